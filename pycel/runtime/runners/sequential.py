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

import threading
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from pycel.errors import UnsupportedError
from pycel.jit.arrays import Ints
from pycel.jit.ordered import run_batch_ordered
from pycel.jit.residual import Residual
from pycel.jit.runtime import run_batch
from pycel.jit.structs import DfaArrays, flags, ints
from pycel.jit.treap import TREAP_ROWS
from pycel.plan.determinize import Dfa, DfaTables
from pycel.plan.planner import Plan
from pycel.plan.probes import prefix_probes
from pycel.runtime.predicates import ClassTable
from pycel.runtime.registers import ordered_tables
from pycel.runtime.snapshot.plan import Json, as_dict
from pycel.runtime.snapshot.tables import Reader, Writer, dfa_in, dfa_out

from .base import PreparedBatch, RawMatches, Store, loop_input
from .classes import load_classes, save_classes


def dfa_arrays(t: DfaTables, contiguous: bool) -> DfaArrays:
    """The determinized automaton's tables with every field of its fixed type."""
    return DfaArrays(
        ints(t.ptr), ints(t.src), ints(t.label), ints(t.dst), flags(t.final), flags(t.extends),
        ints(t.label_masks), ints(t.aptr), ints(t.asrc), ints(t.alabel), ints(t.adst),
        flags(t.extends_gap), bool(contiguous), ints(t.bptr), ints(t.bsrc), ints(t.bdst),
    )  # fmt: skip


class Expandable(Protocol):
    """An automaton whose tables grow one predicate class at a time (Dfa, MaxDfa)."""

    def expand(self, class_bits: list[int]) -> None: ...


A = TypeVar("A", bound=Expandable)


