"""Codecs of the stream's table-like state for :mod:`pycel.snapshot`: the lazily built
automata (same state numbering after a restore), the class table, key-tuple ids and the
post-filter tail, as arrays plus small JSON values.

Example::

    w = Writer(); ref = dfa_out(w, stream.dfa)           # JSON, arrays in w.arrays
    dfa = dfa_in(Reader(arrays), ref, query.nfa)         # DataError if inconsistent
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pycel.data.matches import Matches
from pycel.plan.automaton import Nfa, token, token_atom
from pycel.plan.determinize import START, Dfa, LabelSets
from pycel.plan.maximal import MaxDfa
from pycel.runtime.horizon import Blocking, Horizon, Lookback
from pycel.runtime.keys import TupleIds
from pycel.runtime.postfilter import Tail

from .plan import Json, as_dict, as_int, as_list, as_number, bad, strs

#: Little-endian numeric and bool dtypes: the only arrays a snapshot holds.
DTYPES = frozenset(["<i8", "<i4", "<i2", "|i1", "<u8", "<u4", "<u2", "|u1", "<f8", "<f4", "|b1"])
_MISSING = -2  # MAX: a (class, pair) not expanded yet

Ints = npt.NDArray[np.int64]


class Writer:
    """The arrays of a snapshot being written; :meth:`add` returns an array's index."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray[Any, Any]] = []

    def add(self, a: npt.ArrayLike, dtype: Any = None) -> int:
        """Store ``a`` (as ``dtype``, if given) and return its index for the JSON header."""
        arr = np.asarray(a, dtype=dtype)
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        if arr.dtype.str not in DTYPES:
            raise TypeError(f"snapshot: arrays of dtype {arr.dtype} have no encoding")
        self.arrays.append(arr)
        return len(self.arrays) - 1


class Reader:
    """The arrays of a snapshot being read; :meth:`get` checks each one it returns."""

    def __init__(self, arrays: list[np.ndarray[Any, Any]]) -> None:
        self.arrays = arrays

    def get(self, ref: Json, what: str, dtype: str = "<i8", ndim: int = 1) -> Any:
        """The array ``ref`` points to, checked to have ``dtype`` and ``ndim`` (else DataError)."""
        a = self.arrays[as_int(ref, what, 0, len(self.arrays))]
        if a.dtype.str != dtype or a.ndim != ndim:
            raise bad(f"{what} is a {a.ndim}-d {a.dtype} array, expected {ndim}-d {dtype}")
        return a


def _sets_out(w: Writer, sets: list[frozenset[int]]) -> list[int]:
    lengths = [len(s) for s in sets]
    flat = [v for s in sets for v in sorted(s)]
    return [w.add(np.cumsum([0, *lengths]), np.int64), w.add(flat, np.int64)]


def _sets_in(r: Reader, ref: Json, what: str, lo: int, hi: int) -> list[frozenset[int]]:
    ptr_ref, flat_ref = as_list(ref, what, 2)
    ptr, flat = r.get(ptr_ref, what), r.get(flat_ref, what)
    if not len(ptr) or ptr[0] != 0 or (np.diff(ptr) < 0).any() or ptr[-1] != len(flat):
        raise bad(f"{what}: bad offsets")
    if len(flat) and (flat.min() < lo or flat.max() >= hi):
        raise bad(f"{what}: a state outside [{lo}, {hi})")
    values = flat.tolist()
    return [frozenset(values[a:b]) for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True)]


def _rows_out(w: Writer, per_class: Sequence[Sequence[tuple[int, ...]]], width: int = 3) -> list[int]:
    flat = [m for ms in per_class for m in ms]
    ptr = np.cumsum([0, *(len(m) for m in per_class)])
    return [w.add(ptr, np.int64), w.add(np.array(flat, dtype=np.int64).reshape(-1, width))]


