"""Recursive-descent parser producing a small tree of tuples.

Nodes: ("num", value) and ("bin", op, left, right, pos).
"""

from calc.errors import CalcError
from calc.lexer import Token, tokenize


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def parse(self) -> tuple:
        node = self.expr()
        token = self.peek()
        if token.kind != "end":
            raise CalcError(f"unexpected {token.text!r}", token.pos)
        return node

    def expr(self) -> tuple:
        node = self.term()
        while self.peek().kind == "op" and self.peek().text in "+-":
            op = self.take()
            node = ("bin", op.text, node, self.term(), op.pos)
        return node

    def term(self) -> tuple:
        node = self.atom()
        while self.peek().kind == "op" and self.peek().text in "*/":
            op = self.take()
            node = ("bin", op.text, node, self.atom(), op.pos)
        return node

    def atom(self) -> tuple:
        token = self.take()
        if token.kind == "num":
            return ("num", float(token.text))
        if token.kind == "lparen":
            node = self.expr()
            closing = self.take()
            if closing.kind != "rparen":
                raise CalcError("expected ')'", closing.pos)
            return node
        raise CalcError(f"unexpected {token.text or 'end of input'!r}", token.pos)


def parse(source: str) -> tuple:
    return _Parser(tokenize(source)).parse()
