"""Evaluate arithmetic expressions."""

from calc.errors import CalcError
from calc.evaluate import evaluate

__all__ = ["CalcError", "evaluate"]
