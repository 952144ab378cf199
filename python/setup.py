"""setuptools hooks of the kvferry package (the rest is pyproject.toml).

From a checkout, the wheel carries libkvferry.so.0 (kvferry/libkvferry.so.0, found first by
kvferry/_lib.py after $KVFERRY_LIB): `pip install ./python` then works alone, in a venv or
anywhere, with the library of the same tree as the Python code (the ABI matches by
construction). The library is made by the checkout's Makefile (`make build/libkvferry.so`,
seconds; a no-op when built) in $BUILD (default build/). Such a wheel holds a native library, so
it is tagged for the platform (py3-none-linux_<arch>: no CPython extension, any Python 3).
KVFERRY_BUNDLE_LIB=0 builds a pure wheel that uses the system's libkvferry.so.0 instead (Debian's
libkvferry0, or `make install`); so does a tree without the Makefile (an sdist)."""
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUNDLE = (os.environ.get("KVFERRY_BUNDLE_LIB", "1") != "0"
          and os.path.exists(os.path.join(ROOT, "Makefile")))


def _version():
    """The tree's VERSION, else the package's own __version__ (an sdist)."""
    try:
        with open(os.path.join(ROOT, "VERSION")) as f:
            return f.read().strip()
    except OSError:
        with open(os.path.join(HERE, "kvferry", "__init__.py")) as f:
            return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def _library():
    build = os.environ.get("BUILD", "build")
    target = os.path.join(build, "libkvferry.so")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", "BUILD=" + build, target],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit("kvferry: building %s failed (make, exit %d):\n%s\nInstall the build "
                         "dependencies (scripts/install-deps), or set KVFERRY_BUNDLE_LIB=0 for a "
                         "package that uses the system's libkvferry.so.0"
                         % (target, r.returncode, r.stdout[-4000:]))
    return os.path.join(ROOT, target)


class BuildPy(build_py):
    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "kvferry", "libkvferry.so.0")
        if BUNDLE:
            shutil.copyfile(_library(), dest)
            os.chmod(dest, 0o644)
        elif os.path.exists(dest):  # an earlier bundling build's, in the same build folder
            os.remove(dest)


cmdclass = {"build_py": BuildPy}
try:
    from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = not BUNDLE

        def get_tag(self):
            tag = super().get_tag()
            return ("py3", "none", tag[2]) if BUNDLE else tag

    cmdclass["bdist_wheel"] = BdistWheel
except ImportError:  # no wheel module: setuptools installs without one
    pass

setup(version=_version(), cmdclass=cmdclass)
