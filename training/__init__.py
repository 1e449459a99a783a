"""Training pipeline for the embedded default model (see docs/training.md)."""
