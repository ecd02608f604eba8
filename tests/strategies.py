"""Hypothesis strategies shared by the differential tests (engine vs reference evaluator).

Usage::

    from hypothesis import given
    from strategies import event_types, patterns, streams, cases, Features

    TYPES = event_types(3)                      # T0, T1, T2: subclasses of Base

    @given(cases(TYPES, Features(contiguous=True)))
    def test_engine_matches_reference(case):
        pattern, events = case
        assert pycel.compile(pattern).run(events).keys() == evaluate(pattern, events).keys()

* :func:`event_types` — dynamic ``Event`` subclasses ``T0 … Tn-1`` of :class:`Base`
  (``x``: int in 0..3, ``s``: str in {"a", "b", "c"}, ``time``: int, non-decreasing in a
  stream). The same classes are returned on every call.
* :func:`streams` — lists of events of those types with non-decreasing ``time``.
* :func:`patterns` — random patterns (seq, or, plus, AS, unary filters with ``& | ~``,
  ``isin``, ``between``), optionally wrapped in ``within(events=k)``,
  ``within(k, on=Base.time)`` and ``partition_by(Base.x)``; :class:`Features` turns the
  rest on (contiguity, AND, negated atoms, equality correlation, selection strategies,
  consumption, LIMIT, SELECT) so a test asks only for what its engine supports.
* :func:`cases` — a (pattern, stream) pair whose stream is short when the pattern has a
  Kleene plus, so the brute-force reference stays fast (it enumerates every valuation
  before applying windows).
* :func:`number_cases` — numbers at the edges: events of ``N0``/``N1`` (subclasses of
  :class:`Num`: int ``n``, float ``f``) with values such as 2**53 + 1, 2**63 - 1, -2**63,
  2.0**63, 1e19, inf and NaN, and patterns whose filters, negated atoms and post-filters
  do exact integer arithmetic and int/float comparisons over them (engine and reference
  must agree, also when both raise a DataError for an int64 overflow).

Sizes are bounded so one reference evaluation takes milliseconds: at most
``Features.max_atoms`` atoms, at most ``Features.max_plus`` Kleene operators, at most one
AND, streams of at most ``max_len`` events (``max_len_with_plus`` when a ``+`` occurs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import attrs
from hypothesis import assume
from hypothesis import strategies as st

import pycel
from pycel import Event, Field, Pattern, PatternError
from pycel.dsl import Consume, Limit, PartitionBy, Plus, Select, Strategy_, Within
from pycel.language.checks import check_hierarchical
from pycel.language.events import event_name
from pycel.language.expr import Expr

X_VALUES = (0, 1, 2, 3)
S_VALUES = ("a", "b", "c")
STRATEGY_NAMES = ("all", "next", "last", "max", "strict")
POLICIES = ("any", "partition")


class Base(Event):
    """The base of the generated event types; windows and partitions use its fields."""

    x: Field[int]
    s: Field[str]
    time: Field[int]


_TYPES: list[type[Base]] = []


def event_types(n: int) -> tuple[type[Base], ...]:
    """Event types ``T0 … Tn-1`` (subclasses of :class:`Base`, no fields of their own).

    Types are created once and shared: ``event_types(2)`` is a prefix of
    ``event_types(3)``.
    """
    if n < 1:
        raise ValueError("event_types() needs n >= 1")
    while len(_TYPES) < n:
        name = f"T{len(_TYPES)}"
        _TYPES.append(type(name, (Base,), {"__module__": __name__, "__qualname__": name}))
    return tuple(_TYPES[:n])


@st.composite
def streams(
    draw: st.DrawFn,
    types: Sequence[type[Base]],
    max_len: int = 60,
    *,
    min_len: int = 0,
    nulls: bool = False,
    max_step: int = 3,
) -> list[Base]:
    """Events of ``types`` with ``x`` in 0..3, ``s`` in {a, b, c} and ``time`` growing by
    0..``max_step`` per event. With ``nulls``, ``x`` and ``s`` are sometimes missing."""
    n = draw(st.integers(min_len, max_len))
    x_values: st.SearchStrategy[int | None] = st.sampled_from(X_VALUES)
    s_values: st.SearchStrategy[str | None] = st.sampled_from(S_VALUES)
    if nulls:
        x_values = st.one_of(st.none(), x_values)
        s_values = st.one_of(st.none(), s_values)
    rows = draw(
        st.lists(
            st.tuples(st.sampled_from(list(types)), x_values, s_values, st.integers(0, max_step)),
            min_size=n,
            max_size=n,
        )
    )
    events: list[Base] = []
    time = 0
    for cls, x, s, step in rows:
        time += step
        values: dict[str, Any] = {"time": time}
        if x is not None:
            values["x"] = x
        if s is not None:
            values["s"] = s
        events.append(cls(**values))
    return events


@dataclass(frozen=True)
class Features:
    """What :func:`patterns` may generate. The defaults are the CEL core every engine
    supports (seq, or, plus, AS, unary filters) plus windows and PARTITION BY."""

    # CEL operators
    kleene: bool = True
    contiguous: bool = False  # seq(..., contiguous=True), plus(..., contiguous=True)
    conjunction: bool = False  # p & q
    negation: bool = False  # not_(T) / not_(T.where(...)) inside sequences
    correlation: bool = False  # x.a == y.b between occurrences (equality joins)
    absence: bool = False  # seq(p, absent(T.where(...)), q) (never contiguous)
    # query clauses
    windows: bool = True  # within(events=k) / within(k, on=Base.time)
    partition: bool = True  # partition_by(Base.x)
    strategies: bool = False  # strategy("all" | "next" | "last" | "max" | "strict")
    consume: bool = False  # consume("any" | "partition")
    limit: bool = False  # limit(n)
    select: bool = False  # select(some variables)
    # sizes
    max_atoms: int = 4
    max_plus: int = 1
    strategy_names: tuple[str, ...] = field(default=STRATEGY_NAMES)

    @classmethod
    def everything(cls, **overrides: Any) -> Features:
        """Every feature on."""
        on = {
            name: True
            for name in (
                "contiguous",
                "conjunction",
                "negation",
                "correlation",
                "strategies",
                "consume",
                "limit",
                "select",
            )
        }
        return replace(cls(), **{**on, **overrides})


class _Budget:
    """Counters shared while one pattern is drawn (fresh variable names, size limits)."""

    def __init__(self, features: Features) -> None:
        self.features = features
        self.atoms = 0
        self.plus = 0
        self.conjunctions = 0
        self.names = 0
        # variable -> event type it is an occurrence of (Base for AS groups)
        self.variables: dict[str, type[Base]] = {}

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"


@st.composite
def unary_predicates(draw: st.DrawFn, var: str, cls: type[Base] = Base, depth: int = 2) -> Expr[bool]:
    """A predicate over occurrence ``var`` using x and s: comparisons, ``isin``,
    ``between``, combined with ``&``, ``|``, ``~``."""
    a = pycel.alias(cls, var)
    if depth > 0 and draw(st.integers(0, 3)) == 0:
        left = draw(unary_predicates(var, cls, depth - 1))
        op = draw(st.sampled_from(["and", "or", "not"]))
        if op == "not":
            return ~left
        right = draw(unary_predicates(var, cls, depth - 1))
        return left & right if op == "and" else left | right
    k = draw(st.sampled_from(X_VALUES))
    text = draw(st.sampled_from(S_VALUES))
    kind = draw(st.integers(0, 8))
    leaves: list[Expr[bool]] = [
        a.x == k,
        a.x != k,
        a.x < k,
        a.x >= k,
        a.x.isin(draw(st.lists(st.sampled_from(X_VALUES), min_size=1, max_size=3, unique=True))),
        a.x.between(k, k + draw(st.integers(0, 2))),
        a.s == text,
        a.s != text,
        a.s.isin(draw(st.lists(st.sampled_from(S_VALUES), min_size=1, max_size=2, unique=True))),
    ]
    return leaves[kind]


@st.composite
def _atom(draw: st.DrawFn, types: Sequence[type[Base]], budget: _Budget) -> Pattern:
    budget.atoms += 1
    cls = draw(st.sampled_from(list(types)))
    if budget.features.negation and draw(st.integers(0, 5)) == 0:
        var = budget.fresh("n")  # not recorded: a negated atom's event may be any type
        target = pycel.alias(cls, var)
        if draw(st.booleans()):
            return pycel.not_(target.where(draw(unary_predicates(var, cls, depth=0))), var)
        return pycel.not_(target, var)
    if draw(st.integers(0, 3)) == 0:
        var = event_name(cls)
        atom: Pattern = cls.pattern()  # a bare type: binds the type's own name
    else:
        var = budget.fresh("v")
        atom = pycel.alias(cls, var).pattern()
    budget.variables.setdefault(var, cls)
    if draw(st.booleans()):
        atom = atom.where(draw(unary_predicates(var, cls)))
    return atom


@st.composite
def _absence(draw: st.DrawFn, types: Sequence[type[Base]], budget: _Budget) -> Pattern:
    """``absent(T)``, maybe filtered (its variable is fresh and bound nowhere else)."""
    cls = draw(st.sampled_from(list(types)))
    var = budget.fresh("z")
    target = pycel.alias(cls, var)
    if draw(st.booleans()):
        return pycel.absent(target.where(draw(unary_predicates(var, cls, depth=1))))
    return pycel.absent(target)


def _vars(pattern: Pattern) -> list[str]:
    from pycel.language.checks import bound_variables

    return sorted(bound_variables(pattern))


def some_variables(draw: st.DrawFn, pattern: Pattern) -> Pattern:
    """``pattern`` with SELECT of a drawn non-empty set of its bound variables."""
    return pattern.select(*draw(st.lists(st.sampled_from(_vars(pattern)), min_size=1, unique=True)))


@st.composite
def _body(draw: st.DrawFn, types: Sequence[type[Base]], depth: int, budget: _Budget) -> Pattern:
    f = budget.features
    room = budget.atoms < f.max_atoms - 1  # a binary node needs at least two more atoms
    kinds = ["atom"]
    if depth > 0:
        kinds += ["where", "as"]
        if room:
            kinds += ["seq", "seq", "or"]
            if f.conjunction and budget.conjunctions < 1:
                kinds.append("and")
        if f.kleene and budget.plus < f.max_plus:
            kinds.append("plus")
    kind = draw(st.sampled_from(kinds))
    if kind == "atom" or budget.atoms >= f.max_atoms:
        return draw(_atom(types, budget))
    if kind in ("seq", "or", "and"):
        if kind == "and":
            budget.conjunctions += 1
        left = draw(_body(types, depth - 1, budget))
        if budget.atoms < f.max_atoms:
            right = draw(_body(types, depth - 1, budget))
        else:
            right = draw(_atom(types, budget))
        if kind == "or":
            return left | right
        if kind == "seq" and f.absence and draw(st.integers(0, 1)) == 0:
            node = pycel.seq(left, draw(_absence(types, budget)), right)
        else:
            node = (
                left & right
                if kind == "and"
                else pycel.seq(left, right, contiguous=f.contiguous and draw(st.integers(0, 2)) == 0)
            )
        if f.correlation and draw(st.integers(0, 2)) == 0:
            lvars = [v for v in _vars(left) if v in budget.variables]
            rvars = [v for v in _vars(right) if v in budget.variables and v not in lvars]
            if lvars and rvars:
                lv, rv = draw(st.sampled_from(lvars)), draw(st.sampled_from(rvars))
                la, ra = pycel.alias(budget.variables[lv], lv), pycel.alias(budget.variables[rv], rv)
                joined = node.where(la.x == ra.x if draw(st.booleans()) else la.s == ra.s)
                node = joined if _hierarchical(joined) else node
        return node
    if kind == "plus":
        budget.plus += 1
        inner = draw(_body(types, depth - 1, budget))
        return pycel.plus(inner, contiguous=f.contiguous and draw(st.integers(0, 2)) == 0)
    inner = draw(_body(types, depth - 1, budget))
    if kind == "as":
        var = budget.fresh("g")
        budget.variables[var] = Base
        return inner.as_(var)
    # where: a unary filter on one variable the inner pattern binds
    candidates = [v for v in _vars(inner) if v in budget.variables]
    if not candidates:
        return inner
    var = draw(st.sampled_from(candidates))
    return inner.where(draw(unary_predicates(var, budget.variables[var])))


def _hierarchical(body: Pattern) -> bool:
    """Whether the correlations of ``body`` are hierarchical: generated joins stay inside
    what pycel runs; the refusal of the others is tested in test_checks.py."""
    try:
        check_hierarchical(body)
    except PatternError:
        return False
    return True


@st.composite
def patterns(
    draw: st.DrawFn,
    types: Sequence[type[Base]],
    max_depth: int = 4,
    features: Features | None = None,
) -> Pattern:
    """A random well-formed pattern over ``types`` (see :class:`Features`)."""
    f = features or Features()
    budget = _Budget(f)
    body = draw(_body(types, max_depth, budget))
    # Each join was hierarchical where it was added, but a variable bound on both sides of
    # a ';' or '&' can join two such parts into a pattern that is not.
    assume(_hierarchical(body))
    pattern = body
    if f.windows:
        window = draw(st.sampled_from(["none", "events", "time"]))
        if window == "events":
            pattern = pattern.within(events=draw(st.integers(0, 6)))
        elif window == "time":
            pattern = pattern.within(draw(st.integers(0, 6)), on=Base.time)
    if f.partition and draw(st.integers(0, 3)) == 0:
        pattern = pattern.partition_by(Base.x)
    if f.strategies and draw(st.integers(0, 2)) == 0:
        pattern = pattern.strategy(draw(st.sampled_from(list(f.strategy_names))))  # type: ignore[arg-type]
    if f.select and draw(st.integers(0, 2)) == 0:
        names = _vars(body)
        if names:
            chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
            pattern = pattern.select(*chosen)
    if f.consume and draw(st.integers(0, 3)) == 0:
        pattern = pattern.consume(draw(st.sampled_from(POLICIES)))  # type: ignore[arg-type]
    if f.limit and draw(st.integers(0, 3)) == 0:
        pattern = pattern.limit(draw(st.integers(1, 3)))
    return pattern


def without_limit(pattern: Pattern) -> tuple[Pattern, int | None]:
    """The pattern with its top-level limit() clause removed, and that limit."""
    if isinstance(pattern, Limit):
        return pattern.inner, pattern.n
    if isinstance(pattern, (Within, PartitionBy, Select, Strategy_, Consume)):
        inner, n = without_limit(pattern.inner)
        return attrs.evolve(pattern, inner=inner), n
    return pattern, None


def assert_limited(got: set[Any], unlimited: set[Any], limit: int | None) -> None:
    """Match keys ``got`` of a query against ``unlimited``, the reference's matches of the
    query without its limit: equal without a limit; under LIMIT n a subset that keeps
    min(n, its matches) at each end (which n is the engine's choice: docs/semantics.md)."""
    if limit is None:
        assert got == unlimited
        return
    assert got <= unlimited
    got_per_end = Counter(k[1] for k in got)
    for end, n in Counter(k[1] for k in unlimited).items():
        assert got_per_end[end] == min(limit, n), (end, got_per_end[end], n)


def restored_at(query: pycel.CompiledQuery, stream: Sequence[object], cut: int) -> set[Any]:
    """The match keys of ``stream`` pushed in two pieces, cut at ``cut``, through a
    snapshot and restore between them (to compare with one run)."""
    first = query.stream()
    got: set[Any] = first.push(list(stream[:cut])).keys()
    return got | pycel.Stream.restore(first.snapshot()).push(list(stream[cut:])).keys()


def kleene_count(pattern: Pattern) -> int:
    """How many ``+`` operators ``pattern`` contains."""
    own = 1 if isinstance(pattern, Plus) else 0
    return own + sum(kleene_count(c) for c in pattern.children())


@st.composite
def cases(
    draw: st.DrawFn,
    types: Sequence[type[Base]],
    features: Features | None = None,
    *,
    max_depth: int = 4,
    max_len: int = 60,
    max_len_with_plus: int = 14,
    nulls: bool = False,
) -> tuple[Pattern, list[Base]]:
    """A pattern and a stream; the stream is at most ``max_len_with_plus`` long when the
    pattern iterates (the reference's work grows as 2^(events matching the +))."""
    pattern = draw(patterns(types, max_depth, features))
    length = max_len_with_plus if kleene_count(pattern) else max_len
    return pattern, draw(streams(types, length, nulls=nulls))


# -- numbers at the edges of int64 and float64 ------------------------------------------------
#: int values where wrapping, float rounding or overflow would show (docs/data.md).
INT_EDGES = (0, 1, -1, 3, 2**31, 2**32, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63), -(2**63) + 1)
FLOAT_EDGES = (
    0.0,
    -0.0,
    0.5,
    3.0,
    2.0**31,
    2.0**53,
    2.0**63,
    -(2.0**63),
    1e19,
    -1e19,
    float("inf"),
    float("nan"),
)
ARITH_OPS = ("+", "-", "*", "/", "%")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")


