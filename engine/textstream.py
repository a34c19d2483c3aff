"""Turning generated token ids into streamed text: incremental decoding and stop strings."""

from __future__ import annotations

from typing import Callable


def plain_decode(tokenizer) -> Callable[[list[int]], str]:
    """`ids -> tokenizer.decode(ids, skip_special_tokens=True)`, taken straight from the Rust
    backend of a transformers fast tokenizer when that is all its `decode` does (no clean-up pass,
    no subclass override). transformers' wrapper spends ~20 us of Python per call (converting the
    ids, sorting out keyword arguments) and the decoder below calls it twice per generated token,
    for every running request, on the scheduler's thread."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers layout: keep its own decode
        TokenizersBackend = PreTrainedTokenizerBase = None  # type: ignore[assignment,misc]
    backend = getattr(tokenizer, "_tokenizer", None)
    kind = type(tokenizer)
    if (
        TokenizersBackend is not None
        and isinstance(tokenizer, TokenizersBackend)
        and kind.decode is PreTrainedTokenizerBase.decode
        and kind._decode is TokenizersBackend._decode
        and not getattr(tokenizer, "clean_up_tokenization_spaces", False)
        and callable(getattr(backend, "decode", None))
    ):
        return lambda ids: backend.decode(ids, skip_special_tokens=True)
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)


class IncrementalDecoder:
    """Decodes one token at a time without emitting half characters.

    Decoding a lone token is wrong for byte-level BPE (a multi-byte character spans tokens) and for
    SentencePiece (a leading space depends on the previous token). So each step decodes a short
    window ending at the new token and emits only the text past the window's already-emitted
    part, holding back while the tail is an incomplete UTF-8 sequence ("\\ufffd").
    """

    def __init__(self, tokenizer, context_ids: list[int] | None = None,
                 decode: Callable[[list[int]], str] | None = None) -> None:
        self._decode = decode or plain_decode(tokenizer)
        self._ids: list[int] = list(context_ids or [])[-4:]
        self._prefix = 0
        self._read = len(self._ids)

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        decode = self._decode
        before = decode(self._ids[self._prefix : self._read])
        after = decode(self._ids[self._prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix = self._read
            self._read = len(self._ids)
            return after[len(before) :]
        return ""


class StopStringFilter:
    """Accumulates streamed text, cuts it at the first stop string, and holds back any tail that
    could still become a stop string so that no part of one is ever streamed."""

    def __init__(self, stop: tuple[str, ...] | list[str]) -> None:
        self._stops = [s for s in stop if s]
        self._longest = max((len(s) for s in self._stops), default=0)
        self._text = ""
        self._emitted = 0
        self.stopped = False

    @property
    def text(self) -> str:
        return self._text

    def push(self, piece: str) -> str:
        """Add decoded text; return what may be streamed now. Sets `stopped` on a stop string."""
        if self.stopped or not piece:
            return ""
        start = max(0, len(self._text) - self._longest + 1)
        self._text += piece
        if not self._stops:
            delta, self._emitted = self._text[self._emitted :], len(self._text)
            return delta
        hits = [i for i in (self._text.find(s, start) for s in self._stops) if i >= 0]
        if hits:
            self._text = self._text[: min(hits)]
            self.stopped = True
            delta, self._emitted = self._text[self._emitted :], len(self._text)
            return delta
        safe = len(self._text) - self._held_back()
        delta = self._text[self._emitted : safe]
        self._emitted = max(self._emitted, safe)
        return delta

    def flush(self) -> str:
        """Release held-back text at the end of generation."""
        delta, self._emitted = self._text[self._emitted :], len(self._text)
        return delta

    def _held_back(self) -> int:
        text = self._text
        for n in range(min(self._longest - 1, len(text)), 0, -1):
            tail = text[-n:]
            if any(s.startswith(tail) for s in self._stops):
                return n
        return 0
