"""OpenAI legacy Completions (`POST /v1/completions`) and vLLM's `POST /tokenize` /
`POST /detokenize`: request models, engine requests, responses and stream chunks.

Completions take raw text (or token ids) with no chat template. Usage carries
`prompt_tokens_details.cached_tokens` as on chat completions. Tokenize and detokenize follow
vLLM's shapes: `{"prompt": ...}` or `{"messages": [...]}` in, `{"count", "max_model_len",
"tokens", "token_strs"}` out; `{"tokens": [...]}` in, `{"prompt": ...}` out.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, AsyncIterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hitrate.engine.wire import sse as wire_sse
from hitrate.engine.api import GenerationChunk, GenerationRequest, GenerationResult, SamplingParams
from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.wire.openai import Message, chat_messages
from hitrate.engine.sampling_defaults import SamplingDefaults
from hitrate.engine.serving import MinP, RequestError, Seed, StopList, StopText, TopK, top_k_value, validation_message


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class StreamOptions(_Lenient):
    include_usage: bool = False


class CompletionRequest(_Lenient):
    model: str
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int = Field(default=16, ge=1)  # OpenAI's documented default
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: TopK | None = None
    min_p: MinP | None = None
    stop: StopText | StopList | None = None
    seed: Seed | None = None
    n: int | None = Field(default=None, ge=1)
    echo: bool = False
    logprobs: int | None = None
    suffix: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    cache_salt: str | None = None


def parse_completion(payload: Any, chat: ChatFormat, max_model_len: int, *, salt_header: str | None,
                     defaults: SamplingDefaults | None = None) -> tuple[CompletionRequest, GenerationRequest]:
    """The engine request for a completion (token ids are range-checked by the engine). A text
    prompt that cannot fit `max_model_len` is refused before it is tokenized. `defaults`: the
    sampling a request that names none gets (the model's, `ChatService.sampling_defaults`)."""
    tokenizer = chat.tokenizer
    try:
        body = CompletionRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(validation_message(exc)) from exc
    if body.n not in (None, 1):
        raise RequestError("n > 1 is not supported; send separate requests", param="n")
    for name in ("echo", "logprobs", "suffix"):
        if getattr(body, name):
            raise RequestError(f"{name} is not supported by this server", param=name)
    prompt = body.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        if len(prompt) != 1:
            raise RequestError("a batch of prompts is not supported; send one prompt per request", param="prompt")
        prompt = prompt[0]
    if isinstance(prompt, str):
        _ensure_text_can_fit(prompt, chat, max_model_len)
        ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    else:
        ids = list(prompt)
    if not ids:
        raise RequestError("the prompt is empty", param="prompt")
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    defaults = defaults or SamplingDefaults()
    params = SamplingParams(
        max_tokens=body.max_tokens,
        temperature=defaults.temperature if body.temperature is None else body.temperature,
        top_p=defaults.top_p if body.top_p is None else body.top_p,
        top_k=defaults.top_k if body.top_k is None else top_k_value(body.top_k),
        min_p=defaults.min_p if body.min_p is None else body.min_p,
        stop=tuple(s for s in stop if s),
        seed=body.seed,
    )
    salt = salt_header if salt_header is not None else (body.cache_salt or "")
    return body, GenerationRequest(prompt_ids=ids, params=params, salt=salt)


def _ensure_text_can_fit(text: str, chat: ChatFormat, max_model_len: int) -> None:
    chat.ensure_can_fit([ChatMessage(role="user", content=text)], None, max_model_len)


class CompletionIds:
    def __init__(self, model: str) -> None:
        self.id = "cmpl-" + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model


def usage(result: GenerationResult) -> dict[str, Any]:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.prompt_tokens + result.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
    }


def _envelope(ids: CompletionIds, text: str, finish: str | None) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "text_completion",
        "created": ids.created,
        "model": ids.model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
    }


def completion(ids: CompletionIds, result: GenerationResult) -> dict[str, Any]:
    return {**_envelope(ids, result.text, result.finish_reason), "usage": usage(result)}


async def stream_events(ids: CompletionIds, items, include_usage: bool, on_result) -> AsyncIterator[str]:
    """Server-sent events for an engine stream (chunks, then the result): one text delta per
    token, the finish reason on a last choice, a usage-only chunk when asked for, then `[DONE]`."""
    async for item in items:
        if isinstance(item, GenerationChunk):
            if item.text:
                yield _event(_envelope(ids, item.text, None))
        elif isinstance(item, GenerationResult):
            on_result(item)
            yield _event(_envelope(ids, "", item.finish_reason))
            if include_usage:
                yield _event({**_envelope(ids, "", None), "choices": [], "usage": usage(item)})
    yield "data: [DONE]\n\n"


def _event(payload: dict[str, Any]) -> str:
    return wire_sse.data(payload)


# --------------------------------------------------------------------- tokenize / detokenize


class TokenizeRequest(_Lenient):
    model: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None  # the chat wire's: tool calls and results count too
    add_special_tokens: bool = True
    add_generation_prompt: bool = True
    return_token_strs: bool = False
    tools: list[dict[str, Any]] | None = None


class DetokenizeRequest(_Lenient):
    model: str | None = None
    tokens: list[int]


def tokenize(payload: Any, tokenizer, chat: ChatFormat, max_model_len: int) -> tuple[str | None, dict[str, Any]]:
    """(model named in the request, vLLM TokenizeResponse). `chat` renders `messages` exactly as
    the chat endpoints do (so `count` equals their `usage.prompt_tokens`). Input that cannot fit
    the context window is refused before it is tokenized."""
    try:
        body = TokenizeRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(validation_message(exc)) from exc
    if (body.prompt is None) == (body.messages is None):
        raise RequestError("give exactly one of prompt or messages", param="prompt")
    if body.prompt is not None:
        _ensure_text_can_fit(body.prompt, chat, max_model_len)
        ids = tokenizer(body.prompt, add_special_tokens=body.add_special_tokens)["input_ids"] if body.prompt else []
    else:
        messages = chat_messages(body.messages)
        chat.ensure_can_fit(messages, body.tools, max_model_len)
        ids = chat.encode(messages, body.tools or [], add_generation_prompt=body.add_generation_prompt)
    strs = tokenizer.convert_ids_to_tokens(ids) if body.return_token_strs else None
    return body.model, {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": strs}


def detokenize(payload: Any, tokenizer, vocab_size: int) -> tuple[str | None, dict[str, Any]]:
    try:
        body = DetokenizeRequest.model_validate(payload)
    except ValidationError as exc:
        raise RequestError(validation_message(exc)) from exc
    if not all(0 <= t < vocab_size for t in body.tokens):
        raise RequestError(f"token ids must be in [0, {vocab_size})", param="tokens")
    return body.model, {"prompt": tokenizer.decode(body.tokens)}
