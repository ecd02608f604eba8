"""Determinize the labeled automaton on the fly, one predicate class at a time.

A deterministic state is a set of atom states (state 0 is the start of a new run). From a
state T, an event of class c marked with label set L leads to the set of atoms b that
follow some atom of T, may read class c and carry labels L. One target per (T, c, L)
makes the automaton unambiguous: every valuation has exactly one run.

With contiguity there are two tables over the same states: ``δ_gap`` follows only the
edges that may skip events (it also holds the start moves) and is taken by runs whose last
event is older than the partition's previous event; ``δ_adj`` follows every edge and is
taken by runs whose last event *is* the previous one. A run takes exactly one of them,
so unambiguity is kept. Without contiguous edges ``δ_adj`` is empty and unused.

Absence: a run's deterministic state holds *tokens*, an atom with the guards blocked since
the run's last event (:func:`~pycel.plan.automaton.token`); a guarded edge is followed only
if none of its guards is blocked. An event that reads as guard g (its class has g's
pseudo-atom bit) blocks g for the runs that skip it: ``blocks[c]`` lists, for class c, the
states whose runs then move to another state (``-1``: they can no longer continue).

Only classes seen in the data are expanded: when a batch brings new classes,
:meth:`Dfa.expand` computes their transitions from every known state, and the transitions
of the states this creates, before the runtime reads the tables.

Example::

    dfa = Dfa(nfa)
    dfa.expand(class_bits)          # list of int bit-vectors, by class id
    dfa.tables()                    # CSR arrays the jit runtime reads
"""

from __future__ import annotations

import attrs
import numpy as np
import numpy.typing as npt

from pycel.errors import UnsupportedError
from pycel.limits import MAX_STATES

from .automaton import Nfa, token, token_atom, token_blocked
from .conditions import run_registers

START = -1  # the pseudo-atom a new run starts from


@attrs.frozen
class DfaTables:
    """Transitions grouped by class: class c owns entries ``ptr[c]:ptr[c+1]`` of
    ``src``/``label``/``dst`` (δ_gap) and ``aptr[c]:aptr[c+1]`` of ``asrc``/``alabel``/
    ``adst`` (δ_adj); ``final[s]``: entering s completes a match; ``extends[s]``: runs in
    s can still continue, ``extends_gap[s]``: also after skipping an event;
    ``label_masks[l]``: variables of label set l as bits."""

    ptr: npt.NDArray[np.int64]
    src: npt.NDArray[np.int64]
    label: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    final: npt.NDArray[np.bool_]
    extends: npt.NDArray[np.bool_]
    label_masks: npt.NDArray[np.int64]
    aptr: npt.NDArray[np.int64]
    asrc: npt.NDArray[np.int64]
    alabel: npt.NDArray[np.int64]
    adst: npt.NDArray[np.int64]
    extends_gap: npt.NDArray[np.bool_]
    # Absence: class c blocks the runs of state bsrc[i] into bdst[i] (-1: they end), for
    # i in bptr[c]:bptr[c+1].
    bptr: npt.NDArray[np.int64]
    bsrc: npt.NDArray[np.int64]
    bdst: npt.NDArray[np.int64]
    # Edge conditions: δ_gap entry i applies to the runs of src[i] whose register gives
    # the outcome bits outcome[i] (bit j: the j-th condition of the state holds); state s
    # orders its runs by register state_register[s] (-1: none) and tests the conditions
    # cond[cptr[s]:cptr[s+1]] (indices into the automaton's conditions).
    outcome: npt.NDArray[np.int64]
    state_register: npt.NDArray[np.int64]
    cptr: npt.NDArray[np.int64]
    cond: npt.NDArray[np.int64]


class LabelSets:
    """Label sets (the variables one marked event binds) as dense ids, and as bit masks of
    the automaton's variables for the runtime."""

    def __init__(self, variables: tuple[str, ...]) -> None:
        self.variables = variables
        self.sets: list[frozenset[str]] = []
        self.ids: dict[frozenset[str], int] = {}

    def id(self, labels: frozenset[str]) -> int:
        lid = self.ids.get(labels)
        if lid is None:
            lid = self.ids[labels] = len(self.sets)
            self.sets.append(labels)
        return lid

    def masks(self) -> npt.NDArray[np.int64]:
        masks = [sum(1 << self.variables.index(v) for v in ls) for ls in self.sets] or [0]
        return np.array(masks, dtype=np.int64)


