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

import attrs
import numpy as np
import numpy.typing as npt

from .checks import is_equality_join
from .dsl import And, Atom, Filter, Pattern, Seq
from .events import Event, event_name
from .expr import Attr, Compare, Expr, conjuncts

#: Children per transition the runtime stores in an extend node.
MAX_CHILDREN = 4

Side = tuple[str, str]


@attrs.frozen
class HcqAtom:
    event: type[Event]
    var: str
    filters: tuple[Expr[bool], ...]


@attrs.frozen
class HcqPlan:
    """The automaton: atoms, the classes (per atom: the attribute carrying each class),
    the tree nodes (atom sets) with their shapes, and the transitions."""

    atoms: tuple[HcqAtom, ...]
    class_attrs: tuple[tuple[str | None, ...], ...]  # [class][atom] -> attribute or None
    class_dtypes: tuple[str, ...]
    nodes: tuple[frozenset[int], ...]  # node 0 is the root
    shapes: tuple[frozenset[int], ...]  # per node: the classes containing it strictly
    # transitions: (atom, target node, ((child node), ...), final)
    transitions: tuple[tuple[int, int, tuple[int, ...], bool], ...]


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


def plan_hcq(body: Pattern) -> HcqPlan | None:
    """The parallelized automaton of ``body``, or None when it is not such a pattern
    (the caller then uses the sequential engine)."""
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
    for x in atoms:
        for y in atoms:
            if x is not y and (issubclass(x.event, y.event) or issubclass(y.event, x.event)):
                return None  # one event could be both atoms: the interleaving path handles it
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

    transitions: list[tuple[int, int, tuple[int, ...], bool]] = []
    for target in range(len(nodes)):
        for i in sorted(nodes[target]):
            kids: list[int] = []
            w = target
            while nodes[w] != frozenset([i]):
                nxt = next(u for u in children(w) if i in nodes[u])
                kids += [u for u in children(w) if u != nxt]
                w = nxt
            if len(kids) > MAX_CHILDREN:
                return None
            final = target == 0 and (last is None or i in last)
            transitions.append((i, target, tuple(kids), final))
    atoms_out = tuple(attrs.evolve(a, filters=tuple(unary[k])) for k, a in enumerate(atoms))
    return HcqPlan(atoms_out, tuple(class_attrs), tuple(class_dtypes), nodes, shapes, tuple(transitions))


def transition_arrays(plan: HcqPlan) -> dict[str, npt.NDArray[np.int64]]:
    """The transitions as flat arrays for the runtime, grouped by the atom they read."""
    order = sorted(range(len(plan.transitions)), key=lambda t: plan.transitions[t][0])
    n_atoms = len(plan.atoms)
    ptr = np.zeros(n_atoms + 1, dtype=np.int64)
    dst = np.zeros(len(order), dtype=np.int64)
    final = np.zeros(len(order), dtype=np.int64)
    nkids = np.zeros(len(order), dtype=np.int64)
    kids = np.full((len(order), MAX_CHILDREN), -1, dtype=np.int64)
    for k, t in enumerate(order):
        atom, v, ch, fin = plan.transitions[t]
        ptr[atom + 1] += 1
        dst[k], final[k], nkids[k] = v, int(fin), len(ch)
        kids[k, : len(ch)] = ch
    return {"ptr": np.cumsum(ptr), "dst": dst, "final": final, "nkids": nkids, "kids": kids}


__all__ = ["HcqPlan", "plan_hcq", "transition_arrays", "event_name"]
