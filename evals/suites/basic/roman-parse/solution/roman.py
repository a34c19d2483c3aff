"""Roman numerals."""

import re

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]
_CANONICAL = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")


def to_roman(n: int) -> str:
    if not 1 <= n <= 3999:
        raise ValueError(f"{n} is outside 1..3999")
    parts = []
    for value, symbol in _VALUES:
        count, n = divmod(n, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(text: str) -> int:
    if not text or not _CANONICAL.fullmatch(text):
        raise ValueError(f"not a canonical Roman numeral: {text!r}")
    total = 0
    position = 0
    for value, symbol in _VALUES:
        while text.startswith(symbol, position):
            total += value
            position += len(symbol)
    return total
