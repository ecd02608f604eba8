"""Row-at-a-time evaluation of expressions: the literal semantics the reference uses.

Three-valued: ``None`` is "unknown" (a null attribute), and it propagates; integer
arithmetic that leaves int64 is a DataError (docs/data.md). The engine evaluates the same
expressions column-wise (:mod:`pycel.runtime.predicates`) and must agree with this.

Example::

    eval_scalar(b.price > 3, {"b": {"price": 4.0}})   # True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from pycel.errors import DataError

from .expr import INT64_MAX, INT64_MIN, Arith, Attr, BoolOp, Compare, Const, Expr, IsIn, Like, Not

# -- scalar evaluation (three-valued: None is "unknown", e.g. a null attribute) -------------
_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: float(a) / float(b) if b != 0 else None,  # both to float64 first
    "%": lambda a, b: a % b if b != 0 else None,
}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _scalar_const(value: Any) -> Any:
    """A constant as the reference sees attribute values: timestamps are int nanoseconds
    since the epoch, a naive datetime taken as UTC (as ingestion stores them)."""
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def prev_key(var: str | None) -> tuple[str, str | None]:
    """The environment key of the previous iteration's occurrence of ``var``."""
    return ("prev", var)


def eval_scalar(e: Expr[Any], env: Mapping[Any, Mapping[str, Any]]) -> Any:
    """Evaluate ``e`` with ``env[var][attribute]`` values; ``None`` propagates as unknown.

    This is the literal, row-at-a-time semantics the reference evaluator uses. ``env`` is
    keyed by variable (``str | None``), and by :func:`prev_key` for trends: an
    attribute of a previous iteration (``prev(b).price``) reads ``env[prev_key("b")]``,
    so one environment holds both iterations: ``eval_scalar(b.price > prev(b).price,
    {"b": {"price": 4.0}, prev_key("b"): {"price": 3.0}})`` is True.
    """
    if isinstance(e, Attr):
        return env[prev_key(e.var) if e.prev else e.var].get(e.name)
    if isinstance(e, Const):
        return _scalar_const(e.value)
    if isinstance(e, Arith):
        a, b = eval_scalar(e.left, env), eval_scalar(e.right, env)
        value = None if a is None or b is None else _ARITH[e.op](a, b)
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            raise DataError(f"integer arithmetic leaves the 64-bit range: {e!r} = {value}")
        return value
    if isinstance(e, Compare):
        a, b = eval_scalar(e.left, env), eval_scalar(e.right, env)
        return None if a is None or b is None else _CMP[e.op](a, b)
    if isinstance(e, IsIn):
        a = eval_scalar(e.expr, env)
        return None if a is None else (a in [_scalar_const(v) for v in e.values]) != e.negated
    if isinstance(e, Like):
        a = eval_scalar(e.expr, env)
        return None if a is None else e.compiled().fullmatch(a) is not None
    if isinstance(e, BoolOp):
        vals = [eval_scalar(a, env) for a in e.args]
        decisive = e.op == "or"  # True decides an OR, False decides an AND
        if decisive in vals:
            return decisive
        return None if None in vals else not decisive
    if isinstance(e, Not):
        a = eval_scalar(e.arg, env)
        return None if a is None else not a
    raise TypeError(f"unknown expression node {e!r}")
