"""Comparisons between occurrences that the automaton evaluates on its edges (RMA's
registers; docs/architecture.md, Ordered run index).

A conjunct ``f(y) OP g(x)`` (OP one of ``< <= > >= !=``, each side reading one occurrence)
is an *edge condition* when x and y are adjacent in every match: x labels one atom α, y one
atom β, every run reaches β straight from α, and neither is repeated. The run's last event
is then x, so the earlier side ``g(x)`` is a *register* the run carries for free (it is the
value of its last event), and a run waiting after α is extended by an event e only if
``g(x) OP' f(e)`` holds. A trend ``plus(b.where(b.price > prev(b).price))`` is the same on
the self-loop β→β of a plus over one atom.

The runtime keeps the runs waiting in a state ordered by their register, so an event takes
the runs on one side of its value as O(log n) subtrees (:mod:`pycel.jit.treap`).

Example::

    conds = edge_conditions(body, nfa)      # [EdgeCondition(source=0, target=1, ...)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import attrs

from pycel.dsl import Absent, As, Atom, Filter, NotAtom, Pattern, Plus, Seq
from pycel.errors import UnsupportedError
from pycel.language.absence import seq_chain
from pycel.language.comparisons import is_order_comparison, occurrence_read
from pycel.language.expr import Arith, Attr, Compare, Const, Expr, conjuncts, expr_key, reads_prev

from .automaton import Nfa

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "!=": "!=", "==": "=="}
#: Conditions leaving the atoms of one event type: a state's runs have one ordering, and
#: an event splits them into at most 2k+1 ranges, each with its own transitions (2**k).
MAX_CONDITIONS_PER_TYPE = 4
_KINDS = {"int": "int", "bool": "int", "time": "int", "float": "float"}


def register_kind(dtype: str) -> str | None:
    """How a value of ``dtype`` is kept as a register: "int" (ints, bools, times),
    "float", or None (strings: no order the engine indexes)."""
    return _KINDS.get(dtype)
#: The values an edge condition compares: registers and thresholds of one kind, or an int
#: register with float thresholds ("int/float"), or the reverse; the runtime turns the
#: threshold into a key of the register's kind that compares exactly (docs/architecture.md).
CONDITION_KINDS = ("int", "float", "int/float", "float/int")


class Unindexable(UnsupportedError):
    """A comparison between occurrences that the automaton cannot evaluate on an edge but a
    post-filter can (``part``): the planner then checks it during enumeration instead."""

    def __init__(self, message: str, part: Expr[bool]) -> None:
        super().__init__(message)
        self.part = part


@attrs.frozen
class EdgeCondition:
    """``register OP threshold`` on the edge ``source → target``: ``register`` reads the
    run's last event (read by atom ``source``), ``threshold`` the event read by atom
    ``target``; ``text`` is the conjunct as written."""

    source: int
    target: int
    register: Expr[Any]
    op: str
    threshold: Expr[Any]
    kind: str  # one of CONDITION_KINDS: the register's kind, then the threshold's if other
    text: str

    @property
    def register_kind(self) -> str:
        """"int" or "float": how the runs waiting after ``source`` are ordered."""
        return self.kind.partition("/")[0]

    @property
    def register_key(self) -> str:
        """The register's identity: its expression with the variable left out."""
        return _unbound(self.register)


def _unbound(e: Expr[Any]) -> str:
    return repr(e._map(lambda a: attrs.evolve(a, var=None)))


def _plain(e: Expr[Any]) -> Expr[Any]:
    """``e`` reading the occurrence itself (``prev(b).x`` → ``b.x``)."""
    if not reads_prev(e):
        return e
    result: Expr[Any] = e._map(lambda a: attrs.evolve(a, prev=False))
    return result


