"""Only here for cffi: it compiles csrc/ into cactus_cpu_neon._kernels at build time."""

from setuptools import setup

setup(cffi_modules=["cactus_cpu_neon/_build.py:ffibuilder"])
