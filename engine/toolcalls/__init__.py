"""Tool calls in generated text: parse them into structured calls, and split a stream around them.

Open-weight chat models write tool calls as text. The formats handled:

- markup of a chat template (`markup`): Hermes / Qwen2.5 / Qwen3 `<tool_call>{json}</tool_call>`,
  Qwen3-Coder's `<tool_call><function=NAME><parameter=KEY>...`, Mistral's `[TOOL_CALLS]`, Llama 3's
  `<|python_tag|>{json}`. A call in markup that cannot be parsed never raises: its raw text stays
  in the reply's content behind `INVALID_TOOL_CALL_MARKER`, so the caller (and the model on its
  next turn) can see what went wrong;
- plain JSON naming a declared tool (`json_calls`), fenced (```` ```json ````) or bare, the way
  small models (Qwen2.5-Coder, Llama 3) often write calls. Only when the request declared tools,
  and never for a name it did not declare, so ordinary JSON answers stay answers.

`parse_tool_calls` parses a whole reply; `ToolCallStreamSplitter` forwards a streamed reply's
text while holding back whatever may turn out to be a call, and ends with the same result.
"""

from hitrate.engine.toolcalls.calls import INVALID_TOOL_CALL_MARKER, ParsedReply, ToolCall
from hitrate.engine.toolcalls.markup import HERMES_CLOSE, HERMES_OPEN, LLAMA_PYTHON_TAG, MISTRAL_OPEN
from hitrate.engine.toolcalls.parse import parse_tool_calls
from hitrate.engine.toolcalls.stream import ToolCallStreamSplitter

__all__ = [
    "HERMES_CLOSE", "HERMES_OPEN", "INVALID_TOOL_CALL_MARKER", "LLAMA_PYTHON_TAG", "MISTRAL_OPEN",
    "ParsedReply", "ToolCall", "ToolCallStreamSplitter", "parse_tool_calls",
]
