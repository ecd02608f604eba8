"""The sequential runner: ALL, ANY and STRICT over the determinized Glushkov automaton.

Per event, the Numba loop (:func:`pycel.jit.runtime.run_batch`) extends every run of the
event's key that a transition of the event's class continues, indexed in H by (state,
key); matches are enumerated from the union-heap nodes with output-linear delay. The
tables (:class:`pycel.plan.determinize.Dfa`) grow on demand, for the classes the data
brings.

Example::

    runner = SequentialRunner(plan)        # plan.family == "sequential"
    raw = runner.advance(prepared)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pycel.jit.runtime import run_batch
from pycel.plan.determinize import Dfa, DfaTables
from pycel.plan.planner import Plan
from pycel.runtime.predicates import ClassTable
from pycel.runtime.snapshot.plan import Json, as_dict
from pycel.runtime.snapshot.tables import Reader, Writer, dfa_in, dfa_out

from .base import PreparedBatch, RawMatches, Store
from .classes import load_classes, save_classes


class SequentialRunner:
    """ALL/ANY/STRICT: one run per valuation, all of them kept (see the module docstring)."""

    looks_before_window = False

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.classes = ClassTable()
        self.dfa = Dfa(plan.nfa)
        self.store = Store.new()

    def advance(self, batch: PreparedBatch) -> RawMatches:
        class_ids = self.classes.classify(batch.bits)
        self.dfa.expand(self.classes.bits)
        return self._run(batch, class_ids, self.dfa.tables())

    def _run(self, batch: PreparedBatch, class_ids: Any, t: DfaTables) -> RawMatches:
        s = self.store
        s.E, s.U, s.HT, se, off, var, pos = run_batch(*self._arguments(batch, class_ids, t))
        return RawMatches.of(se, off, var, pos)

    def _arguments(self, batch: PreparedBatch, class_ids: Any, t: DfaTables) -> tuple[Any, ...]:
        """The loop's arguments (shared with the ranked runner's loop)."""
        s = self.store
        return (
            s.E, s.U, s.HT, s.ctr,
            class_ids, batch.keys, batch.key_valid, batch.window_starts, np.int64(batch.offset),
            t.ptr, t.src, t.label, t.dst, t.final, t.extends, t.label_masks,
            np.int64(batch.projection_mask), np.int64(batch.limit), np.int64(batch.consume),
            t.aptr, t.asrc, t.alabel, t.adst, t.extends_gap, self.dfa.contiguous,
        )  # fmt: skip

    def forget(self, window_start: int) -> None:
        pass  # the store recycles what left the window itself

    def save(self, w: Writer) -> Json:
        return {
            "classes": save_classes(w, self.classes),
            "dfa": dfa_out(w, self.dfa),
            "store": self.store.save(w),
        }

    @classmethod
    def load(cls, plan: Plan, r: Reader, x: Json) -> SequentialRunner:
        """The runner :meth:`save` wrote, checked (DataError if not intact)."""
        x = as_dict(x, "runner")
        runner = cls.__new__(cls)
        runner.plan = plan
        runner.dfa = dfa_in(r, x.get("dfa"), plan.nfa)
        runner.classes = load_classes(r, x.get("classes"), runner.dfa.class_bits)
        runner.store = Store.load(r, x.get("store"), 4, len(runner.dfa.labels.sets))
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return {**self.store.stats(window_start), "pair_capacity": 0}
