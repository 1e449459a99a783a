"""Cloud escalation providers for Cactus.

Each provider turns OpenAI-format ``messages``/``tools`` into one vendor's wire
format and back: ``openai`` (any OpenAI-compatible server), ``anthropic``
(Messages API) and ``gemini`` (generateContent).  They are registered through
the ``cactus_register_cloud_providers`` hook in :mod:`cactus_cloud.plugin`;
configuration comes from :func:`cactus_cloud.config.from_env`.
"""

from __future__ import annotations

__version__ = "0.1.0"
