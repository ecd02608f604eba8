"""Normalize a CEL body and compile it into a labeled, ε-free automaton (a PCEA with
|P| ≤ 1 and unary predicates).

The construction is Glushkov's: every atom occurrence of the pattern is a state; reading
an event that satisfies the atom's unary predicate moves a run into that state and marks
the event with the atom's *labels* (its variable and the variables of enclosing ``AS``).
Skip-till-any-match needs no skip moves: a run may continue from any earlier position.
Unary filters are pushed down onto the atoms whose labels they read (CORE's LP form).

Contiguity (``:``, ``:+``) is a property of a follow edge: the run's next marked event
must be the event right after its last one (of its partition). ``gap_follow`` holds the
edges that allow skipping; an edge that both a contiguous and a non-contiguous operator
create (``(A+):+``) allows skipping. With ``strict=True`` every edge is contiguous, which
is exactly the STRICT selection strategy: a match's positions form an interval iff each
of its consecutive marked events are adjacent, and each such pair is glued by one ``;``
or ``+`` of the pattern.

Absence (``seq(p, absent(C), q)``) guards the follow edges from p's last atoms to q's first
atoms: each absence is a *guard* g with a pseudo-atom that reads the absent events (it is in
no run; it only gives those events a bit). ``guards[(a, b)]`` is the mask of guards on edge
a→b; a run may take the edge only if no event of those guards came after its last event.
The deterministic automaton tracks that per run (``token``: an atom and its blocked guards).

Example::

    nfa = build_nfa(split_query(seq(A, plus(B), C)).body)
    nfa.first, nfa.follow, nfa.last      # ({0}, {0: {1}, 1: {1, 2}}, {2})
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from pycel.dsl import Absent, And, As, Atom, Filter, NotAtom, Or, Pattern, Plus, Seq
from pycel.errors import UnsupportedError
from pycel.language.absence import seq_chain, window_absences
from pycel.language.checks import is_equality_join
from pycel.language.comparisons import is_order_comparison
from pycel.language.events import event_name
from pycel.language.expr import Expr, conjuncts, reads_prev
from pycel.limits import MAX_ATOMS

if TYPE_CHECKING:
    from .conditions import EdgeCondition, RunOrder


@attrs.frozen
class AtomState:
    """One atom occurrence: the event type it reads, its predicate and its labels."""

    index: int
    event: str
    negated: bool
    type_predicate: Expr[bool] | None  # NOT(T FILTER …)'s own filter, negated with the type
    filters: tuple[Expr[bool], ...]  # pushed-down unary filters (all must hold)
    labels: frozenset[str]


@attrs.frozen
class Nfa:
    """A Glushkov automaton: runs start in ``first``, move along ``follow``, accept in
    ``last``; ``gap_follow`` ⊆ ``follow`` are the edges that may skip events."""

    atoms: tuple[AtomState, ...]
    first: frozenset[int]
    last: frozenset[int]
    follow: dict[int, frozenset[int]]
    variables: tuple[str, ...]
    gap_follow: dict[int, frozenset[int]] = attrs.field(factory=dict)
    guards: dict[tuple[int, int], int] = attrs.field(factory=dict)  # edge → guard mask
    guard_atoms: tuple[int, ...] = ()  # guard g's pseudo-atom
    # The pseudo-atoms of the absences that end the pattern (no edge: the runtime's
    # horizon, pycel.runtime.horizon, checks them on the outputs).
    end_atoms: tuple[int, ...] = ()
    start_atoms: tuple[int, ...] = ()  # likewise, the absences that start the pattern
    # Comparisons between adjacent occurrences, on their edges (pycel.plan.conditions).
    conditions: tuple[EdgeCondition, ...] = ()
    # Atoms whose waiting runs are ordered by a register no edge condition reads, for
    # the enumerator's pruning of residual comparisons (pycel.plan.conditions.RunOrder).
    orderings: tuple[RunOrder, ...] = ()
    # Per filter of the pattern (pre-order), the atoms [start, end) it covers: a variable
    # its comparisons read is the atom of that name inside it (an OR's branches may both
    # name a b). Planning only: not kept in snapshots.
    filter_spans: tuple[tuple[int, int], ...] = attrs.field(default=(), eq=False)

    def edge_conditions(self, a: int, b: int) -> list[int]:
        """The indices of the conditions on edge a→b (all must hold to take it)."""
        return [k for k, c in enumerate(self.conditions) if c.source == a and c.target == b]

    def guards_after(self, a: int) -> int:
        """The guards on some edge out of atom ``a``."""
        mask = 0
        for b in self.follow.get(a, ()):
            mask |= self.guards.get((a, b), 0)
        return mask

    @property
    def match_size(self) -> int | None:
        """The number of events in every match, or None if matches may differ in size (a
        ``+``, an OR of parts of different lengths). Then no match contains another, so
        MAX keeps every match.

        Example: ``seq(a, b, c)``'s automaton has match_size 3, ``seq(a, plus(b))``'s None."""
        depth = dict.fromkeys(self.first, 1)
        todo = sorted(self.first)
        while todo:
            a = todo.pop()
            for b in self.follow.get(a, ()):
                if b not in depth:
                    depth[b] = depth[a] + 1
                    todo.append(b)
                elif depth[b] != depth[a] + 1:
                    return None  # two paths of different lengths reach b (or a cycle does)
        sizes = {depth[a] for a in self.last if a in depth}
        return sizes.pop() if len(sizes) == 1 else None

    @property
    def contiguous(self) -> bool:
        """Whether some edge requires adjacency (the runtime then tracks fresh runs)."""
        return any(self.follow[a] != self.gap_follow.get(a, frozenset()) for a in self.follow)


#: Bits of a token below the blocked-guard mask: the atom (atoms are fewer than 64).
TOKEN_ATOM_BITS = 6
#: Absences per pattern: a token (atom and blocked guards) must fit an int64.
MAX_GUARDS = 63 - TOKEN_ATOM_BITS


def token(atom: int, blocked: int = 0) -> int:
    """A run's place in the automaton: ``atom`` with the guards ``blocked`` since its last
    event (-1, the start, is never blocked)."""
    return atom if atom < 0 else atom | blocked << TOKEN_ATOM_BITS


def token_atom(t: int) -> int:
    return t if t < 0 else t & ((1 << TOKEN_ATOM_BITS) - 1)


def token_blocked(t: int) -> int:
    return 0 if t < 0 else t >> TOKEN_ATOM_BITS


@attrs.define
class _Builder:
    strict: bool = False
    atoms: list[AtomState] = attrs.field(factory=list)
    follow: dict[int, set[int]] = attrs.field(factory=dict)
    gap_follow: dict[int, set[int]] = attrs.field(factory=dict)
    guards: dict[tuple[int, int], int] = attrs.field(factory=dict)
    guard_atoms: list[int] = attrs.field(factory=list)
    filter_spans: list[tuple[int, int]] = attrs.field(factory=list)

    def link(
        self, sources: frozenset[int], targets: frozenset[int], contiguous: bool, guard: int = 0
    ) -> None:
        for a in sources:
            for b in targets:
                if b in self.follow[a] and self.guards.get((a, b), 0) != guard:
                    # Either guard would allow the edge: one mask cannot say that.
                    raise UnsupportedError(
                        "an absence guards a transition that the pattern also makes without it"
                    )
                if guard:
                    self.guards[(a, b)] = guard
            self.follow[a] |= targets
            if not (contiguous or self.strict):
                self.gap_follow[a] |= targets

    def new_atom(self, atom: AtomState) -> int:
        k = len(self.atoms)
        if k >= MAX_ATOMS:
            raise UnsupportedError(f"the engine supports at most {MAX_ATOMS} atoms per pattern")
        self.atoms.append(attrs.evolve(atom, index=k))
        self.follow[k] = set()
        self.gap_follow[k] = set()
        return k

    def guard(self, node: Absent) -> int:
        """A new guard for ``node``; returns its mask bit."""
        if len(self.guard_atoms) >= MAX_GUARDS:
            raise UnsupportedError(f"the engine supports at most {MAX_GUARDS} absences per pattern")
        self.guard_atoms.append(self.absent_atom(node))
        return 1 << (len(self.guard_atoms) - 1)

    def absent_atom(self, node: Absent) -> int:
        """A pseudo-atom reading the absent events (in no run: it gives them a bit)."""
        parts = conjuncts(node.predicate) if node.predicate is not None else []
        own = tuple(p for p in parts if p.variables() <= {node.var})
        return self.new_atom(AtomState(0, event_name(node.event), False, None, own, frozenset()))

    def chain(
        self, node: Seq, labels: frozenset[str], pending: tuple[Expr[bool], ...]
    ) -> tuple[frozenset[int], frozenset[int]]:
        """A sequence part by part; absences guard the edges across them."""
        first: frozenset[int] | None = None
        last = frozenset[int]()
        guard = 0
        for part, glued in seq_chain(node):
            if isinstance(part, Absent):
                guard |= self.guard(part)
                continue
            f, l2 = self.build(part, labels, pending)
            if first is None:
                first = f
            else:
                self.link(last, f, glued, guard)
            last, guard = l2, 0
        assert first is not None  # checks: a sequence does not start with an absence
        return first, last

    def build(
        self, node: Pattern, labels: frozenset[str], pending: tuple[Expr[bool], ...]
    ) -> tuple[frozenset[int], frozenset[int]]:
        """Add ``node``'s atoms; return its (first, last) atom sets."""
        if isinstance(node, (Atom, NotAtom)):
            own = labels | {node.var}
            mine = tuple(p for p in pending if not p.variables() or p.variables() <= own)
            k = self.new_atom(
                AtomState(
                    0,
                    event_name(node.event),
                    isinstance(node, NotAtom),
                    node.predicate if isinstance(node, NotAtom) else None,
                    mine,
                    own,
                )
            )
            return frozenset([k]), frozenset([k])
        if isinstance(node, As):
            return self.build(node.inner, labels | {node.var}, pending)
        if isinstance(node, Filter):
            slot, start = len(self.filter_spans), len(self.atoms)
            self.filter_spans.append((start, start))  # (pre-order: outer filters first)
            ends = self.build(node.inner, labels, pending + _unary_conjuncts(node))
            self.filter_spans[slot] = (start, len(self.atoms))
            return ends
        if isinstance(node, Or):
            f1, l1 = self.build(node.left, labels, pending)
            f2, l2 = self.build(node.right, labels, pending)
            return f1 | f2, l1 | l2
        if isinstance(node, Seq):
            return self.chain(node, labels, pending)
        if isinstance(node, Plus):
            f, last = self.build(node.inner, labels, pending)
            self.link(last, f, node.contiguous)
            return f, last
        if isinstance(node, And):
            raise UnsupportedError("conjunction (&, AND) is not supported by the engine yet")
        raise UnsupportedError(f"{type(node).__name__} is not supported by the engine yet")


