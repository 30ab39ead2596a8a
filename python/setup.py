"""setup.py: only for the wheel that bundles libvkasr (cmake --build build --target python-wheel): with
vkasr/libvkasr.so present, the wheel carries it (and the default model when present) and is tagged for
this platform. Metadata lives in pyproject.toml."""
import os

from setuptools import setup
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = [f for f in ("libvkasr.so", "vkasr-tdt-tiny-en.gguf") if os.path.exists(os.path.join(HERE, "vkasr", f))]


class BinaryDistribution(Distribution):
    """A wheel with a native library in it is not pure Python: tag it for this platform."""

    def has_ext_modules(self):
        return bool(BUNDLED)


cmdclass = {}
try:
    from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        """Any Python 3 (ctypes, no extension module), this platform (the library)."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = BdistWheel
except ImportError:
    pass

setup(distclass=BinaryDistribution, cmdclass=cmdclass, package_data={"vkasr": ["py.typed"] + BUNDLED})
