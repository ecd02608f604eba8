"""pycel.spark: batch and streaming detection on Spark DataFrames, checked against the
in-process engine (``query.run`` on the same events in the same order).

The tests marked ``spark`` share one local Spark session (``local[2]``, two shuffle
partitions, no UI); ``pytest -m "not spark"`` leaves them out. The others check, without
Spark, what the integration relies on: ``import pycel`` stays free of pyspark, and an
engine stream fed one key's events with their global positions finds exactly the
matches of the whole stream.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pycel
from examples.correlation import Cancelled, Filled, Placed, generate
from examples.stock_data import Buy, Sell, Stock, stock_events, write_parquet_parts
from pycel import DataError

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

import pycel.spark  # noqa: E402
from pycel.spark._batch import grouping, join_group_column  # noqa: E402
from pycel.spark._runner import KeyState, RunnerSpec, advance, run_group  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
s, b, b2 = pycel.alias(Sell, "s"), pycel.alias(Buy, "b"), pycel.alias(Buy, "b2")
x = pycel.alias(Stock, "x")  # an absent event (a buy or a sell)

MatchKey = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


def row_key(row: Any) -> MatchKey:
    """A Spark match row as :meth:`pycel.Match.key` (variables without positions dropped)."""
    val = tuple(sorted((v, tuple(p)) for v, p in row["positions"].asDict().items() if p))
    return (row["match_start"], row["match_end"], val)


def expected(pattern: Any, events: pd.DataFrame) -> set[MatchKey]:
    """The in-process engine's matches on ``events`` (already in stream order)."""
    return pycel.compile(pattern).run(events.drop(columns=["id"]).reset_index(drop=True)).keys()


# -- without Spark ---------------------------------------------------------------------------
def test_import_pycel_does_not_import_pyspark() -> None:
    code = "import sys, pycel; print(any(m.split('.')[0] == 'pyspark' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


SUBSTREAM_PATTERNS = {
    "count window": (s.where(s.volume > 500) >> b).within(events=12).partition_by(Stock.name),
    "time window": (s >> pycel.plus(b.where(b.volume > 700)))
    .within(2, on=Stock.time)
    .partition_by(Stock.name),
    "no window": (s.where(s.volume > 900) >> b.where(b.volume > 900)).partition_by(Stock.name),
    "limit and select": (s >> pycel.plus(b)).within(events=10).limit(2).select("b").partition_by(Stock.name),
    # contiguity under partition_by: the next event of the same key
    "contiguous": pycel.seq(s, pycel.plus(b), contiguous=True).within(events=30).partition_by(Stock.name),
    "max": (s >> pycel.plus(b.where(b.volume > 500)))
    .within(events=12)
    .strategy("max")
    .partition_by(Stock.name),
    "max, contiguous": pycel.seq(s, pycel.plus(b), contiguous=True)
    .within(events=30)
    .strategy("max")
    .partition_by(Stock.name),
    # absence: a blocked best set (LAST without a window), treap (a comparison), pair (MAX)
    "absence, last": pycel.seq(s, pycel.absent(x.where(x.volume > 800)), b)
    .strategy("last")
    .partition_by(Stock.name),
    "absence, comparison": pycel.seq(s, pycel.absent(x.where(x.volume > 800)), b)
    .where(b.price > s.price)
    .within(events=40)
    .partition_by(Stock.name),
    "absence, max": pycel.seq(s, pycel.absent(x.where(x.volume > 900)), pycel.plus(b))
    .strategy("max")
    .partition_by(Stock.name),
}


@pytest.mark.parametrize("name", list(SUBSTREAM_PATTERNS))
def test_substreams_with_global_positions_equal_the_whole_stream(name: str) -> None:
    """Each key's events pushed (in chunks, snapshot and restore between them) with their
    global positions: the union of the matches is the whole stream's, count windows included."""
    pattern = SUBSTREAM_PATTERNS[name]
    events = stock_events(1500, names=4, seed=3)
    query = pycel.compile(pattern)
    got: set[MatchKey] = set()
    for _, group in events.groupby("name"):
        stream = query.stream()
        positions = group["id"].to_numpy()
        for lo in range(0, len(group), 97):
            chunk = group.iloc[lo : lo + 97].drop(columns=["id"])
            got |= stream.push(chunk, positions=positions[lo : lo + 97]).keys()
            stream = pycel.Stream.restore(stream.snapshot())
    assert got == expected(pattern, events)


def test_groups_follow_partition_or_a_join_key() -> None:
    """A join whose attribute has one name groups like PARTITION BY; CONSUME BY ANY (global)
    runs as one group; a join on differently named attributes needs a derived column
    (test_join_on_differently_named_attributes_groups_by_their_values)."""
    joined = (s >> b).where(s.name == b.name)
    assert grouping(pycel.compile(joined)) == ["name"]
    assert grouping(pycel.compile(joined.partition_by(Stock.volume))) == ["volume"]
    assert grouping(pycel.compile(joined.consume("any"))) == []
    nested = pycel.compile(BATCH_PATTERNS["nested classes"])
    assert nested.hcq is not None and grouping(nested) == ["name"]
    assert grouping(pycel.compile((s >> b).where(s.volume == b.price))) == []


def test_window_expires_state_under_every_strategy() -> None:
    """Every strategy chooses among the runs that fit the window, so a key silent for
    longer than a time window outputs the same without its old runs: the window expires
    its state under LAST, NEXT and MAX too (an explicit state_timeout still wins)."""
    from pycel.spark._streaming import expiry_ms

    pattern = pycel.seq(pycel.plus(s), b).within(5, on=Stock.time)
    # s at 0 and 1, a silence, s at 20, b at 21: the runs from 0 and 1 cannot matter at 21.
    events = [Sell(name="X", price=1.0, volume=1, time=t) for t in (0, 1, 20)]
    events.append(Buy(name="X", price=1.0, volume=1, time=21))
    for strategy in ("all", "last", "next", "max"):
        query = pycel.compile(pattern.strategy(strategy))  # type: ignore[arg-type]
        assert expiry_ms(query, None) == 5000
        assert expiry_ms(query, 7) == 7000
        whole = query.run(events).keys()
        assert len(whole) == 1 and query.stream().push(events[2:], positions=[2, 3]).keys() == whole


def test_substream_positions_must_increase() -> None:
    stream = pycel.compile(s >> b).stream()
    frame = stock_events(4, seed=1).drop(columns=["id"])
    with pytest.raises(DataError, match="positions must increase"):
        stream.push(frame, positions=[0, 5, 5, 7])
    stream.push(frame.iloc[:2], positions=[3, 8])
    with pytest.raises(DataError, match="positions must increase"):
        stream.push(frame.iloc[2:], positions=[8, 9])
    with pytest.raises(DataError, match=r"positions=\) is required"):
        stream.push(frame.iloc[2:])
    # Positions that are no int64 stream positions (a probe found an OverflowError, a
    # TypeError, a ValueError, and 1.5 read as 1).
    for bad, message in (
        ([2**63, 2**63 + 1], r"position 9223372036854775808 is outside 0\.\."),
        ([-1, 0], r"position -1 is outside 0\.\."),
        ([1.5, 2.5], r"must be integers, got 1\.5"),
        (["x", "y"], "must be integers, got 'x'"),
        ([None, None], "must be integers, got None"),
    ):
        with pytest.raises(DataError, match=message):
            pycel.compile(s >> b).stream().push(frame.iloc[:2], positions=bad)


def test_raise_pycel_errors_finds_the_workers_error() -> None:
    """The worker's traceback text, anywhere in the chain of a failed job's exceptions,
    becomes the pycel error it names; other errors pass through."""
    worker = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "_runner.py", line 1, in evaluate\n    raise DataError(message)\n'
        "pycel.errors.DataError: unknown event type 'Hold' (position 7, id='e7')\n SQLSTATE: 38000"
    )
    job = RuntimeError("Job aborted")
    job.__cause__ = RuntimeError(worker)
    with pytest.raises(DataError, match=r"^unknown event type 'Hold' \(position 7, id='e7'\)$") as err:
        with pycel.spark.raise_pycel_errors():
            raise job
    assert err.value.__cause__ is job
    with pytest.raises(RuntimeError, match="Job aborted"), pycel.spark.raise_pycel_errors():
        raise RuntimeError("Job aborted: os.errors.DataError: not ours")


