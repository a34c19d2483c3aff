"""Server-sent events shared by the wire modules: the line formats and the in-stream error of an
engine failure after a stream has started (each wire module puts it in its own error shape)."""

from __future__ import annotations

import json
import logging
from typing import Any

from hitrate.engine.api import EngineError

log = logging.getLogger(__name__)


def data(payload: dict[str, Any]) -> str:
    """`data: {...}` (OpenAI Chat Completions and Completions streams)."""
    return "data: " + json.dumps(payload, ensure_ascii=False) + "\n\n"


def event(name: str, payload: dict[str, Any]) -> str:
    """`event: name` + `data: {...}` (Anthropic Messages and OpenAI Responses streams)."""
    return f"event: {name}\ndata: " + json.dumps(payload, ensure_ascii=False) + "\n\n"


def failure(exc: BaseException) -> tuple[bool, str]:
    """(internal, message) for an exception raised mid-stream; internal ones are logged."""
    if isinstance(exc, EngineError):
        return False, str(exc)
    log.error("engine failed during a stream", exc_info=exc)
    return True, f"internal error: {type(exc).__name__}: {exc}"
