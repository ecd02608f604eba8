"""Typed expressions over event attributes: the predicates of ``where``/``filter``.

``Expr[T]`` is an immutable expression node whose type parameter is the Python type of its
value, so mypy rejects ``Stock.price > "x"``. Comparisons and arithmetic build new nodes;
nothing is evaluated until a pattern runs.

Example::

    cheap_intel = (Stock.name == "INTC") & (Stock.price < 20.5)
    big = Stock.volume.between(1_000, 10_000) | Stock.name.isin(["AAPL", "MSFT"])
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import attrs
import numpy as np

from pycel.errors import PatternError

T_co = TypeVar("T_co", covariant=True)

#: The value types an attribute may have, by pycel dtype name.
DTYPES: dict[str, tuple[type, ...]] = {
    "bool": (bool,),
    "int": (int,),
    "float": (float, int),
    "str": (str,),
    "time": (datetime,),
}
_NUMERIC = ("bool", "int", "float")
#: int attributes and integer arithmetic are 64-bit signed (docs/data.md).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def plain_value(value: Any) -> Any:
    """``value`` as a Python constant: numpy's bool, integer, float and string scalars
    (``np.int64(3)``, what reading an array gives) become the Python value they hold."""
    if isinstance(value, (np.bool_, np.integer, np.floating, np.str_)):
        return value.item()
    return value


def dtype_of_value(value: object) -> str:
    """The pycel dtype of a Python constant (``3`` → ``"int"``)."""
    for name in ("bool", "int", "float", "str", "time"):
        if type(value) in DTYPES[name] or (name == "time" and isinstance(value, datetime)):
            if name == "int" and not INT64_MIN <= value <= INT64_MAX:  # type: ignore[operator]
                raise PatternError(f"integer constant {value} is outside the 64-bit range of int attributes")
            return name
    raise PatternError(f"unsupported constant {value!r} of type {type(value).__name__}")


def comparable(a: str, b: str) -> bool:
    """Whether values of dtypes ``a`` and ``b`` may be compared."""
    return a == b or (a in _NUMERIC and b in _NUMERIC)


class Expr(Generic[T_co]):
    """Base class of expression nodes; ``T_co`` is the type of the value it computes."""

    dtype: str

    def variables(self) -> frozenset[str | None]:
        """The occurrence variables this expression reads (``None``: not yet bound)."""
        return frozenset().union(*(c.variables() for c in self.children()))

    def children(self) -> tuple[Expr[Any], ...]:
        return ()

    def bind(self, default: str) -> Expr[T_co]:
        """A copy where class-level attributes (no variable yet) read occurrence ``default``."""
        result: Expr[T_co] = self._map(lambda a: attrs.evolve(a, var=default) if a.var is None else a)
        return result

    def _map(self, f: Any) -> Any:
        return self

    # -- comparisons ---------------------------------------------------------------------
    if TYPE_CHECKING:

        @overload  # type: ignore[override]
        def __eq__(self: Expr[str], other: str | Expr[str]) -> Expr[bool]: ...
        @overload
        def __eq__(self: Expr[float], other: float | Expr[float]) -> Expr[bool]: ...
        @overload
        def __eq__(self: Expr[datetime], other: datetime | Expr[datetime]) -> Expr[bool]: ...
        def __eq__(self, other: Any) -> Any: ...

        @overload  # type: ignore[override]
        def __ne__(self: Expr[str], other: str | Expr[str]) -> Expr[bool]: ...
        @overload
        def __ne__(self: Expr[float], other: float | Expr[float]) -> Expr[bool]: ...
        @overload
        def __ne__(self: Expr[datetime], other: datetime | Expr[datetime]) -> Expr[bool]: ...
        def __ne__(self, other: Any) -> Any: ...

        @overload
        def __lt__(self: Expr[str], other: str | Expr[str]) -> Expr[bool]: ...
        @overload
        def __lt__(self: Expr[float], other: float | Expr[float]) -> Expr[bool]: ...
        @overload
        def __lt__(self: Expr[datetime], other: datetime | Expr[datetime]) -> Expr[bool]: ...
        def __lt__(self, other: Any) -> Any: ...

        @overload
        def __le__(self: Expr[str], other: str | Expr[str]) -> Expr[bool]: ...
        @overload
        def __le__(self: Expr[float], other: float | Expr[float]) -> Expr[bool]: ...
        @overload
        def __le__(self: Expr[datetime], other: datetime | Expr[datetime]) -> Expr[bool]: ...
        def __le__(self, other: Any) -> Any: ...

        @overload
        def __gt__(self: Expr[str], other: str | Expr[str]) -> Expr[bool]: ...
        @overload
        def __gt__(self: Expr[float], other: float | Expr[float]) -> Expr[bool]: ...
        @overload
        def __gt__(self: Expr[datetime], other: datetime | Expr[datetime]) -> Expr[bool]: ...
        def __gt__(self, other: Any) -> Any: ...

        @overload
        def __ge__(self: Expr[str], other: str | Expr[str]) -> Expr[bool]: ...
        @overload
        def __ge__(self: Expr[float], other: float | Expr[float]) -> Expr[bool]: ...
        @overload
        def __ge__(self: Expr[datetime], other: datetime | Expr[datetime]) -> Expr[bool]: ...
        def __ge__(self, other: Any) -> Any: ...

    else:

        def __eq__(self, other):
            return Compare.build("==", self, other)

        def __ne__(self, other):
            return Compare.build("!=", self, other)

        def __lt__(self, other):
            return Compare.build("<", self, other)

        def __le__(self, other):
            return Compare.build("<=", self, other)

        def __gt__(self, other):
            return Compare.build(">", self, other)

        def __ge__(self, other):
            return Compare.build(">=", self, other)

    __hash__ = object.__hash__

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self: Expr[float], other: float | Expr[float]) -> Expr[float]:
        return Arith.build("+", self, other)

    def __sub__(self: Expr[float], other: float | Expr[float]) -> Expr[float]:
        return Arith.build("-", self, other)

    def __mul__(self: Expr[float], other: float | Expr[float]) -> Expr[float]:
        return Arith.build("*", self, other)

    def __truediv__(self: Expr[float], other: float | Expr[float]) -> Expr[float]:
        return Arith.build("/", self, other)

    def __mod__(self: Expr[float], other: float | Expr[float]) -> Expr[float]:
        return Arith.build("%", self, other)

    def __neg__(self: Expr[float]) -> Expr[float]:
        return Arith.build("-", Const(0), self)

    # A constant on the left (``1 - b.price``, ``2 * b.volume``): Python asks the right side.
    def __radd__(self: Expr[float], other: float) -> Expr[float]:
        return Arith.build("+", other, self)

    def __rsub__(self: Expr[float], other: float) -> Expr[float]:
        return Arith.build("-", other, self)

    def __rmul__(self: Expr[float], other: float) -> Expr[float]:
        return Arith.build("*", other, self)

    def __rtruediv__(self: Expr[float], other: float) -> Expr[float]:
        return Arith.build("/", other, self)

    def __rmod__(self: Expr[float], other: float) -> Expr[float]:
        return Arith.build("%", other, self)

    # -- boolean connectives -------------------------------------------------------------
    def __and__(self: Expr[bool], other: Expr[bool]) -> Expr[bool]:
        return BoolOp.build("and", self, other)

    def __or__(self: Expr[bool], other: Expr[bool]) -> Expr[bool]:
        return BoolOp.build("or", self, other)

    def __invert__(self: Expr[bool]) -> Expr[bool]:
        _require_bool(self)
        return Not(self)

    def __bool__(self) -> bool:
        raise PatternError(
            f"{self!r} is a pattern predicate, not a Python bool: use &, | and ~ "
            "instead of and/or/not, and .isin() instead of 'in'"
        )

    # -- sets, ranges, text --------------------------------------------------------------
    # (overloads per value type, as the comparisons': mypy then refuses ``name.isin([1])``)
    @overload
    def isin(self: Expr[str], values: Iterable[str]) -> Expr[bool]: ...
    @overload
    def isin(self: Expr[float], values: Iterable[float]) -> Expr[bool]: ...
    @overload
    def isin(self: Expr[datetime], values: Iterable[datetime]) -> Expr[bool]: ...
    def isin(self, values: Iterable[Any]) -> Expr[bool]:
        """True when the value is one of ``values`` (CEQL ``IN {…}``).

        Example: ``Buy.name.isin(["INTC", "MSFT"])``."""
        return _membership(self, values, negated=False)

    @overload
    def not_in(self: Expr[str], values: Iterable[str]) -> Expr[bool]: ...
    @overload
    def not_in(self: Expr[float], values: Iterable[float]) -> Expr[bool]: ...
    @overload
    def not_in(self: Expr[datetime], values: Iterable[datetime]) -> Expr[bool]: ...
    def not_in(self, values: Iterable[Any]) -> Expr[bool]:
        """True when the value is none of ``values`` (CEQL ``NOT IN {…}``).

        Example: ``Buy.volume.not_in([0, 1])``."""
        return _membership(self, values, negated=True)

    @overload
    def between(self: Expr[str], low: str | Expr[str], high: str | Expr[str]) -> Expr[bool]: ...
    @overload
    def between(self: Expr[float], low: float | Expr[float], high: float | Expr[float]) -> Expr[bool]: ...
    @overload
    def between(
        self: Expr[datetime], low: datetime | Expr[datetime], high: datetime | Expr[datetime]
    ) -> Expr[bool]: ...
    def between(self, low: Any, high: Any) -> Expr[bool]:
        """``low <= value <= high`` (an inclusive range).

        Example: ``Buy.price.between(10, 20.5)``."""
        return BoolOp.build("and", Compare.build(">=", self, low), Compare.build("<=", self, high))

    def like(self: Expr[str], pattern: str) -> Expr[bool]:
        """SQL ``LIKE``: ``%`` matches any run of characters, ``_`` exactly one."""
        _require_str(self, "like()", pattern)
        return Like(self, pattern, regex=False)

    def matches(self: Expr[str], regex: str) -> Expr[bool]:
        """True when the whole string matches the regular expression ``regex``."""
        _require_str(self, "matches()", regex)
        try:
            re.compile(regex)
        except re.error as err:
            raise PatternError(f"matches({regex!r}): invalid regular expression: {err}") from None
        return Like(self, regex, regex=True)


def _lift(value: Any) -> Expr[Any]:
    if isinstance(value, Expr):
        return value
    if getattr(type(value), "previous_occurrence", False):  # pycel.prev(b) itself
        raise PatternError(f"{value!r} is an occurrence, but a value was expected: read an attribute of it")
    if isinstance(value, type) or hasattr(value, "__pycel_pattern__"):
        raise PatternError(f"{value!r} is a pattern, but a value or attribute was expected")
    return Const(value)


def _require_str(e: Expr[Any], method: str, pattern: object) -> None:
    if e.dtype != "str":
        raise PatternError(f"{method} needs a str expression, but {e!r} is {e.dtype}")
    if not isinstance(pattern, str):
        raise PatternError(f"{method} needs a str pattern, got {pattern!r}")


def expr_key(value: object) -> object:
    """A hashable structural identity of an expression, for comparing patterns.

    ``==`` on expressions builds a predicate, so pattern nodes that hold expressions
    compare them through this key instead.
    """
    if isinstance(value, Expr):
        fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(type(value))  # type: ignore[arg-type]
        return (type(value).__name__, *(expr_key(getattr(value, f.name)) for f in fields))
    if isinstance(value, tuple):
        return tuple(expr_key(v) for v in value)
    return (type(value).__name__, value)


def _require_bool(e: Expr[Any]) -> None:
    if e.dtype != "bool":
        raise PatternError(f"{e!r} is a {e.dtype} expression, but a predicate was expected")


@attrs.frozen(eq=False, repr=False)
class Attr(Expr[T_co]):
    """An attribute of an event occurrence, e.g. ``s.price`` or ``Stock.price``.

    ``var`` is the occurrence variable (``None`` for class-level access until the pattern
    binds it); ``owner`` the event type the attribute was read from. ``prev``: the
    attribute of ``var``'s occurrence in the *previous* iteration of the ``plus`` that
    binds it (``pycel.prev(b).price``, a trend condition; docs/semantics.md, Trends).
    """

    var: str | None
    name: str
    dtype: str
    owner: str
    prev: bool = False

    def variables(self) -> frozenset[str | None]:
        return frozenset([self.var])

    def _map(self, f: Any) -> Any:
        return f(self)

    def __repr__(self) -> str:
        if self.prev:
            return f"prev({self.var or self.owner}).{self.name}"
        return f"{self.var or self.owner}.{self.name}"


def _membership(expr: Expr[Any], values: Iterable[Any], negated: bool) -> Expr[bool]:
    """``expr IN {values}`` (``NOT IN`` when ``negated``), the values checked against
    ``expr``'s type."""
    if isinstance(values, (str, bytes)):  # (iterating would test its characters)
        name = "not_in" if negated else "isin"
        raise PatternError(
            f"{name}() takes a collection of values, not the string {values!r}: write "
            f"{name}([{values!r}]) or {'!=' if negated else '=='} {values!r}"
        )
    vals = tuple(plain_value(v) for v in values)
    for v in vals:
        if not comparable(expr.dtype, dtype_of_value(v)):
            raise PatternError(f"{expr!r} ({expr.dtype}) cannot be compared with {v!r}")
    return IsIn(expr, vals, negated)