def _rows_in(r: Reader, ref: Json, what: str, classes: int, width: int = 3) -> tuple[Ints, Ints]:
    ptr_ref, rows_ref = as_list(ref, what, 2)
    ptr, rows = r.get(ptr_ref, what), r.get(rows_ref, what, ndim=2)
    if len(ptr) != classes + 1 or ptr[0] != 0 or (np.diff(ptr) < 0).any() or ptr[-1] != len(rows):
        raise bad(f"{what}: bad offsets")
    if width == 4 and rows.shape[1] == 3:  # written before edge conditions: outcome 0
        rows = np.concatenate([rows, np.zeros((len(rows), 1), dtype=np.int64)], axis=1)
    if rows.shape[1] != width:
        raise bad(f"{what}: rows of {rows.shape[1]} values")
    return ptr, rows


def in_range(a: Ints, lo: int, hi: int, what: str) -> None:
    """Raise DataError (naming ``what``) unless every value of ``a`` is in [lo, hi)."""
    if len(a) and (a.min() < lo or a.max() >= hi):
        raise bad(f"{what} outside [{lo}, {hi})")


def _labels(x: Json, variables: tuple[str, ...]) -> LabelSets:
    labels = LabelSets(variables)
    for item in as_list(x, "label sets"):
        labels.id(frozenset(strs(item, "label set")))
    if len(labels.sets) != len(as_list(x, "label sets")) or not set().union(*labels.sets) <= set(variables):
        raise bad("label sets repeat or name unknown variables")
    return labels


def dfa_out(w: Writer, d: Dfa) -> Json:
    """The determinized automaton's states and transition tables as JSON and arrays."""
    return {
        "states": _sets_out(w, d.states),
        "labels": [sorted(s) for s in d.labels.sets],
        "class_bits": w.add(d.class_bits, np.int64),
        "moves": _rows_out(w, d.moves, 4),
        "adj_moves": _rows_out(w, d.adj_moves, 4),
    }


def dfa_in(r: Reader, x: Json, nfa: Nfa) -> Dfa:
    """The automaton :func:`dfa_out` wrote, checked against ``nfa`` (states, atoms, labels)."""
    x = as_dict(x, "automaton tables")
    d = Dfa(nfa)
    # A state's tokens are atoms, each with the guards blocked since the run's last event.
    d.states = _sets_in(r, x.get("states"), "states", START, token(0, 1 << len(nfa.guard_atoms)))
    d.state_ids = {s: k for k, s in enumerate(d.states)}
    if (
        not d.states
        or d.states[0] != frozenset([START])
        or len(d.state_ids) != len(d.states)
        or any(START in s for s in d.states[1:])
        or any(token_atom(t) >= len(nfa.atoms) for s in d.states for t in s)
    ):
        raise bad("deterministic states")
    d.labels = _labels(x.get("labels"), nfa.variables)
    d.class_bits = r.get(x.get("class_bits"), "class bits").tolist()
    for key in ("moves", "adj_moves"):
        ptr, rows = _rows_in(r, x.get(key), key, len(d.class_bits), 4)
        outcomes = 1 << max([len(d.state_conditions(s)) for s in range(1, len(d.states))] or [0])
        for col, hi in ((0, len(d.states)), (1, len(d.labels.sets)), (2, len(d.states)), (3, outcomes)):
            in_range(rows[:, col], 0, hi, key)
        flat = [tuple(m) for m in rows.tolist()]
        setattr(d, key, [flat[a:b] for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True)])
    # Absence: which states a class blocks follows from the states, so it is not stored.
    known = len(d.states)
    d.blocks = [[m for sid in range(known) for m in d.block(sid, bits)] for bits in d.class_bits]
    if len(d.states) != known:
        raise bad("deterministic states (a blocked state is missing)")
    return d


def max_out(w: Writer, m: MaxDfa) -> Json:
    """The MAX pair automaton's tables as JSON and arrays."""
    n = len(m.pairs)
    marks = [m.marks[c].get(p, []) for c in range(len(m.class_bits)) for p in range(n)]
    skips = [m.skips[c].get(p, _MISSING) for c in range(len(m.class_bits)) for p in range(n)]
    rows = [[(label, dst, int(out)) for label, dst, out in ms] for ms in marks]
    return {
        "pairs": [_sets_out(w, [p[k] for p in m.pairs]) for k in range(3)],
        "labels": [sorted(s) for s in m.labels.sets],
        "class_bits": w.add(m.class_bits, np.int64),
        "marks": _rows_out(w, rows),
        "skips": w.add(skips, np.int64),
    }