class Dfa:
    """The lazily determinized automaton of an :class:`~pycel.plan.automaton.Nfa`."""

    def __init__(self, nfa: Nfa) -> None:
        self.nfa = nfa
        self.states: list[frozenset[int]] = [frozenset([START])]
        self.state_ids: dict[frozenset[int], int] = {self.states[0]: 0}
        self.labels = LabelSets(nfa.variables)
        self.class_bits: list[int] = []
        # moves[c] / adj_moves[c] = list of (src, label, dst, outcome) for class c (δ_gap / δ_adj)
        self.moves: list[list[tuple[int, int, int, int]]] = []
        self.adj_moves: list[list[tuple[int, int, int, int]]] = []
        self.blocks: list[list[tuple[int, int]]] = []  # per class: (src, dst or -1)
        self.contiguous = nfa.contiguous
        self._tables: DfaTables | None = None
        # Registers by identity (pycel.plan.conditions.run_registers), and the atoms whose
        # runs are ordered by one though no condition leaves them.
        self.register_ids = {key: i for i, (key, *_) in enumerate(run_registers(nfa))}
        self.ordered_atoms = {o.atom: self.register_ids[o.register_key] for o in nfa.orderings}

    def state_conditions(self, sid: int) -> list[int]:
        """The conditions on edges leaving state ``sid``'s atoms (outcome bit j is the j-th)."""
        atoms = {token_atom(t) for t in self.states[sid]}
        return [k for k, c in enumerate(self.nfa.conditions) if c.source in atoms]

    def _ordered(self, atoms: set[int]) -> int:
        """The register ordering the runs of a state of ``atoms`` without conditions (a
        run order's: its atom is the state's only one, as the state's label binds its
        variable), or -1."""
        return next((self.ordered_atoms[a] for a in atoms if a in self.ordered_atoms), -1)

    def _state(self, atoms: frozenset[int]) -> int:
        sid = self.state_ids.get(atoms)
        if sid is None:
            if len(self.states) >= MAX_STATES:
                raise UnsupportedError("the pattern's deterministic automaton grew too large")
            sid = self.state_ids[atoms] = len(self.states)
            self.states.append(atoms)
        return sid

    def _step(self, sid: int, bits: int, adjacent: bool = False) -> list[tuple[int, int, int, int]]:
        """Transitions (src, label, dst, outcome) of state ``sid`` on a class with atom
        bit-vector ``bits`` (δ_adj if ``adjacent``, else δ_gap): with edge conditions,
        those of every outcome of the state's conditions."""
        if adjacent and (sid == 0 or not self.contiguous):
            return []
        conds = self.state_conditions(sid) if sid != 0 else []
        outcomes = range(1 << len(conds))
        return [m for outcome in outcomes for m in self._step_on(sid, bits, adjacent, conds, outcome)]

    def _step_on(
        self, sid: int, bits: int, adjacent: bool, conds: list[int], outcome: int
    ) -> list[tuple[int, int, int, int]]:
        follow = self.nfa.follow if adjacent else self.nfa.gap_follow
        guards = self.nfa.guards
        holds = {k for j, k in enumerate(conds) if outcome >> j & 1}
        groups: dict[frozenset[str], set[int]] = {}
        for t in self.states[sid]:
            p, blocked = token_atom(t), token_blocked(t)
            succ = self.nfa.first if p == START else follow[p]
            for b in succ:
                needs = self.nfa.edge_conditions(p, b) if conds else []
                if bits >> b & 1 and not guards.get((p, b), 0) & blocked and holds.issuperset(needs):
                    groups.setdefault(self.nfa.atoms[b].labels, set()).add(token(b))
        return [
            (sid, self.labels.id(labels), self._state(frozenset(targets)), outcome)
            for labels, targets in sorted(groups.items(), key=lambda kv: sorted(kv[0]))
        ]

    def block(self, sid: int, bits: int) -> list[tuple[int, int]]:
        """[(sid, target)] if an event of a class with ``bits`` moves the runs of ``sid``
        that skip it (it blocks guards on their edges; target -1: no edge is left), else []."""
        guard_atoms = self.nfa.guard_atoms
        hit = sum(1 << g for g, a in enumerate(guard_atoms) if bits >> a & 1)
        if not hit or sid == 0:
            return []
        kept: set[int] = set()
        for t in self.states[sid]:
            a, blocked = token_atom(t), token_blocked(t)
            now = blocked | (hit & self.nfa.guards_after(a))
            if now == blocked:
                kept.add(t)
            elif any(not self.nfa.guards.get((a, b), 0) & now for b in self.nfa.follow[a]):
                kept.add(token(a, now))
        if kept == self.states[sid]:
            return []
        return [(sid, self._state(frozenset(kept)) if kept else -1)]

    def expand(self, class_bits: list[int]) -> None:
        """Make the tables complete for classes ``class_bits`` (ids are list positions)."""
        if len(class_bits) == len(self.class_bits):
            return
        self._tables = None
        done_states = len(self.states)
        for bits in class_bits[len(self.class_bits) :]:
            self.class_bits.append(bits)
            self.moves.append([m for s in range(done_states) for m in self._step(s, bits)])
            self.adj_moves.append([m for s in range(done_states) for m in self._step(s, bits, True)])
            self.blocks.append([m for s in range(done_states) for m in self.block(s, bits)])
        # States created above need their transitions on every known class, and so on.
        while done_states < len(self.states):
            sid = done_states
            for c, bits in enumerate(self.class_bits):
                self.moves[c].extend(self._step(sid, bits))
                self.adj_moves[c].extend(self._step(sid, bits, True))
                self.blocks[c].extend(self.block(sid, bits))
            done_states += 1

    def tables(self) -> DfaTables:
        """The transition tables as flat arrays for the runtime."""
        if self._tables is None:
            ptr, arr = _csr(self.moves)
            aptr, adj = _csr(self.adj_moves)
            bptr, blocks = _csr([[(src, 0, dst, 0) for src, dst in b] for b in self.blocks])
            registers = self.register_ids
            conds = [self.state_conditions(s) if s else [] for s in range(len(self.states))]
            last = self.nfa.last
            follow = self.nfa.follow
            gap = self.nfa.gap_follow
            atoms = [{token_atom(t) for t in s} for s in self.states]
            state_register = [
                registers[self.nfa.conditions[c[0]].register_key] if c else self._ordered(a)
                for c, a in zip(conds, atoms, strict=True)
            ]
            self._tables = DfaTables(
                ptr=ptr,
                src=np.ascontiguousarray(arr[:, 0]),
                label=np.ascontiguousarray(arr[:, 1]),
                dst=np.ascontiguousarray(arr[:, 2]),
                final=np.array([bool(s & last) for s in atoms], dtype=np.bool_),
                extends=np.array(
                    [any(follow.get(a) for a in s if a != START) for s in atoms], dtype=np.bool_
                ),
                label_masks=self.labels.masks(),
                aptr=aptr,
                asrc=np.ascontiguousarray(adj[:, 0]),
                alabel=np.ascontiguousarray(adj[:, 1]),
                adst=np.ascontiguousarray(adj[:, 2]),
                extends_gap=np.array(
                    [any(gap.get(a) for a in s if a != START) for s in atoms], dtype=np.bool_
                ),
                bptr=bptr,
                bsrc=np.ascontiguousarray(blocks[:, 0]),
                bdst=np.ascontiguousarray(blocks[:, 2]),
                outcome=np.ascontiguousarray(arr[:, 3]),
                state_register=np.array(state_register, dtype=np.int64),
                cptr=np.concatenate([[0], np.cumsum([len(c) for c in conds])]).astype(np.int64),
                cond=np.array([k for c in conds for k in c] or [0], dtype=np.int64),
            )
        return self._tables


def _csr(moves: list[list[tuple[int, int, int, int]]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(ptr, rows of (src, label, dst, outcome)) of per-class move lists."""
    counts = [len(m) for m in moves]
    flat = [m for ms in moves for m in ms] or [(0, 0, 0, 0)]
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ptr, np.array(flat, dtype=np.int64).reshape(-1, 4)
