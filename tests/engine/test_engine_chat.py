"""Chat rendering and turn-over-turn token extension, with the tiny model's real tokenizer."""

from __future__ import annotations

import random

import pytest

from hitrate.engine.api import EngineError
from hitrate.engine.chat import FALLBACK_CHAT_TEMPLATE, ChatFormat, ChatMessage, ChatTemplateError
from hitrate.engine.tiny import build_tokenizer
from hitrate.engine.toolcalls import ToolCall, parse_tool_calls

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(512)


def _sample_reply(tokenizer, rng: random.Random, text: str | None) -> list[int]:
    """Ids as a model might sample them: random, or `text` spelled in a non-canonical way, + eos."""
    if text is None:
        ids = [rng.randrange(0, 300) for _ in range(rng.randint(3, 12))]
    else:
        ids = []
        for piece in (text[i : i + 3] for i in range(0, len(text), 3)):  # not how BPE would split it
            ids += tokenizer(piece, add_special_tokens=False)["input_ids"]
    return ids + [tokenizer.eos_token_id]


def _agent_session(fmt: ChatFormat, tokenizer, turns: int, *, salt: str = "", seed: int = 0):
    """Runs `turns` turns, generating replies; returns [(prompt_ids, reply_ids)] per turn."""
    rng = random.Random(seed)
    messages = [ChatMessage("system", "You fix bugs."), ChatMessage("user", "Tests fail in parser.py")]
    history = []
    for turn in range(turns):
        prompt = fmt.encode(messages, TOOLS, salt=salt)
        call_text = f'Reading.<tool_call>\n{{"name": "read_file", "arguments": {{"path": "f{turn}.py"}}}}\n</tool_call>'
        reply_ids = _sample_reply(tokenizer, rng, call_text if turn % 2 == 0 else None)
        parsed = parse_tool_calls(tokenizer.decode(reply_ids, skip_special_tokens=True), ["read_file"])
        calls = tuple(ToolCall(c.name, c.arguments, id=f"call_{turn}") for c in parsed.tool_calls)
        fmt.remember_reply(salt=salt, content=parsed.content, tool_calls=calls, token_ids=reply_ids)
        history.append((prompt, reply_ids))
        messages.append(ChatMessage("assistant", parsed.content, calls))
        if calls:
            messages.append(ChatMessage("tool", f"contents of f{turn}.py", tool_call_id=calls[0].id, name="read_file"))
        else:
            messages.append(ChatMessage("user", f"Now step {turn}."))
    return history, messages


def test_renders_with_the_models_own_template_including_tools(tokenizer):
    fmt = ChatFormat(tokenizer)
    assert not fmt.uses_fallback_template
    msgs = [ChatMessage("user", "hi"),
            ChatMessage("assistant", "", (ToolCall("read_file", {"path": "a"}, id="c1"),)),
            ChatMessage("tool", "A", tool_call_id="c1")]
    text = fmt.render(msgs, TOOLS)
    assert text == tokenizer.apply_chat_template([m.to_template() for m in msgs], tools=TOOLS, tokenize=False,
                                                 add_generation_prompt=True)
    assert '"name": "read_file"' in text and "<tool_response>\nA\n</tool_response>" in text


def test_each_turn_extends_the_previous_prompt_plus_the_generated_reply(tokenizer):
    fmt = ChatFormat(tokenizer)
    history, messages = _agent_session(fmt, tokenizer, turns=6)
    for (prompt, reply), (next_prompt, _) in zip(history, history[1:]):
        assert next_prompt[: len(prompt) + len(reply)] == prompt + reply
        assert len(next_prompt) > len(prompt) + len(reply)
    # Random replies do not survive decode -> encode, so plain re-rendering would have broken this.
    last_prompt, last_reply = history[-1]
    rendered = tokenizer(fmt.render(messages, TOOLS), add_special_tokens=False)["input_ids"]
    assert rendered[: len(last_prompt) + len(last_reply)] != last_prompt + last_reply


def test_encoding_without_the_prompt_memo_gives_the_same_ids(tokenizer):
    remembering = ChatFormat(tokenizer)
    history, messages = _agent_session(remembering, tokenizer, turns=5)
    final = remembering.encode(messages, TOOLS)
    forgetful = ChatFormat(tokenizer, prompt_memo_size=0)
    forgetful._replies = remembering._replies  # same replies, but history is re-rendered every time
    assert forgetful.encode(messages, TOOLS) == final
    assert final[: len(history[-1][0])] == history[-1][0]


def test_replies_are_remembered_per_salt(tokenizer):
    fmt = ChatFormat(tokenizer)
    history, messages = _agent_session(fmt, tokenizer, turns=2, salt="tenant-a")
    prompt, reply = history[0]
    assert fmt.encode(messages, TOOLS, salt="tenant-a")[: len(prompt) + len(reply)] == prompt + reply
    other = fmt.encode(messages, TOOLS, salt="tenant-b")
    assert other[: len(prompt)] == prompt  # same rendering up to the reply ...
    assert other[: len(prompt) + len(reply)] != prompt + reply  # ... but tenant a's exact ids are not used


