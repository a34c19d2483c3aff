"""Checks a command runs on its input before it imports anything heavy.

Resolving a model loads the router, the wire modules and the provider SDKs: seconds of CPU, far
more on a busy machine. A misspelt spec or a missing key is known from the text of the spec and the
environment alone, so it is refused first, in the time the interpreter takes to start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hitrate.harness.models import ModelSpec, ModelSpecError, parse_model_spec


def check_spec(spec: str, env: Mapping[str, str] | None = None) -> ModelSpec:
    """`spec` parsed, or ModelSpecError: no provider, an unknown one, a malformed model part, or
    the provider's API key not set (the same messages resolving it would give, sooner)."""
    environment = dict(os.environ if env is None else env)
    parsed = parse_model_spec(spec, environment)
    if parsed.wire != "local_engine":
        parsed.api_key(environment)
    return parsed


__all__ = ["ModelSpecError", "check_spec"]
