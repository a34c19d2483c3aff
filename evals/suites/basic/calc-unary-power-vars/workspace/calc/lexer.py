"""Split an expression into tokens."""

from dataclasses import dataclass

from calc.errors import CalcError

OPERATORS = "+-*/"


@dataclass(frozen=True)
class Token:
    kind: str  # "num", "op", "lparen", "rparen" or "end"
    text: str
    pos: int


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    i = 0
    while i < len(source):
        ch = source[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit() or ch == ".":
            start = i
            while i < len(source) and (source[i].isdigit() or source[i] == "."):
                i += 1
            text = source[start:i]
            try:
                float(text)
            except ValueError:
                raise CalcError(f"bad number {text!r}", start) from None
            tokens.append(Token("num", text, start))
        elif ch in OPERATORS:
            tokens.append(Token("op", ch, i))
            i += 1
        elif ch == "(":
            tokens.append(Token("lparen", ch, i))
            i += 1
        elif ch == ")":
            tokens.append(Token("rparen", ch, i))
            i += 1
        else:
            raise CalcError(f"unexpected character {ch!r}", i)
    tokens.append(Token("end", "", len(source)))
    return tokens