def edge_conditions(
    body: Pattern, nfa: Nfa, shared: frozenset[frozenset[str]] = frozenset()
) -> tuple[EdgeCondition, ...]:
    """The order comparisons of ``body``'s filters as conditions on ``nfa``'s edges
    (``shared``: pairs of event type names one event can have both of, a subtype and its
    base: their atoms' runs wait in one state, so their conditions must order them alike).

    Raises :class:`UnsupportedError`, with the way out, for one the automaton cannot
    evaluate on an edge (its occurrences are not adjacent in every match, strings, too many
    conditions on one event type)."""
    counted = [0]
    parts = _order_conjuncts(body, None, counted)
    # Each comparison reads its variables inside its own filter (the NFA builder met the
    # filters in the same pre-order; should the counts differ, the whole pattern).
    spans = nfa.filter_spans if len(nfa.filter_spans) == counted[0] else None

    def within(k: int) -> tuple[int, int] | None:
        return spans[k] if spans is not None else None

    _check_trend_loops(body, [])
    # Trends first: a monotone trend lets a comparison with the event before a plus stand
    # on the plus's first edge only (see _implied_by_trend).
    found = [_condition(p, inner, nfa, [], within(k)) for p, inner, k in parts if reads_prev(p)]
    trends = list(found)
    others = [p for p, _, _ in parts if not reads_prev(p)]
    for part, inner, k in parts:
        if not reads_prev(part):
            try:
                found.append(_condition(part, inner, nfa, trends, within(k)))
            except UnsupportedError as err:
                raise Unindexable(str(err), part) from None
    conflict = _register_conflict(found, nfa, shared)
    if conflict is not None:
        k, message = conflict
        if k < len(trends):  # (the conflict picks a trend only when every other is one)
            raise UnsupportedError(message)
        raise Unindexable(message, others[k - len(trends)])
    return tuple(found)


def has_order_comparisons(body: Pattern) -> bool:
    """Whether ``body``'s filters compare occurrences by order or ``!=``."""
    return bool(_order_conjuncts(body, None, [0]))


def _order_conjuncts(
    node: Pattern, plus_inner: Pattern | None, counted: list[int]
) -> list[tuple[Compare, Pattern | None, int]]:
    """The order comparisons of the (non-post) filters in ``node``, each with the body of
    the innermost plus around it and its filter's number (pre-order over every filter;
    ``counted[0]`` counts them)."""
    out: list[tuple[Compare, Pattern | None, int]] = []
    if isinstance(node, Filter):
        k = counted[0]
        counted[0] += 1
        if not node.post_filter:
            parts = conjuncts(node.predicate)
            out += [(p, plus_inner, k) for p in parts if isinstance(p, Compare) and is_order_comparison(p)]
    inner = node.inner if isinstance(node, Plus) else plus_inner
    for child in node.children():
        out += _order_conjuncts(child, inner, counted)
    return out


def _check_trend_loops(node: Pattern, outer: list[Plus]) -> None:
    """Refuse a trend whose plus sits in another plus that can repeat its event right after
    itself (``plus(plus(b.where(b.x > prev(b).x)))``): the automaton has one edge b → b for
    both loops, so the trend would also bind across the outer one, where ``prev(b)``, the
    previous iteration of the innermost plus, does not exist."""
    if isinstance(node, Plus):
        outer = [*outer, node]
    if isinstance(node, Filter) and not node.post_filter and len(outer) > 1:
        for part in conjuncts(node.predicate):
            if isinstance(part, Compare) and reads_prev(part):
                var = next(iter(part.variables()))
                for loop in outer[:-1]:
                    first, last = _ends(loop.inner)
                    if var in first and var in last:
                        raise UnsupportedError(
                            f"{part!r}: the trend's plus() is inside another plus() that repeats "
                            f"{var!r} right after {var!r}, where prev({var}) is not defined; the "
                            "engine cannot tell the two loops apart. Check it with "
                            "pycel.reference.evaluate"
                        )
    for child in node.children():
        _check_trend_loops(child, outer)


def _ends(node: Pattern) -> tuple[set[str | None], set[str | None]]:
    """The variables of the atoms that can read the first and the last event of a match of
    ``node`` (more, never fewer: AND counts both sides)."""
    if isinstance(node, (Atom, NotAtom)):
        return {node.var}, {node.var}
    if isinstance(node, Seq):
        parts = [part for part, _ in seq_chain(node) if not isinstance(part, Absent)]
        return _ends(parts[0])[0], _ends(parts[-1])[1]
    first: set[str | None] = set()
    last: set[str | None] = set()
    for child in node.children():  # As, Filter, Plus: the inner; Or, And: both sides
        f, l2 = _ends(child)
        first |= f
        last |= l2
    return first, last


def _way_out(part: Expr[Any]) -> str:
    if reads_prev(part):  # a post-filter sees the whole match, not the iterations
        return "a trend condition has no post-filter form; check it with pycel.reference.evaluate"
    return f"write where({part!r}, post_filter=True) to check it on complete matches instead"