def runner_spec(pattern: Any, **kw: Any) -> RunnerSpec:
    query = pycel.compile(pattern)
    fields: dict[str, Any] = dict(
        query=query,
        type_column="event_type",
        attributes=("name", "price", "volume", "time"),
        position_column="id",
        key_columns=("name",),
        id_column=None,
        event_columns=(),
        variables=query.variables,
        chunk_rows=50,
    )
    fields.update(kw)
    return RunnerSpec(**fields)


WARM_ABSENCE = """
import json
import re
import pycel
from examples.correlation import Cancelled, Filled, Placed
from pycel.jit import runtime
from pycel.spark._runner import RunnerSpec, warm_kernels
p, f, c = pycel.alias(Placed, "p"), pycel.alias(Filled, "f"), pycel.alias(Cancelled, "c")
query = pycel.compile(pycel.seq(p, pycel.absent(c), f).within(events=10))
spec = RunnerSpec(query=query, type_column="event_type", attributes=(), position_column="id",
                  key_columns=(), id_column=None, event_columns=(), variables=query.variables, chunk_rows=50)
entries = warm_kernels(spec)
print(json.dumps({"blocking": sorted({key[3] for key in runtime.loop_variants()}), "entries": len(entries)}))
"""


def test_the_driver_warms_the_loop_without_blocking_and_with_it() -> None:
    """A group with no absent event runs the loop variant without blocking, one with an
    absent event the blocking one: the driver warms both (and ships their entries), the
    types other than the absent one first."""
    run = subprocess.run(
        [sys.executable, "-c", WARM_ABSENCE], cwd=ROOT, check=True,
        capture_output=True, text=True,
    )  # fmt: skip
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["blocking"] == [False, True] and result["entries"] > 0


