"""The pattern language: immutable pattern nodes and the operators that build them.

A pattern is a small tree of frozen ``attrs`` nodes. Build it with functions (``seq``,
``plus``, ``not_``), operators (``>>`` sequence, ``|`` or, ``&`` and) and methods
(``where``, ``as_``, ``within``, ``partition_by``, ``select``, ``strategy``, ``consume``,
``limit``). The semantics are docs/semantics.md; :mod:`pycel.reference` is their literal
implementation. Two helpers live below this module, and their public names are
re-exported here: what stands for a pattern (event types, aliases) is
:mod:`pycel.language.patternlike`, the values the modifiers accept
:mod:`pycel.language.modifiers`.

Example::

    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    p = (pycel.seq(s.where(s.name == "INTC"), b.where(b.price > 10))
         .within(seconds=10, on=Stock.time)
         .partition_by(Stock.name))
    print(p)   # SELECT * WHERE (Sell AS s FILTER ... ; Buy AS b FILTER ...) PARTITION BY ...
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, overload

import attrs

from pycel.errors import PatternError
from pycel.language.expr import Attr, Expr, expr_key

# ``x as x``: re-exported, so pycel.dsl stays the one module to import the language from.
from pycel.language.modifiers import POLICIES as POLICIES
from pycel.language.modifiers import STRATEGIES as STRATEGIES
from pycel.language.modifiers import Policy as Policy
from pycel.language.modifiers import Strategy as Strategy
from pycel.language.modifiers import check_limit as check_limit
from pycel.language.modifiers import check_window_size as check_window_size
from pycel.language.modifiers import limit_of, window_of
from pycel.language.patternlike import PatternLike as PatternLike
from pycel.language.patternlike import as_pattern as as_pattern
from pycel.language.patternlike import event_name, is_event_type, stands_for_pattern

if TYPE_CHECKING:
    # For annotations only: pycel.language.events builds on this module (its operators
    # make patterns), so importing it here would close a circle.
    from pycel.language.events import Event


class Pattern:
    """Base class of pattern nodes. Combine patterns with ``>>``, ``|``, ``&``."""

    def children(self) -> tuple[Pattern, ...]:
        return ()

    def __pycel_pattern__(self) -> Pattern:
        """A pattern stands for itself (see :mod:`pycel.language.patternlike`)."""
        return self

    def pattern(self) -> Pattern:
        """This pattern (lets event classes, aliases and patterns be used alike)."""
        return self

    # -- combinators ---------------------------------------------------------------------
    def __rshift__(self, other: PatternLike) -> Pattern:
        """``p >> q`` is ``seq(p, q)``: p, then q later (events may be skipped)."""
        return seq(self, other)

    def __rrshift__(self, other: PatternLike) -> Pattern:
        return seq(other, self)

    def __or__(self, other: PatternLike) -> Pattern:
        """``p | q``: a match of p or a match of q."""
        return Or(self, as_pattern(other))

    def __ror__(self, other: PatternLike) -> Pattern:
        return Or(as_pattern(other), self)

    def __and__(self, other: PatternLike) -> Pattern:
        """``p & q``: both match; the match is the union of both (PCEA conjunction)."""
        return And(self, as_pattern(other))

    def __rand__(self, other: PatternLike) -> Pattern:
        return And(as_pattern(other), self)

    def __bool__(self) -> bool:
        raise PatternError(f"{self!r} is a pattern, not a Python bool: use | and & to combine")

    # -- filters and variables -----------------------------------------------------------
    def where(self, predicate: Expr[bool], *, post_filter: bool = False) -> Pattern:
        """Keep matches where ``predicate`` holds for every event bound to its variables.

        Unary conditions (``s.price > 10``) filter single occurrences; equalities between
        occurrences (``s.name == b.name``) correlate them. Anything else needs
        ``post_filter=True`` (exact, but without the delay guarantee).
        Class-level attributes (``Stock.price``) refer to the occurrence named after the
        class, e.g. ``Stock`` in ``seq(Stock, Buy)``.

        Example: ``seq(s, b).where(s.name == b.name)``
        """
        if not isinstance(predicate, Expr) or predicate.dtype != "bool":
            raise PatternError(f"where() needs a predicate, got {predicate!r}")
        return Filter(self, _bind_to_owner(predicate), post_filter)

    filter = where

    def as_(self, var: str) -> Pattern:
        """Bind ``var`` to every position of this pattern's match (CEQL ``p AS x``)."""
        return As(self, _check_var(var))

    # -- query-level modifiers -----------------------------------------------------------
    # One overload per way of giving a window, so that mypy refuses a time window without
    # on=, a count window with one, or two sizes at once.
    @overload
    def within(self, *, events: int) -> Pattern: ...
    @overload
    def within(self, size: float | timedelta, *, on: Attr[float] | Attr[datetime]) -> Pattern: ...
    @overload
    def within(self, *, seconds: float | timedelta, on: Attr[float] | Attr[datetime]) -> Pattern: ...
    @overload
    def within(self, *, milliseconds: float, on: Attr[float] | Attr[datetime]) -> Pattern: ...
    @overload
    def within(self, *, minutes: float, on: Attr[float] | Attr[datetime]) -> Pattern: ...
    @overload
    def within(self, *, hours: float, on: Attr[float] | Attr[datetime]) -> Pattern: ...
    def within(
        self,
        size: float | timedelta | None = None,
        *,
        events: int | None = None,
        seconds: float | timedelta | None = None,
        on: Attr[float] | Attr[datetime] | None = None,
        milliseconds: float | None = None,
        minutes: float | None = None,
        hours: float | None = None,
    ) -> Pattern:
        """Keep matches whose span fits the window (inclusive bounds).

        ``within(events=n)``: end − start ≤ n positions. ``within(seconds=d, on=T.time)``:
        time(end) − time(start) ≤ d, with d in seconds (a timedelta, or a number for a
        numeric time attribute counted in seconds); ``milliseconds=``, ``minutes=`` and
        ``hours=`` give d in those units. ``within(n, on=T.attr)``: the same in the
        attribute's own units.

        Example: ``seq(A, B).within(seconds=10, on=Stock.time)``,
        ``seq(Order, Delivery).within(hours=2, on=Order.at)``
        """
        window = window_of(
            size,
            events=events,
            seconds=seconds,
            on=on,
            milliseconds=milliseconds,
            minutes=minutes,
            hours=hours,
        )
        return Within(self, *window)

    def partition_by(self, *keys: Attr[Any] | str) -> Pattern:
        """Evaluate on each sub-stream of events with equal values of ``keys``.

        Positions and count windows stay global. Events with a null key are in no
        partition. Example: ``seq(Sell, Buy).partition_by(Stock.name)``
        """
        names: list[str] = []
        for k in keys:
            if isinstance(k, str):
                names.append(k)
            elif isinstance(k, Attr):
                names.append(k.name)
            else:
                raise PatternError(f"partition_by() takes attributes or names, got {k!r}")
        if not names:
            raise PatternError("partition_by() needs at least one attribute")
        return PartitionBy(self, tuple(names))

    def select(self, *variables: str | type[Event]) -> Pattern:
        """Projection: keep only these variables in matches; start and end are kept.

        Example: ``seq(s, b).select("b")``
        """
        names = tuple(_var_name(v) for v in variables)
        if not names:
            raise PatternError("select() needs at least one variable")
        return Select(self, names)

    def strategy(self, name: Strategy) -> Pattern:
        """Selection strategy among matches with the same end: all, next, last, max, strict.

        Example: ``seq(A, plus(B), C).strategy("max")``
        """
        if name not in STRATEGIES:
            raise PatternError(f"unknown strategy {name!r}; choose one of {STRATEGIES}")
        return Strategy_(self, name)

    def consume(self, policy: Policy) -> Pattern:
        """Consumption policy: after an output, drop partial matches (``any``) or only
        those of the same partition (``partition``). Default ``none``."""
        if policy not in POLICIES:
            raise PatternError(f"unknown consumption policy {policy!r}; choose one of {POLICIES}")
        return Consume(self, policy)

    def limit(self, n: int) -> Pattern:
        """Enumerate at most ``n`` matches per end position."""
        return Limit(self, limit_of(n))


