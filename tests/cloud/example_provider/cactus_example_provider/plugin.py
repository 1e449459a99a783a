"""Hook implementations only: register the provider, import its code lazily."""

from cactus_core.plugins import hookimpl


def _factory(config: dict):
    from .provider import OllamaProvider

    return OllamaProvider(config)


@hookimpl
def cactus_register_cloud_providers(register):
    register("ollama", _factory)
