"""Errors that carry one clear line for the user.

Every error the engine raises on purpose derives from :class:`CactusError`; its
message is a single line that says what was wrong and how to fix it.  The CLI
prints ``str(err)`` and exits non-zero; ``Engine.complete`` turns it into
``success: false``.
"""

from __future__ import annotations


class CactusError(Exception):
    """Base class: ``str(err)`` is one line meant for the user."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ModelLoadError(CactusError):
    """A model directory, config or weight file is missing, corrupt or unsupported."""


class BadRequestError(CactusError):
    """Malformed messages, tools, options, or a prompt longer than the context."""


class BackendError(CactusError):
    """An unknown or unusable backend was requested, or no backend supports an op."""


class PluginError(CactusError):
    """A plugin failed to load or registered something invalid."""


class CloudError(CactusError):
    """A cloud provider call failed, timed out, or is not configured."""


class QuantizationError(CactusError):
    """A conversion or quantization request cannot be carried out."""
