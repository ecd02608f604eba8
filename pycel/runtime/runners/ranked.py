"""The ranked runner: LAST and NEXT over the determinized automaton.

Per (state, key) the loop (:func:`pycel.jit.last.run_batch_last`) keeps one *best set*
of runs, ranked by the strategy: LAST prefers the latest positions, NEXT the earliest
continuation. NEXT's ranks live in an order-maintenance list (:mod:`pycel.jit.order`)
whose entries are the current best sets only. docs/strategies.md has the semantics.

Example::

    runner = RankedRunner(plan)            # plan.strategy in ("last", "next")
    raw = runner.advance(prepared)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pycel.jit.last import run_batch_last
from pycel.jit.order import O_NEXT, O_PREV, new_order
from pycel.jit.store import H_MS, H_RANK, H_STATE, H_VAL
from pycel.jit.structs import ints
from pycel.plan.determinize import DfaTables
from pycel.plan.planner import Plan
from pycel.runtime.snapshot.plan import Json, as_dict
from pycel.runtime.snapshot.tables import Reader, Writer, in_range

from .base import PreparedBatch, RawMatches, loop_input, power_of_two_columns
from .sequential import SequentialRunner


class RankedRunner(SequentialRunner):
    """LAST/NEXT: the sequential runner's tables and store, one ranked best set per
    (state, key), and NEXT's order list."""

    looks_before_window = True  # a best set is chosen among runs the window may drop

    @property
    def prunes_post_filters(self) -> bool:
        return False  # post-filters are refused under LAST/NEXT without a window

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        self.order = new_order()

    def _run(self, batch: PreparedBatch, class_ids: Any, t: DfaTables) -> RawMatches:
        next_mode = self.plan.strategy == "next"
        step = run_batch_last(
            self.store.nodes(), ints(self.order), loop_input(batch, class_ids), self._arrays(t), next_mode
        )
        self.store.keep(step.store)
        self.order = step.order
        return RawMatches.of(step.out)

    def save(self, w: Writer) -> Json:
        return {**super().save(w), "order": w.add(self.order, np.int64)}

    @classmethod
    def load(cls, plan: Plan, r: Reader, x: Json) -> RankedRunner:
        runner = super().load(plan, r, x)
        assert isinstance(runner, RankedRunner)
        runner.order = r.get(as_dict(x, "runner").get("order"), "order list", ndim=2)
        capacity = power_of_two_columns(runner.order, 4, "the order list")
        in_range(runner.order[O_NEXT], 0, capacity, "order links")
        in_range(runner.order[O_PREV], 0, capacity, "order links")
        if plan.strategy == "next":
            # The ranks the loop reads: of entries holding a best set (or a max-start that
            # would make the loop extend one). An emptied entry keeps whatever its rank row
            # held (EMPTY where ht_slot made it), which the loop never reads.
            HT = runner.store.HT
            held = (HT[H_STATE] >= 0) & ((HT[H_VAL] >= 0) | (HT[H_MS] >= 0))  # (EMPTY < 0)
            in_range(HT[H_RANK][held], -1, capacity, "order entries")
        return runner
