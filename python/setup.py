"""setup.py of the btr package: the metadata is in pyproject.toml; this only
records, at build time, where libbtr.so.0 is (btr/_install.py): from
BTR_LIBRARY, or from pkg-config's libdir of btr (PKG_CONFIG_PATH as set).
Without either, the package finds the library at import time (docs/python.md)."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py


def _found():
    lib = os.environ.get("BTR_LIBRARY")
    if lib:
        return "LIBDIR = %r\nLIBRARY = %r\n" % (os.path.dirname(os.path.abspath(lib)), os.path.abspath(lib))
    exe = shutil.which("pkg-config") or shutil.which("pkgconf")
    if exe:
        r = subprocess.run([exe, "--variable=libdir", "btr"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           check=False)
        d = r.stdout.decode().strip()
        if r.returncode == 0 and d and os.path.exists(os.path.join(d, "libbtr.so.0")):
            return "LIBDIR = %r\n" % os.path.realpath(d)
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        found = _found()
        out = os.path.join(self.build_lib, "btr", "_install.py")
        if found:
            with open(out, "w") as f:
                f.write("# written by pip install (setup.py): where libbtr.so.0 was found\n" + found)
        elif os.path.exists(out):   # an earlier build's, not this one's
            os.remove(out)


setup(cmdclass={"build_py": BuildPy})