class Num(Event):
    """The base of the number cases' event types: an int ``n``, a float ``f``, a time."""

    n: Field[int]
    f: Field[float]
    time: Field[int]


class N0(Num): ...


class N1(Num): ...


NUM_TYPES = (N0, N1)


@st.composite
def number_streams(draw: st.DrawFn, max_len: int = 10) -> list[Num]:
    """Events of N0/N1 whose ``n`` and ``f`` are edge values (or missing: null)."""
    rows = draw(
        st.lists(
            st.tuples(
                st.sampled_from(NUM_TYPES),
                st.sampled_from((*INT_EDGES, None)),
                st.sampled_from((*FLOAT_EDGES, None)),
            ),
            min_size=1,
            max_size=max_len,
        )
    )
    events: list[Num] = []
    for k, (cls, n, f) in enumerate(rows):
        values: dict[str, Any] = {"time": k}
        if n is not None:
            values["n"] = n
        if f is not None:
            values["f"] = f
        events.append(cls(**values))
    return events


@st.composite
def number_expressions(draw: st.DrawFn, occurrences: Sequence[Any], depth: int = 2) -> Expr[float]:
    """Arithmetic over the ``n`` and ``f`` of ``occurrences`` (aliases) and edge constants:
    ``+ - * / %`` and unary minus, nested up to ``depth``."""
    from pycel.language.expr import Arith, Const

    if depth > 0 and draw(st.integers(0, 2)) == 0:
        if draw(st.integers(0, 4)) == 0:
            return -draw(number_expressions(occurrences, depth - 1))
        op = draw(st.sampled_from(ARITH_OPS))
        left = draw(number_expressions(occurrences, depth - 1))
        right = draw(number_expressions(occurrences, depth - 1))
        return Arith.build(op, left, right)
    a = draw(st.sampled_from(list(occurrences)))
    leaves: list[Expr[float]] = [
        a.n,
        a.n,
        a.f,
        Const(draw(st.sampled_from(INT_EDGES))),
        Const(draw(st.sampled_from(FLOAT_EDGES))),
    ]
    return draw(st.sampled_from(leaves))


