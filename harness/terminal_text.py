"""Text from models and tools made safe to show on a terminal: control characters shown, not obeyed.

A model's reply, a file `read_file` returned or a command's output can hold terminal control
sequences: OSC 52 writes the user's clipboard, OSC 0 sets the window title, CSI `2J` clears the
screen and cursor moves overwrite what was printed, C1 controls (U+0080–U+009F) act as ESC-
sequences on terminals that honour them, and bidi overrides (the "Trojan Source" characters,
CVE-2021-42574) show text in another order than it has. Each such character is printed as its
Python escape (`\\x1b`, `\\x9b`, `\\u202e`), so the user sees that it is there and the terminal
does nothing. Newlines and tabs are kept; a CR-LF line end becomes a newline.

Rich (and Textual, which draws with it) strips only BEL, BS, VT, FF and CR, so ESC reaches the
terminal through them too: every front end passes model and tool text through here first.
"""

from __future__ import annotations

import re

# C0 controls but TAB and LF; DEL; C1 controls; the Unicode bidi controls (ALM, LRM, RLM,
# LRE..RLO, LRI..PDI, https://www.unicode.org/reports/tr9/#Directional_Formatting_Characters);
# tag characters (invisible, used to smuggle text past a reader).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every terminal control character shown as its escape; newlines and tabs kept."""
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


class VisibleStream:
    """`visible` for text that arrives in pieces: a CR at the end of a piece is held back until
    the next piece says whether it starts a CR-LF."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        self._held = ""
        if text.endswith("\r"):
            text, self._held = text[:-1], "\r"
        return visible(text)

    def flush(self) -> str:
        """What is held back, shown (the stream ended on a lone CR)."""
        text, self._held = self._held, ""
        return visible(text)


def visible_value(value: object) -> object:
    """`visible` applied to every string in a JSON-like value (tool arguments), keys included."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(str(k)): visible_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [visible_value(v) for v in value]
    return value


def json_escaped(text: str) -> str:
    """JSON text with every terminal control character that JSON leaves raw (C1, DEL, bidi and
    tag characters; JSON already escapes C0) written as a \\u escape: still the same JSON
    value, and a terminal the lines are printed on obeys none of them."""
    return _UNSAFE.sub(lambda found: "".join(f"\\u{unit:04x}" for unit in _utf16_units(found.group())), text)


def _utf16_units(char: str) -> list[int]:
    encoded = char.encode("utf-16-be")
    return [int.from_bytes(encoded[i : i + 2], "big") for i in range(0, len(encoded), 2)]
