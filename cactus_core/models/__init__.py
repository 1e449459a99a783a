"""One module per architecture, named after config.json's ``model_type``."""

from __future__ import annotations

import importlib

from ..errors import ModelLoadError

#: model_type -> module in this package.  Aliases share a file when the
#: architecture is the same (Mistral is Llama with a sliding window).
ARCHITECTURES: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "qwen3": "qwen3",
    "gemma3_text": "gemma3_text",
    "gemma3": "gemma3_text",
    "bert": "bert",
}


def supported() -> list[str]:
    """The model types this engine can run."""
    return sorted(ARCHITECTURES)


def model_module(config: dict):
    """The architecture module for a parsed config.json."""
    model_type = config.get("model_type")
    if not model_type:
        raise ModelLoadError("config.json has no 'model_type'; is this a Hugging Face checkpoint?")
    name = ARCHITECTURES.get(model_type)
    if name is None:
        raise ModelLoadError(
            f"unknown model_type '{model_type}'; supported: {', '.join(supported())}"
        )
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError as exc:
        raise ModelLoadError(f"model_type '{model_type}' is not available in this build: {exc}") from exc