def _condition(
    part: Compare,
    plus_inner: Pattern | None,
    nfa: Nfa,
    trends: list[EdgeCondition],
    span: tuple[int, int] | None = None,
) -> EdgeCondition:
    left, right = occurrence_read(part.left), occurrence_read(part.right)
    assert left is not None and right is not None
    sides = (_KINDS.get(part.left.dtype), _KINDS.get(part.right.dtype))
    if None in sides:
        raise UnsupportedError(
            f"{part!r}: the engine compares numbers and times between occurrences; {_way_out(part)}"
        )

    def kind(register: Expr[Any]) -> str:
        """The condition's kind when ``register`` (one side of ``part``) is the register."""
        reg, thr = (sides[0], sides[1]) if register is part.left else (sides[1], sides[0])
        assert reg is not None and thr is not None
        return reg if reg == thr else f"{reg}/{thr}"

    if left[1] or right[1]:  # a trend: one side reads prev(b)
        prev_side, now_side = (part.left, part.right) if left[1] else (part.right, part.left)
        var = left[0]
        if right[0] != var:
            raise UnsupportedError(
                f"{part!r}: the engine compares an iteration with the previous one of the same "
                f"occurrence; {_way_out(part)}"
            )
        beta = _single_atom(nfa, var, part, span)
        if beta not in nfa.follow.get(beta, ()) or not _one_atom(plus_inner):
            raise UnsupportedError(
                f"{part!r}: the engine evaluates prev() inside a plus() over one event "
                f"(plus(b.where(...))); {_way_out(part)}"
            )
        op = part.op if prev_side is part.left else _FLIP[part.op]
        return EdgeCondition(beta, beta, _plain(prev_side), op, now_side, kind(prev_side), repr(part))
    alpha, beta = _single_atom(nfa, left[0], part, span), _single_atom(nfa, right[0], part, span)
    if _adjacent(nfa, alpha, beta):  # left is the earlier occurrence: the register
        return EdgeCondition(alpha, beta, part.left, part.op, part.right, kind(part.left), repr(part))
    if _adjacent(nfa, beta, alpha):
        return EdgeCondition(beta, alpha, part.right, _FLIP[part.op], part.left, kind(part.right), repr(part))
    for first, then, register, op, threshold in (
        (alpha, beta, part.left, part.op, part.right),
        (beta, alpha, part.right, _FLIP[part.op], part.left),
    ):
        cond = EdgeCondition(first, then, register, op, threshold, kind(register), repr(part))
        if _implied_by_trend(nfa, cond, trends):
            return cond
    raise UnsupportedError(
        f"{part!r}: the engine evaluates comparisons between occurrences that follow each "
        f"other directly in every match (seq(a, b).where(b.x > a.y)), and trends with prev(); "
        f"{_way_out(part)}"
    )


def _single_atom(nfa: Nfa, var: str | None, part: Expr[Any], span: tuple[int, int] | None = None) -> int:
    """The one atom labeled ``var`` (inside ``span``, the filter's atoms, if given)."""
    lo, hi = span if span is not None else (0, len(nfa.atoms))
    atoms = [a.index for a in nfa.atoms if var in a.labels and not a.negated and lo <= a.index < hi]
    if len(atoms) != 1:
        raise UnsupportedError(
            f"{part!r}: {var!r} stands for {len(atoms)} events of the pattern; the engine "
            f"compares occurrences of one event each; {_way_out(part)}"
        )
    return atoms[0]


def _one_atom(node: Pattern | None) -> bool:
    while isinstance(node, (As, Filter)):
        node = node.inner
    return isinstance(node, Atom)


def _reaches(nfa: Nfa, a: int, b: int) -> bool:
    """Whether a path of one or more edges leads from atom a to atom b."""
    seen: set[int] = set()
    todo = list(nfa.follow.get(a, ()))
    while todo:
        x = todo.pop()
        if x == b:
            return True
        if x not in seen:
            seen.add(x)
            todo.extend(nfa.follow.get(x, ()))
    return False