@attrs.frozen(eq=False, repr=False)
class Const(Expr[T_co]):
    """A constant value."""

    value: Any = attrs.field(converter=plain_value)
    dtype: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype_of_value(self.value))

    def __repr__(self) -> str:
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "\\'") + "'"
        if isinstance(self.value, bool):
            return "TRUE" if self.value else "FALSE"
        return repr(self.value)


@attrs.frozen(eq=False, repr=False)
class Arith(Expr[T_co]):
    """Arithmetic ``left op right`` with op one of ``+ - * / %``."""

    op: str
    left: Expr[Any]
    right: Expr[Any]
    dtype: str

    @staticmethod
    def build(op: str, left: Any, right: Any) -> Arith[Any]:
        lhs, rhs = _lift(left), _lift(right)
        for side in (lhs, rhs):
            if side.dtype not in _NUMERIC:
                raise PatternError(f"arithmetic {op!r} needs numbers, but {side!r} is {side.dtype}")
        dtype = "float" if "float" in (lhs.dtype, rhs.dtype) or op == "/" else "int"
        return Arith(op, lhs, rhs, dtype)

    def children(self) -> tuple[Expr[Any], ...]:
        return (self.left, self.right)

    def _map(self, f: Any) -> Any:
        return Arith(self.op, self.left._map(f), self.right._map(f), self.dtype)

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


