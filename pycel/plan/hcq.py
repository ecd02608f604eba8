"""Hierarchical conjunctions with nested join classes as a parallelized automaton (PCEA
paper §4 and Appendix B: the q-tree construction).

A *hierarchical conjunctive* pattern is an AND of single events of pairwise unrelated
types, correlated by equality joins whose classes are nested or disjoint, optionally
followed (``seq(conjunction, last)``) by the event that must come last (Example 3.3's
P0). Each class of equal attributes covers a set of atoms; these sets, the single atoms
and the set of all atoms form a tree (the compact q-tree). A state is a node of the tree:
"every atom below it has been read, joined". Reading atom i completes node v when every
other subtree hanging off the path from v down to i is already complete; those subtrees
are the transition's children, each looked up by its *shape*: the classes above it, whose
values it shares with atom i. Each match has one run tree (its last atom completes the
root, recursively), so the automaton is unambiguous.

Example::

    plan = plan_hcq((t & s & r).where((t.a == s.a) & (s.a == r.a) & (s.b == r.b)))
    # nodes: {T, S, R} (a), {S, R} (a, b), and the three atoms
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from typing import Any

import attrs
import numpy as np

from pycel.dsl import And, Atom, Filter, Pattern, Seq
from pycel.language.checks import is_equality_join
from pycel.language.events import Event, event_name
from pycel.language.expr import Attr, Compare, Expr, conjuncts

#: Children per transition the runtime stores in an extend node.
MAX_CHILDREN = 4

Side = tuple[str, str]


@attrs.frozen
class HcqAtom:
    event: type[Event]
    var: str
    filters: tuple[Expr[bool], ...]


@attrs.frozen
class HcqTransition:
    """Reading one event as the atoms ``reads`` (several: one event serving a self-join)
    completes node ``target`` from the complete subtrees ``children``. ``same``: attribute
    pairs the event must hold equal (two merged atoms in one class; ``(a, a)`` when both
    read attribute a: it must not be null, as null == null is false); ``child_attrs`` and
    ``target_attrs``: the event's attributes giving each child's and the target's key,
    one per class of the shape (classes in order)."""

    reads: tuple[int, ...]
    target: int
    children: tuple[int, ...]
    final: bool
    same: tuple[tuple[str, str], ...]
    child_attrs: tuple[tuple[str, ...], ...]
    target_attrs: tuple[str, ...]


@attrs.frozen
class HcqPlan:
    """The automaton: atoms, the classes (per atom: the attribute carrying each class),
    the tree nodes (atom sets) with their shapes, and the transitions."""

    atoms: tuple[HcqAtom, ...]
    class_attrs: tuple[tuple[str | None, ...], ...]  # [class][atom] -> attribute or None
    class_dtypes: tuple[str, ...]
    nodes: tuple[frozenset[int], ...]  # node 0 is the root
    shapes: tuple[frozenset[int], ...]  # per node: the classes containing it strictly
    transitions: tuple[HcqTransition, ...]


def _items(node: Pattern, out: list[HcqAtom]) -> bool:
    """Collect the AND's single events; False when ``node`` is not an AND of them."""
    if isinstance(node, And):
        return _items(node.left, out) and _items(node.right, out)
    filters: tuple[Expr[bool], ...] = ()
    while isinstance(node, Filter) and not node.post_filter:
        filters += tuple(conjuncts(node.predicate))
        node = node.inner
    if not isinstance(node, Atom) or any(p.variables() - {node.var} for p in filters):
        return False
    out.append(HcqAtom(node.event, node.var, filters))
    return True


