"""Cactus: on-device LLM inference with pluggable kernels and cloud routing.

```python
import cactus_core as cactus
engine = cactus.load()                 # the embedded default model
result = engine.complete([{"role": "user", "content": "hi"}])
```
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (  # noqa: F401
    BackendError,
    BadRequestError,
    CactusError,
    CloudError,
    ModelLoadError,
    PluginError,
    QuantizationError,
)
from .plugins import hookimpl  # noqa: F401


def load(model=None, backend: str = "auto", **options):
    """Load a model (a directory, a known name, or None for the default) into an Engine."""
    from .engine import Engine

    return Engine.load(model, backend=backend, **options)