@attrs.frozen(eq=False, repr=False)
class Compare(Expr[bool]):
    """A comparison ``left op right`` with op one of ``== != < <= > >=``."""

    op: str
    left: Expr[Any]
    right: Expr[Any]
    dtype: str = "bool"

    @staticmethod
    def build(op: str, left: Any, right: Any) -> Compare:
        lhs, rhs = _lift(left), _lift(right)
        if not comparable(lhs.dtype, rhs.dtype):
            raise PatternError(f"cannot compare {lhs!r} ({lhs.dtype}) with {rhs!r} ({rhs.dtype})")
        return Compare(op, lhs, rhs)

    def children(self) -> tuple[Expr[Any], ...]:
        return (self.left, self.right)

    def _map(self, f: Any) -> Any:
        return Compare(self.op, self.left._map(f), self.right._map(f))

    def __repr__(self) -> str:
        op = {"==": "=", "!=": "!="}.get(self.op, self.op)
        return f"{self.left!r} {op} {self.right!r}"


@attrs.frozen(eq=False, repr=False)
class IsIn(Expr[bool]):
    """Set membership ``expr IN {values}`` (or ``NOT IN`` when ``negated``)."""

    expr: Expr[Any]
    values: tuple[Any, ...]
    negated: bool
    dtype: str = "bool"

    def children(self) -> tuple[Expr[Any], ...]:
        return (self.expr,)

    def _map(self, f: Any) -> Any:
        return IsIn(self.expr._map(f), self.values, self.negated)

    def __repr__(self) -> str:
        vals = ", ".join(repr(Const(v)) for v in self.values)
        return f"{self.expr!r} {'NOT IN' if self.negated else 'IN'} {{{vals}}}"


