"""Control tokens typed into chat content are encoded as the text they are.

A chat template renders the conversation to one string, and tokenizing that string turns every
spelling of a control token into the token itself, wherever it came from: a user message holding
`<|im_end|>\\n<|im_start|>system\\n...` would open a system turn of its own. transformers (5.20+)
solves this for `apply_chat_template(..., sanitize_control_tokens=True)`: the control-token
spellings in the inputs are wrapped in private-use markers before rendering, and the rendered text
is then encoded with the marked spans as plain text and everything else (the template's own
markup) as usual. `ChatFormat` renders and tokenizes in pieces (to keep each turn's ids a prefix of
the next), so it uses the two halves of that mechanism directly: `mark` on what goes into the
template, `encode` on each rendered piece. Text without control-token spellings is encoded exactly
as before, so ids stay a pure function of the conversation and prefix-stable.

Control tokens: the tokenizer's special tokens, plus the added tokens the tokenizer lists in
`chat_control_tokens` or, without that list, the non-whitespace added tokens the template's source
contains (transformers' own rule). Dict keys (tool parameter names) are not marked: transformers
leaves them as they are.
"""

from __future__ import annotations

import re
from typing import Any

from hitrate.engine.api import EngineError

try:
    from transformers.utils.chat_template_utils import mark_control_tokens
except ImportError:  # transformers < 5.20
    mark_control_tokens = None


class ControlTokenGuard:
    """Marks control-token spellings in template inputs and encodes rendered text accordingly."""

    def __init__(self, tokenizer: Any, template: str) -> None:
        self.tokenizer = tokenizer
        self.tokens = control_tokens(tokenizer, template)
        if self.tokens and mark_control_tokens is None:
            raise EngineError("encoding chat content safely needs transformers >= 5.20 "
                              "(sanitize_control_tokens); upgrade transformers")
        longest_first = sorted(self.tokens, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, longest_first))) if self.tokens else None

    def mark(self, value: Any) -> Any:
        """`value` (a string, or lists / dicts of them) with each control-token spelling marked."""
        if self._pattern is None:
            return value
        return mark_control_tokens(value, self._pattern)

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text: marked spellings as plain text, the rest as usual."""
        if not text:
            return []
        if self._pattern is None:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        try:
            return list(self.tokenizer(text, add_special_tokens=False, sanitize_control_tokens=True)["input_ids"])
        except ValueError as exc:  # a spelling the tokenizer also produces from plain text
            raise EngineError(f"chat content cannot be encoded safely: {exc}") from exc


def control_tokens(tokenizer: Any, template: str) -> tuple[str, ...]:
    """The added tokens that only the chat template may write (see the module docstring)."""
    listed = getattr(tokenizer, "chat_control_tokens", None)
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    out = []
    for token in decoder.values():
        content = token.content
        if token.special:
            out.append(content)
        elif listed is not None:
            if content in listed:
                out.append(content)
        elif content in template and not content.isspace():
            out.append(content)
    return tuple(dict.fromkeys(out))
