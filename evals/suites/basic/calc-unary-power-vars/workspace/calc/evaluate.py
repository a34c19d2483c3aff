"""Evaluate a parsed expression."""

from calc.errors import CalcError
from calc.parser import parse


def _eval(node: tuple) -> float:
    if node[0] == "num":
        return node[1]
    _, op, left, right, pos = node
    a, b = _eval(left), _eval(right)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise CalcError("division by zero", pos)
    return a / b


def evaluate(source: str) -> float:
    return float(_eval(parse(source)))
