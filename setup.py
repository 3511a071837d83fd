"""pip install --no-build-isolation . : the Python module (docs/PYTHON.md) built by this repository's
CMake, with Debian's setuptools as the build backend (no package index needed).

The extension is the CMake target _driftlab. With DRIFTLAB_BUILD_DIR set to a configured build
folder (e.g. build), that folder's module is built there and taken; otherwise a fresh build of
the library and the module goes to build-pip/cmake (minutes: the whole library compiles).
"""
import glob
import os
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("DRIFTLAB_BUILD_DIR")
        if build:
            build = os.path.abspath(build)
        else:
            build = os.path.join(ROOT, "build-pip", "cmake")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DDRIFTLAB_TESTS=OFF", "-DDRIFTLAB_BENCH=OFF"])
        subprocess.check_call(["cmake", "--build", build, "--target", "_driftlab", "-j", str(os.cpu_count() or 2)])
        built = glob.glob(os.path.join(build, "python", "driftlab", "_driftlab*.so"))
        if len(built) != 1:
            raise RuntimeError("driftlab: expected one _driftlab module in %s/python/driftlab, found %r" % (build, built))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(
    name="driftlab",
    version="0.1.0",
    description="Every framework convention a named knob: a C++/CUDA neural-net engine, from Python",
    packages=["driftlab"],
    package_dir={"": "python"},
    package_data={"driftlab": ["__init__.pyi", "py.typed"]},
    ext_modules=[Extension("driftlab._driftlab", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