def max_in(r: Reader, x: Json, nfa: Nfa) -> MaxDfa:
    """The pair automaton :func:`max_out` wrote, checked against ``nfa``."""
    x = as_dict(x, "pair automaton")
    m = MaxDfa(nfa)
    # run states: START, or a token (atom and blocked guards) and the freshness bit
    hi = 2 * token(0, 1 << len(nfa.guard_atoms)) if nfa.guard_atoms else 2 * len(nfa.atoms)
    t, e, u = (_sets_in(r, ref, "pairs", START, hi) for ref in as_list(x.get("pairs"), "pairs", 3))
    pairs = list(zip(t, e, u, strict=True))
    if not pairs or pairs[0] != m.pairs[0]:
        raise bad("pair states")
    m.pairs, m.pair_ids = pairs, {p: k for k, p in enumerate(pairs)}
    m.labels = _labels(x.get("labels"), nfa.variables)
    m.class_bits = r.get(x.get("class_bits"), "class bits").tolist()
    n, classes = len(pairs), len(m.class_bits)
    ptr, rows = _rows_in(r, x.get("marks"), "marks", classes * n)
    skips = r.get(x.get("skips"), "skips")
    in_range(rows[:, 0], 0, len(m.labels.sets), "mark labels")
    in_range(rows[:, 1], -1, n, "mark targets")
    in_range(rows[:, 2], 0, 2, "mark outputs")
    in_range(skips, _MISSING, n, "skip targets")
    if len(skips) != classes * n:
        raise bad("skip table size")
    flat = [(a, b, bool(c)) for a, b, c in rows.tolist()]
    bounds, skip = ptr.tolist(), skips.tolist()
    m.marks = [
        {
            p: flat[bounds[c * n + p] : bounds[c * n + p + 1]]
            for p in range(n)
            if bounds[c * n + p + 1] > bounds[c * n + p]
        }
        for c in range(classes)
    ]
    m.skips = [{p: s for p in range(n) if (s := skip[c * n + p]) != _MISSING} for c in range(classes)]
    return m


def tuples_out(w: Writer, t: TupleIds) -> Json:
    """Key tuple ids and last-seen positions as arrays (one row per tuple)."""
    keys = list(t.ids)
    width = len(keys[0]) if keys else 0
    if any(len(k) != width for k in keys):
        raise TypeError("snapshot: key tuples of different lengths in one dictionary")
    return {
        "rows": w.add(np.array(keys, dtype=np.int64).reshape(len(keys), width)),
        "ids": w.add(list(t.ids.values()), np.int64),
        "last": w.add([t.last[k] for k in keys], np.int64),
        "next_id": t.next_id,
        "kept": t.kept,
    }


def tuples_in(r: Reader, x: Json) -> TupleIds:
    """The tuple ids :func:`tuples_out` wrote (ids unique and below the next id)."""
    x = as_dict(x, "key tuples")
    t = TupleIds()
    rows, ids, last = (
        r.get(x.get("rows"), "key tuples", ndim=2),
        r.get(x.get("ids"), "tuple ids"),
        r.get(x.get("last"), "tuples"),
    )
    t.next_id, t.kept = as_int(x.get("next_id"), "next tuple id", 0), as_int(x.get("kept"), "kept tuples", 0)
    keys = [tuple(k) for k in rows.tolist()]
    t.ids, t.last = dict(zip(keys, ids.tolist(), strict=True)), dict(zip(keys, last.tolist(), strict=True))
    if len(t.ids) != len(keys) or len(set(t.ids.values())) != len(keys):
        raise bad("key tuples repeat")
    in_range(ids, 0, t.next_id, "tuple ids")
    return t


def tail_out(w: Writer, tail: Tail) -> Json:
    """The post-filter tail's positions and columns as arrays."""
    return {
        "positions": w.add(tail.positions, np.int64),
        "values": {k: w.add(v) for k, v in tail.values.items()},
        "valid": {k: w.add(v, np.bool_) for k, v in tail.valid.items()},
    }