def _check_var(var: str) -> str:
    if not isinstance(var, str) or not var.isidentifier():
        raise PatternError(f"variable name {var!r} must be an identifier")
    return var


def _var_name(v: object) -> str:
    if isinstance(v, str):
        return _check_var(v)
    if is_event_type(v):
        return event_name(v)
    if not isinstance(v, Pattern | type) and stands_for_pattern(v):  # an alias
        node = as_pattern(v)
        if isinstance(node, Atom):
            return node.var
    raise PatternError(f"expected a variable name or alias, got {v!r}")


def _bind_to_owner(pred: Expr[bool]) -> Expr[bool]:
    """Class-level attributes (``Stock.price``) read the occurrence named after the class."""
    result: Expr[bool] = pred._map(lambda a: attrs.evolve(a, var=a.owner) if a.var is None else a)
    return result


# -- nodes ------------------------------------------------------------------------------
@attrs.frozen(repr=False)
class Atom(Pattern):
    """One event of type ``event`` (or a subclass), bound to variable ``var``."""

    event: type[Event]
    var: str

    def where(self, predicate: Expr[bool], *, post_filter: bool = False) -> Pattern:
        """Class-level attributes of this atom's type or of its bases (``Stock.price`` on a
        ``Buy`` atom) read this occurrence; those of other types read the occurrence named
        after their class, as on any other pattern (so the static checks report them)."""
        if not isinstance(predicate, Expr) or predicate.dtype != "bool":
            raise PatternError(f"where() needs a predicate, got {predicate!r}")
        own = {event_name(t) for t in self.event.__mro__ if is_event_type(t)}
        bound: Expr[bool] = predicate._map(
            lambda a: attrs.evolve(a, var=self.var if a.owner in own else a.owner) if a.var is None else a
        )
        return Filter(self, bound, post_filter)

    filter = where

    def as_(self, var: str) -> Pattern:
        """Name this occurrence ``var`` (CEQL ``T AS x``)."""
        return Atom(self.event, _check_var(var))

    def __repr__(self) -> str:
        name = event_name(self.event)
        return name if self.var == name else f"{name} AS {self.var}"


