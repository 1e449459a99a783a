"""cffi build script (out-of-line API mode), run by setuptools at install time.

``setup.py`` names it in ``cffi_modules``; it compiles ``csrc/*.c`` into the
extension module ``cactus_cpu_neon._kernels``.  On AArch64 the kernels use
``arm_neon.h`` directly; on every other CPU the same source compiles through
SIMDe's NEON emulation (headers from the ``simde-py`` build requirement).

Environment:

- ``CACTUS_PORTABLE_BUILD=1``: no ``-march=native``/``-mcpu=native``, so the
  binary runs on any CPU of the architecture (wheels, CI caches);
- ``CACTUS_OPENMP=1``: thread with OpenMP instead of the built-in POSIX thread
  pool (the default: its threads claim chunks of work, so a busy or
  descheduled thread does not stall every kernel as a fork-join region does;
  ``CACTUS_NO_OPENMP=1`` is still accepted and means the default);
- ``CACTUS_FORCE_SIMDE=1``: use SIMDe even on AArch64 (to test the emulation);
- ``CC``: the compiler to use (as for any setuptools build).

Run ``python cactus_cpu_neon/_build.py`` from ``plugins/cpu_neon`` to build in
place while developing.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import sysconfig
import tempfile

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(HERE, "csrc")
SOURCES = (
    "runtime.c", "linear.c", "rowwise.c", "attention.c", "cq.c", "cq_i8.c", "cq_i8_avx2.c", "fused.c", "block.c", "affine.c",
    # x86 AVX-512 kernels; empty stubs elsewhere
    "cq_vbmi.c", "gemm_avx512.c", "gemm_amx.c", "affine_avx512.c", "attention_avx512.c", "prologue_avx512.c",
)


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def _accepts(compile_flags: list[str], link_flags: list[str] = (), code: str = "") -> bool:
    """Whether the compiler builds and links a tiny program with these flags."""
    code = code or "int main(void) { return 0; }\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(code)
        cmd = _compiler() + list(compile_flags) + [src, "-o", os.path.join(tmp, "probe")]
        try:
            res = subprocess.run(cmd + list(link_flags), capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        return res.returncode == 0


def _arm64() -> bool:
    return platform.machine().lower() in ("arm64", "aarch64")


def _arch_flags() -> list[str]:
    if _env_on("CACTUS_PORTABLE_BUILD"):
        return []  # the architecture's baseline: NEON on arm64, SSE2 on x86-64
    candidates = (["-mcpu=native"], ["-march=native"]) if _arm64() else (["-march=native"],)
    for flags in candidates:
        if _accepts(flags):
            return flags
    return []


_OMP_PROBE = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"


def _thread_flags() -> tuple[list[str], list[str]]:
    """(compile flags, link flags): runtime.c's POSIX thread pool, or OpenMP when asked for."""
    if _env_on("CACTUS_OPENMP") and not _env_on("CACTUS_NO_OPENMP"):
        if _accepts(["-fopenmp"], ["-fopenmp"], _OMP_PROBE):
            return ["-fopenmp"], ["-fopenmp"]
        if sys.platform == "darwin":  # Apple clang + Homebrew's libomp
            for prefix in ("/opt/homebrew/opt/libomp", "/usr/local/opt/libomp"):
                cflags = ["-Xpreprocessor", "-fopenmp", f"-I{prefix}/include"]
                lflags = [f"-L{prefix}/lib", "-lomp", f"-Wl,-rpath,{prefix}/lib"]
                if _accepts(cflags, lflags, _OMP_PROBE):
                    return cflags, lflags
    # runtime.c's own pool; -pthread is harmless where threads live in libc
    return (["-pthread"], ["-pthread"]) if _accepts(["-pthread"], ["-pthread"]) else ([], [])


def _simde_include() -> list[str]:
    if _arm64() and not _env_on("CACTUS_FORCE_SIMDE"):
        return []
    try:
        import simde_py
    except ImportError as exc:
        raise RuntimeError(
            "building cactus-cpu-neon on this CPU needs the SIMDe headers: pip install simde-py"
        ) from exc
    return [simde_py.get_include()]


def _make_builder(absolute: bool = False) -> FFI:
    ffi = FFI()
    with open(os.path.join(CSRC, "cactus_neon.h")) as f:
        ffi.cdef(f.read())
    omp_c, omp_l = _thread_flags()
    macros = [("CACTUS_FORCE_SIMDE", "1")] if _env_on("CACTUS_FORCE_SIMDE") else []
    # setuptools wants source paths relative to the project (setup.py) directory;
    # ffi.compile() works from its tmpdir, so the development build passes them absolute.
    sources = [os.path.join(CSRC, s) for s in SOURCES]
    if not absolute:
        sources = [os.path.relpath(s) for s in sources]
    ffi.set_source(
        "cactus_cpu_neon._kernels",
        "#include <stdint.h>\n#include \"cactus_neon.h\"\n",
        sources=sources,
        include_dirs=[CSRC] + _simde_include(),
        define_macros=macros,
        # Python's own CFLAGS carry -fwrapv, which cost the int8 CQ decode a quarter of its
        # speed (0.45 against 0.36 ms, docs/cpu_neon.md); the kernels never rely on signed wrap.
        extra_compile_args=["-O3", "-fno-wrapv", "-fno-math-errno", "-Wno-unknown-pragmas"]
        + _arch_flags()
        + omp_c,
        extra_link_args=omp_l,
    )
    return ffi


ffibuilder = _make_builder()

if __name__ == "__main__":
    # In-place development build: objects under build/, the module beside this file.
    import glob
    import shutil

    os.chdir(os.path.dirname(HERE))
    ffibuilder = _make_builder(absolute=True)
    built = ffibuilder.compile(tmpdir="build", verbose=True)
    for stale in glob.glob(os.path.join("cactus_cpu_neon", "_kernels*.so")):
        os.remove(stale)  # an older build under another suffix would shadow this one
    shutil.copy(built, "cactus_cpu_neon")
