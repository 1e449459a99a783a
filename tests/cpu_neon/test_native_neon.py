"""The C kernels against scalar C references (neon_harness.c), outside Python:

- the native NEON path (arm_neon.h, no SIMDe), cross-compiled for AArch64 and
  run under qemu-aarch64 (or directly on an arm64 host), for the baseline
  Armv8-A and (under qemu) for Armv8.2-A with the dot-product extension;
- the portable SIMDe path on this host, built without -march=native, which
  is what CACTUS_PORTABLE_BUILD=1 wheels run, with the POSIX thread pool;
- the host's -march=native build with OpenMP (the CACTUS_OPENMP=1 threading),
  which on x86 with AVX-512 also runs the x86-only kernels (cq_vbmi.c, with
  its int8-activation decode where the CPU has VNNI, gemm_avx512.c,
  affine_avx512.c, attention_avx512.c) on the harness's shapes.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import pytest

_build = pytest.importorskip("cactus_cpu_neon._build", reason="needs cactus-cpu-neon's build script (and cffi)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "plugins", "cpu_neon", "cactus_cpu_neon", "csrc")
HARNESS = os.path.join(ROOT, "tests", "cpu_neon", "neon_harness.c")
# the extension's own list (x86 AVX2 / AVX-512 files are empty stubs elsewhere)
KERNELS = tuple(_build.SOURCES)


def _toolchain() -> tuple[str, list[str]]:
    """(compiler, runner prefix) for an AArch64 binary, or skip saying what is missing."""
    if platform.machine().lower() in ("aarch64", "arm64") and shutil.which("cc"):
        return "cc", []
    cc, qemu = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")
    if not (cc and qemu):
        pytest.skip(
            "needs aarch64-linux-gnu-gcc and qemu-aarch64: "
            "apt-get install -y gcc-aarch64-linux-gnu qemu-user"
        )
    return cc, [qemu]


def _build(cc: str, out: str, openmp: bool, extra=()) -> subprocess.CompletedProcess:
    cmd = [cc, "-O2", *extra, "-I", CSRC, HARNESS, *(os.path.join(CSRC, k) for k in KERNELS)]
    cmd += ["-lm", "-o", out]
    if cc == "aarch64-linux-gnu-gcc" or cc.endswith("/aarch64-linux-gnu-gcc"):
        cmd[1:1] = ["-static"]  # qemu-user then needs no AArch64 sysroot
    cmd[1:1] = ["-fopenmp"] if openmp else ["-pthread"]  # OpenMP, or runtime.c's thread pool
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _run_harness(cc, runner, exe, extra=(), openmp=True) -> str:
    built = _build(cc, exe, openmp=openmp, extra=extra)
    if built.returncode != 0 and openmp:  # a toolchain without libgomp: the thread pool instead
        built = _build(cc, exe, openmp=False, extra=extra)
    assert built.returncode == 0, built.stderr[-2000:]
    run = subprocess.run(runner + [exe], capture_output=True, text=True, timeout=300)
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAIL")]
    assert run.returncode == 0 and not failed, run.stdout
    assert run.stdout.count("\nok ") >= 30, run.stdout  # every check ran
    return run.stdout


def test_native_neon_kernels_match_scalar_reference(tmp_path):
    cc, runner = _toolchain()
    # Threaded by runtime.c's pool, the default build's threading.
    out = _run_harness(cc, runner, str(tmp_path / "neon_harness"), openmp=False)
    assert "native NEON: yes" in out and "thread pool" in out, out


def test_native_neon_dot_product_build_matches_scalar_reference(tmp_path):
    """The same harness built for Armv8.2-A with the dot-product extension, which
    cq_i8.c's int8-activation decode uses (vdotq_s32) where the CPU has it."""
    cc, runner = _toolchain()
    if not runner:
        pytest.skip("runs under qemu-aarch64 only: this arm64 host may lack the extension")
    out = _run_harness(cc, runner, str(tmp_path / "neon_dotprod"), extra=["-march=armv8.2-a+dotprod"],
                       openmp=False)
    assert "native NEON: yes" in out and "dot product instructions: yes" in out, out


def _host_simde(why_skip_on_arm: str) -> tuple[str, str]:
    """The host C compiler and SIMDe's include folder (skips where either is missing)."""
    if platform.machine().lower() in ("aarch64", "arm64"):
        pytest.skip(why_skip_on_arm)
    simde_py = pytest.importorskip("simde_py", reason="needs the SIMDe headers: pip install simde-py")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    return cc, simde_py.get_include()


def test_portable_simde_build_matches_scalar_reference(tmp_path):
    cc, include = _host_simde("SIMDe is not used on arm64")
    # Built without OpenMP, so this also runs the POSIX thread pool of runtime.c.
    out = _run_harness(cc, [], str(tmp_path / "simde_harness"), extra=["-I", include], openmp=False)
    assert "native NEON: no (SIMDe)" in out and "thread pool" in out, out


def test_host_native_build_matches_scalar_reference(tmp_path):
    cc, include = _host_simde("covered by the native NEON test on arm64")
    # Built with OpenMP (CACTUS_OPENMP=1 builds), so that threading path runs too.
    out = _run_harness(cc, [], str(tmp_path / "native_harness"), extra=["-march=native", "-I", include])
    assert "native NEON: no (SIMDe)" in out, out