@attrs.frozen(repr=False)
class NotAtom(Pattern):
    """CORE's negated atom ``NOT(T FILTER …)``: one event that is not such a T.

    The event is bound to ``var``. ``predicate`` (over ``var``) narrows which T is excluded.
    """

    event: type[Event]
    var: str
    predicate: Expr[bool] | None = attrs.field(eq=expr_key)

    def __repr__(self) -> str:
        inner = event_name(self.event)
        if self.predicate is not None:
            inner += f" FILTER {self.predicate!r}"
        return f"NOT({inner}) AS {self.var}"


@attrs.frozen(repr=False)
class Absent(Pattern):
    """Absence inside a sequence: no event of type ``event`` (satisfying ``predicate``)
    between the neighbouring parts of the sequence. It binds no variable; ``var`` names
    the absent event inside ``predicate``, which may also read the neighbours' variables.
    """

    event: type[Event]
    var: str
    predicate: Expr[bool] | None = attrs.field(eq=expr_key)

    def __repr__(self) -> str:
        inner = event_name(self.event)
        if self.var != inner:
            inner += f" AS {self.var}"
        if self.predicate is not None:
            inner += f" FILTER {self.predicate!r}"
        return f"ABSENT({inner})"


@attrs.frozen(repr=False)
class Seq(Pattern):
    """``left ; right`` (or ``left : right`` when ``contiguous``)."""

    left: Pattern
    right: Pattern
    contiguous: bool = False

    def children(self) -> tuple[Pattern, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"({self.left!r} {':' if self.contiguous else ';'} {self.right!r})"


@attrs.frozen(repr=False)
class Or(Pattern):
    """``left OR right``."""

    left: Pattern
    right: Pattern

    def children(self) -> tuple[Pattern, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"({self.left!r} OR {self.right!r})"


@attrs.frozen(repr=False)
class And(Pattern):
    """``left AND right``: both match, valuations united."""

    left: Pattern
    right: Pattern

    def children(self) -> tuple[Pattern, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"({self.left!r} AND {self.right!r})"


@attrs.frozen(repr=False)
class Plus(Pattern):
    """``inner+`` (or ``inner:+`` when ``contiguous``): one or more repetitions."""

    inner: Pattern
    contiguous: bool = False

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"{self.inner!r}{':+' if self.contiguous else '+'}"


@attrs.frozen(repr=False)
class As(Pattern):
    """``inner AS var``: var bound to every position of inner's match."""

    inner: Pattern
    var: str

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"({self.inner!r} AS {self.var})"


@attrs.frozen(repr=False)
class Filter(Pattern):
    """``inner FILTER predicate``: the predicate holds for all events bound to its variables."""

    inner: Pattern
    predicate: Expr[bool] = attrs.field(eq=expr_key)
    post_filter: bool = False

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"({self.inner!r} FILTER {self.predicate!r})"


@attrs.frozen(repr=False)
class Within(Pattern):
    """Window: ``unit`` is ``events``, ``seconds`` or ``units`` (of attribute ``on``)."""

    inner: Pattern
    size: float
    unit: str
    on: str | None

    def __attrs_post_init__(self) -> None:
        # Checked here, not only in within(), so CEQL and hand-built nodes cannot carry a
        # size that every push would then fail on.
        check_window_size(self.size, self.unit)

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        size = float(self.size)
        n = int(size) if size.is_integer() and abs(size) < 1e16 else size
        text = {"events": f"{n} EVENTS", "seconds": f"{n} seconds [{self.on}]"}.get(
            self.unit, f"{n} [{self.on}]"
        )
        return f"{self.inner!r} WITHIN {text}"


@attrs.frozen(repr=False)
class PartitionBy(Pattern):
    """Evaluate per sub-stream of equal ``keys`` attribute values."""

    inner: Pattern
    keys: tuple[str, ...]

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"{self.inner!r} PARTITION BY " + ", ".join(f"[{k}]" for k in self.keys)


@attrs.frozen(repr=False)
class Select(Pattern):
    """Projection onto ``variables``."""

    inner: Pattern
    variables: tuple[str, ...]

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"SELECT {', '.join(self.variables)} FROM ({self.inner!r})"


@attrs.frozen(repr=False)
class Strategy_(Pattern):
    """Selection strategy ``name`` (all, any, next, last, max, strict)."""

    inner: Pattern
    name: str

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"SELECT {self.name.upper()} * FROM ({self.inner!r})"


@attrs.frozen(repr=False)
class Consume(Pattern):
    """Consumption policy ``policy`` (none, any, partition)."""

    inner: Pattern
    policy: str

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"{self.inner!r} CONSUME BY {self.policy.upper()}"


@attrs.frozen(repr=False)
class Limit(Pattern):
    """At most ``n`` matches per end position."""

    inner: Pattern
    n: int

    def __attrs_post_init__(self) -> None:
        check_limit(self.n)

    def children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def __repr__(self) -> str:
        return f"{self.inner!r} LIMIT {self.n}"


# -- functions --------------------------------------------------------------------------
def seq(*parts: PatternLike, contiguous: bool = False) -> Pattern:
    """Sequence: each part matches after the previous one ends (CEQL ``;``).

    With ``contiguous=True`` each part starts right after the previous one (CEQL ``:``).

    Example: ``pycel.seq(Sell, Buy, Buy.as_("b2"))``
    """
    if not parts:
        raise PatternError("seq() needs at least one pattern")
    nodes = [as_pattern(p) for p in parts]
    result = nodes[0]
    for node in nodes[1:]:
        result = Seq(result, node, contiguous)
    return result


def plus(p: PatternLike, *, contiguous: bool = False) -> Pattern:
    """One or more repetitions of ``p`` (CEQL ``p+``; ``p:+`` when ``contiguous``).

    Example: ``pycel.seq(A, pycel.plus(B), C)``
    """
    return Plus(as_pattern(p), contiguous)


def not_(p: PatternLike, var: str | None = None) -> Pattern:
    """CORE's negated atom: one event that is *not* ``p`` (an event type, maybe filtered).

    Example: ``pycel.seq(A, pycel.not_(B.where(B.x > 3)), C)``
    """
    node = as_pattern(p)
    predicate: Expr[bool] | None = None
    if isinstance(node, Filter) and isinstance(node.inner, Atom):
        predicate, node = node.predicate, node.inner
    if not isinstance(node, Atom):
        raise PatternError(f"not_() takes one event type, optionally filtered; got {node!r}")
    name = var or f"not_{node.var}"
    if predicate is not None:
        predicate = predicate._map(lambda a: attrs.evolve(a, var=name) if a.var == node.var else a)
    return NotAtom(node.event, _check_var(name), predicate)


def absent(p: PatternLike) -> Pattern:
    """Absence: inside ``seq``, no such event between the parts before and after it.

    ``p`` is one event type or alias, optionally filtered; its filter may correlate the
    absent event with the sequence's other variables. The absent event is bound to
    nothing. Absence must have a part of the sequence on both sides.

    Example: ``pycel.seq(o, pycel.absent(c.where(c.order_id == o.order_id)), d)``
    """
    node = as_pattern(p)
    predicate: Expr[bool] | None = None
    if isinstance(node, Filter) and isinstance(node.inner, Atom) and not node.post_filter:
        predicate, node = node.predicate, node.inner
    if not isinstance(node, Atom):
        raise PatternError(f"absent() takes one event type or alias, optionally filtered; got {node!r}")
    return Absent(node.event, node.var, predicate)
