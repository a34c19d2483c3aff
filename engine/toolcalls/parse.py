"""One entry point: generated text -> content and tool calls, whichever format the model wrote."""

from __future__ import annotations

from typing import Iterable

from hitrate.engine.toolcalls import json_calls, markup
from hitrate.engine.toolcalls.calls import ParsedReply


def join_content(pieces: Iterable[str]) -> str:
    """The text left around calls: each piece trimmed, empty ones dropped, paragraphs between."""
    return "\n\n".join(p.strip() for p in pieces if p.strip())


def parse_tool_calls(text: str, tool_names: Iterable[str] | None = None) -> ParsedReply:
    """Split generated `text` into content and tool calls; never raises.

    `tool_names`: the tools the request offered. When given, a call to any other name is not
    handed out: in markup it is kept as marked text, as plain JSON it is just text. Plain JSON
    (fenced or bare) is only looked for when tools were offered.
    """
    names = frozenset(tool_names) if tool_names is not None else None
    if markup.HERMES_OPEN in text:
        return markup.parse_hermes(text, names)
    if markup.MISTRAL_OPEN in text:
        return markup.parse_mistral(text, names)
    if markup.LLAMA_PYTHON_TAG in text:
        return markup.parse_llama_tagged(text, names)
    if names:
        spans, calls = json_calls.fenced_calls(text, names)
        if calls:
            bounds = [0] + [i for span in spans for i in span] + [len(text)]
            pieces = [text[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2)]
            return ParsedReply(content=join_content(pieces), tool_calls=calls)
        bare = json_calls.bare_calls(text, names)
        if bare is not None:
            start, calls, others = bare
            return ParsedReply(content=join_content([text[:start], *others]), tool_calls=calls)
    return ParsedReply(content=text.strip())
