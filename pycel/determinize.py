"""Determinize the labeled automaton on the fly, one predicate class at a time.

A deterministic state is a set of atom states (state 0 is the start of a new run). From a
state T, an event of class c marked with label set L leads to the set of atoms b that
follow some atom of T, may read class c and carry labels L. One target per (T, c, L)
makes the automaton unambiguous: every valuation has exactly one run.

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

from .automaton import Nfa
from .errors import UnsupportedError

START = -1  # the pseudo-atom a new run starts from
MAX_STATES = 1 << 20


@attrs.frozen
class DfaTables:
    """Transitions grouped by class: class c owns entries ``ptr[c]:ptr[c+1]`` of
    ``src``/``label``/``dst``; ``final[s]``: entering s completes a match; ``extends[s]``:
    runs in s can still continue; ``label_masks[l]``: variables of label set l as bits."""

    ptr: npt.NDArray[np.int64]
    src: npt.NDArray[np.int64]
    label: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    final: npt.NDArray[np.bool_]
    extends: npt.NDArray[np.bool_]
    label_masks: npt.NDArray[np.int64]


class Dfa:
    """The lazily determinized automaton of an :class:`~pycel.automaton.Nfa`."""

    def __init__(self, nfa: Nfa) -> None:
        self.nfa = nfa
        self.states: list[frozenset[int]] = [frozenset([START])]
        self.state_ids: dict[frozenset[int], int] = {self.states[0]: 0}
        self.labels: list[frozenset[str]] = []
        self.label_ids: dict[frozenset[str], int] = {}
        self.class_bits: list[int] = []
        # moves[c] = list of (src, label, dst) for class c
        self.moves: list[list[tuple[int, int, int]]] = []
        self._tables: DfaTables | None = None

    def _state(self, atoms: frozenset[int]) -> int:
        sid = self.state_ids.get(atoms)
        if sid is None:
            if len(self.states) >= MAX_STATES:
                raise UnsupportedError("the pattern's deterministic automaton grew too large")
            sid = self.state_ids[atoms] = len(self.states)
            self.states.append(atoms)
        return sid

    def _label(self, labels: frozenset[str]) -> int:
        lid = self.label_ids.get(labels)
        if lid is None:
            lid = self.label_ids[labels] = len(self.labels)
            self.labels.append(labels)
        return lid

    def _step(self, sid: int, bits: int) -> list[tuple[int, int, int]]:
        """Transitions of state ``sid`` on a class with atom bit-vector ``bits``."""
        groups: dict[frozenset[str], set[int]] = {}
        for p in self.states[sid]:
            succ = self.nfa.first if p == START else self.nfa.follow[p]
            for b in succ:
                if bits >> b & 1:
                    groups.setdefault(self.nfa.atoms[b].labels, set()).add(b)
        return [
            (sid, self._label(labels), self._state(frozenset(targets)))
            for labels, targets in sorted(groups.items(), key=lambda kv: sorted(kv[0]))
        ]

    def expand(self, class_bits: list[int]) -> None:
        """Make the tables complete for classes ``class_bits`` (ids are list positions)."""
        if len(class_bits) == len(self.class_bits):
            return
        self._tables = None
        done_states = len(self.states)
        for bits in class_bits[len(self.class_bits):]:
            self.class_bits.append(bits)
            self.moves.append([m for s in range(done_states) for m in self._step(s, bits)])
        # States created above need their transitions on every known class, and so on.
        while done_states < len(self.states):
            sid = done_states
            for c, bits in enumerate(self.class_bits):
                self.moves[c].extend(self._step(sid, bits))
            done_states += 1

    def tables(self) -> DfaTables:
        """The transition tables as flat arrays for the runtime."""
        if self._tables is None:
            counts = [len(m) for m in self.moves]
            flat = [m for ms in self.moves for m in ms] or [(0, 0, 0)]
            arr = np.array(flat, dtype=np.int64).reshape(-1, 3)
            variables = self.nfa.variables
            masks = [sum(1 << variables.index(v) for v in ls) for ls in self.labels] or [0]
            last = self.nfa.last
            follow = self.nfa.follow
            self._tables = DfaTables(
                ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                src=np.ascontiguousarray(arr[:, 0]),
                label=np.ascontiguousarray(arr[:, 1]),
                dst=np.ascontiguousarray(arr[:, 2]),
                final=np.array([bool(s & last) for s in self.states], dtype=np.bool_),
                extends=np.array(
                    [any(follow.get(a) for a in s if a != START) for s in self.states], dtype=np.bool_
                ),
                label_masks=np.array(masks, dtype=np.int64),
            )
        return self._tables
