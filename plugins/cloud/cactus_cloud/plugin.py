"""Hook implementations: register the built-in cloud providers."""

from __future__ import annotations

from cactus_core.plugins import hookimpl


def _lazy(module: str, cls: str):
    # Import the provider module only when a provider is actually built, so
    # listing plugins never pays for httpx.
    def factory(config: dict):
        import importlib

        return getattr(importlib.import_module(f"cactus_cloud.{module}"), cls)(config)

    factory.__name__ = f"{cls}.factory"
    factory.__doc__ = f"Build a cactus_cloud.{module}.{cls} from a config dict."
    return factory


@hookimpl
def cactus_register_cloud_providers(register):
    register("openai", _lazy("openai", "OpenAIProvider"))
    register("anthropic", _lazy("anthropic", "AnthropicProvider"))
    register("gemini", _lazy("gemini", "GeminiProvider"))
