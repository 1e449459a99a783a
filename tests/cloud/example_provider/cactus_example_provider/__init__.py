"""Example third-party Cactus cloud provider for Ollama's native chat API."""
