"""Normalize equality joins into run keys (docs/architecture.md: equality predicates as keys).

A correlation ``a.x == b.x`` is an equality predicate between occurrences. When one class
of equal attributes constrains *every* event a match can contain, all events of a match
carry the same value, so the engine evaluates the join exactly like PARTITION BY: runs are
indexed in H by that value, read per event from the attribute its event type uses
(``a.x == b.y`` reads ``x`` on a's type and ``y`` on b's). Several such classes make a
tuple key. This keeps the per-event cost constant whatever the number of key values, and
memory follows the window, not the number of keys seen.

Correlations that leave an occurrence unconstrained (``seq(a, b, c).where(a.x == c.x)``),
relate two attributes of one event, sit inside an iteration, or meet a negated atom are
not run keys; they are rejected here with the way out (``post_filter=True``).

Example::

    body, keys = plan_joins(seq(s, b).where(s.name == b.name).within(events=9))
    keys[0].attributes          # (('Buy', 'name'), ('Sell', 'name'))
"""

from __future__ import annotations

import functools
import operator

import attrs

from pycel.dsl import Absent, And, As, Atom, Filter, NotAtom, Or, Pattern, Plus, Seq
from pycel.errors import PatternError, UnsupportedError
from pycel.language.checks import is_equality_join
from pycel.language.events import Event, event_name
from pycel.language.expr import Attr, Compare, Expr, conjuncts

Side = tuple[str, str]  # (variable, attribute)


@attrs.frozen
class JoinKey:
    """One class of equal attributes: for each event type of the pattern, the attribute
    that carries the class's value (``dtype``: the common type the values compare as)."""

    attributes: tuple[tuple[str, str], ...]  # (event type name, attribute), sorted
    dtype: str

    def attribute_of(self, type_name: str) -> str:
        return dict(self.attributes)[type_name]


@attrs.define
class _Occurrence:
    event: type[Event]
    labels: frozenset[str]
    negated: bool
    sides: set[Side] = attrs.field(factory=set)
    absent: bool = False

    def show(self) -> str:
        own = sorted(self.labels)
        return f"{event_name(self.event)} (bound to {', '.join(own)})"


@attrs.define
class _Planner:
    occurrences: list[_Occurrence] = attrs.field(factory=list)
    parent: dict[Side, Side] = attrs.field(factory=dict)
    dtypes: dict[Side, str] = attrs.field(factory=dict)
    # An absence's correlations also key the single events they read (a match binds one
    # event there; an iterated one may bind several values, which a key cannot say).
    absence_joins: list[Expr[bool]] = attrs.field(factory=list)
    single: list[int] = attrs.field(factory=list)
    # Joins inside an iteration, with the message refusing them: decided once the classes
    # are known (a class the partition implies needs no key).
    iterated: list[tuple[Expr[bool], str]] = attrs.field(factory=list)

    def root(self, side: Side) -> Side:
        while self.parent.setdefault(side, side) != side:
            side = self.parent[side]
        return side

    def walk(self, node: Pattern, labels: frozenset[str], iterated: bool) -> list[int]:
        """Record the occurrences below ``node``; return their indices."""
        if isinstance(node, (Atom, NotAtom)):
            self.occurrences.append(_Occurrence(node.event, labels | {node.var}, isinstance(node, NotAtom)))
            if not iterated:
                self.single.append(len(self.occurrences) - 1)
            return [len(self.occurrences) - 1]
        if isinstance(node, Absent):
            # The absent event must carry the run key too: its correlations join it to
            # the classes (an uncorrelated absence in a joined pattern is refused below).
            self.occurrences.append(_Occurrence(node.event, frozenset([node.var]), False, absent=True))
            k = len(self.occurrences) - 1
            own = Filter(Atom(node.event, node.var), node.predicate) if node.predicate is not None else None
            for join in join_conjuncts(own) if own is not None else []:
                if iterated:
                    self.iterated.append(
                        (join, f"correlation {join!r} of an absence inside an iteration (+) is not supported")
                    )
                self.add_join(join, [k])
                self.absence_joins.append(join)
            return []
        if isinstance(node, As):
            return self.walk(node.inner, labels | {node.var}, iterated)
        if isinstance(node, Plus):
            return self.walk(node.inner, labels, True)
        found = [k for child in node.children() for k in self.walk(child, labels, iterated)]
        if isinstance(node, Filter) and not node.post_filter:
            joins = join_conjuncts(node)
            if joins:
                _check_bound(joins, mandatory_variables(node.inner), node.inner)
            for join in joins:
                if iterated:
                    self.iterated.append(
                        (
                            join,
                            f"correlation {join!r} is inside an iteration (+), where it relates "
                            "the events of each repetition separately; the engine cannot run "
                            "that as a key. Move it outside the +, or pass where(..., "
                            "post_filter=True) (exact, without the delay guarantee)",
                        )
                    )
                self.add_join(join, found)
        return found

    def walk_all(self, body: Pattern, partition: tuple[str, ...] = ()) -> list[Side]:
        """Record every occurrence of ``body`` and the joins that relate them; return the
        roots of the classes that need a run key: not those the partition implies."""
        self.walk(body, frozenset(), False)
        for join in self.absence_joins:
            self.add_join(join, self.single)
        roots = sorted({self.root(s) for s in self.parent} - self.implied(partition))
        for join, refusal in self.iterated:
            if self.root(_sides(join)[0]) in roots:
                raise UnsupportedError(refusal)
        return roots

    def implied(self, partition: tuple[str, ...]) -> set[Side]:
        """The roots of the classes that equate one attribute the pattern is partitioned by
        (``a.k == b.k`` under ``partition_by("k")``): every event of a match already shares
        it, null keys excluded as the join excludes them, so they need no key."""
        attributes: dict[Side, set[str]] = {}
        for side in self.parent:
            attributes.setdefault(self.root(side), set()).add(side[1])
        return {root for root, names in attributes.items() if len(names) == 1 and names <= set(partition)}

    def add_join(self, join: Expr[bool], scope: list[int]) -> None:
        assert isinstance(join, Compare) and isinstance(join.left, Attr) and isinstance(join.right, Attr)
        sides = _sides(join)
        self.dtypes[sides[0]], self.dtypes[sides[1]] = join.left.dtype, join.right.dtype
        self.parent[self.root(sides[1])] = self.root(sides[0])
        for k in scope:
            occ = self.occurrences[k]
            occ.sides.update(s for s in sides if s[0] in occ.labels)


