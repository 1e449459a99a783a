"""cactus-cpu-neon: CPU kernels written with NEON intrinsics, compiled through cffi.

The backend lives in :mod:`cactus_cpu_neon.backend`; the compiled module
``cactus_cpu_neon._kernels`` is imported only when the backend is created or
probed, so this package imports cleanly on any machine, built or not.
"""

__version__ = "0.1.0"
