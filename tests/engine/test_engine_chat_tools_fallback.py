"""A chat template that ignores `tools` (as Gemma 3's does) does not lose them: they are described
in the system turn in Hermes markup, and earlier calls and results are written as plain turns."""

from __future__ import annotations

from hitrate.engine.chat import ChatFormat, ChatMessage
from hitrate.engine.tiny import build_tokenizer
from hitrate.engine.toolcalls import ToolCall, parse_tool_calls

# No `tools` variable, and a template error on role "tool", like many instruction templates.
NO_TOOLS_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}{{ raise_exception('roles must be user, system or assistant') }}{%- endif %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                            "parameters": {"type": "object"}}}]


def test_tools_go_into_the_system_turn_when_the_template_ignores_them():
    tokenizer = build_tokenizer()
    fmt = ChatFormat(tokenizer, chat_template=NO_TOOLS_TEMPLATE)
    assert not fmt.template_shows_tools()
    text = fmt.render([ChatMessage("system", "Be brief."), ChatMessage("user", "Open main.py")], TOOLS)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '"name": "read_file"' in text and "<tool_call></tool_call> XML tags" in text


def test_calls_and_results_become_plain_turns_the_template_accepts():
    tokenizer = build_tokenizer()
    fmt = ChatFormat(tokenizer, chat_template=NO_TOOLS_TEMPLATE)
    call = ToolCall(name="read_file", arguments={"path": "main.py"}, id="call_1")
    messages = [ChatMessage("user", "Open main.py"), ChatMessage("assistant", "Reading.", tool_calls=(call,)),
                ChatMessage("tool", "print('hi')", tool_call_id="call_1", name="read_file")]
    text = fmt.render(messages, TOOLS)
    assert '<|im_start|>assistant\nReading.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "main.py"}}' \
           '\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\nprint('hi')\n</tool_response><|im_end|>" in text
    assert parse_tool_calls(text.split("<|im_start|>assistant\n")[1], ["read_file"]).tool_calls[0] == \
        ToolCall(name="read_file", arguments={"path": "main.py"})
    assert fmt.encode(messages, TOOLS)  # the prompt encodes end to end


def test_a_template_that_prints_tools_is_used_as_it_is():
    tokenizer = build_tokenizer()  # the tiny tokenizer's own template renders tools (Qwen2.5 style)
    fmt = ChatFormat(tokenizer)
    assert fmt.template_shows_tools()
    messages = [ChatMessage("user", "Open main.py")]
    native = tokenizer.apply_chat_template([m.to_template() for m in messages], tools=TOOLS, tokenize=False,
                                           add_generation_prompt=True)
    assert fmt.render(messages, TOOLS) == native