def _implied_by_trend(nfa: Nfa, cond: EdgeCondition, trends: list[EdgeCondition]) -> bool:
    """Whether ``cond`` (α → β, β repeated by a plus right after α) holds for every
    iteration once it holds for the first: a trend on β makes the compared value monotone
    in the direction the comparison needs (``register < f(b)`` with f non-decreasing over
    the iterations, ``register > f(b)`` with f non-increasing). Then it stands on α → β,
    the plus's entry, alone, e.g. ``seq(a, plus(b.where(b.x > prev(b).x)), c)`` with
    ``b.x > a.x``: the first b is the lowest."""
    alpha, beta = cond.source, cond.target
    into_beta = {a for a, targets in nfa.follow.items() if beta in targets}
    if into_beta != {alpha, beta} or beta in nfa.first or _reaches(nfa, alpha, alpha):
        return False
    rising = {"<": ("<", "<="), "<=": ("<", "<="), ">": (">", ">="), ">=": (">", ">=")}.get(cond.op, ())
    value = expr_key(cond.threshold)
    return any(
        t.source == beta == t.target
        and t.op in rising
        and expr_key(t.register) == value == expr_key(t.threshold)
        for t in trends
    )


def _adjacent(nfa: Nfa, alpha: int, beta: int) -> bool:
    """Whether every run reaches β straight from α, and neither repeats."""
    into_beta = {a for a, targets in nfa.follow.items() if beta in targets}
    return (
        into_beta == {alpha}
        and beta not in nfa.first
        and not _reaches(nfa, alpha, alpha)
        and not _reaches(nfa, beta, beta)
    )


def shared_types(supertypes: Iterable[frozenset[str]]) -> frozenset[frozenset[str]]:
    """The pairs of event type names that one event has both of (a type and its base type),
    from each known type's ``supertypes`` (pycel.data.ingest.Schema)."""
    return frozenset(frozenset((x, y)) for names in supertypes for x in names for y in names if x != y)


def check_registers(
    found: list[EdgeCondition], nfa: Nfa, shared: frozenset[frozenset[str]] = frozenset()
) -> None:
    """A deterministic state holds the atoms that read one event, so its runs have one
    register only if the conditions leaving atoms that can read one event share it."""
    conflict = _register_conflict(found, nfa, shared)
    if conflict is not None:
        raise UnsupportedError(conflict[1])


def _register_conflict(
    found: list[EdgeCondition], nfa: Nfa, shared: frozenset[frozenset[str]] = frozenset()
) -> tuple[int, str] | None:
    """(the index of a condition to leave out, why) when the conditions leaving atoms that
    can read one event (one event type, or a type and its subtype: ``shared``) order runs
    by different registers, or are too many; else None. The first register of a type
    stays (a trend's, as trends come first)."""
    events = [nfa.atoms[cond.source].event for cond in found]
    by_type: dict[str, list[int]] = {}
    for event in dict.fromkeys(events):
        by_type[event] = [j for j, e in enumerate(events) if e == event or frozenset((event, e)) in shared]
    for event, ks in by_type.items():
        conds = [found[k] for k in ks]
        keys = sorted({c.register_key for c in conds})
        if len(keys) > 1:
            other = next(k for k in ks if found[k].register_key != conds[0].register_key)
            return other, (
                f"the comparisons {[c.text for c in conds]} order runs after a {event} event by "
                f"different values ({', '.join(keys)}); the engine orders them by one. Write "
                f"all but one with where(..., post_filter=True)"
            )
        if len(conds) > MAX_CONDITIONS_PER_TYPE:
            return ks[-1], (
                f"at most {MAX_CONDITIONS_PER_TYPE} comparisons between occurrences may leave "
                f"{event} events; write the others with where(..., post_filter=True)"
            )
    return None


@attrs.frozen
class RunOrder:
    """The runs waiting after atom ``atom`` kept ordered by ``register`` (an attribute of
    the atom's event) although no edge condition reads it: a residual comparison
    ``f(...) OP register`` then skips whole subtrees of those runs while matches are
    enumerated (:func:`key_pruning`, :mod:`pycel.jit.residual`)."""

    atom: int
    register: Expr[Any]
    register_kind: str  # "int" or "float"

    @property
    def register_key(self) -> str:
        """The register's identity, as :attr:`EdgeCondition.register_key`."""
        return _unbound(self.register)


def _monotone(e: Expr[Any]) -> tuple[Attr[Any], bool] | None:
    """(the attribute x, whether ``e`` grows with it) when ``e`` is x itself or x moved by
    finite number constants (``x + 1``, ``2 - x``, ``-x``, ``x * 1.5``, ``x / -4``): then
    ``e`` is monotone in x (weakly, after rounding); else None. An int result that could
    overflow is no exception: such a push is not pruned at all (runtime/residual.py)."""
    if isinstance(e, Attr):
        return e, True
    if not isinstance(e, Arith) or e.op not in ("+", "-", "*", "/"):
        return None
    for inner, const, on_left in ((e.left, e.right, True), (e.right, e.left, False)):
        if not isinstance(const, Const) or isinstance(const.value, bool):
            continue
        c = const.value
        if not isinstance(c, (int, float)) or not math.isfinite(c):
            return None
        found = _monotone(inner)
        if found is None:
            return None
        x, grows = found
        if e.op == "+":
            return x, grows
        if e.op == "-":
            return x, grows if on_left else not grows
        if c == 0 or (e.op == "/" and not on_left):
            return None
        return x, grows if c > 0 else not grows
    return None