@attrs.frozen(eq=False, repr=False)
class Like(Expr[bool]):
    """SQL ``LIKE`` (``regex=False``) or a full regular-expression match."""

    expr: Expr[Any]
    pattern: str
    regex: bool
    dtype: str = "bool"

    def children(self) -> tuple[Expr[Any], ...]:
        return (self.expr,)

    def _map(self, f: Any) -> Any:
        return Like(self.expr._map(f), self.pattern, self.regex)

    def compiled(self) -> re.Pattern[str]:
        """The equivalent Python regular expression (anchored at both ends)."""
        if self.regex:
            return re.compile(self.pattern)
        body = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in self.pattern)
        return re.compile(body, re.DOTALL)

    def __repr__(self) -> str:
        return f"{self.expr!r} {'MATCHES' if self.regex else 'LIKE'} {Const(self.pattern)!r}"


@attrs.frozen(eq=False, repr=False)
class BoolOp(Expr[bool]):
    """Conjunction (``op == "and"``) or disjunction (``"or"``) of predicates."""

    op: str
    args: tuple[Expr[bool], ...]
    dtype: str = "bool"

    @staticmethod
    def build(op: str, left: Any, right: Any) -> BoolOp:
        lhs, rhs = _lift(left), _lift(right)
        _require_bool(lhs)
        _require_bool(rhs)
        args: list[Expr[bool]] = []
        for side in (lhs, rhs):
            args.extend(side.args if isinstance(side, BoolOp) and side.op == op else [side])
        return BoolOp(op, tuple(args))

    def children(self) -> tuple[Expr[Any], ...]:
        return self.args

    def _map(self, f: Any) -> Any:
        return BoolOp(self.op, tuple(a._map(f) for a in self.args))

    def __repr__(self) -> str:
        return "(" + f" {self.op.upper()} ".join(repr(a) for a in self.args) + ")"


