# SPDX-License-Identifier: BSD-3-Clause
"""The package's Python modules and, where a CMake build made them (-DTESSERA_BUILD_PYTHON=ON), the C++
bindings tessera/_tessera*.so, copied from TESSERA_BUILD_DIR/python/tessera (default: ../build beside this
directory). Without a build the package installs without them: the converters work, training raises
ImportError saying how to build."""
import glob
import os
import shutil
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

here = os.path.dirname(os.path.abspath(__file__))
build_dir = os.environ.get("TESSERA_BUILD_DIR", os.path.join(here, "..", "build"))
suffix = sysconfig.get_config_var("EXT_SUFFIX")
built = os.path.join(build_dir, "python", "tessera", "_tessera" + suffix)
others = glob.glob(os.path.join(build_dir, "python", "tessera", "_tessera*.so"))
if not os.path.exists(built) and others:
    raise SystemExit(f"{others[0]} was built for another Python than this one (which needs _tessera{suffix}): "
                     "configure the build with -DPython3_EXECUTABLE=<this python>")
if "TESSERA_BUILD_DIR" in os.environ and not os.path.exists(built):
    raise SystemExit(f"TESSERA_BUILD_DIR={build_dir}: no {built} (configure with -DTESSERA_BUILD_PYTHON=ON, build)")


class CopyBuiltBindings(build_ext):
    """The extension is CMake's: copied in, not compiled by setuptools."""

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("tessera._tessera", sources=[])] if os.path.exists(built) else [],
      cmdclass={"build_ext": CopyBuiltBindings})
