"""Chat messages -> prompt token ids, so that each turn's prompt extends the previous turn's tokens.

A prefix cache only helps an agent session if the prompt of turn n+1 starts with exactly the
token ids of turn n's prompt followed by the reply the model generated. Rendering the whole
conversation through the chat template and tokenizing it again breaks that in three common ways:

1. The reply re-tokenized from its text is often not the token sequence the model sampled (a model
   may emit "ab" as "a" + "b"; a random test model almost always does).
2. Templates rewrite earlier assistant turns: Qwen3 drops the reasoning of turns before the last
   user message, some templates re-serialise tool-call arguments, others trim content.
3. Some templates move content as the conversation grows (Mistral renders the tool list before the
   *last* user message).

So `ChatFormat.encode` never re-renders history. It splits the conversation at its assistant
turns and builds the prompt piece by piece: the prompt the model saw for turn j, then the reply
exactly as generated (token ids remembered by `remember_reply`), then only the text the template
adds after that reply (its end-of-turn markup, the next user or tool messages, the next
generation prompt). Those pieces come from rendering the conversation with each earlier assistant
turn replaced by a unique sentinel text, so the template never sees (and cannot rewrite) a reply.
Every piece depends only on the messages before it, so the ids of turn n+1 extend those of turn n
by construction. A reply the server did not generate (or no longer remembers) is rendered by the
template as if it were the newest turn, which is how the model would have seen it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import uuid
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from hitrate.engine import chat_tools_fallback
from hitrate.engine.control_tokens import ControlTokenGuard
from hitrate.engine.api import ContextLengthError, EngineError
from hitrate.engine.toolcalls import ToolCall

log = logging.getLogger(__name__)

Role = Literal["system", "user", "assistant", "tool"]

# ChatML with Hermes-style tools (the format of Qwen2.5 and NousResearch Hermes), used when a
# tokenizer ships no chat template. The model must then learn or be prompted into this format; the
# engine also stops on "<|im_end|>" as a string when it is not a single token.
FALLBACK_CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- if (loop.first and message.content) or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + call.function.name + '\", \"arguments\": ' }}"
    "{{- call.function.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- if not (loop.last and continue_final_message) %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
FALLBACK_END_OF_TURN = "<|im_end|>"


class ChatTemplateError(EngineError):
    """The chat template refused the conversation (e.g. roles that must alternate)."""


@dataclass(frozen=True)
class ChatMessage:
    """One message in the engine's wire-neutral form (what HF chat templates take)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()  # assistant turns only
    tool_call_id: str | None = None  # tool results only: which call this answers
    name: str | None = None  # tool results only: the tool's name, for templates that print it

    def to_template(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    def canonical(self) -> str:
        """Stable text identity of the message (ids of tool calls included: templates may print them)."""
        return json.dumps(self.to_template(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def reply_key(salt: str, content: str, tool_calls: Sequence[ToolCall]) -> str:
    """Identity of an assistant reply as a client echoes it back.

    Tool-call ids are left out (clients may rename them). The content is compared exactly: a reply
    echoed with other whitespace is other text, and splicing in the remembered ids would have the
    model read something the client did not send. Such a turn is encoded from its text instead.
    """
    calls = [[c.name, json.dumps(c.arguments, sort_keys=True, ensure_ascii=False)] for c in tool_calls]
    blob = json.dumps([salt, content, calls], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class ChatFormat:
    """Renders and encodes chats for one tokenizer; remembers generated replies token for token.

    Thread-safe. `memory_size` bounds the number of remembered replies, `prompt_memo_size` the
    number of remembered prompts (each lets the next turn of a session skip re-rendering history).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        chat_template: str | None = None,
        memory_size: int = 4096,
        prompt_memo_size: int = 256,
    ) -> None:
        self.tokenizer = tokenizer
        own = chat_template or getattr(tokenizer, "chat_template", None)
        if isinstance(own, dict):  # some tokenizers ship named templates; "default" is the chat one
            own = own.get("default") or next(iter(own.values()), None)
        self.uses_fallback_template = not own
        self.template: str = own or FALLBACK_CHAT_TEMPLATE
        # Control tokens typed into content are encoded as text (a user turn cannot open a system turn).
        self._guard = ControlTokenGuard(tokenizer, self.template)
        self.stop_strings: tuple[str, ...] = ()
        if self.uses_fallback_template and len(self._tokenize(FALLBACK_END_OF_TURN)) != 1:
            self.stop_strings = (FALLBACK_END_OF_TURN,)
        self._sentinel_stem = f"\u2063turn-{uuid.uuid4().hex}-"
        self._lock = threading.Lock()
        self._replies: OrderedDict[str, array] = OrderedDict()
        self._memory_size = memory_size
        self._prompts: OrderedDict[str, array] = OrderedDict()
        self._prompt_memo_size = prompt_memo_size
        self._shows_tools: bool | None = None

    # ----------------------------------------------------------------- rendering

    def render(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        template_kwargs: dict[str, Any] | None = None,
    ) -> str:
        """The template's own text for the whole conversation (no reply splicing). Control-token
        spellings from the messages are wrapped in the private-use markers of `control_tokens`."""
        if not messages:
            raise ChatTemplateError("the conversation has no messages")
        continue_final = messages[-1].role == "assistant"
        return self._render([m.to_template() for m in messages], tools, template_kwargs,
                            add_generation_prompt=add_generation_prompt and not continue_final,
                            continue_final=continue_final)

    def _render(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        template_kwargs: dict[str, Any] | None,
        *,
        add_generation_prompt: bool,
        continue_final: bool = False,
    ) -> str:
        if tools and not self.template_shows_tools():
            messages, tools = chat_tools_fallback.hermes_in_plain_turns(messages, tools), None
        return self._apply(messages, tools, template_kwargs, add_generation_prompt=add_generation_prompt,
                           continue_final=continue_final)

    def template_shows_tools(self) -> bool:
        """Whether the chat template prints the `tools` it is given (checked once, by rendering a
        probe tool); when it does not, tools go into the system turn in Hermes markup."""
        if self._shows_tools is None:
            try:
                text = self._apply([{"role": "user", "content": "x"}], chat_tools_fallback.probe_tools(), None,
                                   add_generation_prompt=True)
                self._shows_tools = chat_tools_fallback.PROBE_NAME in text
            except ChatTemplateError:
                self._shows_tools = False
            if not self._shows_tools:
                log.info("the chat template does not print tools; they are described in the system turn instead")
        return self._shows_tools

    def _apply(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        template_kwargs: dict[str, Any] | None,
        *,
        add_generation_prompt: bool,
        continue_final: bool = False,
    ) -> str:
        guard = self._guard
        try:
            return self.tokenizer.apply_chat_template(
                guard.mark(messages),
                tools=guard.mark(list(tools)) if tools else None,
                chat_template=self.template,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final,
                tokenize=False,
                **guard.mark(template_kwargs or {}),
            )
        except Exception as exc:  # jinja2 TemplateError, raise_exception(...) in templates, ValueError
            raise ChatTemplateError(f"chat template rejected the conversation: {exc}") from exc

    def _tokenize(self, text: str) -> list[int]:
        """Ids of rendered text (or of content marked with `self._guard.mark`)."""
        return self._guard.encode(text)

    # ----------------------------------------------------------------- size before tokenizing

    @functools.cached_property
    def max_token_chars(self) -> int:
        """The most characters one token of the vocabulary stands for. Read from the tokens' own
        spellings, which are never shorter than the text they decode to (byte-level BPE spells each
        byte as one character, SentencePiece a space as one "▁", byte fallback as "<0x41>")."""
        vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        return max((len(t) for t in vocab if t), default=1)

    def min_prompt_tokens(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None = None) -> int:
        """A floor on the number of tokens of the prompt, from the length of its text alone.

        Each token stands for at most `max_token_chars` characters, so N characters take at least
        N / max_token_chars tokens; the floor is halved once more because a tokenizer's normalizer
        may shorten text (Unicode composition joins a letter and its accent). Cheap next to
        tokenizing: a prompt far over the context window is refused before any big string is built.
        """
        chars = sum(len(m.content) for m in messages)
        chars += sum(len(json.dumps(c.arguments, ensure_ascii=False)) for m in messages for c in m.tool_calls)
        if tools:
            chars += len(json.dumps(list(tools), ensure_ascii=False, default=str))
        return chars // (2 * self.max_token_chars)

    def ensure_can_fit(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None,
                       window: int) -> None:
        """Raises `ContextLengthError` when the prompt cannot fit `window` tokens whatever its exact count."""
        floor = self.min_prompt_tokens(messages, tools)
        if floor >= window:
            raise ContextLengthError(
                f"prompt is too long: at least {floor} tokens, but the model's context window is {window} tokens "
                "(counted from the length of its text, before tokenizing)"
            )

    # ----------------------------------------------------------------- replies

    def remember_reply(self, *, salt: str, content: str, tool_calls: Sequence[ToolCall], token_ids: Sequence[int]) -> None:
        """Record the exact ids of a reply, keyed by how the client will echo it back."""
        key = reply_key(salt, content, tool_calls)
        with self._lock:
            self._replies[key] = array("i", token_ids)
            self._replies.move_to_end(key)
            while len(self._replies) > self._memory_size:
                self._replies.popitem(last=False)

    def _remembered(self, salt: str, message: ChatMessage) -> list[int] | None:
        key = reply_key(salt, message.content, message.tool_calls)
        with self._lock:
            ids = self._replies.get(key)
            if ids is not None:
                self._replies.move_to_end(key)
        return list(ids) if ids is not None else None

    # ----------------------------------------------------------------- encoding

    def encode(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        salt: str = "",
        template_kwargs: dict[str, Any] | None = None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Prompt token ids for `messages`; extends the ids of every earlier turn of the same chat.

        A final assistant message is a prefill: the model continues it (no end-of-turn, no new
        generation prompt). `add_generation_prompt=False` ends the ids after the last message.
        """
        if not messages:
            raise ChatTemplateError("the conversation has no messages")
        msgs = list(messages)
        continue_final = msgs[-1].role == "assistant"
        # boundaries[k]: messages[:boundaries[k]] precede a generation prompt. Every assistant turn
        # is one; so is the end of the conversation unless its last message is a prefill.
        boundaries = [i for i, m in enumerate(msgs) if m.role == "assistant"]
        if not continue_final:
            boundaries.append(len(msgs))
        final_prompt = add_generation_prompt or continue_final
        context = json.dumps([salt, list(tools or []), template_kwargs or {}, self.template],
                             sort_keys=True, ensure_ascii=False, default=str)
        chain = _prefix_hashes(context, msgs)

        start, ids = self._resume(chain, boundaries if final_prompt else boundaries[:-1])
        try:
            if ids is None:
                start = 0
                ids = self._tokenize(self._first_piece(msgs, boundaries[0], tools, template_kwargs,
                                                       final_prompt or len(boundaries) > 1))
            for k in range(start, len(boundaries) - 1):
                is_last = k + 1 == len(boundaries) - 1
                ids = self._extend(ids, msgs, salt, boundaries[k], boundaries[k + 1], tools, template_kwargs,
                                   add_generation_prompt=final_prompt or not is_last)
        except _NotPrefixStable as exc:
            log.warning("chat template is not prefix-stable (%s); encoding the whole conversation", exc)
            return self._tokenize(self.render(msgs, tools, add_generation_prompt=add_generation_prompt,
                                              template_kwargs=template_kwargs))
        if final_prompt:
            self._memo_prompt(chain[boundaries[-1]], ids)
        if continue_final:
            # Prefill: the final assistant message is continued, so it gets no end-of-turn markup.
            ids = ids + self._tokenize(self._guard.mark(msgs[-1].content))
        return ids

    def _resume(self, chain: list[str], boundaries: list[int]) -> tuple[int, list[int] | None]:
        """The latest boundary whose prompt ids are remembered, and those ids."""
        with self._lock:
            for k in range(len(boundaries) - 1, -1, -1):
                memo = self._prompts.get(chain[boundaries[k]])
                if memo is not None:
                    self._prompts.move_to_end(chain[boundaries[k]])
                    return k, list(memo)
        return 0, None

    def _first_piece(self, msgs, boundary, tools, template_kwargs, add_generation_prompt: bool) -> str:
        if boundary > 0:
            return self._render_with_sentinels(msgs, boundary, tools, template_kwargs, add_generation_prompt)
        # The conversation opens with an assistant turn: its prompt is whatever the template
        # writes before that turn's text.
        text = self._render_with_sentinels(msgs, 1, tools, template_kwargs, False)
        head, found, _ = text.partition(self._sentinel(0))
        if not found:
            raise _NotPrefixStable("the opening assistant turn is not rendered")
        return head

    def _memo_prompt(self, key: str, ids: list[int]) -> None:
        with self._lock:
            self._prompts[key] = array("i", ids)
            self._prompts.move_to_end(key)
            while len(self._prompts) > self._prompt_memo_size:
                self._prompts.popitem(last=False)

    def _sentinel(self, index: int) -> str:
        return f"{self._sentinel_stem}{index}\u2063"

    def _with_sentinels(self, msgs: list[ChatMessage], upto: int) -> list[dict[str, Any]]:
        """messages[:upto] as template dicts, each assistant turn replaced by its sentinel text."""
        return [
            {"role": "assistant", "content": self._sentinel(i)} if m.role == "assistant" else m.to_template()
            for i, m in enumerate(msgs[:upto])
        ]

    def _render_with_sentinels(self, msgs, upto, tools, template_kwargs, add_generation_prompt: bool) -> str:
        return self._render(self._with_sentinels(msgs, upto), tools, template_kwargs,
                            add_generation_prompt=add_generation_prompt)

    def _extend(self, ids, msgs, salt, turn, next_boundary, tools, template_kwargs, *,
                add_generation_prompt: bool) -> list[int]:
        """ids of the prompt before assistant turn `turn` -> ids of the prompt at `next_boundary`."""
        text = self._render_with_sentinels(msgs, next_boundary, tools, template_kwargs, add_generation_prompt)
        sentinel = self._sentinel(turn)
        if text.count(sentinel) != 1:
            raise _NotPrefixStable(f"assistant turn {turn} is not rendered exactly once")
        after = text[text.index(sentinel) + len(sentinel) :]
        body = self._remembered(salt, msgs[turn])
        if body is not None:
            after = self._drop_generated_end(body, after)
        else:
            body = self._tokenize(self._native_reply_text(msgs, turn, tools, template_kwargs))
        return ids + body + self._tokenize(after)

    def _drop_generated_end(self, body: list[int], after: str) -> str:
        """When the generated ids already end with the end-of-turn token, the template's copy of it
        must not be added a second time."""
        if not body:
            return after
        last_text = self.tokenizer.decode(body[-1:], skip_special_tokens=False)
        special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
        if (body[-1] in special or last_text == FALLBACK_END_OF_TURN) and last_text and after.startswith(last_text):
            return after[len(last_text) :]
        return after

    def _native_reply_text(self, msgs, turn, tools, template_kwargs) -> str:
        """The template's rendering of an assistant turn as the newest message, without its framing."""
        before = self._with_sentinels(msgs, turn)
        native = self._render(before + [msgs[turn].to_template()], tools, template_kwargs, add_generation_prompt=False)
        framed = self._render(before + [{"role": "assistant", "content": self._sentinel(turn)}], tools,
                              template_kwargs, add_generation_prompt=False)
        head, _, tail = framed.partition(self._sentinel(turn))
        if native.startswith(head) and native.endswith(tail) and len(native) >= len(head) + len(tail):
            return native[len(head) : len(native) - len(tail)]
        # The template frames this turn differently from a plain reply (e.g. a header without a
        # newline before tool calls): fall back to Hermes markup, which the parser also reads.
        message = msgs[turn]
        mark = self._guard.mark
        parts = [mark(message.content)] if message.content else []
        parts += [
            "<tool_call>\n" + mark(json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False))
            + "\n</tool_call>"
            for c in message.tool_calls
        ]
        return "\n".join(parts)


class _NotPrefixStable(Exception):
    pass


def _prefix_hashes(context: str, msgs: Sequence[ChatMessage]) -> list[str]:
    """chain[k] identifies (context, messages[:k]); computed once per request in O(total size)."""
    h = hashlib.sha256(context.encode()).hexdigest()
    chain = [h]
    for m in msgs:
        h = hashlib.sha256((h + m.canonical()).encode()).hexdigest()
        chain.append(h)
    return chain
