"""The automaton of the MAX selection strategy (CEL paper Theorem 4 and Algorithm 7,
extended to valuations), built lazily one predicate class at a time.

MAX keeps a complex event C (a set of positions) unless another output with the same end
strictly contains it. Inclusion is not a total order, so unlike LAST and NEXT no single
best run per state exists; instead every run carries what it needs to know about the
runs that contain it. A *pair* state (the paper's (T, U), plus E for valuations) is

* T: the automaton states of the run itself (its deterministic state);
* E: the states of the other valuations with exactly the same positions so far;
* U: the states of the runs whose positions strictly contain the run's.

A run state is an atom with a freshness bit (its last event is the partition's previous
one: contiguous edges may still fire) or ``START``. On each event every run either marks
it (with one label set L) or skips it, and the sets follow the standard subset
construction:

* mark with L:  U' = Δ•(U),  T' = Δ•_L(T) \\ U',  E' = (Δ•(E) ∪ Δ•_{≠L}(T)) \\ (U' ∪ T');
  the new run is an output iff Δ•_L(T) reaches a final atom and U' does not (no run with
  strictly more positions ends here accepted);
* skip:  U'' = Δ•(T) ∪ Δ•(E) ∪ Δ•(U) ∪ Δ∘(U),  T'' = Δ∘(T) \\ U'',  E'' = Δ∘(E) \\ (U'' ∪ T'').

A state in both T and U is dropped from T: every continuation from it is also one of the
larger run's. States with no outgoing edge are dropped (canonical pairs). The move is
deterministic per (pair, class, mark/label), so each valuation has one run: no
duplicates. The number of pairs is exponential in the pattern in the worst case, bounded
by ``MAX_PAIRS``; the per-event work is the number of pairs live for the event's key.

Example::

    dfa = MaxDfa(nfa)
    dfa.expand(class_bits)      # list of int bit-vectors, by class id
    dfa.tables()                # the arrays :func:`pycel.jit.maximal.run_batch_max` reads
"""

from __future__ import annotations

import attrs
import numpy as np
import numpy.typing as npt

from pycel.errors import UnsupportedError
from pycel.limits import MAX_PAIRS

from .automaton import Nfa, token, token_atom, token_blocked
from .determinize import LabelSets

START = -1

Pair = tuple[frozenset[int], frozenset[int], frozenset[int]]  # (T, E, U)


@attrs.frozen
class MaxTables:
    """Moves of pair p on class c: marking rows ``mark_ptr[c*P + p] : mark_ptr[c*P + p + 1]``
    of ``mark_label``/``mark_dst``/``mark_out`` (dst -1: the run cannot continue; out:
    the new run is a maximal match), and ``skip_dst[c*P + p]`` (-1: the skipping run is
    dominated or dead). ``initial[p]``: p holds the runs that have not started;
    ``inert[c]``: class c changes no pair (the loop skips such events)."""

    n_pairs: int
    mark_ptr: npt.NDArray[np.int64]
    mark_label: npt.NDArray[np.int64]
    mark_dst: npt.NDArray[np.int64]
    mark_out: npt.NDArray[np.bool_]
    skip_dst: npt.NDArray[np.int64]
    initial: npt.NDArray[np.bool_]
    inert: npt.NDArray[np.bool_]
    label_masks: npt.NDArray[np.int64]