def plan_hcq(body: Pattern, partition: tuple[str, ...] = ()) -> HcqPlan | None:
    """The parallelized automaton of ``body``, or None when it is not such a pattern
    (the caller then uses the sequential engine).

    ``partition``: PARTITION BY attributes. All events of a match share their values, and
    an event without one is in no partition, exactly like a join class over every atom
    on that attribute, so each becomes one (the root class of the q-tree)."""
    preds: list[Expr[bool]] = []
    while isinstance(body, Filter) and not body.post_filter:
        preds += conjuncts(body.predicate)
        body = body.inner
    atoms: list[HcqAtom] = []
    last: set[int] | None = None
    if isinstance(body, Seq) and not body.contiguous and isinstance(body.left, And):
        if not _items(body.left, atoms) or not _items(body.right, atoms) or len(atoms) < 3:
            return None
        last = {len(atoms) - 1}
    elif not isinstance(body, And) or not _items(body, atoms):
        return None
    names = [a.var for a in atoms]
    if len(set(names)) != len(names) or len(atoms) > 8:
        return None
    index = {a.var: k for k, a in enumerate(atoms)}
    unary: dict[int, list[Expr[bool]]] = {k: list(a.filters) for k, a in enumerate(atoms)}
    parent: dict[Side, Side] = {}
    dtypes: dict[Side, str] = {}

    def root(side: Side) -> Side:
        while parent.setdefault(side, side) != side:
            side = parent[side]
        return side

    for p in preds:
        vs = {v for v in p.variables() if v is not None}
        if len(vs) == 1:
            unary[index[vs.pop()]].append(p)
            continue
        if not (
            is_equality_join(p)
            and isinstance(p, Compare)
            and isinstance(p.left, Attr)
            and isinstance(p.right, Attr)
        ):
            return None
        sides = [(a.var, a.name) for a in (p.left, p.right) if a.var is not None]
        for (v, n), a in zip(sides, (p.left, p.right), strict=True):
            dtypes[(v, n)] = a.dtype
        parent[root(sides[1])] = root(sides[0])
    for name in partition:
        kinds = {item.event.__fields__[name] for item in atoms if name in item.event.__fields__}
        kind = kinds.pop() if len(kinds) == 1 else "float" if kinds == {"int", "float"} else None
        if kind is None:
            return None
        for item in atoms:
            dtypes[(item.var, name)] = kind
            parent[root((item.var, name))] = root((atoms[0].var, name))
    roots = sorted({root(s) for s in parent})
    class_attrs: list[tuple[str | None, ...]] = []
    class_sets: list[frozenset[int]] = []
    class_dtypes: list[str] = []
    for r in roots:
        members = [s for s in parent if root(s) == r]
        per_atom: list[str | None] = [None] * len(atoms)
        for v, n in members:
            if per_atom[index[v]] not in (None, n):
                return None
            per_atom[index[v]] = n
        kinds = {dtypes[s] for s in members}
        if len(kinds) > 1 and not kinds <= {"int", "float"}:
            return None
        class_dtypes.append("float" if len(kinds) > 1 else kinds.pop())
        class_attrs.append(tuple(per_atom))
        class_sets.append(frozenset(k for k, a in enumerate(per_atom) if a is not None))
    everything = frozenset(range(len(atoms)))
    node_sets = sorted(
        {everything, *class_sets, *(frozenset([k]) for k in range(len(atoms)))}, key=lambda s: -len(s)
    )
    for s1 in node_sets:
        for s2 in node_sets:
            if s1 & s2 and not (s1 <= s2 or s2 <= s1):
                return None  # not hierarchical (the static checks explain it)
    nodes = tuple(node_sets)
    shapes = tuple(frozenset(c for c, cs in enumerate(class_sets) if cs > n) for n in nodes)

    def children(v: int) -> list[int]:
        below = [w for w in range(len(nodes)) if nodes[w] < nodes[v]]
        return [w for w in below if not any(nodes[w] < nodes[u] for u in below)]

    def sharable(group: tuple[int, ...]) -> bool:  # one event can be all of them
        return all(
            issubclass(atoms[i].event, atoms[j].event) or issubclass(atoms[j].event, atoms[i].event)
            for i in group for j in group
        )

    transitions: list[HcqTransition] = []
    for target in range(len(nodes)):
        below = sorted(nodes[target])
        for size in range(1, len(below) + 1):
            for group in combinations(below, size):
                built = _transition(
                    target, group, nodes, shapes, class_attrs, children, last, sharable(group)
                )
                if built == "too wide":
                    return None
                if isinstance(built, HcqTransition):
                    transitions.append(built)
    atoms_out = tuple(attrs.evolve(a, filters=tuple(unary[k])) for k, a in enumerate(atoms))
    return HcqPlan(atoms_out, tuple(class_attrs), tuple(class_dtypes), nodes, shapes, tuple(transitions))