def mandatory_variables(node: Pattern) -> set[str]:
    """The variables every match of ``node`` binds (an OR binds only what both sides do)."""
    if isinstance(node, (Atom, NotAtom)):
        return {node.var}
    if isinstance(node, Or):
        return mandatory_variables(node.left) & mandatory_variables(node.right)
    found = set().union(*(mandatory_variables(c) for c in node.children()))
    return found | {node.var} if isinstance(node, As) else found


def _sides(join: Expr[bool]) -> tuple[Side, Side]:
    assert isinstance(join, Compare) and isinstance(join.left, Attr) and isinstance(join.right, Attr)
    assert join.left.var is not None and join.right.var is not None
    return (join.left.var, join.left.name), (join.right.var, join.right.name)


def _check_bound(joins: list[Expr[bool]], mandatory: set[str], inner: Pattern) -> None:
    """Refuse joins that a match can leave vacuous. A conjunct over a variable the match
    does not bind holds (CEL's "for all" over no events), so ``v0.x == w.x & v1.x == w.x``
    with ``w`` inside an OR does not relate v0 and v1; a key would. Every optional side must
    be joined directly to a bound one, and the bound sides of a class must be connected
    through conjuncts between bound sides."""
    every: dict[Side, Side] = {}
    bound: dict[Side, Side] = {}

    def root(parent: dict[Side, Side], side: Side) -> Side:
        while parent.setdefault(side, side) != side:
            side = parent[side]
        return side

    for join in joins:
        left, right = _sides(join)
        optional = [v for v, _ in (left, right) if v not in mandatory]
        if len(optional) == 2 or (optional and left[0] == right[0]):
            raise UnsupportedError(
                f"correlation {join!r} reads {sorted(set(optional))}, which some matches of "
                f"{inner!r} leave unbound (an OR); there the condition holds vacuously, which "
                "the engine cannot run as a key. Relate each of them to an occurrence every "
                "match binds, or pass where(..., post_filter=True)"
            )
        every[root(every, left)] = root(every, right)
        if not optional:
            bound[root(bound, left)] = root(bound, right)
    for a in every:
        for b in every:
            same = root(every, a) == root(every, b)
            if same and a[0] in mandatory and b[0] in mandatory and root(bound, a) != root(bound, b):
                raise UnsupportedError(
                    f"in {inner!r}, {a[0]}.{a[1]} and {b[0]}.{b[1]} are related only through "
                    "a variable some matches leave unbound (an OR), where the condition holds "
                    "vacuously; the engine cannot run that as a key. Relate them directly, or "
                    "pass where(..., post_filter=True)"
                )


def join_conjuncts(node: Filter) -> list[Expr[bool]]:
    """The conjuncts of a filter that are equality joins ``x.a == y.b`` (attribute to
    attribute; a join through arithmetic is not a key)."""
    return [
        c
        for c in conjuncts(node.predicate)
        if is_equality_join(c)
        and isinstance(c, Compare)
        and isinstance(c.left, Attr)
        and isinstance(c.right, Attr)
    ]


