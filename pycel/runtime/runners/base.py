"""What every runner shares: the prepared batch it reads, the raw matches it returns, the
node store and index H it keeps, and the interface a :class:`~pycel.runtime.stream.Stream`
calls.

A *runner* evaluates one automaton family (see :mod:`pycel.plan.planner`) over a stream:
it owns its state (the node store, H, its tables) and snapshots it. The stream does the
work every family needs once per batch (ingestion, atom bits, run keys, window starts,
post-filters, global positions) and hands it over as a :class:`PreparedBatch`.

Example::

    runner = new_runner(plan)                 # pycel.runtime.runners
    raw = runner.advance(prepared)            # RawMatches, positions local to the stream
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch
from pycel.jit.residual import Residual
from pycel.jit.runtime import live_counts
from pycel.jit.store import (
    C_E_NEXT,
    C_MAX_DEPTH,
    C_U_NEXT,
    E_CHILD,
    E_LABEL,
    EMPTY,
    H_ROWS,
    H_STATE,
    N_COUNTERS,
    U_CONTENT,
    U_LEFT,
    U_RIGHT,
    new_store,
)
from pycel.jit.structs import BatchInput, NodeStore, RawOutput, batch_input, ints
from pycel.runtime.snapshot.plan import Json, as_list, bad
from pycel.runtime.snapshot.tables import Reader, Writer, in_range

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
_MAX_DEPTH = 4096  # far above any heap depth (logarithmic in the live runs)


@attrs.frozen
class PreparedBatch:
    """One batch as every runner reads it (positions local to the stream).

    ``bits[j]``: which atoms' unary predicates event j satisfies (bit k for atom k);
    ``keys``/``key_valid``: its run key (partition and join values) and whether it has
    one; ``window_starts[j]``: the first position inside its window. The clauses are as
    the loops apply them: with post-filters, every variable and no limit (they act after
    the filter).
    """

    batch: EventBatch
    offset: int
    bits: Ints
    keys: Ints
    key_valid: Mask
    window_starts: Ints
    projection_mask: int
    limit: int
    consume: int
    #: The post-filters as the enumerator prunes with them (pycel.jit.residual), if any.
    residual: Residual | None = None


@attrs.frozen
class RawMatches:
    """Matches as the enumerator writes them: match k spans ``starts[k]..ends[k]`` and
    binds ``var_ids[offsets[k]:offsets[k+1]]`` at ``positions[...]``."""

    starts: Ints
    ends: Ints
    offsets: Ints
    var_ids: Any
    positions: Ints

    @classmethod
    def of(cls, out: RawOutput) -> RawMatches:
        """From a loop's output (``out.se``: starts and ends interleaved)."""
        return cls(out.se[0::2].copy(), out.se[1::2].copy(), out.offsets, out.var_ids, out.positions)


def loop_input(batch: PreparedBatch, classes: Any) -> BatchInput:
    """The batch as the loops over a determinized automaton read it (``classes``: each
    event's class id)."""
    return batch_input(
        classes, batch.keys, batch.key_valid, batch.window_starts,
        batch.offset, batch.projection_mask, batch.limit, batch.consume,
    )  # fmt: skip


class Runner(Protocol):
    """One automaton family's evaluation state. Created from a plan by
    :func:`pycel.runtime.runners.new_runner`, restored by ``load``."""

    #: Whether its choices look at runs that left the window (LAST, NEXT, MAX): the
    #: stream then keeps the ids of key tuples outside the window.
    looks_before_window: bool

    @property
    def prunes_post_filters(self) -> bool:
        """Whether its loop prunes with the post-filters' programs
        (``PreparedBatch.residual``): the stream builds them only then."""
        ...

    def advance(self, batch: PreparedBatch) -> RawMatches:
        """Run the batch; return the matches that end in it."""
        ...

    def forget(self, window_start: int) -> None:
        """Drop bookkeeping for what left every window (before ``window_start``)."""
        ...

    def save(self, w: Writer) -> Json:
        """The runner's state for a snapshot (arrays go to ``w``)."""
        ...

    def stats(self, window_start: int) -> dict[str, int]:
        """Store sizes (see :meth:`pycel.runtime.stream.Stream.stats`)."""
        ...