def test_unremembered_history_still_extends_turn_after_turn(tokenizer):
    """A conversation built by the client (replies not generated here) is stable too."""
    fmt = ChatFormat(tokenizer)
    msgs = [ChatMessage("user", "q1"), ChatMessage("assistant", "a1"), ChatMessage("user", "q2")]
    first = fmt.encode(msgs, TOOLS)
    msgs2 = msgs + [ChatMessage("assistant", "", (ToolCall("read_file", {"path": "x"}, id="c"),)),
                    ChatMessage("tool", "X", tool_call_id="c")]
    second = ChatFormat(tokenizer).encode(msgs2, TOOLS)
    assert second[: len(first)] == first
    # ... and what the model reads equals the template's own rendering when nothing is remembered.
    assert tokenizer.decode(second) == fmt.render(msgs2, TOOLS)


# A Qwen3-style template: reasoning of assistant turns before the last user message is dropped.
STRIPPING_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- set content = m.content %}"
    "{%- if m.role == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + m.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    # ... and with thinking off, the generation prompt holds an empty reasoning block that history never shows.
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)

# A Mistral-style template: the tool list is printed before the *last* user message, so it moves.
MOVING_TOOLS_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'user' and loop.index0 == ns.last_user and tools %}[TOOLS]{{ tools | tojson }}[/TOOLS]{%- endif %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.mark.parametrize("template, kwargs", [
    (STRIPPING_TEMPLATE, None), (STRIPPING_TEMPLATE, {"enable_thinking": False}), (MOVING_TOOLS_TEMPLATE, None),
], ids=["strips-reasoning", "thinking-off", "moves-tools"])
def test_templates_that_rewrite_history_still_extend(tokenizer, template, kwargs):
    fmt = ChatFormat(tokenizer, chat_template=template)
    messages = [ChatMessage("user", "first")]
    previous: list[int] | None = None
    for turn in range(4):
        prompt = fmt.encode(messages, TOOLS, template_kwargs=kwargs)
        if previous is not None:
            assert prompt[: len(previous)] == previous
        text = f"<think>\nplan {turn}\n</think>\n\nanswer {turn}"
        reply = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        fmt.remember_reply(salt="", content=text, tool_calls=(), token_ids=reply)
        previous = prompt + reply
        messages += [ChatMessage("assistant", text), ChatMessage("user", f"next {turn}")]
    # The plain template rendering would have rewritten history (and so missed the cache).
    plain = tokenizer(fmt.render(messages, TOOLS, template_kwargs=kwargs), add_special_tokens=False)["input_ids"]
    assert plain[: len(previous)] != previous


def test_final_assistant_message_is_continued(tokenizer):
    fmt = ChatFormat(tokenizer)
    msgs = [ChatMessage("user", "Say a word."), ChatMessage("assistant", "The word is")]
    ids = fmt.encode(msgs)
    prompt = fmt.encode(msgs[:1])
    assert ids[: len(prompt)] == prompt
    assert tokenizer.decode(ids[len(prompt) :]) == "The word is"


def test_add_generation_prompt_false_ends_after_the_last_message(tokenizer):
    fmt = ChatFormat(tokenizer)
    msgs = [ChatMessage("user", "hello")]
    assert tokenizer.decode(fmt.encode(msgs)).endswith("<|im_start|>assistant\n")
    assert tokenizer.decode(fmt.encode(msgs, add_generation_prompt=False)).endswith("hello<|im_end|>\n")


def test_template_errors_are_engine_errors(tokenizer):
    fmt = ChatFormat(tokenizer, chat_template="{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ChatTemplateError, match="roles must alternate") as info:
        fmt.encode([ChatMessage("user", "x")])
    assert isinstance(info.value, EngineError)
    with pytest.raises(ChatTemplateError, match="no messages"):
        ChatFormat(tokenizer).encode([])


def test_fallback_chatml_template_when_the_tokenizer_has_none(tokenizer):
    bare = build_tokenizer(512)
    bare.chat_template = None
    fmt = ChatFormat(bare)
    assert fmt.uses_fallback_template and fmt.template == FALLBACK_CHAT_TEMPLATE
    assert fmt.stop_strings == ()  # "<|im_end|>" is one token in this vocabulary
    msgs = [ChatMessage("system", "S"), ChatMessage("user", "U"),
            ChatMessage("assistant", "A", (ToolCall("read_file", {"path": "p"}, id="1"),)),
            ChatMessage("tool", "R", tool_call_id="1")]
    text = fmt.render(msgs, TOOLS)
    assert text.startswith("<|im_start|>system\nS\n\n# Tools")
    assert '<|im_start|>assistant\nA\n<tool_call>\n{"name": "read_file", "arguments": {"path": "p"}}\n</tool_call>' in text
    assert text.endswith("<tool_response>\nR\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert parse_tool_calls(text.split("<|im_start|>assistant\n")[1]).tool_calls[0].arguments == {"path": "p"}


def test_fallback_adds_a_stop_string_when_end_of_turn_is_not_a_token():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    fmt = ChatFormat(PreTrainedTokenizerFast(tokenizer_object=backend))
    assert fmt.uses_fallback_template and fmt.stop_strings == ("<|im_end|>",)


def test_a_template_that_drops_replies_falls_back_to_its_own_rendering(tokenizer, caplog):
    drops_replies = (
        "{%- for m in messages %}{%- if m.role != 'assistant' %}"
        "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
    )
    fmt = ChatFormat(tokenizer, chat_template=drops_replies)
    msgs = [ChatMessage("user", "a"), ChatMessage("assistant", "b"), ChatMessage("user", "c")]
    with caplog.at_level("WARNING"):
        ids = fmt.encode(msgs)
    assert tokenizer.decode(ids) == fmt.render(msgs) == "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"
    assert "not prefix-stable" in caplog.text
