"""The named structures the per-event loops take and return.

Every loop (:func:`pycel.jit.runtime.run_batch`, :func:`pycel.jit.last.run_batch_last`,
:func:`pycel.jit.maximal.run_batch_max`, :func:`pycel.jit.pcea.run_batch_hcq`) reads
its state, the batch and the automaton's tables as ``typing.NamedTuple`` s of arrays
(Numba types them as heterogeneous named tuples), and the :class:`Buffers` it writes
into, and returns the new state and the raw matches as named tuples too. (Each of
these Python functions runs the compiled variant of its loop that has the paths the
batch uses; the variants take the same structures.)

Numba compiles a function once per argument *type*, and a named tuple's type is the
types of all its fields. So every field has one fixed type: C-contiguous int64 (or
bool) arrays and ``np.int64`` scalars; the ``*_input``/``*_tables`` helpers below
convert what they are given, and mypy checks the scalar fields (a Python ``int`` where
an ``np.int64`` is expected is an error). Each loop variant then compiles once per
process (and is cached on disk), whatever the query.

Example::

    store = new_node_store()
    batch = batch_input(class_ids, keys, key_valid, window_starts, offset=0,
                        projection_mask=-1, limit=-1, consume=0)
    step = run_batch(store, batch, tables)   # Step(store=NodeStore, out=RawOutput)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .arrays import Flags, Int32s, Ints
from .store import new_store


class NodeStore(NamedTuple):
    """The node store (:mod:`pycel.jit.store`): extend nodes, heap nodes, the index H and
    the counters."""

    E: Ints
    U: Ints
    HT: Ints
    ctr: Ints


class RawOutput(NamedTuple):
    """The matches a loop found: match k spans ``se[2k]..se[2k+1]`` and binds
    ``var_ids[offsets[k]:offsets[k+1]]`` at ``positions[...]`` (positions local to the
    stream)."""

    se: Ints
    offsets: Ints
    var_ids: Int32s
    positions: Ints


class BatchInput(NamedTuple):
    """One batch for the loops over a determinized automaton: each event's class id, run
    key (valid where ``key_valid``) and window start; the position of its first event;
    the clauses as the loop applies them (variables kept as bits, matches per end or -1,
    consumption 0 none / 1 any / 2 partition)."""

    classes: Ints
    keys: Ints
    key_valid: Flags
    window_starts: Ints
    offset: np.int64
    projection_mask: np.int64
    limit: np.int64
    consume: np.int64


class HcqInput(NamedTuple):
    """One batch for the parallelized automaton: each event's atom bits, its key under
    every key combo (rows) and whether it has one, whether it holds each set of attribute
    equalities of a merged read; then as :class:`BatchInput` (no consumption)."""

    bits: Ints
    keys: Ints
    key_valid: Flags
    same_ok: Flags
    window_starts: Ints
    offset: np.int64
    projection_mask: np.int64
    limit: np.int64


class DfaArrays(NamedTuple):
    """:class:`pycel.plan.determinize.DfaTables` as the loops read it, plus whether the
    adjacent transitions (``aptr``…) are in use."""

    ptr: Ints
    src: Ints
    label: Ints
    dst: Ints
    final: Flags
    extends: Flags
    label_masks: Ints
    aptr: Ints
    asrc: Ints
    alabel: Ints
    adst: Ints
    extends_gap: Flags
    contiguous: bool
    # Absence: class c blocks the runs of state bsrc[i] into bdst[i] (-1: they end), for i
    # in bptr[c]:bptr[c+1].
    bptr: Ints
    bsrc: Ints
    bdst: Ints


class MaxArrays(NamedTuple):
    """:class:`pycel.plan.maximal.MaxTables` as the MAX loop reads it."""

    mark_ptr: Ints
    mark_label: Ints
    mark_dst: Ints
    mark_out: Flags
    skip_dst: Ints
    initial: Flags
    inert: Flags
    n_pairs: np.int64
    label_masks: Ints


class HcqArrays(NamedTuple):
    """The parallelized automaton's transitions (:func:`pycel.plan.hcq.transition_arrays`):
    atoms read, target, final, equality set, children and their key combos, and each
    transition's label set as variable bits."""

    mask: Ints
    dst: Ints
    final: Ints
    same: Ints
    nkids: Ints
    kids: Ints
    kid_combo: Ints
    dst_combo: Ints
    label_masks: Ints


class Buffers(NamedTuple):
    """What a loop writes into, allocated by the caller (so that no loop compiles the
    allocations; they grow inside the loop): the output arrays (start/end pairs,
    offsets, variables, positions), the enumerator's path and stack, its set of this
    end's matches (no columns when nothing is projected away) and the most variables one
    label set binds (entries a path node may write)."""

    se: Ints
    offsets: Ints
    var_ids: Int32s
    positions: Ints
    path: Ints
    stack_h: Ints
    stack_d: Ints
    seen: Ints
    max_labels: np.int64


class Step(NamedTuple):
    """What :func:`~pycel.jit.runtime.run_batch` and :func:`~pycel.jit.pcea.run_batch_hcq`
    return: the (possibly grown) store and the matches."""

    store: NodeStore
    out: RawOutput


class RankedStep(NamedTuple):
    """What :func:`~pycel.jit.last.run_batch_last` returns: also NEXT's order list."""

    store: NodeStore
    order: Ints
    out: RawOutput


class MaxStep(NamedTuple):
    """What :func:`~pycel.jit.maximal.run_batch_max` returns: also the pair arena."""

    store: NodeStore
    pairs: Ints
    out: RawOutput


def ints(a: Any) -> Ints:
    """``a`` as a C-contiguous int64 array (no copy if it is one already)."""
    return np.ascontiguousarray(a, dtype=np.int64)


def flags(a: Any) -> Flags:
    """``a`` as a C-contiguous bool array (no copy if it is one already)."""
    return np.ascontiguousarray(a, dtype=np.bool_)


def new_node_store(capacity: int = 1024) -> NodeStore:
    """An empty store (see :func:`pycel.jit.store.new_store`)."""
    return NodeStore(*new_store(capacity))


def batch_input(
    classes: Any, keys: Any, key_valid: Any, window_starts: Any,
    offset: int, projection_mask: int, limit: int, consume: int,
) -> BatchInput:  # fmt: skip
    """A :class:`BatchInput` with every field of its fixed type."""
    return BatchInput(
        ints(classes), ints(keys), flags(key_valid), ints(window_starts),
        np.int64(offset), np.int64(projection_mask), np.int64(limit), np.int64(consume),
    )  # fmt: skip


def hcq_input(
    bits: Any, keys: Any, key_valid: Any, same_ok: Any, window_starts: Any,
    offset: int, projection_mask: int, limit: int,
) -> HcqInput:  # fmt: skip
    """An :class:`HcqInput` with every field of its fixed type."""
    return HcqInput(
        ints(bits), ints(keys), flags(key_valid), flags(same_ok), ints(window_starts),
        np.int64(offset), np.int64(projection_mask), np.int64(limit),
    )  # fmt: skip