@attrs.define
class Store:
    """The node store and H (pycel/jit/store.py): extend nodes ``E``, heap nodes ``U``,
    the hash index ``HT`` and the counters ``ctr``. Every family keeps one."""

    E: Ints
    U: Ints
    HT: Ints
    ctr: Ints

    @classmethod
    def new(cls, heap_rows: int = 6) -> Store:
        """An empty store (``heap_rows``: 8 where the heap arena also holds the ordered
        index's nodes, pycel.jit.treap, with 4,096 slots: the ordered loop reserves room
        for a treap split per condition and transition at each event, which would double
        a 1,024-slot arena at the first event of most queries)."""
        E, U, HT, ctr = new_store()
        if heap_rows != U.shape[0]:
            U = np.full((heap_rows, 4 * U.shape[1]), -1, dtype=np.int64)
        return cls(E, U, HT, ctr)

    def nodes(self) -> NodeStore:
        """The arrays as the loops take them (:class:`pycel.jit.structs.NodeStore`)."""
        return NodeStore(ints(self.E), ints(self.U), ints(self.HT), ints(self.ctr))

    def keep(self, nodes: NodeStore) -> None:
        """Take the store a loop returned (its arrays may have grown)."""
        self.E, self.U, self.HT, self.ctr = nodes

    def save(self, w: Writer) -> Json:
        return [w.add(a, np.int64) for a in (self.E, self.U, self.HT, self.ctr)]

    @classmethod
    def load(cls, r: Reader, x: Json, extend_rows: int, labels: int, heap_rows: int = 6) -> Store:
        """The store of a snapshot, checked so that no loop reads out of bounds
        (``extend_rows``: rows of E; ``labels``: the number of label ids; ``heap_rows``:
        rows of U)."""
        refs = as_list(x, "store", 4)
        E, U, HT = (r.get(refs[k], "store", ndim=2) for k in range(3))
        store = cls(E, U, HT, r.get(refs[3], "counters"))
        power_of_two_columns(E, extend_rows, "the extend arena")
        power_of_two_columns(U, heap_rows, "the heap arena")
        power_of_two_columns(HT, H_ROWS, "the index H")
        ctr = store.ctr
        if ctr.shape != (N_COUNTERS,) or min(ctr[C_E_NEXT], ctr[C_U_NEXT]) < 0:
            raise bad("counters")
        in_range(ctr[C_MAX_DEPTH : C_MAX_DEPTH + 1], 0, _MAX_DEPTH, "heap depth")
        in_range(E[E_LABEL], -1, labels, "label ids")
        # Node ids count up from 0 (-1: none): one beyond the counters was never made. (Ids
        # are masked into their arena, so such a one would read some other node.)
        e_next, u_next = int(ctr[C_E_NEXT]), int(ctr[C_U_NEXT])
        in_range(E[E_CHILD], -1, u_next, "extend nodes' children")
        in_range(U[U_CONTENT], -1, e_next, "heap nodes' contents")
        in_range(U[U_LEFT], -1, u_next, "heap nodes' left children")
        in_range(U[U_RIGHT], -1, u_next, "heap nodes' right children")
        if (HT[H_STATE] != EMPTY).all():
            raise bad("the index H has no free slot")
        return store

    def stats(self, window_start: int) -> dict[str, int]:
        live_e, live_u, h = live_counts(self.E, self.U, self.HT, self.ctr, window_start)
        return {
            "live_extend_nodes": live_e,
            "live_heap_nodes": live_u,
            "h_entries": h,
            "extend_capacity": int(self.E.shape[1]),
            "heap_capacity": int(self.U.shape[1]),
            "h_capacity": int(self.HT.shape[1]),
            "max_heap_depth": int(self.ctr[C_MAX_DEPTH]),
        }


def power_of_two_columns(a: Ints, rows: int, what: str) -> int:
    """The column count of a snapshot's arena ``a`` (a power of two), checked with its
    row count; DataError otherwise."""
    cap = a.shape[1]
    if a.shape[0] != rows or cap < 1 or cap & (cap - 1):
        raise bad(f"{what} has shape {a.shape}")
    return int(cap)
