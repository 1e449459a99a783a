"""cactus-mlx-ref: a Cactus kernel backend on MLX (mlx-cpu on Linux, Metal on Apple silicon).

The backend lives in :mod:`cactus_mlx_ref.backend`; importing this package does
not import MLX.
"""

__version__ = "0.1.0"