def _unary_conjuncts(node: Filter) -> tuple[Expr[bool], ...]:
    if node.post_filter:
        raise UnsupportedError("post_filter=True is not supported by the engine yet")
    # Comparisons between occurrences are conditions on edges, not on one atom.
    parts = [p for p in conjuncts(node.predicate) if not is_order_comparison(p)]
    for p in parts:
        if reads_prev(p):  # not one comparison: an atom cannot see the previous iteration
            raise UnsupportedError(
                f"trend condition {p!r}: the engine evaluates trend conditions that compare "
                "one value of the current iteration with one of the previous (<, <=, >, >=, "
                "==, !=); write a negation or OR as such comparisons (~(b.x <= prev(b).x) is "
                "b.x > prev(b).x), or check it with pycel.reference.evaluate"
            )
        if is_equality_join(p):
            raise UnsupportedError(
                f"correlation {p!r} between occurrences is not supported by the engine yet"
            )
    return tuple(parts)


def build_nfa(body: Pattern, *, strict: bool = False) -> Nfa:
    """Compile a CEL body (no query clauses) into a labeled Glushkov automaton
    (``strict``: every sequencing and iteration contiguous, the STRICT strategy)."""
    builder = _Builder(strict)
    body, starts, ends = window_absences(body)
    first, last = builder.build(body, frozenset(), ())
    end_atoms = tuple(builder.absent_atom(node) for node in ends)
    start_atoms = tuple(builder.absent_atom(node) for node in starts)
    variables = sorted({v for a in builder.atoms for v in a.labels})
    return Nfa(
        tuple(builder.atoms),
        first,
        last,
        {k: frozenset(v) for k, v in builder.follow.items()},
        tuple(variables),
        {k: frozenset(v) for k, v in builder.gap_follow.items()},
        dict(builder.guards),
        tuple(builder.guard_atoms),
        end_atoms,
        start_atoms,
        filter_spans=tuple(builder.filter_spans),
    )
