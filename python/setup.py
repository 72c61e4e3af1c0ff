"""Builds the kjit wheel: the pure-Python package plus, in kjit/_lib/, libkjit_c.so and the
`kjit` command from a CMake build of this repository (KJIT_BUILD_DIR, default build/release,
built here with the release preset when the library is missing). With PREBUILD_KERNELS and
GPU_ARCHS set, `kjit prebuild` fills kjit/_lib/prebuilt, the wheel's prebuilt tier. Where the
build has kjit._fastlaunch (the launch path in C, CPython's stable ABI; Python's headers needed),
it goes into kjit/_lib too and the wheel is tagged cp311-abi3-<platform>; without it,
py3-none-<platform>, and the package launches through ctypes."""

import os
import pathlib
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent


FASTLAUNCH = "_fastlaunch.abi3.so"


def build_dir():
    return pathlib.Path(os.environ.get("KJIT_BUILD_DIR", REPO / "build" / "release"))


def fastlaunch(build):
    return build / "python" / "fastlaunch" / FASTLAUNCH


class BuildWithNative(build_py):
    def run(self):
        super().run()
        build = build_dir()
        library = build / "capi" / "libkjit_c.so"
        cli = build / "tools" / "kjit"
        if not (library.is_file() and cli.is_file()):
            subprocess.run(["cmake", "--preset", "release"], cwd=REPO, check=True)
            subprocess.run(["cmake", "--build", "--preset", "release", "--target", "kjit_c",
                            "kjit_cli"], cwd=REPO, check=True)
        if not fastlaunch(build).is_file():  # a build without Python's headers has no target
            subprocess.run(["cmake", "--build", str(build), "--target", "kjit_fastlaunch"],
                           cwd=REPO, check=False)
        target = pathlib.Path(self.build_lib) / "kjit" / "_lib"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library.resolve(), target / "libkjit_c.so")
        shutil.copy2(cli, target / "kjit")
        if fastlaunch(build).is_file():
            shutil.copy2(fastlaunch(build), target / FASTLAUNCH)
        level, archs = os.environ.get("PREBUILD_KERNELS"), os.environ.get("GPU_ARCHS")
        if level and level != "0" and archs:
            subprocess.run([str(target / "kjit"), "prebuild", "--level", level, "--targets", archs,
                            "--out", str(target / "prebuilt")], check=True)


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        platform = super().get_tag()[2]
        if fastlaunch(build_dir()).is_file():
            return "cp311", "abi3", platform  # the stable ABI of CPython 3.11 and later
        return "py3", "none", platform


setup(cmdclass={"build_py": BuildWithNative, "bdist_wheel": PlatformWheel})
