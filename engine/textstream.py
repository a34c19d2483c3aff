"""Turning generated token ids into streamed text: incremental decoding and stop strings."""

from __future__ import annotations


class IncrementalDecoder:
    """Decodes one token at a time without emitting half characters.

    Decoding a lone token is wrong for byte-level BPE (a multi-byte character spans tokens) and for
    SentencePiece (a leading space depends on the previous token). So each step decodes a short
    window ending at the new token and emits only the text past the window's already-emitted
    part, holding back while the tail is an incomplete UTF-8 sequence ("\\ufffd").
    """

    def __init__(self, tokenizer, context_ids: list[int] | None = None) -> None:
        self._tok = tokenizer
        self._ids: list[int] = list(context_ids or [])[-4:]
        self._prefix = 0
        self._read = len(self._ids)

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        decode = self._tok.decode
        before = decode(self._ids[self._prefix : self._read], skip_special_tokens=True)
        after = decode(self._ids[self._prefix :], skip_special_tokens=True)
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
