"""The error a model spec that cannot be used raises, in a module of its own: `harness.defaults`
subclasses it, and `hitrate --help` imports `harness.defaults` without needing the model specs
(pydantic) of `harness.models`, which re-exports it."""

from __future__ import annotations


class ModelSpecError(ValueError):
    """A model spec that cannot be used; the message says what to change."""
