"""Evaluate a parsed expression."""

from collections.abc import Mapping

from calc.errors import CalcError
from calc.parser import parse


def _eval(node: tuple, variables: Mapping[str, float]) -> float:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "var":
        _, name, pos = node
        if name not in variables:
            raise CalcError(f"unknown variable {name!r}", pos)
        return float(variables[name])
    if kind == "neg":
        return -_eval(node[1], variables)
    _, op, left, right, pos = node
    a, b = _eval(left, variables), _eval(right, variables)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "^":
        try:
            return float(a**b)
        except (ZeroDivisionError, OverflowError, TypeError) as exc:
            raise CalcError(f"bad power: {exc}", pos) from None
    if b == 0:
        raise CalcError("division by zero", pos)
    return a / b


def evaluate(source: str, variables: Mapping[str, float] | None = None) -> float:
    return float(_eval(parse(source), variables or {}))
