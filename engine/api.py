"""The engine's public contract: what the server (and in-process callers) use from the runner.

The runner (`hitrate.engine.runner`) implements `Engine`; the HTTP server, chat rendering and the
harness's local backend only depend on these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Literal, Protocol, Union


class EngineError(Exception):
    """A request the engine refuses, with a message fit to show a user (maps to HTTP 4xx)."""


class ContextLengthError(EngineError):
    """The prompt plus max_tokens does not fit the model's context window."""


class UnsupportedArchitectureError(EngineError):
    """The model's state cannot be cut at an arbitrary prefix, so prefix caching would be wrong."""


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # keep only the k most probable tokens; 0: no cut
    min_p: float = 0.0  # drop tokens less probable than min_p times the most probable one
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False  # keep generating past end-of-sequence tokens (benchmarks, fixed-length runs)


@dataclass(frozen=True)
class PrefillStarted:
    """First item of every stream, yielded once the prompt is matched against the prefix cache and
    before it is prefilled: how the prompt splits into cached and computed tokens is known from here
    on (it equals the final result's split), so a server can report usage up front (Anthropic's
    `message_start`) without waiting for the first token."""

    prompt_tokens: int
    cached_tokens: int  # prompt tokens that will be served from the prefix cache


@dataclass
class GenerationChunk:
    """One streamed step. `text` is the decoded delta (may be empty while a multi-byte char is pending)."""

    token_ids: list[int]
    text: str


@dataclass
class GenerationResult:
    token_ids: list[int]
    text: str
    finish_reason: Literal["stop", "length"]
    prompt_tokens: int
    cached_tokens: int  # prompt tokens served from the prefix cache (not recomputed)
    completion_tokens: int
    ttft_s: float
    total_s: float


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    params: SamplingParams = field(default_factory=SamplingParams)
    salt: str = ""  # tenant; enters the root of the prefix cache, never shared across salts
    # (prefix length in tokens, seconds): protect each prefix of the prompt from eviction for its own
    # time to live, e.g. one pin per Anthropic cache_control mark (a 1h head, a 5m moving tail).
    pins: tuple[tuple[int, float], ...] = ()
    # An llguidance grammar string (`hitrate.engine.constraints`): every sampled token must keep the
    # output inside it (structured output, forced tool calls). None: unconstrained.
    grammar: str | None = None


StreamItem = Union[PrefillStarted, GenerationChunk, GenerationResult]


class Engine(Protocol):
    model_name: str
    max_context: int

    @property
    def tokenizer(self):  # a transformers PreTrainedTokenizerBase
        ...

    def generate(self, request: GenerationRequest) -> GenerationResult: ...

    def stream(self, request: GenerationRequest) -> Iterator[StreamItem]:
        """Yields one `PrefillStarted` first (once the cache is matched, before prefill), then chunks
        as tokens are produced, then the final `GenerationResult` last. A request refused on its
        inputs raises before `PrefillStarted`."""
        ...

    def metrics(self) -> dict[str, float]:
        """hit rate, prefill tokens computed / saved, pool pages used / total, ..."""
        ...
