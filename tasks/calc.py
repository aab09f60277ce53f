"""`calculate`: safe integer and decimal arithmetic for the code phase.

An expression in Python syntax is parsed with `ast` and evaluated over numbers and
`+ - * / // % **` and parentheses only: no names, calls, attributes or strings ever run.
Exponents and intermediate results are bounded, so no input can exhaust the machine.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from tasks.errors import ExpressionError

MAX_CHARS = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 10**30

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _eval(node: ast.AST) -> Number:
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ExpressionError(f"exponents above {MAX_EXPONENT} are refused")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExpressionError("division by zero") from None
        if isinstance(value, complex) or abs(value) > MAX_MAGNITUDE:
            raise ExpressionError("the result is out of range")
        return value
    raise ExpressionError(f"only numbers and + - * / // % ** are allowed, not {_name(node)}")


def _name(node: ast.AST) -> str:
    return type(node).__name__


def calculate(expression: str) -> Number:
    """The value of an arithmetic expression; whole-valued results come back as int."""
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionError("expression must be a non-empty string")
    if len(expression) > MAX_CHARS:
        raise ExpressionError(f"expression must be at most {MAX_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"not an expression: {exc.msg}") from None
    value = _eval(tree.body)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return round(value, 6) if isinstance(value, float) else value