class MaxDfa:
    """The lazily built pair automaton of an :class:`~pycel.plan.automaton.Nfa` under MAX."""

    def __init__(self, nfa: Nfa) -> None:
        self.nfa = nfa
        self.contiguous = nfa.contiguous
        self.final = frozenset(nfa.last)
        start: Pair = (frozenset([START]), frozenset(), frozenset())
        self.pairs: list[Pair] = [start]
        self.pair_ids: dict[Pair, int] = {start: 0}
        self.labels = LabelSets(nfa.variables)
        self.class_bits: list[int] = []
        # per class: {pair: [(label, dst, out), ...]} and {pair: skip dst}
        self.marks: list[dict[int, list[tuple[int, int, bool]]]] = []
        self.skips: list[dict[int, int]] = []
        self._tables: MaxTables | None = None

    # -- run states ------------------------------------------------------------------------
    # A run state is START or a token (an atom and the absences' guards blocked since the
    # run's last event, pycel.plan.automaton) shifted left by one, with the freshness bit.
    def _succ(self, q: int) -> frozenset[int]:
        """Atoms a run in state q may mark next (not across a blocked guard)."""
        if q == START:
            return self.nfa.first
        atom, blocked, fresh = token_atom(q >> 1), token_blocked(q >> 1), q & 1
        succ = (self.nfa.follow if fresh else self.nfa.gap_follow).get(atom, frozenset())
        if not blocked:
            return succ
        return frozenset(b for b in succ if not self.nfa.guards.get((atom, b), 0) & blocked)

    def _final(self, q: int) -> bool:
        return q != START and token_atom(q >> 1) in self.final

    def _marked(self, atom: int) -> int:
        """The run state after marking ``atom`` (fresh only matters with contiguity)."""
        return 2 * atom + 1 if self.contiguous else 2 * atom

    def _skipped(self, q: int, hit: int) -> int | None:
        """The run state after skipping an event that reads as the guards ``hit`` (it
        blocks those on the run's edges); None: the run can never continue."""
        if q == START:
            return START
        atom = token_atom(q >> 1)
        blocked = token_blocked(q >> 1) | (hit & self.nfa.guards_after(atom))
        guards = self.nfa.guards
        if any(not guards.get((atom, b), 0) & blocked for b in self.nfa.gap_follow.get(atom, ())):
            return 2 * token(atom, blocked)
        return None

    def _live(self, q: int) -> bool:
        return bool(q == START or self._succ(q))

    def _mark_all(self, states: frozenset[int], bits: int) -> set[int]:
        return {self._marked(b) for q in states for b in self._succ(q) if bits >> b & 1}

    def _skip_all(self, states: frozenset[int], hit: int) -> set[int]:
        return {s for q in states if (s := self._skipped(q, hit)) is not None}

    # -- pairs -----------------------------------------------------------------------------
    def _pair(self, t: set[int], e: set[int], u: set[int]) -> int:
        """The id of the canonical pair (dead states dropped), or -1 if T is empty."""
        tt = frozenset(q for q in t if self._live(q))
        if not tt:
            return -1
        uu = frozenset(q for q in u if self._live(q))
        ee = frozenset(q for q in e if self._live(q)) - uu - tt
        key = (tt, ee, uu)
        pid = self.pair_ids.get(key)
        if pid is None:
            if len(self.pairs) >= MAX_PAIRS:
                raise UnsupportedError(
                    "strategy('max'): the pattern's pair automaton grew past "
                    f"{MAX_PAIRS} states; use 'all' or 'last' for this pattern"
                )
            pid = self.pair_ids[key] = len(self.pairs)
            self.pairs.append(key)
        return pid

    def _step(self, pid: int, bits: int) -> tuple[list[tuple[int, int, bool]], int]:
        """(marking rows, skip target) of pair ``pid`` on a class with atom bits ``bits``."""
        t, e, u = self.pairs[pid]
        hit = sum(1 << g for g, a in enumerate(self.nfa.guard_atoms) if bits >> a & 1)
        by_label: dict[frozenset[str], set[int]] = {}
        for q in t:
            for b in self._succ(q):
                if bits >> b & 1:
                    by_label.setdefault(self.nfa.atoms[b].labels, set()).add(self._marked(b))
        mark_e = self._mark_all(e, bits)
        mark_u = self._mark_all(u, bits)
        larger_final = any(self._final(q) for q in mark_u)
        rows = []
        for labels, targets in sorted(by_label.items(), key=lambda kv: sorted(kv[0])):
            t1 = targets - mark_u
            others = set().union(*(v for k, v in by_label.items() if k != labels))
            dst = self._pair(t1, (mark_e | others) - t1, mark_u)
            out = not larger_final and any(self._final(q) for q in targets)
            if dst >= 0 or out:
                rows.append((self.labels.id(labels), dst, out))
        u2 = {q for ts in by_label.values() for q in ts} | mark_e | mark_u | self._skip_all(u, hit)
        t2 = self._skip_all(t, hit) - u2
        skip = self._pair(t2, self._skip_all(e, hit) - u2 - t2, u2)
        return rows, skip

    def expand(self, class_bits: list[int]) -> None:
        """Make the tables complete for classes ``class_bits`` (ids are list positions)."""
        if len(class_bits) == len(self.class_bits):
            return
        self._tables = None
        done = len(self.pairs)
        for bits in class_bits[len(self.class_bits):]:
            self.class_bits.append(bits)
            self.marks.append({})
            self.skips.append({})
            for p in range(done):
                self._add(len(self.class_bits) - 1, p)
        while done < len(self.pairs):  # pairs created above need every class, and so on
            for c in range(len(self.class_bits)):
                self._add(c, done)
            done += 1

    def _add(self, c: int, pid: int) -> None:
        rows, skip = self._step(pid, self.class_bits[c])
        if rows:
            self.marks[c][pid] = rows
        self.skips[c][pid] = skip

    def tables(self) -> MaxTables:
        """The transition tables as flat arrays for the runtime."""
        if self._tables is None:
            n = len(self.pairs)
            counts = np.zeros(len(self.class_bits) * n, dtype=np.int64)
            rows: list[tuple[int, int, bool]] = []
            skip = np.full(max(1, len(self.class_bits) * n), -1, dtype=np.int64)
            for c in range(len(self.class_bits)):
                for p in range(n):
                    mine = self.marks[c].get(p, [])
                    counts[c * n + p] = len(mine)
                    rows.extend(mine)
                    skip[c * n + p] = self.skips[c][p]
            ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            self._tables = MaxTables(
                n_pairs=n,
                mark_ptr=ptr,
                mark_label=np.array([r[0] for r in rows] or [0], dtype=np.int64),
                mark_dst=np.array([r[1] for r in rows] or [0], dtype=np.int64),
                mark_out=np.array([r[2] for r in rows] or [False], dtype=np.bool_),
                skip_dst=skip,
                initial=np.array([START in p[0] for p in self.pairs], dtype=np.bool_),
                inert=np.array(
                    [bits == 0 and not self.contiguous for bits in self.class_bits] or [False],
                    dtype=np.bool_,
                ),
                label_masks=self.labels.masks(),
            )
        return self._tables
