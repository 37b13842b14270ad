"""``calculator``: arithmetic on an AST whitelist, never ``eval``.

Reference fidelity mirrors VisualToolBench's tool: ``^`` is advertised but rejected. In
``fixed`` it means power. Exponents and results are bounded so ``9**9**9`` cannot stall a worker.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import orjson

from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool

_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Mod: operator.mod, ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv,
}
_FUNCS: dict[str, Callable[[float], float]] = {
    "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan, "log": math.log, "exp": math.exp,
}
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 1e300


class CalcError(ValueError):
    pass


@functools.lru_cache(maxsize=4096)
def evaluate(expression: str, *, caret_is_power: bool) -> float:
    """Evaluate an arithmetic expression or raise CalcError with a readable reason."""
    if caret_is_power:
        expression = expression.replace("^", "**")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise CalcError(f"could not parse expression: {e.msg}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise CalcError(f"exponent {right} is too large")
        try:
            value = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalcError("division by zero") from None
        except OverflowError:
            raise CalcError("result too large") from None
        if isinstance(value, complex) or abs(value) > _MAX_MAGNITUDE:
            raise CalcError("result too large or not real")
        return value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if len(node.args) != 1 or node.keywords:
            raise CalcError(f"{node.func.id}() takes exactly one argument")
        try:
            return _FUNCS[node.func.id](_eval(node.args[0]))
        except (ValueError, OverflowError) as e:
            raise CalcError(f"{node.func.id}: {e}") from None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise CalcError("unsupported operator '^' (use ** for powers)")
    raise CalcError(f"unsupported expression element: {ast.dump(node)[:60]}")


def format_number(value: float) -> int | float:
    """Integral results as ints (``49``, not ``49.0``), as the reference tool prints them."""
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e15:
        return int(value)
    return float(value)


@register_tool
class Calculator(Tool):
    name = "calculator"
    option_schema = {}
    description = ("Evaluate an arithmetic expression. Supports + - * / % ** ^ (power), parentheses, "
                   "and sqrt, sin, cos, tan, log, exp of one argument.")
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. '(3 + 4) * 2'"}},
        "required": ["expression"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        expr = args.get("expression")
        if not isinstance(expr, str) or not expr.strip():
            return ToolResult.fail("calculator needs a non-empty string 'expression'")
        try:
            value = evaluate(expr, caret_is_power=ctx.fidelity != "reference")
        except CalcError as e:
            return ToolResult.fail(orjson.dumps({"status": "error", "expression": expr, "error": str(e)}).decode())
        out = {"result": format_number(value), "expression": expr, "status": "success"}
        return ToolResult(status="ok", output=orjson.dumps(out).decode())