def tail_in(r: Reader, x: Json) -> Tail:
    """The tail :func:`tail_out` wrote, every column as long as its positions."""
    x = as_dict(x, "post-filter tail")
    positions = r.get(x.get("positions"), "tail positions")
    values = {
        k: r.arrays[as_int(v, "tail column", 0, len(r.arrays))]
        for k, v in as_dict(x.get("values"), "tail").items()
    }
    valid = {k: r.get(v, "tail validity", "|b1") for k, v in as_dict(x.get("valid"), "tail").items()}
    if values.keys() != valid.keys() or any(
        a.shape != positions.shape for a in [*values.values(), *valid.values()]
    ):
        raise bad("post-filter tail columns")
    return Tail(positions, values, valid)


def horizon_out(w: Writer, h: Horizon) -> Json:
    """The pending matches of an absence that ends the pattern, as arrays."""
    m = h.pending
    return {
        "matches": [w.add(m.starts, np.int64), w.add(m.ends, np.int64), w.add(m.offsets, np.int64),
                    w.add(m.var_ids, np.int32), w.add(m.positions, np.int64)],
        "keys": w.add(h.keys, np.int64),
        "start_times": w.add(h.start_times),
        "last_position": h.last_position,
        "last_time": h.last_time,
    }


def horizon_in(r: Reader, x: Json, empty: Horizon) -> Horizon:
    """The pending matches :func:`horizon_out` wrote, checked: a match's span of entries,
    variables and positions (inside its start..end) and one key and start time each."""
    x = as_dict(x, "horizon")
    refs = as_list(x.get("matches"), "pending matches", 5)
    starts, ends, offsets = (r.get(a, "pending matches") for a in refs[:3])
    var_ids, positions = r.get(refs[3], "pending variables", "<i4"), r.get(refs[4], "pending positions")
    keys = r.get(x.get("keys"), "pending keys")
    times = r.arrays[as_int(x.get("start_times"), "pending start times", 0, len(r.arrays))]
    if times.dtype.str not in ("<i8", "<f8") or times.ndim != 1:
        raise bad("pending start times")
    n = len(starts)
    if (
        not ends.shape == keys.shape == times.shape == (n,)
        or offsets.shape != (n + 1,)
        or offsets[0] != 0
        or np.any(np.diff(offsets) < 1)
        or offsets[-1] != len(var_ids)
        or var_ids.shape != positions.shape
        or np.any(starts > ends)
    ):
        raise bad("pending matches")
    in_range(var_ids, 0, len(empty.variables), "pending variables")
    owner = np.repeat(np.arange(n), np.diff(offsets))
    if np.any(positions < starts[owner]) or np.any(positions > ends[owner]):
        raise bad("pending positions outside their match")
    last = x.get("last_time")
    pending = Matches(starts, ends, offsets, var_ids, positions, empty.variables)
    last_position = as_int(x.get("last_position"), "last position", -1)
    last_time = None if last is None else as_number(last, "last time")
    return empty.holding(pending, keys, times, last_position, last_time)


def lookback_out(w: Writer, look: Lookback) -> Json:
    """The recent events of an absence that starts the pattern, as arrays (in stream
    order)."""
    r = look.in_stream_order()
    return {
        "positions": w.add(r.positions, np.int64),
        "keys": w.add(r.keys, np.int64),
        "times": w.add(r.times),
        "last_position": r.last_position,
        "last_time": r.last_time,
    }


def lookback_in(r: Reader, x: Json, empty: Lookback) -> Lookback:
    """The recent events :func:`lookback_out` wrote, checked: positions increasing, one
    key each, and a time each for a time window."""
    x = as_dict(x, "lookback")
    positions, keys = r.get(x.get("positions"), "recent positions"), r.get(x.get("keys"), "recent keys")
    times = r.arrays[as_int(x.get("times"), "recent times", 0, len(r.arrays))]
    n = len(positions)
    timed = empty.unit != "events"
    if (
        keys.shape != (n,)
        or times.ndim != 1
        or times.dtype.str not in ("<i8", "<f8")
        or len(times) != (n if timed else 0)
        or np.any(np.diff(positions) <= 0)
    ):
        raise bad("the recent events of an absence that starts the pattern")
    last_position, last_time = x.get("last_position"), x.get("last_time")
    recent = Blocking(
        positions,
        keys,
        times,
        None if last_position is None else as_int(last_position, "last position"),
        None if last_time is None else as_number(last_time, "last time"),
    )
    return empty.with_recent(recent)