def _order_pruned(part: Expr[bool], nfa: Nfa) -> tuple[int, Attr[Any], str] | None:
    """(atom α, register x(a), the side to skip: "above" or "below") when ``part`` is
    ``f(…) OP g(a)`` with OP an order, g a plain number attribute x of the occurrence a of
    atom α or x moved by constants (:func:`_monotone`), f not reading any variable α binds,
    and α earlier than f's atoms in every match (its node is the one the enumerator binds
    last: there the comparison is decided); else None."""
    if not isinstance(part, Compare) or part.op not in ("<", "<=", ">", ">="):
        return None
    for g_side, f, op in ((part.left, part.right, part.op), (part.right, part.left, _FLIP[part.op])):
        monotone = _monotone(g_side)
        if monotone is None:
            continue
        g, grows = monotone
        read = occurrence_read(g)
        if read is None or read[1] or _KINDS.get(g.dtype) is None:
            continue
        if not grows:
            op = _FLIP[op]
        if _KINDS.get(f.dtype) is None or not f.variables():
            continue
        atoms = [a for a in nfa.atoms if g.var in a.labels and not a.negated]
        if len(atoms) != 1 or atoms[0].labels & f.variables():
            continue
        alpha = atoms[0].index
        others = [a.index for a in nfa.atoms if a.labels & f.variables() and not a.negated]
        if not others or any(not _reaches(nfa, alpha, b) or _reaches(nfa, b, alpha) for b in others):
            continue
        # x(a) < f fails at x(a) = v: it fails at every value above v too (below, if g falls).
        return alpha, g, "above" if op in ("<", "<=") else "below"
    return None


def run_orders(parts: tuple[Expr[bool], ...], nfa: Nfa) -> tuple[RunOrder, ...]:
    """The orderings the residual comparisons ``parts`` can prune by: one per atom whose
    runs no edge condition orders already (the first such comparison's register)."""
    taken = {c.source for c in nfa.conditions}
    found: dict[int, RunOrder] = {}
    for part in parts:
        pruned = _order_pruned(part, nfa)
        if pruned is not None and pruned[0] not in taken and pruned[0] not in found:
            alpha, g, _ = pruned
            found[alpha] = RunOrder(alpha, g, _KINDS[g.dtype])
    return tuple(found.values())


def key_pruning(part: Expr[bool], nfa: Nfa) -> tuple[Attr[Any], str] | None:
    """(the register g(a), "above" or "below") when ``nfa`` keeps the runs waiting after
    a ordered by the register ``part`` compares (an edge condition's or a
    :class:`RunOrder`'s): where ``part`` fails on such a run, the enumerator may skip the
    runs ordered on that side of it. None otherwise.

    Example: ``key_pruning(b.x > a.y, nfa)`` is ``(a.y, "above")`` when a's runs are
    ordered by ``a.y``."""
    pruned = _order_pruned(part, nfa)
    if pruned is None:
        return None
    alpha, g, side = pruned
    keys = {c.register_key for c in nfa.conditions if c.source == alpha}
    keys |= {o.register_key for o in nfa.orderings if o.atom == alpha}
    if keys != {_unbound(g)}:
        return None
    return g, side


def run_registers(nfa: Nfa) -> list[tuple[str, Expr[Any], str, int]]:
    """The registers the runs of ``nfa`` carry, as (key, expression, kind, the atom whose
    event it is read on): the edge conditions' in the order they are first read, then the
    run orders'. A register's id is its place here (the automaton's state tables and the
    loop's rows of values agree on it)."""
    found: dict[str, tuple[str, Expr[Any], str, int]] = {}
    for c in nfa.conditions:
        found.setdefault(c.register_key, (c.register_key, c.register, c.register_kind, c.source))
    for o in nfa.orderings:
        found.setdefault(o.register_key, (o.register_key, o.register, o.register_kind, o.atom))
    return list(found.values())
