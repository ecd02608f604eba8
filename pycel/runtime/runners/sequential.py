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

from pycel.jit.runtime import run_batch
from pycel.jit.structs import DfaArrays, flags, ints
from pycel.plan.determinize import Dfa, DfaTables
from pycel.plan.planner import Plan
from pycel.runtime.predicates import ClassTable
from pycel.runtime.snapshot.plan import Json, as_dict
from pycel.runtime.snapshot.tables import Reader, Writer, dfa_in, dfa_out

from .base import PreparedBatch, RawMatches, Store, loop_input
from .classes import load_classes, save_classes


def dfa_arrays(t: DfaTables, contiguous: bool) -> DfaArrays:
    """The determinized automaton's tables with every field of its fixed type."""
    return DfaArrays(
        ints(t.ptr), ints(t.src), ints(t.label), ints(t.dst), flags(t.final), flags(t.extends),
        ints(t.label_masks), ints(t.aptr), ints(t.asrc), ints(t.alabel), ints(t.adst),
        flags(t.extends_gap), bool(contiguous),
    )  # fmt: skip


class SequentialRunner:
    """ALL/ANY/STRICT: one run per valuation, all of them kept (see the module docstring)."""

    looks_before_window = False

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.classes = ClassTable()
        self.dfa = Dfa(plan.nfa)
        self.store = Store.new()
        self._arrays_of: DfaTables | None = None

    def advance(self, batch: PreparedBatch) -> RawMatches:
        class_ids = self.classes.classify(batch.bits)
        self.dfa.expand(self.classes.bits)
        return self._run(batch, class_ids, self.dfa.tables())

    def _run(self, batch: PreparedBatch, class_ids: Any, t: DfaTables) -> RawMatches:
        step = run_batch(self.store.nodes(), loop_input(batch, class_ids), self._arrays(t))
        self.store.keep(step.store)
        return RawMatches.of(step.out)

    def _arrays(self, t: DfaTables) -> DfaArrays:
        """The tables as the loops read them (shared with the ranked runner's loop),
        converted again only when the automaton grew."""
        if self._arrays_of is not t:
            self._arrays_of, self._loop_tables = t, dfa_arrays(t, self.dfa.contiguous)
        return self._loop_tables

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
        runner._arrays_of = None
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return {**self.store.stats(window_start), "pair_capacity": 0}
