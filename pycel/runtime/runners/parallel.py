"""The parallel runner: the PCEA paper's parallelized automaton of a hierarchical
conjunction (:mod:`pycel.plan.hcq`), for an AND of single events whose equality joins
nest.

A transition reads several atoms at once and joins the runs of its children, each found
in H under its own key *combo* (a q-tree node and the attributes the event reads its
join classes from); extend nodes have up to four children and matches are enumerated as
products (:func:`pycel.jit.pcea.run_batch_hcq`). A key made of several values gets an
id per node (:class:`pycel.runtime.keys.TupleIds`), forgotten once it left every window.

Example::

    runner = ParallelRunner(plan)          # plan.family == "parallel"
    raw = runner.advance(prepared)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch
from pycel.jit.pcea import E_NCH, E_ROWS, new_arena, run_batch_hcq
from pycel.jit.structs import HcqArrays, hcq_input, ints
from pycel.plan.hcq import HcqPlan, transition_arrays
from pycel.plan.planner import Plan
from pycel.runtime.keys import TupleIds, key_values
from pycel.runtime.snapshot.plan import Json, as_dict, as_int, as_list
from pycel.runtime.snapshot.tables import Reader, Writer, in_range, tuples_in, tuples_out

from .base import PreparedBatch, RawMatches, Store

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class ParallelRunner:
    """The parallelized automaton's transitions as arrays, its store (extend nodes with
    children), and the tuple ids of its multi-attribute keys."""

    looks_before_window = False
    prunes_post_filters = False  # complete matches only

    def __init__(self, plan: Plan) -> None:
        assert plan.hcq is not None
        self.plan = plan
        self.store = Store.new()
        self.store.E = new_arena()
        self.shape_tuples: dict[int, TupleIds] = {}  # per q-tree node, its tuple keys
        self._tables(plan.hcq)

    def _tables(self, hcq: HcqPlan) -> None:
        """The transitions as flat arrays, computed once per plan (all its streams in this
        process read the same arrays; nothing writes them)."""
        plan = self.plan
        self.arrays, self.tables = plan.shared_tables().get("hcq", lambda: _hcq_arrays(plan.variables, hcq))

    def advance(self, batch: PreparedBatch) -> RawMatches:
        keys, key_valid, same_ok = self._combo_keys(batch.batch)
        step = run_batch_hcq(
            self.store.nodes(),
            hcq_input(
                batch.bits, keys, key_valid, same_ok, batch.window_starts,
                batch.offset, batch.projection_mask, batch.limit,
            ),
            self.tables,
        )  # fmt: skip
        self.store.keep(step.store)
        return RawMatches.of(step.out)

    def _combo_keys(self, batch: EventBatch) -> tuple[Ints, Mask, Mask]:
        """Per key combo, each event's key (a tuple of several values gets an id stable
        per node) and whether it has one; per set of attribute equalities of a merged
        read, whether the event holds them."""
        hcq = self.plan.hcq
        assert hcq is not None
        n = len(batch)
        dtype_of = {
            attr: dtype
            for per_atom, dtype in zip(hcq.class_attrs, hcq.class_dtypes, strict=True)
            for attr in per_atom
            if attr is not None
        }

        def column(attr: str) -> tuple[Ints, Mask]:
            if attr not in batch.columns:
                return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
            return key_values(batch.columns[attr], dtype_of[attr], batch.valid[attr], attr), batch.valid[attr]

        combos, sames = self.arrays["combos"], self.arrays["sames"]
        keys = np.zeros((max(1, len(combos)), n), dtype=np.int64)
        valid = np.ones((max(1, len(combos)), n), dtype=np.bool_)
        for k, (node, attributes) in enumerate(combos):
            cols = [column(a) for a in attributes]
            for _, present in cols:
                valid[k] &= present
            if len(cols) == 1:
                keys[k] = cols[0][0]
            elif cols:
                tuples = self.shape_tuples.setdefault(node, TupleIds())
                keys[k] = tuples.assign([c for c, _ in cols], valid[k], batch.offset)
        same_ok = np.ones((max(1, len(sames)), n), dtype=np.bool_)
        for k, pairs in enumerate(sames):
            for a, b in pairs:
                (va, pa), (vb, pb) = column(a), column(b)
                same_ok[k] &= pa & pb & (va == vb)
        return keys, valid, same_ok

    def forget(self, window_start: int) -> None:
        for tuples in self.shape_tuples.values():
            tuples.forget(window_start)

    def save(self, w: Writer) -> Json:
        return {
            "store": self.store.save(w),
            "shape_tuples": [[k, tuples_out(w, t)] for k, t in sorted(self.shape_tuples.items())],
        }

    @classmethod
    def load(cls, plan: Plan, r: Reader, x: Json) -> ParallelRunner:
        """The runner :meth:`save` wrote, checked (DataError if not intact)."""
        assert plan.hcq is not None
        x = as_dict(x, "runner")
        runner = cls.__new__(cls)
        runner.plan = plan
        runner._tables(plan.hcq)
        runner.store = Store.load(r, x.get("store"), E_ROWS, len(plan.hcq.transitions))
        in_range(runner.store.E[E_NCH], -1, 5, "child counts")
        runner.shape_tuples = {
            as_int(k, "tuple node", 0): tuples_in(r, t)
            for k, t in (as_list(p, "tuples", 2) for p in as_list(x.get("shape_tuples"), "tuples"))
        }
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return {**self.store.stats(window_start), "pair_capacity": 0}


def _hcq_arrays(variables: tuple[str, ...], hcq: HcqPlan) -> tuple[dict[str, Any], HcqArrays]:
    """The parallelized automaton's transitions: as built (``combos``, ``sames`` for the
    keys) and as the loop reads them."""
    a = transition_arrays(hcq)
    label_masks = [sum(1 << variables.index(hcq.atoms[i].var) for i in t.reads) for t in hcq.transitions]
    tables = HcqArrays(
        ints(a["mask"]), ints(a["dst"]), ints(a["final"]), ints(a["same"]), ints(a["nkids"]),
        ints(a["kids"]), ints(a["kid_combo"]), ints(a["dst_combo"]), ints(label_masks),
    )  # fmt: skip
    return a, tables
