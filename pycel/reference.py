"""The reference evaluator: the test oracle of docs/semantics.md, brute force and literal.

It computes the denotation of every subpattern as an explicit set of valuations, so it is
exponential in the worst case and meant for streams of tens of events. Every engine test
compares against it; it is never the fast path (use :func:`pycel.compile`).

A valuation is a frozenset of ``(variable, position)`` pairs; its positions are the
complex event C, ``start = min C`` and ``end = max C``. Data errors follow docs/data.md as
the engine raises them: an absent column the query reads, an int-float join value without
an exact float, integer overflow in a filter (checked on every event of the filter's type
before evaluating), in a post-filter (on the complete matches) or in a trend condition
(on the pairs of iterations it compares, naming the later one's last event).

Example::

    matches = pycel.reference.evaluate(pycel.seq(A, B).within(events=3), events)
    [(m.start, m.end, m.variables) for m in matches]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pycel.data.ingest import (
    DEFAULT_TYPE_COLUMN,
    EventBatch,
    Schema,
    check_input_columns,
    time_values,
    to_batch,
)
from pycel.data.matches import Match, Matches
from pycel.dsl import Absent, And, As, Atom, Filter, NotAtom, Or, Pattern, Plus, Seq
from pycel.errors import DataError
from pycel.language.absence import seq_chain, window_absences
from pycel.language.checks import bound_variables, check, event_types, is_equality_join, trend_conditions
from pycel.language.clauses import QuerySpec, split_query
from pycel.language.evaluate import eval_scalar, prev_key
from pycel.language.expr import Attr, Compare, Expr, attributes_in, conjuncts, reads_prev
from pycel.language.patternlike import PatternLike
from pycel.runtime.keys import inexact_join_error

Valuation = frozenset[tuple[str, int]]
T = TypeVar("T")

#: Refuse to build intermediate sets larger than this (the oracle is for small streams).
MAX_VALUATIONS = 2_000_000


def _positions(v: Valuation) -> frozenset[int]:
    return frozenset(p for _, p in v)


class _Stream:
    """The (sub)stream one evaluation sees: its positions and decoded events."""

    def __init__(self, batch: EventBatch, positions: Sequence[int]):
        self.batch = batch
        self.positions = list(positions)
        self.next_of = dict(zip(self.positions, self.positions[1:], strict=False))
        self.events = {p: batch.row(p - batch.offset) for p in self.positions}
        supertypes, type_ids = batch.schema.supertypes, batch.type_ids
        self.types = {p: supertypes[int(type_ids[p - batch.offset])] for p in self.positions}

    def follows(self, before: Valuation, after: Valuation, contiguous: bool) -> bool:
        end, start = max(_positions(before)), min(_positions(after))
        return self.next_of.get(end) == start if contiguous else end < start


def _holds(pred: Expr[bool], v: Valuation, stream: _Stream, post: bool = False) -> bool:
    """Each conjunct of ``pred`` holds for every combination of events bound to the
    variables it reads (so ``s[P] AND b[Q]`` checks s and b separately, CEL's FILTER).

    A post-filter whose integer arithmetic leaves int64 keeps the valuation: that is an
    error only if a complete match includes it (:func:`_check_post_filters`). Unary
    filters were checked on every event before (:func:`_check_overflow`). Trend
    conditions (conjuncts reading ``prev(x)``) are skipped: one iteration cannot decide
    them, the enclosing ``plus`` checks them (:func:`_trend_holds`).
    """
    if post:
        try:
            return _holds(pred, v, stream)
        except DataError:
            return True
    for part in conjuncts(pred):
        if reads_prev(part):
            continue
        if not all(eval_scalar(part, env) is True for env in _combinations(part, v, stream)):
            return False
    return True


def _bound(var: str | None, v: Valuation) -> list[int]:
    return [p for x, p in v if x == var]


def _trend_holds(
    conditions: Sequence[Expr[bool]], previous: Valuation, new: Valuation, stream: _Stream
) -> bool:
    """Whether each trend condition holds for every combination of the events ``new`` (an
    iteration of a plus) binds to the variables it reads and the events ``previous`` (the
    iteration before) binds to the ``prev(x)`` it reads. Integer arithmetic that leaves
    int64 is a DataError naming the new iteration's last event."""
    for part in conditions:
        # environment key -> the positions it ranges over
        sources = {
            (prev_key(a.var) if a.prev else a.var): _bound(a.var, previous if a.prev else new)
            for a in attributes_in(part)
        }
        combos: list[dict[object, dict[str, Any]]] = [{}]
        for key, bound in sources.items():
            combos = [{**c, key: stream.events[p][1]} for c in combos for p in bound]
        for env in combos:
            try:
                value = eval_scalar(part, env)
            except DataError as err:
                raise _overflow(f"{err} (trend condition {part!r})", max(_positions(new)), part) from None
            if value is not True:
                return False
    return True


def _combinations(part: Expr[bool], v: Valuation, stream: _Stream) -> list[dict[str | None, dict[str, Any]]]:
    """Every assignment of the events ``v`` binds to the variables ``part`` reads."""
    combos: list[dict[str | None, dict[str, Any]]] = [{}]
    for var in part.variables():
        bound = [p for x, p in v if x == var]
        combos = [{**c, var: stream.events[p][1]} for c in combos for p in bound]
    return combos


def _scoped_predicates(
    node: Pattern, labels: frozenset[str], pending: tuple[Expr[bool], ...]
) -> list[tuple[Expr[bool], str | None]]:
    """The unary filters evaluated per event, each with the event type it is evaluated on
    (None: every event). As in the engine, a filter belongs to the atoms under it that
    carry its variable (a negated atom reads events of any type), and a negated atom's own
    predicate to the events of its type."""
    if isinstance(node, (Atom, NotAtom)):
        own = labels | {node.var}
        name = _type_name(node.event)
        found: list[tuple[Expr[bool], str | None]] = [
            (p, None if isinstance(node, NotAtom) else name) for p in pending if p.variables() <= own
        ]
        if isinstance(node, NotAtom) and node.predicate is not None:
            found.append((node.predicate, name))
        return found
    if isinstance(node, Absent):
        parts = conjuncts(node.predicate) if node.predicate is not None else []
        return [(p, _type_name(node.event)) for p in parts if p.variables() <= {node.var}]
    if isinstance(node, As):
        labels = labels | {node.var}
    if isinstance(node, Filter) and not node.post_filter:
        # (a trend condition of one variable too: as in the engine, each side's arithmetic
        # is computed on every event of its type, the previous iteration's on the event
        # that will be the previous one)
        pending = pending + tuple(p for p in conjuncts(node.predicate) if len(p.variables()) <= 1)
    return [f for child in node.children() for f in _scoped_predicates(child, labels, pending)]


def _overflow(message: str, row: int, e: Expr[Any]) -> DataError:
    names = sorted({a.name for a in attributes_in(e)})
    return DataError(message, row=row, column=names[0] if len(names) == 1 else None)


def _check_overflow(body: Pattern, batch: EventBatch) -> None:
    """Integer arithmetic is exact or an error: a unary filter (or a trend condition,
    either side) whose arithmetic leaves int64 on an event it is evaluated on raises a
    DataError naming the first such event."""
    scoped = _scoped_predicates(body, frozenset(), ())
    if not scoped:
        return
    supertypes = batch.schema.supertypes
    for k in range(len(batch)):
        types = supertypes[int(batch.type_ids[k])]
        values = batch.row(k)[1]
        for pred, type_name in scoped:
            if type_name is not None and type_name not in types:
                continue
            env: dict[Any, dict[str, Any]] = dict.fromkeys(pred.variables(), values)
            if reads_prev(pred):
                env |= {prev_key(v): values for v in pred.variables()}
            try:
                eval_scalar(pred, env)
            except DataError as err:
                raise _overflow(str(err), batch.offset + k, pred) from None


def _atom_labels(node: Pattern, labels: frozenset[str] = frozenset()) -> list[tuple[str, frozenset[str]]]:
    """(event type, labels) of every atom of ``node`` (its variable and enclosing AS)."""
    if isinstance(node, (Atom, NotAtom)):
        return [(_type_name(node.event), labels | {node.var})]
    if isinstance(node, As):
        labels = labels | {node.var}
    return [a for child in node.children() for a in _atom_labels(child, labels)]


def _rounded_join_sides(body: Pattern) -> list[tuple[str, str]]:
    """The (variable, int attribute) members of equality-join classes that also hold a
    float attribute: the engine keys such a class by float64 values."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}
    dtypes: dict[tuple[str, str], str] = {}

    def root(k: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    todo = [body]
    while todo:
        node = todo.pop()
        todo.extend(node.children())
        if not isinstance(node, Filter) or node.post_filter:
            continue
        for part in conjuncts(node.predicate):
            if is_equality_join(part) and isinstance(part, Compare):
                sides = [(a.var or "", a.name) for a in (part.left, part.right) if isinstance(a, Attr)]
                if len(sides) == 2:
                    dtypes.update({sides[0]: part.left.dtype, sides[1]: part.right.dtype})
                    parent[root(sides[0])] = root(sides[1])
    kinds: dict[tuple[str, str], set[str]] = {}
    for k, dtype in dtypes.items():
        kinds.setdefault(root(k), set()).add(dtype)
    return sorted(k for k, d in dtypes.items() if d == "int" and {"int", "float"} <= kinds[root(k)])


def _check_join_floats(body: Pattern, batch: EventBatch) -> None:
    """An int value that an int-float equality join would compare rounded (no exact
    float64) is a DataError at the first such event, as in the engine."""
    sides = _rounded_join_sides(body)
    if not sides:
        return
    atoms = _atom_labels(body)
    checks = [(attr, {t for t, labels in atoms if var in labels}) for var, attr in sides]
    for k in range(len(batch)):
        types = batch.schema.supertypes[int(batch.type_ids[k])]
        for attr, readers in checks:
            value = batch.value(attr, k) if types & readers else None
            if value is not None and int(float(value)) != value:
                raise inexact_join_error(value, batch.offset + k, attr)


def _check_post_filters(parts: Sequence[Expr[bool]], v: Valuation, stream: _Stream, end: int) -> None:
    """A post-filter's integer arithmetic leaving int64 on a combination of a complete
    match is a DataError naming the match's end (the engine checks them there)."""
    for part in parts:
        for env in _combinations(part, v, stream):
            try:
                eval_scalar(part, env)
            except DataError as err:
                message = f"{err} (post-filter {part!r}, match ending at this row)"
                raise _overflow(message, end, part) from None


def _post_filters(node: Pattern) -> list[Expr[bool]]:
    own = conjuncts(node.predicate) if isinstance(node, Filter) and node.post_filter else []
    return own + [p for c in node.children() for p in _post_filters(c)]


def _guard(result: set[T]) -> set[T]:
    if len(result) > MAX_VALUATIONS:
        raise RuntimeError("the reference evaluator is for small streams: too many partial matches")
    return result


def _denote(node: Pattern, stream: _Stream) -> set[Valuation]:
    """The set of valuations of ``node`` over ``stream`` (CEL semantics, docs/semantics.md)."""
    if isinstance(node, Atom):
        name = _type_name(node.event)
        return {frozenset([(node.var, p)]) for p in stream.positions if name in stream.types[p]}
    if isinstance(node, NotAtom):
        name = _type_name(node.event)

        def excluded(p: int) -> bool:
            if name not in stream.types[p]:
                return False
            return node.predicate is None or _holds(node.predicate, frozenset([(node.var, p)]), stream)

        return {frozenset([(node.var, p)]) for p in stream.positions if not excluded(p)}
    if isinstance(node, Seq):
        return _denote_chain(seq_chain(node), stream)
    if isinstance(node, Or):
        return _denote(node.left, stream) | _denote(node.right, stream)
    if isinstance(node, And):
        left, right = _denote(node.left, stream), _denote(node.right, stream)
        return _guard({a | b for a in left for b in right})
    if isinstance(node, Plus):
        return _denote_plus(node, stream)
    if isinstance(node, As):
        return {v | {(node.var, p) for p in _positions(v)} for v in _denote(node.inner, stream)}
    if isinstance(node, Filter):
        post = node.post_filter
        return {v for v in _denote(node.inner, stream) if _holds(node.predicate, v, stream, post)}
    raise TypeError(f"the reference evaluator does not know {node!r}")


def _denote_plus(node: Plus, stream: _Stream) -> set[Valuation]:
    """``inner+``: unions of iterations in sequence, each appended iteration satisfying the
    plus's trend conditions against the one before (the first holds them vacuously).
    Trends need the last iteration, which the union forgets, so the fixpoint runs over
    pairs (valuation so far, its last iteration)."""
    once = _denote(node.inner, stream)
    trends = trend_conditions(node)
    if not trends:  # no previous iteration is read: plain unions
        result, frontier = set(once), set(once)
        while frontier:
            grown = {a | b for a in frontier for b in once if stream.follows(a, b, node.contiguous)}
            frontier = _guard(grown - result)
            result |= frontier
        return result
    seen: set[tuple[Valuation, Valuation]] = {(v, v) for v in once}
    runs = set(seen)
    while runs:
        grown_runs = {
            (a | b, b)
            for a, last in runs
            for b in once
            if stream.follows(a, b, node.contiguous) and _trend_holds(trends, last, b, stream)
        }
        runs = _guard(grown_runs - seen)
        seen |= runs
    return _guard({v for v, _ in seen})


def _denote_chain(chain: list[tuple[Pattern, bool]], stream: _Stream) -> set[Valuation]:
    """A sequence's valuations, part by part; the absences between two parts drop the
    pairs with such an event strictly between them (docs/semantics.md, Absence)."""
    result = _denote(chain[0][0], stream)
    absences: list[Absent] = []
    for part, contiguous in chain[1:]:
        if isinstance(part, Absent):
            absences.append(part)
            continue
        right = _denote(part, stream)
        result = _guard(
            {
                a | b
                for a in result
                for b in right
                if stream.follows(a, b, contiguous)
                and not any(_occurs(x, a, b, stream) or _unkeyed(x, a | b, stream) for x in absences)
            }
        )
        absences = []
    return result


def _occurs(absence: Absent, left: Valuation, right: Valuation, stream: _Stream) -> bool:
    """Whether an event of the absence's type satisfying its filter (with the bindings of
    ``left | right`` for the variables it correlates with) lies strictly between ``left``'s
    last position and ``right``'s first."""
    before, after = max(_positions(left)), min(_positions(right))
    return any(before < p < after and _absent_at(absence, left | right, p, stream) for p in stream.positions)


def _occurs_outside(
    absence: Absent,
    v: Valuation,
    stream: _Stream,
    spec: QuerySpec,
    times: dict[int, Any],
    scale: int,
    after: bool,
) -> bool:
    """Whether an event of an absence that ends (``after``) or starts the pattern,
    satisfying its filter with ``v``'s bindings, lies after ``v``'s last position (before
    its first) and inside ``v``'s window: position − start ≤ n events, or time − time(start)
    ≤ d (end − position, time(end) − time, before)."""
    c = _positions(v)
    start, end = min(c), max(c)
    edge = start if after else end  # the match's event the window is measured from
    return any(
        (p > end if after else p < start)
        and _in_window(spec, frozenset({(absence.var, edge), (absence.var, p)}), times, scale)
        and _absent_at(absence, v, p, stream)
        for p in stream.positions
    )


def _unkeyed(absence: Absent, v: Valuation, stream: _Stream) -> bool:
    """Whether an equality that correlates the absence with a variable of ``v`` (its key,
    as a join key) is null on ``v``'s side: that event has no key, so it is in no
    partition and matches nothing (docs/data.md, rule 1), as under ``partition_by``."""
    if absence.predicate is None:
        return False
    for part in conjuncts(absence.predicate):
        if not is_equality_join(part):
            continue
        assert isinstance(part, Compare)
        for mine, other in ((part.left, part.right), (part.right, part.left)):
            if mine.variables() != {absence.var}:
                continue
            (var,) = other.variables()
            for w, p in v:
                if w == var and eval_scalar(other, {var: stream.events[p][1]}) is None:
                    return True
    return False


def _absent_at(absence: Absent, v: Valuation, p: int, stream: _Stream) -> bool:
    """Whether the event at ``p`` is of the absence's type and satisfies its filter (with
    ``v``'s bindings for the variables it correlates with)."""
    if _type_name(absence.event) not in stream.types[p]:
        return False
    return absence.predicate is None or _holds(absence.predicate, v | {(absence.var, p)}, stream)


def _type_name(cls: type) -> str:
    from pycel.language.events import event_name

    return event_name(cls)


# -- query clauses: consumption first (consumed partial matches are gone, docs/semantics.md),
# then the window, then the strategy among the outputs that fit it, projection, limit ------
def _strategy_filter(name: str, outputs: list[Valuation], stream: _Stream) -> list[Valuation]:
    """Keep the outputs (all with the same end) that the selection strategy selects."""
    sets = [_positions(v) for v in outputs]
    if name in ("all", "any"):
        return outputs
    if name == "strict":
        index = {p: k for k, p in enumerate(stream.positions)}
        return [v for v, c in zip(outputs, sets, strict=True) if index[max(c)] - index[min(c)] + 1 == len(c)]
    if name == "max":
        return [v for v, c in zip(outputs, sets, strict=True) if not any(c < d for d in sets)]
    pick: Callable[[frozenset[int]], int] = min if name == "next" else max

    def better(c1: frozenset[int], c2: frozenset[int]) -> bool:  # c1 <_strategy c2
        return c1 != c2 and pick(c1 ^ c2) in c2

    best = sets[0]
    for c in sets[1:]:
        if better(best, c):
            best = c
    return [v for v, c in zip(outputs, sets, strict=True) if c == best]


def _in_window(spec: QuerySpec, v: Valuation, times: dict[int, Any], scale: int) -> bool:
    """end − start ≤ n events, or time(end) − time(start) ≤ d (``scale``: units per second)."""
    window = spec.window
    if window is None:
        return True
    c = _positions(v)
    start, end = min(c), max(c)
    if window.unit == "events":
        return end - start <= window.size
    return bool(times[end] - times[start] <= window.size * scale)


def columns_read(spec: QuerySpec) -> dict[str, str]:
    """The attributes a query reads, each with the first part of the query that reads it
    (the window's time, PARTITION BY, a filter, a correlation, a post-filter).

    Example: ``columns_read(split_query(b.where(b.price > 3).within(5, on=B.time)))``
    is ``{"time": "the window's time attribute", "price": "the filter b.price > 3"}``.
    """
    reads: dict[str, str] = {}
    if spec.window is not None and spec.window.on is not None:
        reads[spec.window.on] = "the window's time attribute"
    for key in spec.partition:
        reads.setdefault(key, "PARTITION BY")
    todo = [spec.body]
    while todo:
        node = todo.pop(0)
        todo.extend(node.children())
        if isinstance(node, Filter):
            parts = [(p, "post-filter" if node.post_filter else "filter") for p in conjuncts(node.predicate)]
        elif isinstance(node, NotAtom) and node.predicate is not None:
            parts = [(node.predicate, "filter of a negated event")]
        elif isinstance(node, Absent) and node.predicate is not None:
            parts = [(node.predicate, "filter of an absence")]
        else:
            continue
        for pred, what in parts:
            if what == "filter" and len(pred.variables()) > 1:
                what = "correlation"
            for name in sorted({a.name for a in attributes_in(pred)}):
                reads.setdefault(name, f"the {what} {pred!r}")
    return reads


def _evaluate_spec(spec: QuerySpec, batch: EventBatch) -> list[Match]:
    n = len(batch)
    positions = range(batch.offset, batch.offset + n)
    times: dict[int, Any] = {}
    scale = 1
    if spec.window is not None and spec.window.on is not None:
        column = time_values(batch, spec.window.on)
        # Python numbers: a difference of int64 times must not wrap around.
        times = {batch.offset + k: column[k].item() for k in range(n)}
        if spec.window.unit == "seconds" and batch.schema.fields[spec.window.on] == "time":
            scale = 1_000_000_000  # timestamps are nanoseconds
    _check_join_floats(spec.body, batch)
    _check_overflow(spec.body, batch)
    post_parts = _post_filters(spec.body)
    body, start_absences, end_absences = window_absences(spec.body)
    # Partitions: sub-streams of equal, non-null key values (one stream when unpartitioned).
    groups: dict[tuple[Any, ...], list[int]] = {}
    for p in positions:
        key = tuple(batch.value(k, p - batch.offset) for k in spec.partition)
        if None not in key:
            groups.setdefault(key, []).append(p)
    outputs: dict[int, list[tuple[tuple[Any, ...], Valuation]]] = {}
    streams: dict[tuple[Any, ...], _Stream] = {}
    for key, members in groups.items():
        streams[key] = stream = _Stream(batch, members)
        for v in _denote(body, stream):
            outputs.setdefault(max(_positions(v)), []).append((key, v))
    barrier: dict[Any, int] = {}
    result: list[Match] = []
    for end in sorted(outputs):
        key = outputs[end][0][0]  # the end event lies in exactly one partition
        candidates = [v for _, v in outputs[end]]
        scope = key if spec.consume == "partition" else ()
        if spec.consume != "none":
            # Consumed runs no longer exist: they take no part in the strategy's choice.
            candidates = [v for v in candidates if min(_positions(v)) > barrier.get(scope, -1)]
        # The window first: a strategy chooses among the outputs that fit it.
        candidates = [v for v in candidates if _in_window(spec, v, times, scale)]
        # An absence that starts or ends the pattern: none of its events in the rest of
        # the window, before the first event or after the last.
        candidates = [
            v
            for v in candidates
            if not any(_occurs_outside(x, v, streams[key], spec, times, scale, False) for x in start_absences)
            and not any(_occurs_outside(x, v, streams[key], spec, times, scale, True) for x in end_absences)
            and not any(_unkeyed(x, v, streams[key]) for x in start_absences + end_absences)
        ]
        chosen = _strategy_filter(spec.strategy, candidates, streams[key]) if candidates else []
        for v in chosen:
            _check_post_filters(post_parts, v, streams[key], end)
        if spec.consume != "none" and chosen:
            barrier[scope] = end
        found = {_to_match(spec, v) for v in chosen}
        ordered = sorted(found)
        result.extend(ordered[: spec.limit] if spec.limit is not None else ordered)
    return result


def _to_match(spec: QuerySpec, v: Valuation) -> Match:
    c = _positions(v)
    valuation: dict[str, list[int]] = {}
    for var, p in v:
        if spec.select is None or var in spec.select:
            valuation.setdefault(var, []).append(p)
    return Match.of(min(c), max(c), valuation)


def evaluate(pattern: PatternLike, events: Any, *, type_column: str = DEFAULT_TYPE_COLUMN) -> Matches:
    """Every match of ``pattern`` over ``events``, by brute force (the test oracle).

    ``events``: Event instances, dicts with an ``event_type`` field, a pandas DataFrame or
    an Arrow table. Matches are sorted by end, then start, then valuation. With ``limit``,
    the first matches in that order are kept (the engine may keep others).

    Example::

        for m in pycel.reference.evaluate(seq(A, B), [A(), B(), B()]):
            print(m.start, m.end, m.variables)   # 0 1 {'A': (0,), 'B': (1,)} ...
    """
    spec = split_query(pattern)
    check(spec)
    schema = Schema.for_types(event_types(spec.body))
    batch = events if isinstance(events, EventBatch) else to_batch(events, schema, type_column=type_column)
    check_input_columns(batch.input_columns, columns_read(spec))
    if isinstance(events, EventBatch) and events.offset != 0:
        raise DataError("the reference evaluator takes a whole stream (offset 0)")
    variables = tuple(sorted(bound_variables(spec.body)))
    # The query's variables, as the engine's matches have them (m["x"] of another is a KeyError).
    matches = Matches.from_list(_evaluate_spec(spec, batch), variables)
    matches.source, matches.variables_complete = batch, True
    return matches
