"""cactus-metal: Metal GPU kernels for Cactus on Apple silicon (via ``mx.fast.metal_kernel``).

Importing this package imports neither MLX nor Metal; on other machines the
plugin registers the ``metal`` backend as unavailable, with the reason.
"""

__version__ = "0.1.0"