def test_key_state_carries_matches_and_ids_across_micro_batches() -> None:
    """The streaming step on its own: a key's events in three batches, state through bytes."""
    pattern = (s >> b).within(3, on=Stock.time).partition_by(Stock.name)
    events = stock_events(600, names=3, seed=5)
    events["ref"] = "r" + events["id"].astype(str)
    spec = runner_spec(pattern, id_column="ref")
    rows = []
    for _, group in events.groupby("name"):
        blob = KeyState(spec.query.stream()).dumps()
        for lo in range(0, len(group), len(group) // 3 + 1):
            part = group.iloc[lo : lo + len(group) // 3 + 1].sample(frac=1, random_state=1)
            state = KeyState.loads(blob)
            rows.append(advance(spec, state, part, late="error"))
            blob = state.dumps()
    out = pd.concat(rows, ignore_index=True)
    got = {
        (int(r.match_start), int(r.match_end), tuple((v, tuple(r.positions[v])) for v in ("b", "s")))
        for r in out.itertuples()
    }
    assert got == expected(pattern, events.drop(columns=["ref"]))
    for r in out.itertuples():
        assert r.ids["s"] == [f"r{p}" for p in r.positions["s"]]
        assert r.ids["b"] == [f"r{p}" for p in r.positions["b"]]


def test_key_state_rejects_or_drops_late_events() -> None:
    spec = runner_spec((s >> b).partition_by(Stock.name))
    events = stock_events(40, names=1, seed=2)
    state = KeyState(spec.query.stream())
    advance(spec, state, events.iloc[20:], late="error")
    with pytest.raises(DataError, match=r"late event: .* \(position 5, group name="):
        advance(spec, state, events.iloc[5:10], late="error")
    assert len(advance(spec, state, events.iloc[5:10], late="drop")) == 0


def test_match_rows_split_positions_by_match() -> None:
    """As many positions of a variable as matches is not one per match: a's positions
    here are 1 (match 0), none (match 1) and 0, 1 (match 2); each row gets its own."""
    from pycel.data.matches import Match, Matches
    from pycel.spark._runner import match_rows

    found = [Match.of(1, 1, {"a": [1]}), Match.of(1, 1, {"b": [1]}), Match.of(0, 1, {"a": [0, 1]})]
    spec = RunnerSpec(
        query=pycel.compile(s >> b),
        type_column="event_type",
        attributes=(),
        position_column="pos",
        key_columns=(),
        id_column=None,
        event_columns=(),
        variables=("a", "b"),
    )
    rows = match_rows(spec, Matches.from_list(found, ["a", "b"]), pd.DataFrame({"pos": [0, 1]}))
    got = [{v: tuple(p) for v, p in cell.items() if len(p)} for cell in rows["positions"]]
    assert got == [m.variables for m in found]


def test_match_rows_cells_equal_the_reference() -> None:
    """Every cell of the match rows, built from the wide form: a variable that binds several
    events (plus), one some matches leave unbound (OR), one named like a wide table's own
    column ("start"); positions, ids and event columns against the reference's matches."""
    start = pycel.alias(Sell, "start")
    pattern = (start >> (pycel.plus(b.where(b.volume > 700)) | b2)).within(events=9).partition_by(Stock.name)
    events = stock_events(90, names=2, seed=11)
    events["ref"] = np.where(events["id"] % 5 == 0, None, "r" + events["id"].astype(str))
    events["note"] = np.where(events["id"] % 3 == 0, None, "n" + events["id"].astype(str))
    events["volume"] = events["volume"].astype("Int64").mask(events["id"] % 7 == 0)
    spec = runner_spec(pattern, id_column="ref", event_columns=("volume", "note"), chunk_rows=20)
    rows = pd.concat(
        [run_group(spec, g.sample(frac=1, random_state=2)) for _, g in events.groupby("name")],
        ignore_index=True,
    )
    want = pycel.reference.evaluate(pattern, events.drop(columns=["id", "ref", "note"]))
    assert want.keys() and any(len(p) > 1 for m in want for p in m.variables.values())
    got = {
        (
            int(r.match_start),
            int(r.match_end),
            tuple((v, tuple(p)) for v, p in sorted(r.positions.items()) if p),
        )
        for r in rows.itertuples()
    }
    assert got == want.keys() and len(rows) == len(want)

    def plain(x: Any) -> Any:
        return None if pd.isna(x) else x

    by_position = events.set_index("id")
    for r in rows.itertuples():
        assert list(r.positions) == list(spec.variables) == list(r.ids) == list(r.events)
        for v, positions in r.positions.items():
            assert positions == sorted(positions)
            assert r.ids[v] == [by_position.at[p, "ref"] for p in positions]
            assert r.events[v] == [
                {"volume": plain(by_position.at[p, "volume"]), "note": by_position.at[p, "note"]}
                for p in positions
            ]


def test_match_rows_leave_the_cycle_collector_as_they_found_it() -> None:
    from pycel.data.matches import Match, Matches
    from pycel.spark._runner import match_rows

    spec = runner_spec(s >> b, key_columns=(), position_column="pos")
    matches = Matches.from_list([Match.of(0, 1, {"s": [0], "b": [1]})], spec.variables)
    for enabled in (True, False):
        gc.enable() if enabled else gc.disable()
        try:
            assert len(match_rows(spec, matches, pd.DataFrame({"pos": [0, 1]}))) == 1
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


def test_run_group_checks_positions() -> None:
    spec = runner_spec((s >> b).partition_by(Stock.name))
    events = stock_events(10, names=1, seed=2)
    events.loc[3, "id"] = 2
    with pytest.raises(DataError, match="position 2 occurs twice"):
        run_group(spec, events)


def _bound(positions: dict[str, list[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((v, tuple(p)) for v, p in sorted(positions.items()) if p)


def test_run_group_resolves_the_drivers_event_types_by_name() -> None:
    """An executor has only the query's own classes: the driver's other event types come
    as data (``declared_types``), and rows of them are accepted as in process; without
    them the same rows are an unknown event type."""
    events = stock_events(40, names=1, seed=5)
    events.loc[[4, 9, 17, 30], "event_type"] = "Hold"  # a type no class of this process has
    held = ("Hold", tuple(Stock.__fields__.items()), ("Hold", "Stock"))
    # The reference: the same rows with each Hold as a class of this process that is a
    # Stock and nothing more, as the description says (a unique name: test modules each
    # define a "Stock").

    class HeldForReference(Stock): ...

    as_stock = events.assign(event_type=events["event_type"].replace("Hold", "HeldForReference"))
    for pattern in [(s >> b).partition_by(Stock.name), (x.where(x.volume > 300) >> b).within(events=12)]:
        with pytest.raises(DataError, match="unknown event type 'Hold'"):
            run_group(runner_spec(pattern), events)
        rows = run_group(runner_spec(pattern, declared_types=(held,)), events)
        got = {(int(r.match_start), int(r.match_end), _bound(r.positions)) for r in rows.itertuples()}
        want = pycel.reference.evaluate(pattern, as_stock.drop(columns=["id"])).keys()
        assert len(want) > 0 and got == want
    assert any(4 in m.positions() for m in pycel.reference.evaluate(x >> b, as_stock.drop(columns=["id"])))
    twice = (held, ("Hold", (("qty", "int"),), ("Hold",)))
    with pytest.raises(DataError, match="'Hold' is ambiguous"):
        run_group(runner_spec((s >> b).partition_by(Stock.name), declared_types=twice), events)


# -- with Spark ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pycel-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def ticks() -> pd.DataFrame:
    """2000 ticks of 5 stocks in stream order (``id`` = position)."""
    return stock_events(2000, names=5, seed=11)


@pytest.fixture(scope="module")
def ticks_df(spark: SparkSession, ticks: pd.DataFrame) -> Any:
    """The ticks as a Spark DataFrame whose rows are *not* in stream order."""
    return spark.createDataFrame(ticks.sample(frac=1, random_state=7)).cache()


BATCH_PATTERNS = {
    # count windows under partition_by are measured in global positions
    "partitioned, count window": (s.where(s.volume > 600) >> b.where(b.volume > 600))
    .within(events=40)
    .partition_by(Stock.name),
    "partitioned, time window, iteration": (s.where(s.volume > 900) >> pycel.plus(b.where(b.volume > 950)))
    .within(4, on=Stock.time)
    .partition_by(Stock.name),
    "unpartitioned": (
        s.where((s.name == "INTC") & (s.volume > 700)) >> b.where((b.name == "RIMM") & (b.volume > 700))
    ).within(events=30),
    # the other keys' groups have no match (an empty output frame per group)
    "partitioned, one key matches": (s.where((s.name == "RIMM") & (s.volume > 900)) >> b)
    .within(events=15)
    .partition_by(Stock.name),
    "limit, select": (s >> pycel.plus(b)).within(events=8).limit(2).select("b").partition_by(Stock.name),
    "max": (s >> pycel.plus(b)).within(events=8).strategy("max").partition_by(Stock.name),
    # an equality join runs as a key inside the one group; a post-filter after the loop
    "equality join": (s.where(s.volume > 800) >> b.where(b.volume > 800))
    .where(s.name == b.name)
    .within(events=30),
    "post-filter": (s >> b)
    .where(s.volume < b.volume, post_filter=True)
    .within(events=6)
    .partition_by(Stock.name),
    "absence": pycel.seq(
        s.where(s.volume > 800), pycel.absent(x.where(x.volume > 500)), b.where(b.volume > 800)
    )
    .within(events=40)
    .partition_by(Stock.name),
    # nested classes on the parallelized automaton, grouped by its class over every atom
    "nested classes": (s & b & b2)
    .where((s.name == b.name) & (b.name == b2.name) & (b.volume == b2.volume))
    .within(events=12),
    # order comparisons on the automaton's edges (the ordered run index), per key and cut
    # into ranges
    "comparison": (s >> b).where(b.price > s.price).within(events=20).partition_by(Stock.name),
    "comparison, trend": (s >> pycel.plus(b.where(b.price > pycel.prev(b).price)))
    .within(events=10)
    .partition_by(Stock.name),
    "comparison, unpartitioned": (s.where(s.volume > 700) >> b.where(b.volume > 700))
    .where(b.price >= s.price)
    .within(events=30),
    "comparison, last": (s >> b)
    .where(b.price > s.price)
    .within(events=20)
    .strategy("last")
    .partition_by(Stock.name),
    "comparison, absence": pycel.seq(s, pycel.absent(x.where(x.volume > 900)), b)
    .where(b.price > s.price)
    .within(events=20)
    .partition_by(Stock.name),
    # an absence at the end: a group's last matches wait for its events to end
    "absence at the end": pycel.seq(s.where(s.volume > 700), pycel.absent(x.where(x.volume > 900)))
    .within(events=15)
    .partition_by(Stock.name),
    "absence at the start": pycel.seq(pycel.absent(x.where(x.volume > 950)), b.where(b.volume > 700))
    .within(events=12)
    .partition_by(Stock.name),
    "absence at the end, unpartitioned": pycel.seq(
        s.where(s.volume > 900), pycel.absent(x.where(x.volume > 800))
    ).within(events=4),
    "comparison, int with float": (s >> b)
    .where(b.volume * 0.5 > s.price)
    .within(events=20)
    .partition_by(Stock.name),
    "post-filter, consume": (s >> b)
    .where(s.volume < b.volume, post_filter=True)
    .within(events=20)
    .partition_by(Stock.name)
    .consume("partition"),
}


@pytest.mark.spark
@pytest.mark.parametrize("name", list(BATCH_PATTERNS))
def test_batch_detect_equals_query_run(name: str, ticks: pd.DataFrame, ticks_df: Any) -> None:
    pattern = BATCH_PATTERNS[name]
    rows = pycel.spark.detect(ticks_df, pattern, order_by="time", id_column="id").collect()
    want = expected(pattern, ticks)
    assert len(want) > 0
    assert len(rows) == len(want)  # no duplicates
    assert {row_key(r) for r in rows} == want
    keys = list(pycel.compile(pattern).partition)
    for r in rows:
        ids = [i for v in r["ids"].asDict().values() for i in v]
        assert sorted(ids) == sorted(p for v in r["positions"].asDict().values() for p in v)
        assert all(r[k] is not None for k in keys)


@pytest.mark.spark
def test_join_on_differently_named_attributes_groups_by_their_values(spark: SparkSession) -> None:
    """``o.sym == f.ticker``: one group per symbol through a derived column (Cancelled,
    which the join does not read, in a null group), with the in-process matches."""
    events = generate(600)
    events["id"] = np.arange(len(events))
    o, f = pycel.alias(Placed, "o"), pycel.alias(Filled, "f")
    pattern = pycel.seq(o, f).where(o.sym == f.ticker).within(seconds=60, on=Placed.time)
    query = pycel.compile(pattern, types=[Cancelled])
    derived = join_group_column(query, "event_type")
    assert grouping(query) == [] and derived is not None
    assert join_group_column(pycel.compile(pattern.consume("any"), types=[Cancelled]), "event_type") is None
    df = spark.createDataFrame(events.sample(frac=1, random_state=3))
    assert df.select(derived.alias("g")).distinct().count() > 100  # ~200 symbols and null
    rows = pycel.spark.detect(df, pattern, order_by="time", id_column="id", types=[Cancelled]).collect()
    want = query.run(events.drop(columns=["id"])).keys()
    assert len(want) > 0
    assert len(rows) == len(want)
    assert {row_key(r) for r in rows} == want


class Big(pycel.Event):
    v: pycel.Field[int]
    at: pycel.Field[pycel.Timestamp]


class BigA(Big): ...


class BigB(Big):
    stamp: pycel.Field[pycel.Timestamp]


def test_nullable_integers_and_times_reach_the_engine_exactly(spark: SparkSession) -> None:
    """Spark handed a group's bigint column holding a null to pandas as float64: 2**53 + 1
    rounded (a filter on it matched nothing), an epoch-nanosecond time failed the job, ids
    came back rounded; and a join of a timestamp column with an epoch-nanosecond one
    grouped their values apart, as text (found by a probe)."""
    big, t = 2**53, pd.Timestamp("2024-01-01")
    events = pd.DataFrame(
        {
            "id": pd.array([big + 1, big + 3, None, 7], dtype="Int64"),
            "event_type": ["BigA", "BigB", "BigB", "BigB"],
            "v": pd.array([big + 1, big, None, big + 1], dtype="Int64"),
            "at": [t, t + pd.Timedelta(1), t + pd.Timedelta(2), t + pd.Timedelta(3)],
            "stamp": pd.array([None, t.value, t.value + 1, t.value], dtype="Int64"),
        }
    )
    schema = "id long, event_type string, v long, at timestamp, stamp long"
    rows = [[None if pd.isna(x) else x for x in row] for row in events.astype(object).itertuples(index=False)]
    df = spark.createDataFrame([[*r[:3], r[3].to_pydatetime(), r[4]] for r in rows], schema)
    a, b = pycel.alias(BigA, "a"), pycel.alias(BigB, "b")
    for pattern in (
        pycel.seq(a.where(a.v == big + 1), b).within(events=3),
        pycel.seq(a, b.where(b.stamp >= t.to_pydatetime())),
        pycel.seq(a, b).where(a.at == b.stamp),
    ):
        want = pycel.compile(pattern).run(events.drop(columns=["id"])).keys()
        found = pycel.spark.detect(df, pattern, order_by="at").collect()
        assert len(want) > 0 and {row_key(r) for r in found} == want, pattern
    rows = pycel.spark.detect(df, pycel.seq(a, b).within(events=1), order_by="at", id_column="id").collect()
    assert [(list(r["ids"]["a"]), list(r["ids"]["b"])) for r in rows] == [([big + 1], [big + 3])]


@pytest.mark.parametrize("kind", ["timestamp", "timestamp_ntz"])
def test_a_timestamp_outside_the_nanosecond_range_fails_with_its_position(
    spark: SparkSession, kind: str
) -> None:
    """A year-1500 timestamp failed inside PySpark's Arrow conversion (ArrowInvalid, no
    row named; found by a probe): it is a DataError naming position, id and column, as in
    process. Timestamps just inside the range run."""
    schema = f"pos long, ref string, event_type string, v long, at {kind}"
    a, b = pycel.alias(BigA, "a"), pycel.alias(BigB, "b")
    pattern = pycel.seq(a, b).within(seconds=10**12, on=Big.at)
    for bad in (datetime(1500, 1, 1), datetime(2300, 1, 1)):
        df = spark.createDataFrame(
            [(0, "r0", "BigA", 1, datetime(2000, 1, 1)), (1, "r1", "BigB", 2, bad)], schema
        )
        # (the time window's range planning reads the times: detect itself raises then)
        with pytest.raises(DataError, match=rf"time {bad.year}-01-01 00:00:00 is outside the range.*"
                           r"\(position 1, ref='r1', column 'at'\)"):  # fmt: skip
            with pycel.spark.raise_pycel_errors():
                pycel.spark.detect(df, pattern, position_column="pos", id_column="ref").collect()
        # No window: the job fails at the action.
        plain = pycel.spark.detect(df, pycel.seq(a, b), position_column="pos", id_column="ref")
        with pytest.raises(DataError, match=r"is outside the range.*\(position 1, ref='r1', column 'at'\)"):
            with pycel.spark.raise_pycel_errors():
                plain.collect()
    edges = [(0, "r0", "BigA", 1, datetime(1677, 9, 22)), (1, "r1", "BigB", 2, datetime(2262, 4, 10))]
    rows = pycel.spark.detect(spark.createDataFrame(edges, schema), pattern, position_column="pos").collect()
    assert [row_key(r) for r in rows] == [(0, 1, (("a", (0,)), ("b", (1,))))]


@pytest.mark.spark
@pytest.mark.parametrize("api", ["applyInPandasWithState", "transformWithState"])
def test_streaming_nullable_integers_reach_the_engine_exactly(
    spark: SparkSession, tmp_path: Path, api: str
) -> None:
    """As in batch: a micro-batch's bigint column holding a null reached pandas as float64,
    so ``a.v == 2**53 + 1`` matched nothing (found by a probe); with transformWithState the
    null flags reached the processor under positional names."""
    big, t = 2**53, pd.Timestamp("2024-01-01")
    events = pd.DataFrame(
        {
            "id": np.arange(6),
            "event_type": ["BigA", "BigB"] * 3,
            "v": pd.array([big + 1, None, big + 1, big, None, big + 1], dtype="Int64"),
            "stamp": pd.array([None, t.value, None, t.value + 1, None, t.value], dtype="Int64"),
        }
    )
    write_parquet_parts(events, tmp_path / "in", 2)
    source = spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
    stream = source.option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
    a, b = pycel.alias(BigA, "a"), pycel.alias(BigB, "b")
    pattern = pycel.seq(a.where(a.v == big + 1), b.where(b.stamp >= t.to_pydatetime())).within(events=4)
    matches = pycel.spark.detect(stream, pattern, position_column="id", stateful_api=api)  # type: ignore[arg-type]
    rows = write_until_done(spark, matches, tmp_path)
    want = pycel.compile(pattern).run(events.drop(columns=["id"])).keys()
    assert len(want) == 4 and sorted(row_key(r) for r in rows) == sorted(want)


def test_streaming_options_on_a_batch_dataframe_warn(spark: SparkSession) -> None:
    """watermark= on a batch DataFrame was ignored without a word (found by a probe)."""
    frame = pd.DataFrame({"event_type": ["BigA", "BigB"], "v": [1, 2], "id": [0, 1]})
    a, b = pycel.alias(BigA, "a"), pycel.alias(BigB, "b")
    ignored = r"watermark=, state_timeout= applies to a streaming DataFrame only"
    with pytest.warns(UserWarning, match=ignored):
        df = spark.createDataFrame(frame)
        found = pycel.spark.detect(df, pycel.seq(a, b), order_by="id", watermark="1 minute", state_timeout=5)
    rows = found.collect()
    assert len(rows) == 1


class Named(pycel.Event):
    match_end: pycel.Field[str]


def test_a_partition_attribute_named_like_an_output_column_is_refused(spark: SparkSession) -> None:
    """partition_by('match_end') made a row schema with the column twice, and the job
    failed with Spark's own type error (found by a probe)."""
    frame = pd.DataFrame({"event_type": ["Named"] * 2, "match_end": ["x", "y"], "id": [0, 1]})
    df = spark.createDataFrame(frame)
    n = pycel.alias(Named, "n")
    refused = r"partition_by\('match_end'\): the match rows have a column"
    with pytest.raises(pycel.PatternError, match=refused):
        pycel.spark.detect(df, pycel.seq(n, n.as_("m")).partition_by(Named.match_end), order_by="id")


@pytest.mark.spark
def test_streaming_join_on_differently_named_attributes(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The derived group column works for streaming too: the state is kept per symbol."""
    events = generate(400, seed=5)
    events["id"] = np.arange(len(events))
    write_parquet_parts(events, tmp_path / "in", 3)
    o, f = pycel.alias(Placed, "o"), pycel.alias(Filled, "f")
    pattern = pycel.seq(o, f).where(o.sym == f.ticker).within(seconds=40, on=Placed.time)
    source = spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
    stream = source.option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
    matches = pycel.spark.detect(stream, pattern, position_column="id", types=[Cancelled])
    matches.explain(extended=True)
    plan = capsys.readouterr().out
    assert "CASE WHEN (event_type#" in plan and "= Placed) THEN sym#" in plan  # the derived key
    rows = write_until_done(spark, matches, tmp_path)
    want = pycel.compile(pattern, types=[Cancelled]).run(events.drop(columns=["id"])).keys()
    assert len(want) > 0
    assert sorted(row_key(r) for r in rows) == sorted(want)


@pytest.mark.spark
def test_batch_detect_ceql_and_events(spark: SparkSession, ticks: pd.DataFrame, ticks_df: Any) -> None:
    """A CEQL query text, with the matched events' columns in the output."""
    declaration = """CREATE STREAM Stock {
        EVENT Buy { name: string, price: double, volume: int, time: int },
        EVENT Sell { name: string, price: double, volume: int, time: int } }"""
    query = """SELECT * FROM Stock WHERE Sell AS s ; Buy AS b
        FILTER s[volume > 900] AND b[volume > 900]
        PARTITION BY [name] WITHIN 20 [time]"""
    out = pycel.spark.detect(ticks_df, query, types=declaration, id_column="id", include_events=True)
    rows = out.collect()
    from pycel import ceql

    pattern = ceql.parse_query(query, ceql.parse_declaration(declaration))
    assert {row_key(r) for r in rows} == expected(pattern, ticks)
    by_id = ticks.set_index("id")
    for r in rows[:50]:
        (event,) = r["events"]["s"]
        (pos,) = r["positions"]["s"]
        assert event["id"] == pos and event["event_type"] == "Sell"
        assert event["price"] == by_id.loc[pos, "price"] and event["name"] == r["name"]


@pytest.mark.spark
def test_matcher_with_own_groupby(ticks: pd.DataFrame, ticks_df: Any) -> None:
    """with_positions + matcher in a user's groupBy: grouping coarser than the pattern's
    partition (two stocks per group) gives the same matches."""
    pattern = BATCH_PATTERNS["partitioned, count window"]
    events = pycel.spark.with_positions(ticks_df, ["time", "id"], "pos")
    m = pycel.spark.matcher(pattern, events.schema, position_column="pos")

    grouped = events.withColumn("bucket", F.crc32("name") % 2).groupBy("bucket")
    rows = grouped.applyInPandas(m, m.schema).collect()
    assert {row_key(r) for r in rows} == expected(pattern, ticks)


def test_matcher_refuses_per_batch_use() -> None:
    """mapInPandas hands the function an iterator of Arrow batches, and a per-batch call
    would cut partitions apart and lose matches: both are a TypeError that says so."""
    fields = [("event_type", T.StringType()), ("name", T.StringType()), ("volume", T.LongType())]
    fields += [("price", T.DoubleType()), ("time", T.LongType()), ("pos", T.LongType())]
    m = pycel.spark.matcher(
        BATCH_PATTERNS["partitioned, count window"],
        T.StructType([T.StructField(n, t) for n, t in fields]),
        position_column="pos",
    )
    frame = stock_events(50, names=2).rename(columns={"id": "pos"})
    with pytest.raises(TypeError, match="groupBy.*applyInPandas"):
        m(iter([frame]))  # type: ignore[arg-type]  # what mapInPandas passes
    with pytest.raises(TypeError, match="lose the matches"):
        m(frame)  # type: ignore[arg-type]
    rows = m(("INTC",), frame)
    got = {
        (start, end, tuple(sorted((v, tuple(p)) for v, p in cell.items() if len(p))))
        for start, end, cell in zip(rows["match_start"], rows["match_end"], rows["positions"], strict=True)
    }
    assert got == expected(BATCH_PATTERNS["partitioned, count window"], frame.rename(columns={"pos": "id"}))


RANGE_PATTERNS = {
    "count window": (s.where(s.volume > 500) >> pycel.plus(b.where(b.volume > 800))).within(events=25),
    "time window": (s.where(s.volume > 900) >> b.where(b.volume > 900)).within(3, on=Stock.time),
    "select, strict": (s >> b).within(events=4).select("b").strategy("strict"),
    "max": (s >> pycel.plus(b.where(b.volume > 300))).within(events=12).strategy("max"),
    "next": (s.where(s.volume > 500) >> b).within(2, on=Stock.time).strategy("next"),
    "last": (s.where(s.volume > 500) >> pycel.plus(b.where(b.volume > 700)))
    .within(events=10)
    .strategy("last"),
    "post-filter": (s.where(s.volume > 700) >> b)
    .where(s.price < b.price, post_filter=True)
    .within(2, on=Stock.time),
    # the halo before a range also holds the absent events between a match's parts
    "absence": pycel.seq(
        s.where(s.volume > 600), pycel.absent(x.where(x.volume > 900)), b.where(b.volume > 600)
    ).within(events=20),
    # and the absent events before a match that starts with an absence
    "absence at the start": pycel.seq(pycel.absent(x.where(x.volume > 980)), b.where(b.volume > 900)).within(
        events=20
    ),
    "absence, comparison, next": pycel.seq(
        s.where(s.volume > 600), pycel.absent(x.where(x.volume > 900)), b.where(b.volume > 600)
    )
    .where(b.price > s.price)
    .within(events=20)
    .strategy("next"),
    # the halo after a range holds the absent events after a match that ends with one
    "absence at the end": pycel.seq(s.where(s.volume > 900), pycel.absent(x.where(x.volume > 800))).within(
        events=40
    ),
    "absence at the end, time window": pycel.seq(
        s.where(s.volume > 900), pycel.absent(x.where(x.volume > 700))
    ).within(4, on=Stock.time),
}


@pytest.mark.spark
@pytest.mark.parametrize("name", list(RANGE_PATTERNS))
def test_unpartitioned_windows_run_in_ranges(name: str, ticks: pd.DataFrame, ticks_df: Any) -> None:
    """Cut into 37 ranges (~54 events each; 20 events share each time, so cuts fall
    between equal times and through matches), the matches equal query.run's."""
    pattern = RANGE_PATTERNS[name]
    matches = pycel.spark.detect(ticks_df, pattern, order_by="time", id_column="id", ranges=37)
    plan = matches._jdf.queryExecution().toString()
    assert "_pycel_range" in plan
    rows = matches.collect()
    want = expected(pattern, ticks)
    assert len(want) > 0 and len(rows) == len(want)
    assert {row_key(r) for r in rows} == want


@pytest.mark.spark
@pytest.mark.parametrize(
    "name",
    ["partitioned, count window", "partitioned, time window, iteration", "post-filter", "absence at the end"],
)
def test_hot_keys_run_in_ranges(name: str, ticks: pd.DataFrame, ticks_df: Any) -> None:
    """With 8 ranges, keys holding more than an eighth of the ticks are hot: their events
    are cut into ranges with halos, the other keys run whole; same matches."""
    pattern = BATCH_PATTERNS[name]
    matches = pycel.spark.detect(ticks_df, pattern, order_by="time", id_column="id", ranges=8)
    assert "_pycel_range" in matches._jdf.queryExecution().toString()
    shares = ticks["name"].value_counts()
    assert (shares * 8 > len(ticks)).any() and not (shares * 8 > len(ticks)).all()
    rows = matches.collect()
    want = expected(pattern, ticks)
    assert len(want) > 0 and len(rows) == len(want)
    assert {row_key(r) for r in rows} == want
    assert all(r["name"] is not None for r in rows)


@pytest.mark.spark
def test_spark_ranges_equal_the_numpy_twin(spark: SparkSession, ticks: pd.DataFrame) -> None:
    """The Spark expression puts every event in the ranges RangePlan.members lists (the
    twin tests/test_spark_ranges.py checks on generated patterns)."""
    from pycel.spark._ranges import RANGE, RangePlan, with_range_groups, with_time_halos

    events = spark.createDataFrame(ticks[["id", "time"]])
    positions, times = ticks["id"].to_numpy(), ticks["time"].to_numpy()
    homes = positions // 70
    lows = [int(times[homes == r].min()) for r in range(29)]
    highs = [int(times[homes == r].max()) for r in range(29)]
    plans = [
        RangePlan(0, 70, 29, halo_events=150, reach=3),
        with_time_halos(RangePlan(0, 70, 29), lows, highs, 9, ahead=False),
        # and the halos after each range (an absence at the end)
        RangePlan(0, 70, 29, halo_events=150, reach=3, ahead_events=150, ahead_reach=3),
        with_time_halos(RangePlan(0, 70, 29), lows, highs, 9, ahead=True),
    ]
    for plan in plans:
        cut = with_range_groups(events, plan, "id", F.col("time"))
        # One int column added per copy: the own range is the group's to compute.
        assert cut.columns == ["id", "time", RANGE] and cut.schema[RANGE].dataType == T.IntegerType()
        out = cut.collect()
        got = {(r["id"], r[RANGE]) for r in out}
        rows, ranges = plan.members(positions, times)
        assert got == set(zip(positions[rows].tolist(), ranges.tolist(), strict=True))
        assert len(got) > len(ticks)  # halo copies exist


@pytest.mark.spark
def test_each_range_runs_as_a_task_of_its_own(spark: SparkSession, ticks_df: Any) -> None:
    """The whole stream cut into n ranges runs as n tasks, one range each (hashing the
    range numbers onto the shuffle partitions would put several ranges in one task), with
    adaptive execution on (Spark's default); and the slot hash is Spark's own."""
    from pyspark import TaskContext

    from pycel.spark._batch import GROUP, range_groups
    from pycel.spark._ranges import RANGE
    from pycel.spark._tasks import spark_long_hash

    values = [0, 1, 7, -1, -(2**40) - 3, 2**62 + 5]
    hashed = spark.createDataFrame([(v,) for v in values], "v long").select(F.hash("v")).collect()
    assert [r[0] for r in hashed] == [spark_long_hash(v) for v in values]

    def task_of(frame: pd.DataFrame) -> pd.DataFrame:
        task = TaskContext.get()
        assert task is not None
        return pd.DataFrame({"range": [int(frame[RANGE].iloc[0])], "task": [task.partitionId()]})

    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    query = pycel.compile(RANGE_PATTERNS["count window"])
    events = pycel.spark.with_positions(ticks_df, ["time", "id"], "pos").withColumn(GROUP, F.lit(0))
    for count in (2, 5, 8):
        grouped, keys, ranged = range_groups(events, query, "pos", count, [GROUP], single=True)
        assert ranged is not None and GROUP not in grouped.columns  # the constant group is not shipped
        rows = grouped.groupBy(*keys).applyInPandas(task_of, "range long, task long").collect()
        assert sorted(r["range"] for r in rows) == list(range(count))
        assert len({r["task"] for r in rows}) == count  # no task runs two ranges


@pytest.mark.spark
def test_planning_without_hot_keys_is_one_job(
    spark: SparkSession, ticks_df: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deciding that no key is hot takes one aggregation query (events per key, positions
    and the largest key's count together); cutting an unpartitioned count window, one."""
    from pyspark.sql import DataFrame

    from pycel.spark._ranges import plan_ranges

    events = pycel.spark.with_positions(ticks_df, ["time", "id"], "pos").cache()
    events.count()
    queries: list[DataFrame] = []
    kind = type(events)  # the session's DataFrame class (classic or Connect)
    collect = kind.collect

    def counted(frame: DataFrame) -> Any:
        queries.append(frame)
        return collect(frame)

    monkeypatch.setattr(kind, "collect", counted)
    partitioned = BATCH_PATTERNS["partitioned, count window"]
    assert plan_ranges(events, pycel.compile(partitioned), "pos", 2, 2, ["name"]) is None
    assert len(queries) == 1  # 5 stocks: none holds half of the ticks
    planned = plan_ranges(events, pycel.compile(RANGE_PATTERNS["count window"]), "pos", 4, 2)
    assert planned is not None and planned[0].count == 4 and len(queries) == 2
    # A time window, ranges shorter than 16 buckets of positions: the ranges' times, apart.
    planned = plan_ranges(events, pycel.compile(RANGE_PATTERNS["time window"]), "pos", 4, 2)
    assert planned is not None and planned[0].count == 4 and len(queries) == 4
    # Ranges of whole buckets: their times come with the positions, in one query.
    sparse = events.withColumn("pos", F.col("pos") * F.lit(1000))
    planned = plan_ranges(sparse, pycel.compile(RANGE_PATTERNS["time window"]), "pos", 4, 2)
    assert planned is not None and planned[0].count == 4 and len(queries) == 5
    monkeypatch.undo()
    events.unpersist()


@pytest.mark.spark
def test_time_window_cut_in_whole_buckets_equals_query_run(ticks: pd.DataFrame, ticks_df: Any) -> None:
    """Positions 1000 apart make ranges of many buckets: the cut planned in one query
    (pycel.spark._ranges.position_buckets) finds query.run's matches (at those positions)."""
    from pycel.spark._ranges import BUCKET_BITS, BUCKETS_PER_RANGE

    pattern = RANGE_PATTERNS["time window"]
    events = ticks_df.withColumn("pos", F.col("id") * F.lit(1000))
    assert len(ticks) * 1000 // 4 >= BUCKETS_PER_RANGE << BUCKET_BITS
    matches = pycel.spark.detect(events, pattern, position_column="pos", id_column="id", ranges=4)
    assert "_pycel_range" in matches._jdf.queryExecution().toString()
    rows = matches.collect()
    want = {
        (start * 1000, end * 1000, tuple((v, tuple(p * 1000 for p in ps)) for v, ps in cells))
        for start, end, cells in expected(pattern, ticks)
    }
    assert len(want) > 0 and len(rows) == len(want)
    assert {row_key(r) for r in rows} == want


@pytest.mark.spark
@pytest.mark.parametrize("ranges", [1, 3])
def test_duplicate_positions_of_an_unpartitioned_pattern_fail_the_job(
    spark: SparkSession, ticks: pd.DataFrame, ranges: int
) -> None:
    """Without keys every event is in the group (or the range) its position falls in, so
    events sharing a position meet there and the job fails with a DataError naming the
    position and both events; detect() itself runs no check job then."""
    frame = ticks.iloc[:600].copy()
    frame["ref"] = [f"r{i}" for i in range(len(frame))]
    frame.loc[frame.index[401], "id"] = 400  # position 400 twice, 401 missing
    pattern = RANGE_PATTERNS["count window"]
    matches = pycel.spark.detect(
        spark.createDataFrame(frame), pattern, position_column="id", id_column="ref", ranges=ranges
    )
    with pytest.raises(DataError, match=r"position 400 occurs twice.*ref='r400'.*ref='r401'"):
        with pycel.spark.raise_pycel_errors():
            matches.collect()
    # A null position (a time window, whose planning reads each range's times).
    nulls = spark.createDataFrame(frame).withColumn("id", F.when(F.col("ref") != "r9", F.col("id")))
    timed = RANGE_PATTERNS["time window"]
    with pytest.raises(DataError, match=r"null position.*ref='r9'"), pycel.spark.raise_pycel_errors():
        pycel.spark.detect(nulls, timed, position_column="id", id_column="ref", ranges=ranges).collect()
    frame["id"] = np.arange(len(frame))
    rows = pycel.spark.detect(spark.createDataFrame(frame), pattern, position_column="id", ranges=ranges)
    assert {row_key(r) for r in rows.collect()} == expected(pattern, frame.drop(columns=["ref"]))


@pytest.mark.spark
def test_refused_clauses_run_as_one_group(ticks: pd.DataFrame, ticks_df: Any) -> None:
    """CONSUME BY looks before the window: ranges= is refused with a warning saying why."""
    pattern = (s.where(s.volume > 500) >> b).within(events=20).consume("any")
    with pytest.warns(pycel.spark.SingleGroupWarning, match="CONSUME BY"):
        matches = pycel.spark.detect(ticks_df, pattern, order_by="time", id_column="id", ranges=8)
    assert "_pycel_range" not in matches._jdf.queryExecution().toString()
    assert {row_key(r) for r in matches.collect()} == expected(pattern, ticks)
    with pytest.raises(DataError, match="ranges="):
        pycel.spark.detect(ticks_df, pattern, order_by="time", ranges=0)


@pytest.mark.spark
def test_streaming_warns_about_many_shuffle_partitions(spark: SparkSession, tmp_path: Path) -> None:
    """With Spark's default of 200 shuffle partitions, every micro-batch runs 200 stateful
    tasks: detect() says so when the streaming query is defined."""
    events = stock_events(40, names=2)
    write_parquet_parts(events, str(tmp_path / "in"), 1)
    stream = spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema).parquet(
        str(tmp_path / "in")
    )
    pattern = BATCH_PATTERNS["partitioned, count window"]
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    try:
        with pytest.warns(pycel.spark.ShufflePartitionsWarning, match="spark.sql.shuffle.partitions"):
            pycel.spark.detect(stream, pattern, position_column="id")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")


@pytest.mark.spark
def test_streaming_warns_when_waiting_matches_never_expire(spark: SparkSession, tmp_path: Path) -> None:
    """A pattern ending with an absence emits a key's match when a later event of the key
    passes its window or when its state expires: without an expiry (no watermark, or a
    count window without state_timeout) detect() says that a quiet key keeps its matches."""
    write_parquet_parts(stock_events(40, names=2), str(tmp_path / "in"), 1)
    stream = spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema).parquet(
        str(tmp_path / "in")
    )
    ending = pycel.seq(s, pycel.absent(x.where(x.volume > 900)))
    counted, timed = ending.within(events=5), ending.within(5, on=Stock.time)
    for pattern, options in [(timed, {}), (counted, {"watermark": "10 seconds", "time": "time"})]:
        with pytest.warns(pycel.spark.WaitingMatchesWarning, match="keeps its last matches waiting"):
            pycel.spark.detect(stream, pattern, position_column="id", **options)
    for pattern, options in [
        (timed, {"watermark": "10 seconds"}),
        (counted, {"watermark": "10 seconds", "time": "time", "state_timeout": 60}),
        ((s >> b).within(events=5), {}),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pycel.spark.WaitingMatchesWarning)
            pycel.spark.detect(stream, pattern, position_column="id", **options)


@pytest.mark.spark
def test_detect_accepts_event_types_the_pattern_does_not_name(spark: SparkSession) -> None:
    """Rows of an event type declared in the driver but absent from the pattern are read
    as in process (the executor's Python has only the pattern's classes)."""

    class Quote(pycel.Event):
        v: pycel.Field[int]

    class Up(Quote): ...

    class Down(Quote): ...

    class Pause(Quote): ...  # in the data, never in the pattern

    rng = np.random.default_rng(8)
    types = rng.choice(["Up", "Down", "Pause"], 300)
    frame = pd.DataFrame({"event_type": types, "v": rng.integers(0, 9, 300)})
    frame["t"] = np.arange(len(frame))
    u, d = pycel.alias(Up, "u"), pycel.alias(Down, "d")
    pattern = (u.where(u.v > 6) >> d.where(d.v < 2)).within(events=10)
    rows = pycel.spark.detect(spark.createDataFrame(frame), pattern, position_column="t").collect()
    want = pycel.reference.evaluate(pattern, frame.drop(columns=["t"])).keys()
    assert len(want) > 0 and {row_key(r) for r in rows} == want


@pytest.mark.spark
def test_timestamps_and_null_keys(spark: SparkSession) -> None:
    """A timestamp-typed time window; events with a null key are in no partition but keep
    their positions."""

    class Reading(pycel.Event):
        sensor: pycel.Field[str]
        value: pycel.Field[float]
        at: pycel.Field[pycel.Timestamp]

    class High(Reading): ...

    class Low(Reading): ...

    rng = np.random.default_rng(4)
    n = 600
    frame = pd.DataFrame(
        {
            "event_type": rng.choice(["High", "Low"], n),
            "sensor": rng.choice(["a", "b", "c", None], n),
            "value": rng.normal(size=n),
            "at": pd.Timestamp(datetime(2024, 3, 31, 0, 59, tzinfo=UTC)).tz_localize(None)
            + pd.to_timedelta(np.arange(n) * 2, unit="s"),
        }
    )
    hi, lo = pycel.alias(High, "hi"), pycel.alias(Low, "lo")
    pattern = (hi.where(hi.value > 1) >> lo.where(lo.value < -1)).within(seconds=60, on=Reading.at)
    pattern = pattern.partition_by(Reading.sensor)
    df = spark.createDataFrame(frame.sample(frac=1, random_state=3))
    rows = pycel.spark.detect(df, pattern, order_by="at").collect()
    want = pycel.compile(pattern).run(frame).keys()
    assert len(want) > 0 and {row_key(r) for r in rows} == want


@pytest.mark.spark
def test_bad_input_is_reported(spark: SparkSession, ticks: pd.DataFrame, ticks_df: Any) -> None:
    pattern = BATCH_PATTERNS["partitioned, count window"]
    with pytest.raises(DataError, match=r"no column 'volume' \(read by the filter on s, the filter on b\)"):
        pycel.spark.detect(ticks_df.drop("volume"), pattern, order_by="id")
    with pytest.raises(DataError, match="'volume' is declared int but the column is string"):
        as_text = ticks_df.withColumn("volume", ticks_df.volume.cast("string"))
        pycel.spark.detect(as_text, pattern, order_by="id")
    with pytest.raises(DataError, match="needs the order of the stream"):
        pycel.spark.detect(ticks_df, pattern)
    with pytest.raises(DataError, match=r"no column 'when' \(read by order_by\)"):
        pycel.spark.detect(ticks_df, pattern, order_by="when")
    # A column the query reads is named with what reads it, never pycel's own columns.
    timed = BATCH_PATTERNS["partitioned, time window, iteration"]
    with pytest.raises(DataError, match=r"no column 'time' \(read by the time window, order_by\)") as missing:
        pycel.spark.detect(ticks_df.drop("time"), timed)
    assert missing.value.column == "time"
    with pytest.raises(DataError, match="no column 'volume'") as missing:
        pycel.spark.detect(ticks_df.drop("volume"), pattern, order_by="id")
    assert "_pycel" not in str(missing.value)
    with pytest.raises(DataError, match="event type column must be a string"):
        pycel.spark.detect(ticks_df.withColumn("event_type", ticks_df.volume), pattern, order_by="id")
    # Time going backwards within a key fails the job with the engine's message, the key
    # and the position; raise_pycel_errors makes it a DataError again.
    broken = ticks.copy()
    broken.loc[broken.index[-1], "time"] = 0
    timed = BATCH_PATTERNS["partitioned, time window, iteration"]
    with pytest.raises(DataError, match="time goes backwards") as err, pycel.spark.raise_pycel_errors():
        pycel.spark.detect(spark.createDataFrame(broken), timed, order_by="id").collect()
    assert f"position {len(broken) - 1}" in str(err.value)


@pytest.mark.spark
def test_duplicate_positions_are_found_across_keys(spark: SparkSession) -> None:
    """Each key's positions are distinct but position 1 is used by two keys: a DataError
    naming it (and the ids), raised by detect() itself; distinct positions run."""
    frame = pd.DataFrame(
        {
            "id": [0, 1, 1, 2],
            "event_type": ["Sell", "Sell", "Buy", "Buy"],
            "name": ["A", "B", "A", "B"],
            "price": 1.0,
            "volume": 1,
            "time": [0, 1, 1, 2],
            "ref": ["a", "b", "c", "d"],
        }
    )
    pattern = (s >> b).within(events=10).partition_by(Stock.name)
    duplicated = spark.createDataFrame(frame)
    repeated = r"positions occur more than once: 1 \(2 events, ref 'b' \.\.\. 'c'\)"
    with pytest.raises(DataError, match=repeated):
        pycel.spark.detect(duplicated, pattern, position_column="id", id_column="ref")
    with pytest.raises(DataError, match="null positions"):
        nulls = duplicated.withColumn("id", F.when(F.col("ref") != "c", F.col("id")))
        pycel.spark.detect(nulls, pattern, position_column="id", id_column="ref")
    frame["id"] = [0, 1, 2, 3]
    rows = pycel.spark.detect(spark.createDataFrame(frame), pattern, position_column="id").collect()
    want = expected(pattern, frame.drop(columns=["ref"]))
    assert len(want) == 2 and {row_key(r) for r in rows} == want


@pytest.mark.spark
def test_executor_errors_are_pycel_errors(spark: SparkSession, tmp_path: Path, ticks: pd.DataFrame) -> None:
    """A bad row found on an executor fails the job; inside raise_pycel_errors() that is a
    pycel.DataError naming the event's position, id and group (batch and streaming)."""
    pattern = BATCH_PATTERNS["partitioned, count window"]
    unknown = ticks.iloc[:300].copy()
    unknown["ref"] = "r" + unknown["id"].astype(str)
    unknown.loc[250, "event_type"] = "Hold"
    name = unknown.loc[250, "name"]
    where = (
        rf"unknown event type 'Hold'.* "
        rf"\(position 250, ref='r250', group name='{name}', column 'event_type'\)$"
    )
    batch = pycel.spark.detect(spark.createDataFrame(unknown), pattern, order_by="id", id_column="ref")
    with pytest.raises(DataError, match=where), pycel.spark.raise_pycel_errors():
        batch.collect()
    write_parquet_parts(unknown, tmp_path / "in", 1)
    source = spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
    stream = source.parquet(str(tmp_path / "in"))
    matches = pycel.spark.detect(stream, pattern, position_column="id", id_column="ref")
    with pytest.raises(DataError, match=where), pycel.spark.raise_pycel_errors():
        write_until_done(spark, matches, tmp_path)


@pytest.mark.spark
def test_streaming_needs_positions(spark: SparkSession, tmp_path: Path, ticks: pd.DataFrame) -> None:
    write_parquet_parts(ticks, tmp_path, 1)
    stream = spark.readStream.schema(spark.read.parquet(str(tmp_path)).schema).parquet(str(tmp_path))
    with pytest.raises(DataError, match="needs position_column="):
        pycel.spark.detect(stream, BATCH_PATTERNS["unpartitioned"])
    with pytest.raises(DataError, match=r"no column 'volume' \(read by the filter on s, the filter on b\)"):
        pycel.spark.detect(stream.drop("volume"), BATCH_PATTERNS["unpartitioned"], position_column="id")


STREAM_PATTERN = (s.where(s.volume > 800) >> pycel.plus(b.where(b.volume > 900))).within(5, on=Stock.time)


def write_until_done(spark: SparkSession, matches: Any, base: Path) -> list[Any]:
    """Run a streaming query into Parquet under ``base/out`` (checkpoint ``base/checkpoint``)
    until its input is processed; every row written so far."""
    query = (
        matches.writeStream.format("parquet")
        .option("path", str(base / "out"))
        .option("checkpointLocation", str(base / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return list(spark.read.parquet(str(base / "out")).collect())


def run_stream(spark: SparkSession, base: Path, api: str, pattern: Any = STREAM_PATTERN) -> set[MatchKey]:
    """Run the streaming query over the files in ``base/in`` (one file per micro-batch)
    until they are all processed, continuing from ``base/checkpoint``; all output so far."""
    source = base / "in"
    schema = spark.read.parquet(str(source)).schema
    events = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    matches = pycel.spark.detect(
        events,
        pattern.partition_by(Stock.name),
        position_column="id",
        id_column="ref",
        watermark="30 seconds",
        stateful_api=api,  # type: ignore[arg-type]
    )
    rows = write_until_done(spark, matches, base)
    for r in rows:  # ids of events from earlier micro-batches come from the state
        for var, positions in r["positions"].asDict().items():
            assert r["ids"][var] == [f"r{p}" for p in positions]
    keys = [row_key(r) for r in rows]
    assert len(keys) == len(set(keys))  # exactly once, also across the restart
    return set(keys)


@pytest.mark.spark
@pytest.mark.parametrize("api", ["applyInPandasWithState", "transformWithState"])
def test_streaming_equals_batch_and_survives_restart(spark: SparkSession, tmp_path: Path, api: str) -> None:
    """Micro-batches over files, the query stopped and restarted from its checkpoint
    halfway: the matches equal the batch run over all the events."""
    if api == "transformWithState" and importlib.util.find_spec("google") is None:
        pytest.skip("transformWithStateInPandas needs protobuf")
    if api == "transformWithState" and importlib.util.find_spec("google.protobuf") is None:
        pytest.skip("transformWithStateInPandas needs protobuf")
    ticks = stock_events(1600, names=4, seed=21)
    ticks["ref"] = "r" + ticks["id"].astype(str)
    parts = np.array_split(np.arange(len(ticks)), 4)
    write_parquet_parts(ticks.iloc[: parts[1][-1] + 1], tmp_path / "in", 2)
    first = run_stream(spark, tmp_path, api)
    for k in (2, 3):
        ticks.iloc[parts[k]].to_parquet(tmp_path / "in" / f"part-{k:05d}.parquet", index=False)
    got = run_stream(spark, tmp_path, api)
    want = expected(STREAM_PATTERN.partition_by(Stock.name), ticks.drop(columns=["ref"]))
    assert first < got
    assert got == want
    batch = pycel.spark.detect(
        spark.createDataFrame(ticks), STREAM_PATTERN.partition_by(Stock.name), position_column="id"
    )
    assert {row_key(r) for r in batch.collect()} == want


@pytest.mark.spark
@pytest.mark.parametrize("api", ["applyInPandasWithState", "transformWithState"])
def test_streaming_absence_at_the_end_emits_a_match_once_its_window_passed(
    spark: SparkSession, tmp_path: Path, api: str
) -> None:
    """A key's match waits until a later event of its key passes its window, or until the
    key's state expires by the watermark; what is still waiting when the input ends is
    missing, and only that. A key that stops early (ZZZ) is emitted by the expiry."""
    if api == "transformWithState" and importlib.util.find_spec("google.protobuf") is None:
        pytest.skip("transformWithStateInPandas needs protobuf")
    unblocked = pycel.seq(s.where(s.volume > 700), pycel.absent(x.where(x.volume > 990)))
    pattern = unblocked.within(5, on=Stock.time)
    ticks = stock_events(1600, names=4, seed=21)
    ticks.loc[3, ["event_type", "name", "volume"]] = ["Sell", "ZZZ", 1000]  # ZZZ's only event
    ticks["ref"] = "r" + ticks["id"].astype(str)
    write_parquet_parts(ticks, tmp_path / "in", 4)
    got = run_stream(spark, tmp_path, api, pattern)
    events = ticks.drop(columns=["ref"])
    want = expected(pattern.partition_by(Stock.name), events)
    assert got <= want
    assert (3, 3, (("s", (3,)),)) in got
    last_of_key = events.groupby("name")["time"].max()
    for start, _, _ in want - got:
        row = events.iloc[start]
        assert last_of_key[row["name"]] - row["time"] <= 5  # its key never passed its window
    assert len(got) > 0.8 * len(want) > 40


@pytest.mark.spark
def test_streaming_ships_the_kernels_in_a_file(
    spark: SparkSession, ticks_df: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streaming query's kernels go to the executors as a file added to the application
    (its state function must stay small): the file holds this pycel's compiled entries,
    and a worker with another, empty cache installs them from it."""
    import pickle

    from pyspark import SparkFiles

    from pycel.jit.cache import versioned_name
    from pycel.spark._plan import runner_spec
    from pycel.spark._runner import _install_compiled, ship_as_file

    query = pycel.compile(BATCH_PATTERNS["comparison"])
    spec = runner_spec(
        query, ticks_df.schema, type_column="event_type", position_column="id",
        key_columns=list(query.partition), id_column=None, include_events=False, ship_kernels=False,
    )  # fmt: skip
    assert spec.compiled == () and spec.compiled_file is None
    shipped = ship_as_file(spec, spark)
    assert shipped.compiled_file is not None
    with open(SparkFiles.get(shipped.compiled_file), "rb") as f:
        entries = pickle.load(f)
    assert entries and {e.directory for e in entries} == {versioned_name()}
    monkeypatch.setenv("PYCEL_CACHE_DIR", str(tmp_path))
    _install_compiled(shipped)
    installed = {p.name for p in (tmp_path / versioned_name()).iterdir()}
    assert {e.data_name for e in entries} <= installed


class Reading(pycel.Event):
    at: pycel.Field[pycel.Timestamp]


class High(Reading): ...


class Low(Reading): ...


def test_ranges_over_a_naive_timestamp_across_a_dst_change(spark: SparkSession) -> None:
    """The halo of a range cut measured a timestamp_ntz time through the session's time
    zone: across a DST change (Europe/Berlin, 2024-10-27) ranges lost matches that one
    group finds (found by a probe); the engine reads naive times as UTC."""
    n = 400
    at = pd.Timestamp("2024-10-27 00:00") + pd.to_timedelta(np.arange(n) * 60, unit="s")
    kinds = ["High"] * (n // 2) + ["Low"] * (n // 2)
    frame = pd.DataFrame({"id": np.arange(n), "event_type": kinds, "at": at})
    schema = T.StructType(
        [T.StructField("id", T.LongType()), T.StructField("event_type", T.StringType()),
         T.StructField("at", T.TimestampNTZType())]
    )  # fmt: skip
    hi, lo = pycel.alias(High, "hi"), pycel.alias(Low, "lo")
    pattern = pycel.seq(hi, lo).within(seconds=70 * 60, on=Reading.at)
    want = pycel.compile(pattern).run(frame.drop(columns=["id"])).keys()
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Europe/Berlin")
    try:
        df = spark.createDataFrame(frame.astype({"at": "datetime64[us]"}), schema)
        for ranges in (1, 2, 5):
            rows = pycel.spark.detect(df, pattern, order_by="at", ranges=ranges).collect()
            assert {row_key(r) for r in rows} == want and len(want) > 1000, ranges
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_bad_ids_positions_and_reserved_names_are_clear_errors(spark: SparkSession) -> None:
    """Each raised Spark's AnalysisException or a misleading message (found by a probe)."""
    df = spark.createDataFrame(stock_events(40, names=2, seed=2))
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    pattern = pycel.seq(s, b).within(events=6).partition_by(Stock.name)
    cases = {
        "position -10 is negative": lambda: pycel.spark.detect(
            df.withColumn("p", F.col("id") - 10), pattern, position_column="p"
        ),
        "no id column 'nope'": lambda: pycel.spark.detect(df, pattern, order_by="time", id_column="nope"),
        "'_pycel_position': names starting with _pycel_ are pycel's own": lambda: pycel.spark.detect(
            df.withColumn("_pycel_position", F.lit(1)), pattern, order_by="id"
        ),
        "the id column 'm' is a map": lambda: pycel.spark.detect(
            df.withColumn("m", F.create_map(F.lit("a"), F.col("id"))), pattern, order_by="time", id_column="m"
        ),
    }
    for message, run in cases.items():
        with pytest.raises(DataError, match=re.escape(message)), pycel.spark.raise_pycel_errors():
            run().collect()