@st.composite
def number_predicates(draw: st.DrawFn, occurrences: Sequence[Any], depth: int = 1) -> Expr[bool]:
    """Comparisons of :func:`number_expressions`, ``isin`` with edge values, ``& | ~``."""
    from pycel.language.expr import Compare

    if depth > 0 and draw(st.integers(0, 3)) == 0:
        left = draw(number_predicates(occurrences, depth - 1))
        kind = draw(st.sampled_from(["and", "or", "not"]))
        if kind == "not":
            return ~left
        right = draw(number_predicates(occurrences, depth - 1))
        return left & right if kind == "and" else left | right
    if draw(st.integers(0, 5)) == 0:
        a = draw(st.sampled_from(list(occurrences)))
        edges = st.sampled_from(INT_EDGES + FLOAT_EDGES)
        return a.n.isin(draw(st.lists(edges, min_size=1, max_size=3)))  # type: ignore[no-any-return]
    op = draw(st.sampled_from(COMPARE_OPS))
    return Compare.build(op, draw(number_expressions(occurrences)), draw(number_expressions(occurrences)))


@st.composite
def number_cases(draw: st.DrawFn, max_len: int = 10) -> tuple[Pattern, list[Num]]:
    """A pattern of 1-3 occurrences of N0/N1 (sequence or OR), with number filters on
    some, maybe a negated atom with one, maybe a post-filter over two occurrences, maybe
    a count window and a partition by ``n`` or ``f``; and a :func:`number_streams` stream."""
    count = draw(st.integers(1, 3))
    occurrences = [pycel.alias(draw(st.sampled_from(NUM_TYPES)), f"a{k}") for k in range(count)]
    parts: list[Pattern] = []
    for a in occurrences:
        part: Pattern = a.pattern()
        if draw(st.booleans()):
            part = part.where(draw(number_predicates([a])))
        parts.append(part)
    body = parts[0]
    sequential = True
    for k, part in enumerate(parts[1:]):
        if draw(st.integers(0, 3)) == 0:
            body, sequential = body | part, False
        else:
            if draw(st.integers(0, 4)) == 0:
                name = f"x{k}"
                neg = pycel.alias(draw(st.sampled_from(NUM_TYPES)), name)
                body = pycel.seq(body, pycel.not_(neg.where(draw(number_predicates([neg], 0))), name))
            body = pycel.seq(body, part)
    if sequential and count >= 2 and draw(st.integers(0, 2)) == 0:
        body = body.where(draw(number_predicates(occurrences[:2], 0)), post_filter=True)
    if draw(st.booleans()):
        body = body.within(events=draw(st.integers(0, 4)))
    if draw(st.integers(0, 3)) == 0:
        body = body.partition_by(Num.n if draw(st.booleans()) else Num.f)  # extreme keys
    return body, draw(number_streams(max_len))
