"""Stream snapshots (pycel/runtime/snapshot/, docs/snapshots.md): data only, versioned, checksummed.

* Generated patterns of every strategy family (ALL with contiguity, negation, consumption
  and SELECT; LAST/NEXT; MAX; AND; the parallelized conjunctions; post-filters;
  partition_by; equality joins), cut anywhere: push, snapshot, restore, continue gives the
  reference's matches on the whole stream, and restoring then snapshotting gives the same
  bytes (every part of the state round-trips).
* Malicious, corrupted, truncated, foreign and older bytes: always a ``DataError``, nothing
  executed, never a silently different continuation.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import random
import struct
import subprocess
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st
from strategies import Features, cases, event_types
from test_hcq import Q0, Q1, Q2, hcq_cases
from test_joins import join_cases
from test_postfilter import post_filtered_cases

import pycel
from pycel.dsl import Consume, Limit, PartitionBy, Pattern, Select, Strategy_, Within
from pycel.language.expr import expr_key
from pycel.runtime.snapshot.plan import expr_to_json
from pycel.runtime.snapshot.state import FORMAT, MAGIC, pack, unpack

TYPES = event_types(4)


def _compile(pattern: Pattern) -> pycel.CompiledQuery:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return pycel.compile(pattern)
        except pycel.UnsupportedError:
            reject()


def _has_limit(pattern: Pattern) -> bool:
    while isinstance(pattern, (Within, PartitionBy, Select, Strategy_, Consume, Limit)):
        if isinstance(pattern, Limit):
            return True
        pattern = pattern.inner
    return False


def _resumed(query: pycel.CompiledQuery, events: list[Any], cuts: list[int]) -> set[Any]:
    """The matches of ``events`` pushed in pieces, with a snapshot and restore at every
    cut (and a check that the restored state writes the very same bytes)."""
    stream = query.stream()
    got: set[Any] = set()
    for lo, hi in zip([0, *cuts], [*cuts, len(events)], strict=True):
        got |= stream.push(events[lo:hi]).keys()
        saved = stream.snapshot()
        stream = pycel.Stream.restore(saved)
        assert stream.snapshot() == saved
    return got


def _check_cuts(pattern: Pattern, events: list[Any], data: st.DataObject) -> None:
    query = _compile(pattern)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(events)), min_size=1, max_size=3)))
    got = _resumed(query, events, cuts)
    if _has_limit(pattern):  # which n matches LIMIT keeps is the engine's order: compare to it
        assert got == query.run(events).keys()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert got == pycel.reference.evaluate(pattern, events).keys()


FAMILIES = {
    "all": Features(negation=True, contiguous=True, consume=True, select=True, limit=True),
    "last_next": Features(contiguous=True, consume=True, strategies=True, strategy_names=("last", "next")),
    "max": Features(negation=True, strategies=True, strategy_names=("max", "strict")),
    "and": Features(conjunction=True),
    "joins": Features(correlation=True),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=40)
@given(data=st.data())
def test_generated_snapshot_cuts_equal_reference(family: str, data: st.DataObject) -> None:
    pattern, events = data.draw(cases(TYPES, FAMILIES[family]))
    _check_cuts(pattern, events, data)


@settings(max_examples=40)
@given(case=hcq_cases(), data=st.data())
def test_generated_parallel_conjunction_cuts(case: tuple[Pattern, list[Any]], data: st.DataObject) -> None:
    _check_cuts(*case, data)


@settings(max_examples=40)
@given(case=join_cases(), data=st.data())
def test_generated_join_cuts(case: tuple[Pattern, list[Any]], data: st.DataObject) -> None:
    _check_cuts(*case, data)


@settings(max_examples=40)
@given(case=post_filtered_cases(), data=st.data())
def test_generated_post_filter_cuts(case: tuple[Pattern, list[Any]], data: st.DataObject) -> None:
    _check_cuts(*case, data)


def test_next_with_contiguity_and_consumption_restores_its_own_snapshot() -> None:
    """A consumed NEXT best set under contiguity leaves an H entry that holds no best set
    (and no rank in the order list): the snapshot check read its rank as a corruption."""
    a, b = pycel.alias(TYPES[0], "a"), pycel.alias(TYPES[1], "b")
    pattern = pycel.seq(a, b, contiguous=True).strategy("next").consume("any")
    events = [TYPES[0](), TYPES[1](), TYPES[0](), TYPES[1](), TYPES[1](), TYPES[0]()]
    query = pycel.compile(pattern)
    for cut in range(1, len(events)):
        got = _resumed(query, events, [cut])
        assert got == pycel.reference.evaluate(pattern, events).keys() and got


def test_sub_stream_positions_round_trip() -> None:
    """A stream fed ``positions=`` (as Spark runs one key) keeps its position map."""
    t0, t1 = TYPES[0], TYPES[1]
    a, b = pycel.alias(t0, "a"), pycel.alias(t1, "b")
    query = pycel.compile(pycel.seq(a, b).within(events=5))
    events = [t0(x=1, s="a", time=k) if k % 3 else t1(x=1, s="b", time=k) for k in range(12)]
    positions = np.arange(0, 36, 3)
    whole = query.stream().push(events, positions=positions).keys()
    first = query.stream()
    got = first.push(events[:5], positions=positions[:5]).keys()
    got |= pycel.Stream.restore(first.snapshot()).push(events[5:], positions=positions[5:]).keys()
    assert got == whole and whole


# -- bad bytes ------------------------------------------------------------------------------------
def _small(strategy: str = "all", window: bool = True) -> tuple[pycel.CompiledQuery, list[Any], bytes]:
    """A partitioned (and windowed) query with a few events pushed, and its snapshot."""
    t0, t1 = TYPES[0], TYPES[1]
    a, b = pycel.alias(t0, "a"), pycel.alias(t1, "b")
    pattern = pycel.seq(a.where(a.s != "c"), pycel.plus(b)).partition_by(t0.x)
    query = pycel.compile((pattern.within(events=6) if window else pattern).strategy(strategy))
    rng = random.Random(7)
    events = [rng.choice((t0, t1))(x=rng.randint(0, 1), s=rng.choice("abc"), time=k) for k in range(24)]
    stream = query.stream()
    stream.push(events[:12])
    return query, events, stream.snapshot()


def test_every_single_byte_corruption_is_an_error_or_the_exact_continuation() -> None:
    query, events, saved = _small()
    expected = pycel.Stream.restore(saved).push(events[12:]).keys()
    assert expected == query.run(events).keys() - query.run(events[:12]).keys() and expected
    errors = 0
    for k in range(len(saved)):
        for flip in (0xFF, 0x01):
            corrupt = bytearray(saved)
            corrupt[k] ^= flip
            try:
                resumed = pycel.Stream.restore(bytes(corrupt))
            except pycel.DataError:
                errors += 1
                continue
            assert resumed.push(events[12:]).keys() == expected, k
    assert errors == 2 * len(saved)  # the checksum covers every byte after the prefix


def test_truncated_and_extended_snapshots_are_errors() -> None:
    _, _, saved = _small()
    for n in [0, 1, 7, 8, 20, 59, 60, 61, len(saved) // 2, len(saved) - 1]:
        with pytest.raises(pycel.DataError, match="snapshot"):
            pycel.Stream.restore(saved[:n])
    with pytest.raises(pycel.DataError, match="truncated or extended"):
        pycel.Stream.restore(saved + b"\0")


@pytest.mark.parametrize(
    "foreign",
    [b"", b"hello", bytes(random.Random(3).randrange(256) for _ in range(5000)),
     pickle.dumps({"a": 1}), "not bytes", None, 42],
)
def test_foreign_data_is_an_error(foreign: Any) -> None:
    with pytest.raises(pycel.DataError):
        pycel.Stream.restore(foreign)


class _Touch:
    """Unpickling this object would create ``path`` (what a hostile pickle can do)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (open, (str(self.path), "w"))