class SharedAutomaton(Generic[A]):
    """A lazily expanded automaton and the class numbering its tables are indexed by: one
    per plan per process (:meth:`~pycel.plan.planner.Plan.shared_tables`), read by every
    stream of the plan.

    States, label sets and classes are only ever appended, so the tables a stream took
    keep their numbering while another stream expands them; ``lock`` makes classifying,
    expanding and taking the tables one step (streams may run in several threads), and
    a snapshot's view of them consistent. An expansion that fails (the automaton grew
    too large, or was interrupted) leaves the automaton incomplete: its error is raised
    again for every later use, so no stream reads those tables.
    """

    def __init__(self, automaton: A, classes: ClassTable | None = None) -> None:
        self.automaton = automaton
        self.classes = ClassTable() if classes is None else classes
        self.lock = threading.RLock()
        self.failure: str | None = None

    def classify(self, bits: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        """Each event's class id (new bit-vectors get the next ids), with the automaton
        expanded for every class. Hold ``lock`` until the tables are taken."""
        with self.lock:
            if self.failure is not None:
                raise UnsupportedError(self.failure)
            class_ids = self.classes.classify(bits)
            try:
                self.automaton.expand(self.classes.bits)
            except UnsupportedError as e:
                self.failure = str(e)
                raise
            except BaseException as e:  # e.g. KeyboardInterrupt: the tables are half built
                what = type(e).__name__
                self.failure = f"expanding this query's automaton was interrupted ({what}): compile it again"
                raise
            return class_ids

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedAutomaton[A]:
        return self  # a copy of a stream's state (Stream._state_copy) still shares them

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.RLock()


def shared_dfa(plan: Plan) -> SharedAutomaton[Dfa]:
    """The plan's determinized automaton, shared by all its streams in this process."""
    return plan.shared_tables().get("dfa", lambda: SharedAutomaton(Dfa(plan.nfa)))


def _heap_rows(plan: Plan) -> int:
    """Rows of the heap arena: treap nodes need two more (pycel.jit.treap)."""
    return TREAP_ROWS if ordered_runs(plan) else 6


def ordered_runs(plan: Plan) -> bool:
    """Whether some state keeps its runs ordered by a register (edge conditions, or a run
    order for the residual comparisons): the ordered loop (pycel.jit.ordered) runs it."""
    return bool(plan.nfa.conditions or plan.nfa.orderings)


class SequentialRunner:
    """ALL/ANY/STRICT: one run per valuation, all of them kept (see the module docstring)."""

    looks_before_window = False
    #: Set by the windowed runner: each end writes only the outputs this strategy ("last"
    #: or "next") keeps among those that fit the window (pycel.jit.choose); "": all.
    choose = ""

    @property
    def prunes_post_filters(self) -> bool:
        """The ALL loop and the ordered loop (comparisons on the automaton) both prune."""
        return True

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.shared = shared_dfa(plan)
        self.store = Store.new(_heap_rows(plan))
        self._arrays_of: DfaTables | None = None
        self._probes_for: tuple[DfaTables | None, bytes, Ints | None] = (None, b"", None)

    @property
    def dfa(self) -> Dfa:
        """The determinized automaton (shared by the plan's streams)."""
        return self.shared.automaton

    @property
    def classes(self) -> ClassTable:
        """The class numbering of the automaton's tables (shared with it)."""
        return self.shared.classes

    def advance(self, batch: PreparedBatch) -> RawMatches:
        with self.shared.lock:
            class_ids = self.shared.classify(batch.bits)
            t = self.dfa.tables()
        return self._run(batch, class_ids, t)

    def _run(self, batch: PreparedBatch, class_ids: Any, t: DfaTables) -> RawMatches:
        inputs = (self.store.nodes(), loop_input(batch, class_ids), self._arrays(t))
        if ordered_runs(self.plan):  # runs ordered by their registers (pycel.jit.ordered)
            ordered = ordered_tables(self.plan, t, batch.batch)
            step = run_batch_ordered(*inputs, ordered, self._probing(batch.residual, t), self.choose)
        else:
            step = run_batch(*inputs, batch.residual, self.choose)
        self.store.keep(step.store)
        return RawMatches.of(step.out)

    def _probing(self, res: Residual | None, t: DfaTables) -> Residual | None:
        """``res`` with the middle runs the enumerator may probe for emptiness
        (pycel.plan.probes): not where it consumes, chooses among an end's outputs or
        requires contiguity, which change or bypass the indexes the probes read."""
        if res is None or self.choose or self.plan.consume != 0 or self.dfa.contiguous:
            return res
        # Computed again only when the tables grew (a new object) or the conjuncts differ.
        tables, conjuncts, probes = self._probes_for
        asked = res.key_var.tobytes() + res.variables.tobytes()
        if tables is not t or conjuncts != asked or probes is None:
            probes = prefix_probes(t, res.key_var, res.variables)
            self._probes_for = (t, asked, probes)
        return res._replace(key_probe=probes)

    def _arrays(self, t: DfaTables) -> DfaArrays:
        """The tables as the loops read them (shared with the ranked runner's loop),
        converted again only when the automaton grew."""
        if self._arrays_of is not t:
            self._arrays_of, self._loop_tables = t, dfa_arrays(t, self.dfa.contiguous)
        return self._loop_tables

    def forget(self, window_start: int) -> None:
        pass  # the store recycles what left the window itself

    def save(self, w: Writer) -> Json:
        with self.shared.lock:  # classes and tables as of one moment
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
        # The snapshot's tables and numbering, the restored stream's own (its plan, decoded
        # from the snapshot, is a new one too).
        dfa = dfa_in(r, x.get("dfa"), plan.nfa)
        runner.shared = SharedAutomaton(dfa, load_classes(r, x.get("classes"), dfa.class_bits))
        runner.store = Store.load(r, x.get("store"), 4, len(runner.dfa.labels.sets), _heap_rows(plan))
        runner._arrays_of = None
        runner._probes_for = (None, b"", None)
        return runner

    def stats(self, window_start: int) -> dict[str, int]:
        return {**self.store.stats(window_start), "pair_capacity": 0}