@attrs.frozen(eq=False, repr=False)
class Not(Expr[bool]):
    """Negation of a predicate."""

    arg: Expr[bool]
    dtype: str = "bool"

    def children(self) -> tuple[Expr[Any], ...]:
        return (self.arg,)

    def _map(self, f: Any) -> Any:
        return Not(self.arg._map(f))

    def __repr__(self) -> str:
        return f"NOT {self.arg!r}"


def conjuncts(pred: Expr[bool]) -> list[Expr[bool]]:
    """Split a predicate at its top-level ANDs."""
    if isinstance(pred, BoolOp) and pred.op == "and":
        return [c for a in pred.args for c in conjuncts(a)]
    return [pred]


def attributes_in(e: Expr[Any]) -> list[Attr[Any]]:
    """Every attribute ``e`` reads, left to right (a repeated one as often as it occurs).

    Example: ``attributes_in(s.price < b.price)`` is ``[s.price, b.price]``.
    """
    if isinstance(e, Attr):
        return [e]
    return [a for c in e.children() for a in attributes_in(c)]


def reads_prev(e: Expr[Any]) -> bool:
    """Whether ``e`` reads a previous iteration's attribute (``pycel.prev(b).price``).

    Example: ``reads_prev(b.price > pycel.prev(b).price)`` is True, ``reads_prev(b.price > 3)``
    False.
    """
    if isinstance(e, Attr):
        return e.prev
    return any(reads_prev(c) for c in e.children())
