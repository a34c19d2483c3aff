"""An `Engine` whose replies are scripted texts, for tests that need a model to write something
exact (a tool call in a given format). Everything after generation is the real path: the chat
template renders the prompt, the text is tokenized with the model's tokenizer and streamed one
token at a time through the incremental decoder, and the server parses it as it would a model's.
"""

from __future__ import annotations

from typing import Callable, Iterator

from hitrate.engine.api import GenerationChunk, GenerationRequest, GenerationResult, PrefillStarted, StreamItem
from hitrate.engine.textstream import IncrementalDecoder


class ScriptedEngine:
    """Replies with `script(prompt_text)`; every request is kept in `requests`."""

    max_context = 8192

    def __init__(self, tokenizer, script: Callable[[str], str], model_name: str = "scripted") -> None:
        self._tokenizer = tokenizer
        self._script = script
        self.model_name = model_name
        self.requests: list[GenerationRequest] = []

    @property
    def tokenizer(self):
        return self._tokenizer

    def stream(self, request: GenerationRequest) -> Iterator[StreamItem]:
        self.requests.append(request)
        prompt = self._tokenizer.decode(request.prompt_ids)
        text = self._script(prompt)
        ids = self._tokenizer(text, add_special_tokens=False)["input_ids"][: request.params.max_tokens]
        yield PrefillStarted(prompt_tokens=len(request.prompt_ids), cached_tokens=0)
        decoder = IncrementalDecoder(self._tokenizer, request.prompt_ids)
        pieces = []
        for token in ids:
            piece = decoder.push(token)
            pieces.append(piece)
            yield GenerationChunk(token_ids=[token], text=piece)
        finish = "length" if len(ids) == request.params.max_tokens and len(ids) < len(text) else "stop"
        yield GenerationResult(token_ids=ids, text="".join(pieces), finish_reason=finish,
                               prompt_tokens=len(request.prompt_ids), cached_tokens=0,
                               completion_tokens=len(ids), ttft_s=0.0, total_s=0.0)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        *_, result = self.stream(request)
        assert isinstance(result, GenerationResult)
        return result

    def metrics(self) -> dict[str, float]:
        return {}
