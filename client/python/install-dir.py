# Where the sseq package goes for an install prefix, as the interpreter running this
# sees it: its default sysconfig scheme's purelib with the prefix substituted (Debian's
# own scheme for /usr). Prints the directory, then "yes" or "no": whether this
# interpreter reads it (its sys.path, or the site directories site.py adds once they
# exist). Run by client/python/meson.build; tests/test-systemd.sh checks against it.
# Usage: python3 install-dir.py PREFIX
import os
import site
import sys
import sysconfig

prefix = sys.argv[1]
schemes = sysconfig.get_scheme_names()
try:
    scheme = sysconfig.get_default_scheme()
except AttributeError:  # before 3.10
    scheme = sysconfig._get_default_scheme()
if prefix == "/usr" and "deb_system" in schemes:
    # Debian's python3 reads its distribution's packages from /usr/lib/python3/dist-packages.
    scheme = "deb_system"
template = sysconfig.get_path("purelib", scheme, expand=False)
if scheme == "posix_local":
    # Debian's scheme for local installs: {base}/local/lib/python3.X/dist-packages, where
    # {base}/local is /usr/local. Another prefix gets the same layout under it.
    template = template.replace("{base}/local/", "{base}/")
vars = {k: str(v) for k, v in sysconfig.get_config_vars().items()}
for k in ("base", "platbase", "installed_base", "installed_platbase"):
    vars[k] = prefix
path = os.path.normpath(template.format(**vars))

read = {os.path.realpath(p) for p in sys.path if p}
try:
    read |= {os.path.realpath(p) for p in site.getsitepackages()}
except AttributeError:  # site.py of an old virtualenv
    pass
print(path)
print("yes" if os.path.realpath(path) in read else "no")