def _transition(
    target: int,
    reads: tuple[int, ...],
    nodes: tuple[frozenset[int], ...],
    shapes: tuple[frozenset[int], ...],
    class_attrs: list[tuple[str | None, ...]],
    children: Callable[[int], list[int]],
    last: set[int] | None,
    sharable: bool,
) -> HcqTransition | str | None:
    """The transition completing ``target`` by reading one event as ``reads`` (None when
    there is none; "too wide" when it would need more than MAX_CHILDREN children)."""
    group = set(reads)
    if not sharable:
        return None
    if last is not None and (group != last if target == 0 else bool(last & group)):
        return None  # the last event completes the whole conjunction, and alone
    kids: list[int] = []
    stack = [target]
    while stack:  # the subtrees hanging off the paths from target to the atoms read
        w = stack.pop()
        if len(nodes[w]) == 1:
            continue
        for u in children(w):
            (stack if nodes[u] & group else kids).append(u)
    if len(kids) > MAX_CHILDREN:
        return "too wide"

    def rep(c: int) -> str:
        attr = class_attrs[c][min(group & {k for k, a in enumerate(class_attrs[c]) if a})]
        assert attr is not None
        return attr

    same: list[tuple[str, str]] = []
    for per_atom in class_attrs:
        read = [a for a in (per_atom[i] for i in reads) if a is not None]
        used = sorted(set(read))
        same += [(used[0], other) for other in used[1:]]
        if len(used) == 1 and len(read) > 1:
            same.append((used[0], used[0]))  # x == x is false when x is null
    return HcqTransition(
        reads,
        target,
        tuple(kids),
        target == 0,
        tuple(same),
        tuple(tuple(rep(c) for c in sorted(shapes[u])) for u in kids),
        tuple(rep(c) for c in sorted(shapes[target])) if target != 0 else (),
    )


def transition_arrays(plan: HcqPlan) -> dict[str, Any]:
    """The transitions as flat arrays for the runtime, and the key *combos* they read:
    (shape, the event's attributes for its classes) → index into the per-batch keys."""
    n = len(plan.transitions)
    combos: dict[tuple[int, tuple[str, ...]], int] = {}
    sames: dict[tuple[tuple[str, str], ...], int] = {}

    def combo(node: int, attributes: tuple[str, ...]) -> int:
        return combos.setdefault((node, attributes), len(combos))

    out: dict[str, Any] = {
        "mask": np.zeros(n, dtype=np.int64),
        "dst": np.zeros(n, dtype=np.int64),
        "final": np.zeros(n, dtype=np.int64),
        "same": np.full(n, -1, dtype=np.int64),
        "nkids": np.zeros(n, dtype=np.int64),
        "kids": np.full((n, MAX_CHILDREN), -1, dtype=np.int64),
        "kid_combo": np.full((n, MAX_CHILDREN), -1, dtype=np.int64),
        "dst_combo": np.full(n, -1, dtype=np.int64),
    }
    for k, t in enumerate(plan.transitions):
        out["mask"][k] = sum(1 << i for i in t.reads)
        out["dst"][k], out["final"][k], out["nkids"][k] = t.target, int(t.final), len(t.children)
        if t.same:
            out["same"][k] = sames.setdefault(t.same, len(sames))
        for c, (u, attributes) in enumerate(zip(t.children, t.child_attrs, strict=True)):
            out["kids"][k, c] = u
            out["kid_combo"][k, c] = combo(u, attributes)
        if t.target != 0:
            out["dst_combo"][k] = combo(t.target, t.target_attrs)
    out["combos"] = sorted(combos, key=combos.__getitem__)  # [(node, attributes)]
    out["sames"] = sorted(sames, key=sames.__getitem__)
    return out


__all__ = ["HcqPlan", "plan_hcq", "transition_arrays", "event_name"]
