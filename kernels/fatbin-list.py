#!/usr/bin/env python3
"""List what an NVIDIA fatbin holds, one line per image: "PTX sm_90" or "ELF sm_90".

For checking the kernel image where cuobjdump is not installed (CI's CUDA toolkit has
nvcc without it). Reads the fatbin container: a 16-byte header (magic 0xBA55ED50,
version, header size, payload size), then images, each with its own header giving its
kind (1 PTX, 2 ELF), header size, padded size and target SM version.
Usage: fatbin-list.py FILE.fatbin; exits 1 on a file that is not a fatbin."""
import struct
import sys

MAGIC = 0xBA55ED50
KINDS = {1: "PTX", 2: "ELF"}


def images(data):
    if len(data) < 16:
        raise ValueError("too short for a fatbin header")
    magic, _version, header_size, size = struct.unpack_from("<IHHQ", data, 0)
    if magic != MAGIC:
        raise ValueError(f"bad magic {magic:#x}")
    off, end = header_size, header_size + size
    if end > len(data):
        raise ValueError("truncated")
    while off < end:
        kind, _v, image_header, padded = struct.unpack_from("<HHII", data, off)
        sm = struct.unpack_from("<I", data, off + 28)[0]
        if image_header < 32 or off + image_header + padded > end:
            raise ValueError(f"bad image header at {off}")
        yield KINDS.get(kind, f"kind{kind}"), sm
        off += image_header + padded


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1], "rb") as f:
            found = list(images(f.read()))
    except (OSError, ValueError, struct.error) as e:
        print(f"fatbin-list: {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    for kind, sm in found:
        print(f"{kind} sm_{sm}")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
