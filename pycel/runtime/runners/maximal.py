"""The maximal runner: MAX over the CEL paper's pair automaton.

Under MAX a run may skip an event only if no other run reading it keeps every match it
could give, so skipping is explicit: the pair automaton (:class:`pycel.plan.maximal.MaxDfa`,
built on demand) moves every live pair of the event's key on every event, and heaps that
meet in one pair are joined by union nodes. The loop is
:func:`pycel.jit.maximal.run_batch_max`; each key's live pairs are one block of the pair
arena. docs/strategies.md has the semantics.

Example::

    runner = MaximalRunner(plan)           # plan.strategy == "max"
    raw = runner.advance(prepared)
"""

from __future__ import annotations

import numpy as np

from pycel.jit.maximal import ACTIVE, new_pair_arena, run_batch_max
from pycel.jit.store import EMPTY, H_RANK, H_STATE, H_VAL
from pycel.jit.structs import MaxArrays, flags, ints
from pycel.plan.maximal import MaxDfa
from pycel.plan.planner import Plan
from pycel.runtime.predicates import ClassTable
from pycel.runtime.snapshot.plan import Json, as_dict, bad
from pycel.runtime.snapshot.tables import Reader, Writer, in_range, max_in, max_out

from .base import PreparedBatch, RawMatches, Store, loop_input, power_of_two_columns
from .classes import load_classes, save_classes
from .sequential import SharedAutomaton


class MaximalRunner:
    """MAX: the pair automaton, the store, and every key's block of live pairs."""

    looks_before_window = True  # the maximal runs are chosen among runs the window may drop
    prunes_post_filters = False

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        # The pair automaton, shared by all streams of the plan in this process.
        self.shared = plan.shared_tables().get("max_dfa", lambda: SharedAutomaton(MaxDfa(plan.nfa)))
        self.store = Store.new()
        self.pairs = new_pair_arena()

    @property
    def max_dfa(self) -> MaxDfa:
        """The pair automaton (shared by the plan's streams)."""
        return self.shared.automaton

    @property
    def classes(self) -> ClassTable:
        """The class numbering of the pair automaton's tables (shared with it)."""
        return self.shared.classes

    def advance(self, batch: PreparedBatch) -> RawMatches:
        with self.shared.lock:
            class_ids = self.shared.classify(batch.bits)
            t = self.max_dfa.tables()
        tables = MaxArrays(
            ints(t.mark_ptr), ints(t.mark_label), ints(t.mark_dst), flags(t.mark_out), ints(t.skip_dst),
            flags(t.initial), flags(t.inert), np.int64(t.n_pairs), ints(t.label_masks),
        )  # fmt: skip
        step = run_batch_max(self.store.nodes(), ints(self.pairs), loop_input(batch, class_ids), tables)
        self.store.keep(step.store)
        self.pairs = step.pairs
        return RawMatches.of(step.out)

    def forget(self, window_start: int) -> None:
        pass  # the pair arena compacts itself

    def save(self, w: Writer) -> Json:
        with self.shared.lock:  # classes and tables as of one moment
            return {
                "classes": save_classes(w, self.classes),
                "max_dfa": max_out(w, self.max_dfa),
                "store": self.store.save(w),
                "pairs": w.add(self.pairs, np.int64),
            }

    @classmethod
    def load(cls, plan: Plan, r: Reader, x: Json) -> MaximalRunner:
        """The runner :meth:`save` wrote, checked (DataError if not intact)."""
        x = as_dict(x, "runner")
        runner = cls.__new__(cls)
        runner.plan = plan
        # The snapshot's tables and numbering, the restored stream's own.
        max_dfa = max_in(r, x.get("max_dfa"), plan.nfa)
        runner.shared = SharedAutomaton(max_dfa, load_classes(r, x.get("classes"), max_dfa.class_bits))
        runner.store = Store.load(r, x.get("store"), 4, len(runner.max_dfa.labels.sets))
        runner.pairs = r.get(x.get("pairs"), "pair arena", ndim=2)
        capacity = power_of_two_columns(runner.pairs, 2, "the pair arena")
        free = int(runner.pairs[0, 0])
        if not 1 <= free <= capacity:
            raise bad("pair arena")
        in_range(runner.pairs[0, 1:free], -1, len(runner.max_dfa.pairs), "pair ids")
        HT = runner.store.HT
        blocks = (HT[H_STATE] != EMPTY) & (HT[H_STATE] == ACTIVE)
        start, length = HT[H_VAL][blocks], HT[H_RANK][blocks]
        if len(start) and (start.min() < 1 or length.min() < 0 or (start + length).max() > free):
            raise bad("pair blocks")
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return {**self.store.stats(window_start), "pair_capacity": int(self.pairs.shape[1])}
