"""Recursive-descent parser producing a small tree of tuples.

Grammar:
    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "/") unary)*
    unary := ("+" | "-") unary | power
    power := atom ("^" unary)?
    atom  := number | name | "(" expr ")"

Nodes: ("num", value), ("var", name, pos), ("neg", operand) and ("bin", op, left, right, pos).
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

    def at_op(self, ops: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text in ops

    def parse(self) -> tuple:
        node = self.expr()
        token = self.peek()
        if token.kind != "end":
            raise CalcError(f"unexpected {token.text!r}", token.pos)
        return node

    def expr(self) -> tuple:
        node = self.term()
        while self.at_op("+-"):
            op = self.take()
            node = ("bin", op.text, node, self.term(), op.pos)
        return node

    def term(self) -> tuple:
        node = self.unary()
        while self.at_op("*/"):
            op = self.take()
            node = ("bin", op.text, node, self.unary(), op.pos)
        return node

    def unary(self) -> tuple:
        if self.at_op("+-"):
            op = self.take()
            operand = self.unary()
            return ("neg", operand) if op.text == "-" else operand
        return self.power()

    def power(self) -> tuple:
        base = self.atom()
        if self.at_op("^"):
            op = self.take()
            return ("bin", "^", base, self.unary(), op.pos)
        return base

    def atom(self) -> tuple:
        token = self.take()
        if token.kind == "num":
            return ("num", float(token.text))
        if token.kind == "name":
            return ("var", token.text, token.pos)
        if token.kind == "lparen":
            node = self.expr()
            closing = self.take()
            if closing.kind != "rparen":
                raise CalcError("expected ')'", closing.pos)
            return node
        raise CalcError(f"unexpected {token.text or 'end of input'!r}", token.pos)


def parse(source: str) -> tuple:
    return _Parser(tokenize(source)).parse()