def _common_dtype(dtypes: set[str], shown: str) -> str:
    if len(dtypes) == 1:
        return dtypes.pop()
    if dtypes <= {"int", "float"}:
        return "float"
    raise PatternError(f"correlation {shown} compares attributes of types {sorted(dtypes)}")


def _key_for(planner: _Planner, root: Side) -> JoinKey | str:
    """The run key of the class of ``root``, or why the class is not one."""
    members = sorted(s for s in planner.parent if planner.root(s) == root)
    shown = " == ".join(f"{v}.{a}" for v, a in members)
    by_type: dict[type[Event], str] = {}
    for occ in planner.occurrences:
        if occ.negated:
            return (
                f"correlation {shown} with the negated atom {occ.show()} is not supported by "
                "the engine; pass where(..., post_filter=True) (exact, without the delay "
                "guarantee)"
            )
        attrs_ = {s[1] for s in occ.sides if planner.root(s) == root}
        if not attrs_ and occ.absent:
            var = next(iter(occ.labels))
            joined, attribute = members[0]
            return (
                f"correlation {shown} does not constrain the absent {occ.show()}: the engine "
                "runs an equality join as a key that every event of a match shares, so an "
                "absence there must be of the match's key too, e.g. "
                f"absent({var}.where({var}.{attribute} == {joined}.{attribute})); an absence of any key "
                "in a pattern joined by keys is not supported"
            )
        if not attrs_:
            return (
                f"correlation {shown} does not constrain {occ.show()}: the engine runs an "
                "equality join as a key that every event of a match shares (like PARTITION "
                "BY). Relate that occurrence too, or pass where(..., post_filter=True) to "
                "check the condition on complete matches (exact, without the delay guarantee)"
            )
        if len(attrs_) > 1:
            return (
                f"correlation {shown} relates attributes {sorted(attrs_)} of the same event "
                f"{occ.show()}; pass where(..., post_filter=True) to check it on complete matches"
            )
        attr = attrs_.pop()
        for other, other_attr in by_type.items():
            related = issubclass(occ.event, other) or issubclass(other, occ.event)
            if related and other_attr != attr:
                return (
                    f"correlation {shown} reads {event_name(other)}.{other_attr} and "
                    f"{event_name(occ.event)}.{attr}, and an event can be read as both; pass "
                    "where(..., post_filter=True) to check it on complete matches"
                )
        by_type[occ.event] = attr
    dtype = _common_dtype({planner.dtypes[s] for s in members}, shown)
    return JoinKey(tuple(sorted((event_name(t), a) for t, a in by_type.items())), dtype)


def _strip(node: Pattern) -> Pattern:
    """``node`` without its equality-join conjuncts (the keys enforce them)."""
    if isinstance(node, Filter) and not node.post_filter:
        inner = _strip(node.inner)
        joins = join_conjuncts(node)
        rest = [c for c in conjuncts(node.predicate) if all(c is not j for j in joins)]
        if not rest:
            return inner
        return Filter(inner, functools.reduce(operator.and_, rest), node.post_filter)
    if isinstance(node, (Seq, Or, And)):
        return attrs.evolve(node, left=_strip(node.left), right=_strip(node.right))
    if isinstance(node, (Plus, As, Filter)):
        return attrs.evolve(node, inner=_strip(node.inner))
    return node


def plan_joins(body: Pattern, partition: tuple[str, ...] = ()) -> tuple[Pattern, tuple[JoinKey, ...]]:
    """Split the equality joins of ``body`` off as run keys: (body without them, keys).

    Raises UnsupportedError, with the way out, for a correlation the engine cannot run as a
    key. A body without equality joins comes back unchanged with no keys; joins that the
    ``partition`` (the PARTITION BY attributes) implies are dropped and make no key.
    """
    planner = _Planner()
    roots = planner.walk_all(body, partition)
    if not planner.parent:
        return body, ()
    keys = []
    for root in roots:
        key = _key_for(planner, root)
        if isinstance(key, str):
            raise UnsupportedError(key)
        keys.append(key)
    return _strip(body), tuple(keys)


def joins_form_run_keys(body: Pattern, partition: tuple[str, ...] = ()) -> bool:
    """Whether every class of equal attributes in ``body`` is a run key (it constrains
    every event of a match, one attribute per event type) or needs none (``partition``
    implies it). For a body without iterations and ORs, such as a conjunction of single
    events (elsewhere :func:`plan_joins` may refuse a join for other reasons).

    Example: ``joins_form_run_keys((a & b & c).where((a.x == b.x) & (b.y == c.y)))`` is False.
    """
    planner = _Planner()
    roots = planner.walk_all(body, partition)
    return all(not isinstance(_key_for(planner, r), str) for r in roots)
