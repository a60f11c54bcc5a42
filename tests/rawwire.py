# The sseq wire by hand, for the shell tests' raw-frame clients and fake daemons: protobuf
# field tags and varints, and sseqd's frames (a 32-bit little-endian length, the message).
import socket, struct


def varint(n):
    out = b""
    while True:
        b = n & 0x7f; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out


def field(num, payload):
    if isinstance(payload, int): return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def varint_at(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7f) << shift; shift += 7; i += 1
        if not b[i - 1] & 0x80: return v, i


def decode(b):
    """A message as {field number: [values]}: varints as ints, the rest as bytes."""
    out, i = {}, 0
    while i < len(b):
        key, i = varint_at(b, i)
        if key & 7 == 0:
            v, i = varint_at(b, i)
        else:
            n, i = varint_at(b, i)
            v = b[i:i + n]; i += n
        out.setdefault(key >> 3, []).append(v)
    return out


def decode_last(b):
    """A message as {field number: value}, the last value of each field."""
    return {k: v[-1] for k, v in decode(b).items()}


def frame(msg):
    return struct.pack("<I", len(msg)) + msg


def read_frame(c):
    n = struct.unpack("<I", c.recv(4, socket.MSG_WAITALL))[0]
    return c.recv(n, socket.MSG_WAITALL)


def call(c, tag, body_field, body):
    """Send a Request (tag, body in field body_field); return the Reply under that tag,
    as {field number: value}, skipping any other message before it."""
    c.sendall(frame(field(1, tag) + field(body_field, body)))
    while True:
        m = decode_last(read_frame(c))
        if 1 in m and decode_last(m[1]).get(1) == tag:
            return decode_last(m[1])