def _forged(raw_body: bytes) -> bytes:
    """``raw_body`` in a container with the right prefix, lengths and checksum."""
    body = zlib.compress(raw_body)
    digest = hashlib.sha256(body).digest()
    return struct.pack("<8sIQQ32s", MAGIC, FORMAT, len(body), len(raw_body), digest) + body


def test_a_malicious_pickle_executes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    payload = pickle.dumps((2, _Touch(target)))
    for data in (payload, _forged(payload), _forged(struct.pack("<Q", len(payload)) + payload)):
        with pytest.raises(pycel.DataError):
            pycel.Stream.restore(data)
        assert not target.exists()


def test_an_older_pickled_snapshot_names_the_format() -> None:
    query, events, _ = _small()
    stream = query.stream()
    stream.push(events[:5])
    old = pickle.dumps((2, dict(stream.__dict__)), protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(pycel.DataError, match=f"not a pycel snapshot of format {FORMAT}.*pickle"):
        pycel.Stream.restore(old)
    newer = bytearray(stream.snapshot())
    newer[8:12] = struct.pack("<I", FORMAT + 1)
    with pytest.raises(pycel.DataError, match=f"format {FORMAT + 1}; this pycel reads format {FORMAT}"):
        pycel.Stream.restore(bytes(newer))


# -- well-formed containers with a hostile or inconsistent content ------------------------------------
def _edit(saved: bytes, edit: Any) -> bytes:
    """``saved`` with ``edit(state, arrays)`` applied, re-packed with a valid checksum."""
    state, arrays = unpack(saved)
    edit(state, arrays)
    return pack(state, arrays)


def _set_label(state: dict[str, Any], arrays: list[Any]) -> None:
    arrays[state["runner"]["store"][0]][1, 0] = 10**6  # E_LABEL of slot 0: no such label set


def _full_index(state: dict[str, Any], arrays: list[Any]) -> None:
    arrays[state["runner"]["store"][2]][0, :] = 7  # no EMPTY slot: a lookup would never stop


def _bad_order_link(state: dict[str, Any], arrays: list[Any]) -> None:
    arrays[state["runner"]["order"]][0, 3] = 1 << 40  # NEXT's order list


def _unknown_node(state: dict[str, Any], arrays: list[Any]) -> None:
    state["plan"]["nfa"]["atoms"][0][4] = [["call", "os.system", "touch x"]]


def _object_dtype(state: dict[str, Any], arrays: list[Any]) -> None:
    arrays[state["runner"]["store"][3]] = np.array([{"x": 1}] * 9, dtype=object)


def _dfa_target(state: dict[str, Any], arrays: list[Any]) -> None:
    arrays[state["runner"]["dfa"]["moves"][1]][0, 2] = 999


def _bad_attribute_type(state: dict[str, Any], arrays: list[Any]) -> None:
    state["schema"]["fields"]["x"] = "object"


def _missing_edges(state: dict[str, Any], arrays: list[Any]) -> None:
    state["plan"]["nfa"]["follow"] = []  # the atoms' edges: read by key when expanding


def _huge_offset(state: dict[str, Any], arrays: list[Any]) -> None:
    state["offset"] = 2**70  # no int64


def _huge_window(state: dict[str, Any], arrays: list[Any]) -> None:
    state["plan"]["window_size"] = 10**400  # not even a float


def _nan_window(state: dict[str, Any], arrays: list[Any]) -> None:
    state["plan"]["window_size"] = math.nan  # restored, then ValueError at the first push


def _negative_window(state: dict[str, Any], arrays: list[Any]) -> None:
    state["plan"]["window_size"] = -1


def _foreign_run_order(state: dict[str, Any], arrays: list[Any]) -> None:
    """A run order by an attribute of another occurrence than its atom's (``b.x`` on a)."""
    state["plan"]["nfa"]["orderings"] = [[0, expr_to_json(pycel.alias(TYPES[1], "b").x), "int"]]


def _child_beyond(state: dict[str, Any], arrays: list[Any]) -> None:
    """An extend node's child id past every heap node made (found by a probe: the id was
    masked into the arena, and the stream read another node)."""
    arrays[state["runner"]["store"][0]][2, 0] = 10**12


def _left_beyond(state: dict[str, Any], arrays: list[Any]) -> None:
    arrays[state["runner"]["store"][1]][1, 0] = 10**12


def test_a_forged_run_order_is_named() -> None:
    _, _, saved = _small()
    with pytest.raises(pycel.DataError, match="a run order"):
        pycel.Stream.restore(_edit(saved, _foreign_run_order))


@pytest.mark.parametrize(
    "edit",
    [_set_label, _full_index, _bad_order_link, _unknown_node, _dfa_target, _bad_attribute_type,
     _missing_edges, _huge_offset, _huge_window, _nan_window, _negative_window, _foreign_run_order,
     _child_beyond, _left_beyond],
)
def test_inconsistent_content_with_a_valid_checksum_is_an_error(edit: Any) -> None:
    # NEXT without a window keeps an order list (the ranked runner).
    query, events, saved = _small("next", window=False) if edit is _bad_order_link else _small()
    with pytest.raises(pycel.DataError, match="not a valid pycel snapshot") as caught:
        pycel.Stream.restore(_edit(saved, edit)).push(events)
    assert str(caught.value).count("not a valid pycel snapshot") == 1, str(caught.value)


def _with_raw_header(saved: bytes, edit: Any) -> bytes:
    """``saved`` with its JSON header text edited, re-packed with a valid checksum."""
    raw = zlib.decompress(saved[60:])
    (size,) = struct.unpack_from("<Q", raw)
    header = edit(raw[8 : 8 + size])
    return _forged(struct.pack("<Q", len(header)) + header + raw[8 + size :])


def test_deeply_nested_json_is_an_error() -> None:
    _, _, saved = _small()

    def deep(header: bytes) -> bytes:
        nested = b"[" * 100_000 + b"]" * 100_000
        return header.replace(b'"variables":', b'"x":' + nested + b',"variables":', 1)

    with pytest.raises(pycel.DataError, match="not a valid pycel snapshot"):
        pycel.Stream.restore(_with_raw_header(saved, deep))


def test_object_arrays_cannot_be_written_or_read() -> None:
    _, _, saved = _small()
    with pytest.raises(TypeError):
        _edit(saved, _object_dtype)  # pack writes numeric and bool arrays only
    forged = _with_raw_header(saved, lambda header: header.replace(b'"<i8"', b'"|O"', 1))
    with pytest.raises(pycel.DataError, match="array of dtype"):
        pycel.Stream.restore(_with_raw_header(saved, lambda header: header.replace(b'"<i8"', b"[]", 1)))
    with pytest.raises(pycel.DataError, match="not a valid pycel snapshot"):
        pycel.Stream.restore(forged)


def test_restoring_a_parallel_conjunction_needs_its_event_classes() -> None:
    q0, q1, q2 = pycel.alias(Q0, "q0"), pycel.alias(Q1, "q1"), pycel.alias(Q2, "q2")
    query = pycel.compile((q0 & q1 & q2).where((q0.x == q1.x) & (q1.x == q2.x) & (q1.y == q2.y)))
    assert query.hcq is not None
    saved = query.stream().snapshot()
    assert pycel.Stream.restore(saved).plan.hcq == query.hcq

    def other_fields(state: dict[str, Any], arrays: list[Any]) -> None:
        state["plan"]["hcq"]["atoms"][0][1] = {"x": "int"}

    with pytest.raises(pycel.DataError, match="define that Event class"):
        pycel.Stream.restore(_edit(saved, other_fields))


_RESTORE_ELSEWHERE = """
import sys, pycel
stream = pycel.Stream.restore(sys.stdin.buffer.read())
rows = [{"event_type": "T0" if k % 3 else "T1", "x": k % 2, "s": "abc"[k % 3], "time": k}
        for k in range(12, 24)]
print(sorted(stream.push(rows).keys()))
"""


def test_restoring_needs_no_event_classes(tmp_path: Path) -> None:
    """A fresh interpreter that never defined the event types restores and continues (the
    query and schema travel as data; dict rows are read by type name)."""
    t0, t1 = TYPES[0], TYPES[1]
    a, b = pycel.alias(t0, "a"), pycel.alias(t1, "b")
    query = pycel.compile(pycel.seq(a.where(a.s != "c"), b).within(events=4).partition_by(t0.x))
    rows = [{"event_type": "T0" if k % 3 else "T1", "x": k % 2, "s": "abc"[k % 3], "time": k}
            for k in range(24)]
    stream = query.stream()
    stream.push(rows[:12])
    expected = pycel.Stream.restore(stream.snapshot()).push(rows[12:]).keys()
    assert expected == query.run(rows).keys() - query.run(rows[:12]).keys() and expected
    done = subprocess.run(
        [sys.executable, "-c", _RESTORE_ELSEWHERE], input=stream.snapshot(), capture_output=True,
        check=True, cwd=tmp_path,
    )
    assert done.stdout.decode().strip() == repr(sorted(expected))


def test_snapshots_are_deterministic_and_restore_the_query_plan() -> None:
    query, events, saved = _small()
    stream = pycel.Stream.restore(saved)
    assert stream.snapshot() == saved
    assert pycel.Stream.restore(bytearray(saved)).snapshot() == saved
    assert pycel.Stream.restore(memoryview(saved)).snapshot() == saved
    restored = stream.plan
    for name in ("schema", "join_keys", "partition", "window_unit", "window_size", "variables", "text"):
        assert getattr(restored, name) == getattr(query, name), name
    for name in ("first", "last", "follow", "gap_follow", "variables"):
        assert getattr(restored.nfa, name) == getattr(query.nfa, name), name
    for mine, theirs in zip(restored.nfa.atoms, query.nfa.atoms, strict=True):
        assert expr_key(mine.filters) == expr_key(theirs.filters)
        assert attrs.evolve(mine, filters=()) == attrs.evolve(theirs, filters=())


def test_a_snapshot_written_before_window_absences_still_restores() -> None:
    """Snapshots of format 2 from before absences at a pattern's ends have no ``closed``,
    ``horizon`` or ``lookback`` entries; they restore as an open stream without them."""
    t0, t1 = TYPES[0], TYPES[1]
    query = pycel.compile(pycel.seq(pycel.alias(t0, "a"), pycel.alias(t1, "b")).within(events=5))
    stream = query.stream()
    stream.push([t0(x=1, s="a", time=0), t1(x=2, s="a", time=0)])

    def drop_new_entries(state: dict[str, Any], arrays: list[Any]) -> None:
        for key in ("closed", "horizon", "lookback"):
            del state[key]

    again = pycel.Stream.restore(_edit(stream.snapshot(), drop_new_entries))
    assert not again.closed and again.horizon is None and again.lookback is None
    assert [m.positions() for m in again.push([t1(x=3, s="a", time=1)])] == [(0, 2)]
