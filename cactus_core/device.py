"""What this host is: OS, CPU architecture, SIMD features, cores, memory, GPUs.

Backends use this to decide whether they can run here; ``cactus plugins``
prints it.  Detection reads the OS's own sources (``/proc`` on Linux,
``sysctl`` on macOS) and never fails: an unknown field is left empty.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Optional

import attrs

#: The CPU feature flags we report, by architecture, as Linux names them.
_X86_FLAGS = {
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512_vnni": "avx512_vnni",
    "avx_vnni": "avx_vnni",
    "avx512_bf16": "avx512_bf16",
    "amx_int8": "amx_int8",
}
_ARM_FLAGS = {
    "asimd": "neon",
    "asimddp": "dotprod",
    "i8mm": "i8mm",
    "fphp": "fp16",
    "asimdhp": "fp16",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
    "sme": "sme",
}
_MAC_ARM_SYSCTL = {
    "hw.optional.AdvSIMD": "neon",
    "hw.optional.arm.FEAT_DotProd": "dotprod",
    "hw.optional.arm.FEAT_I8MM": "i8mm",
    "hw.optional.arm.FEAT_FP16": "fp16",
    "hw.optional.arm.FEAT_BF16": "bf16",
    "hw.optional.arm.FEAT_SME": "sme",
}


@attrs.frozen
class Device:
    """A description of the host, as plugins and ``cactus plugins`` see it."""

    os: str
    arch: str
    simd: tuple[str, ...]
    cpu_model: str
    physical_cores: int
    logical_cores: int
    total_memory_mb: int
    available_memory_mb: int
    gpus: tuple[str, ...]
    apple_silicon: bool

    def has(self, feature: str) -> bool:
        """Whether the CPU has a SIMD feature (``"neon"``, ``"avx2"``...)."""
        return feature in self.simd

    def to_dict(self) -> dict:
        return attrs.asdict(self, recurse=True, value_serializer=_list_tuples)


def _list_tuples(_inst, _field, value):
    return list(value) if isinstance(value, tuple) else value


def _normalise_arch(machine: str) -> str:
    m = machine.lower()
    if m in ("arm64", "aarch64", "armv8l", "armv8"):
        return "arm64"
    if m in ("x86_64", "amd64"):
        return "x86_64"
    return m


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _sysctl(name: str) -> str:
    exe = shutil.which("sysctl")
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, "-n", name], capture_output=True, text=True, timeout=2)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _linux_cpu() -> tuple[tuple[str, ...], str, int]:
    info = _read("/proc/cpuinfo")
    flags: set[str] = set()
    model = ""
    cores: set[tuple[str, str]] = set()
    phys, core = "0", None
    for line in info.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key in ("flags", "features"):
            flags.update(value.split())
        elif key in ("model name", "hardware", "cpu model") and not model:
            model = value
        elif key == "physical id":
            phys = value
        elif key == "core id":
            core = value
            cores.add((phys, core))
    table = {**_X86_FLAGS, **_ARM_FLAGS}
    simd = tuple(sorted({table[f] for f in flags if f in table}))
    return simd, model, len(cores)


def _memory_mb() -> tuple[int, int]:
    meminfo = _read("/proc/meminfo")
    if meminfo:
        vals = dict(re.findall(r"^(\w+):\s+(\d+)", meminfo, re.M))
        total = int(vals.get("MemTotal", 0)) // 1024
        avail = int(vals.get("MemAvailable", vals.get("MemFree", 0))) // 1024
        return total, avail
    total = int(_sysctl("hw.memsize") or 0) // (1024 * 1024)
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        avail = pages // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        avail = total
    return total, avail


def _gpus(os_name: str, apple_silicon: bool) -> tuple[str, ...]:
    found: list[str] = []
    if apple_silicon:
        found.append("Apple GPU (Metal)")
    drm = "/sys/class/drm"
    if os.path.isdir("/proc/driver/nvidia/gpus"):
        for d in sorted(os.listdir("/proc/driver/nvidia/gpus")):
            m = re.search(r"Model:\s*(.+)", _read(f"/proc/driver/nvidia/gpus/{d}/information"))
            found.append(m.group(1).strip() if m else "NVIDIA GPU")
    elif os_name == "linux" and os.path.isdir(drm):
        for d in sorted(os.listdir(drm)):
            if re.fullmatch(r"card\d+", d):
                vendor = _read(f"{drm}/{d}/device/vendor").strip()
                names = {"0x10de": "NVIDIA GPU", "0x1002": "AMD GPU", "0x8086": "Intel GPU"}
                if vendor in names:
                    found.append(names[vendor])
    return tuple(found)


@functools.lru_cache(maxsize=1)
def detect_device() -> Device:
    """Detect this host once per process."""
    os_name = {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)
    if os_name.startswith("linux"):
        os_name = "linux"
    arch = _normalise_arch(platform.machine())
    logical = os.cpu_count() or 1
    simd: tuple[str, ...] = ()
    model = ""
    physical = 0
    if os_name == "linux":
        simd, model, physical = _linux_cpu()
        if arch == "arm64" and "neon" not in simd:
            simd = tuple(sorted(set(simd) | {"neon"}))  # NEON is mandatory on AArch64
    elif os_name == "macos":
        model = _sysctl("machdep.cpu.brand_string")
        physical = int(_sysctl("hw.physicalcpu") or 0)
        if arch == "arm64":
            simd = tuple(sorted({v for k, v in _MAC_ARM_SYSCTL.items() if _sysctl(k) == "1"} | {"neon"}))
        else:
            feats = (_sysctl("machdep.cpu.features") + " " + _sysctl("machdep.cpu.leaf7_features")).lower()
            simd = tuple(sorted({v for k, v in _X86_FLAGS.items() if k.replace("_", "") in feats}))
    apple = os_name == "macos" and arch == "arm64"
    total, avail = _memory_mb()
    return Device(
        os=os_name,
        arch=arch,
        simd=simd,
        cpu_model=model or platform.processor() or "",
        physical_cores=physical or logical,
        logical_cores=logical,
        total_memory_mb=total,
        available_memory_mb=avail,
        gpus=_gpus(os_name, apple),
        apple_silicon=apple,
    )


def default_threads(device: Optional[Device] = None) -> int:
    """Threads for native kernels: ``CACTUS_THREADS`` or the physical core count."""
    env = os.environ.get("CACTUS_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return (device or detect_device()).physical_cores


def rss_mb() -> float:
    """Resident memory of this process in MB (what ``ram_usage_mb`` reports)."""
    status = _read("/proc/self/status")
    m = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, re.M)
    if m:
        return int(m.group(1)) / 1024.0
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB."""
    status = _read("/proc/self/status")
    m = re.search(r"^VmHWM:\s+(\d+)\s+kB", status, re.M)
    if m:
        return int(m.group(1)) / 1024.0
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0
