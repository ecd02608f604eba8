"""Detection on a streaming DataFrame (Structured Streaming) with per-key engine state.

Each key (the pattern's ``partition_by`` values, or one key for an unpartitioned
pattern) keeps a :class:`~pycel.spark._runner.KeyState` in Spark's state store: the engine
stream's snapshot, the last position processed and, when ids or events are reported, the
rows later matches may still include. Every micro-batch pushes a key's new events, in
position order, into its restored stream and emits the matches that end in them, so the
output equals a batch run over the same events as long as each key's events arrive in
position order across micro-batches (within a micro-batch any order is fine).

State expires by event time: with a watermark, a key whose last event is older than the
watermark by more than the time window (or ``state_timeout``) can take part in no further
match, so its state is dropped (``GroupStateTimeout.EventTimeTimeout`` /
an event-time timer).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import attrs
import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from pycel.engine import CompiledQuery
from pycel.errors import DataError

from ._batch import checked_times, exact_integers, grouping, with_groups
from ._plan import (
    PatternArg,
    TypesArg,
    check_columns,
    check_integral,
    compile_pattern,
    output_schema,
    runner_spec,
)
from ._runner import KeyState, RunnerSpec, advance, exact_integer_columns, expire, ship_as_file

EVENT_TIME = "_pycel_event_time"
#: Shuffle partitions beyond this many per core make the stateful step warn.
_PARTITIONS_PER_CORE = 4


class ShufflePartitionsWarning(UserWarning):
    """A streaming query would keep its state in many more shuffle partitions than there
    are cores: every micro-batch then runs that many small stateful tasks."""


class WaitingMatchesWarning(UserWarning):
    """A pattern that ends with an absence emits a key's match once a later event of
    the key passes the match's window, or when the key's state expires; the streaming
    query has no expiry, so a key that stops sending events keeps its last matches."""


def check_expiry(query: CompiledQuery, expiry: int | None) -> None:
    """Warn when a pattern ends with an absence and its streaming state never expires."""
    if query.nfa.end_atoms and expiry is None:
        warnings.warn(
            "pycel: the pattern ends with an absence, so a key's match is emitted once a "
            "later event of the key passes its window, or when the key's state expires; "
            "this query has no expiry (it needs watermark=, and state_timeout= for a count "
            "window), so a key that stops sending events keeps its last matches waiting",
            WaitingMatchesWarning,
            stacklevel=4,
        )


def check_shuffle_partitions(df: DataFrame) -> None:
    """Warn when ``spark.sql.shuffle.partitions`` is far above the cluster's cores.

    The stateful step (one state store per shuffle partition) runs one task per
    partition in every micro-batch, however few events it holds, and the number is fixed
    by the query's first start (it is stored in the checkpoint). With Spark's default of
    200, a 10k-event micro-batch took 46-95 s on two cores; with 4, 1.5-3.5 s. pycel
    cannot choose it for one query (it is a session setting read when the query starts),
    so it says so when the query is defined."""
    session = df.sparkSession
    partitions = int(session.conf.get("spark.sql.shuffle.partitions", "200") or 200)
    try:
        cores = int(session.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: assume a small cluster
        cores = 2
    if partitions > _PARTITIONS_PER_CORE * max(cores, 2):
        warnings.warn(
            f"pycel: spark.sql.shuffle.partitions is {partitions} for a cluster of about {cores} "
            f"cores; a streaming query keeps its state in that many partitions and runs that many "
            f"tasks per micro-batch, fixed at its first start. Set it to about the number of cores "
            f"(e.g. spark.conf.set('spark.sql.shuffle.partitions', {max(cores, 2)})) before the "
            "query first starts (a query restarted from a checkpoint keeps its number)",
            ShufflePartitionsWarning,
            stacklevel=4,
        )


_STATE_SCHEMA = T.StructType(
    [T.StructField("blob", T.BinaryType(), False), T.StructField("last_time_ms", T.LongType(), False)]
)


def _seconds(value: float | timedelta, what: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise DataError(f"{what} must not be negative, got {value!r}")
    return seconds


def expiry_ms(query: CompiledQuery, state_timeout: float | timedelta | None) -> int | None:
    """How long (event-time ms) after a key's last event its state may be dropped.

    Every strategy chooses among the runs that fit the window (docs/strategies.md), so a
    key idle for longer than a time window can output nothing more, whatever its strategy."""
    if state_timeout is not None:
        return int(_seconds(state_timeout, "state_timeout") * 1000)
    if query.window_unit in ("seconds", "units"):
        return int(np.ceil(query.window_size * 1000))  # units of an integer time count as seconds
    return None


class _KeyTimes:
    """Event time of a frame's rows in epoch milliseconds (the watermark's unit)."""

    def __init__(self, column: str | None, dtype: T.DataType | None) -> None:
        self.column = column
        self.is_timestamp = isinstance(dtype, T.TimestampType | T.TimestampNTZType)

    def last_ms(self, frame: pd.DataFrame) -> int | None:
        if self.column is None or not len(frame):
            return None
        values = frame[self.column]
        if self.is_timestamp:
            stamps = pd.to_datetime(values, utc=True).dropna()
            return int(stamps.max().value // 1_000_000) if len(stamps) else None
        numbers = values.dropna()
        return int(numbers.max()) * 1000 if len(numbers) else None


def detect_stream(
    df: DataFrame,
    pattern: PatternArg,
    *,
    time: str | None,
    position_column: str | None,
    event_type_column: str,
    id_column: str | None,
    include_events: bool,
    types: TypesArg,
    watermark: str | timedelta | None,
    state_timeout: float | timedelta | None,
    late: str,
    stateful_api: str,
) -> DataFrame:
    """The streaming form of :func:`pycel.spark.detect` (it documents the arguments)."""
    query = compile_pattern(pattern, types)
    if position_column is None:
        raise DataError(
            "a streaming DataFrame has no global order to number: detect() needs position_column=, "
            "an integer column increasing in stream order (e.g. a sequence number or an offset); "
            "with a 0-based sequence number the matches equal a batch run on the same events"
        )
    if late not in ("error", "drop"):
        raise DataError(f"late= must be 'error' or 'drop', got {late!r}")
    if time is None and query.window_unit in ("seconds", "units"):
        time = query.time_attribute
    if watermark is not None and time is None:
        raise DataError("watermark= needs the event-time column: pass time=")
    # Every column the query reads is checked before the stream starts.
    timed = [(time, "time=")] if time is not None else []
    check_columns(df.schema, query, event_type_column, [(position_column, "position_column"), *timed])
    check_integral(df.schema, position_column, "position")
    expiry = expiry_ms(query, state_timeout)
    if state_timeout is not None and watermark is None:
        raise DataError("state_timeout= is measured in event time and needs watermark=")
    spec = runner_spec(
        query,
        df.schema,
        type_column=event_type_column,
        position_column=position_column,
        key_columns=list(query.partition),
        id_column=id_column,
        include_events=include_events,
        needed=[(time, "time=")] if time is not None else [],
        ship_kernels=False,  # a large state function is broadcast, which its runner cannot load
    )
    schema = output_schema(spec, df.schema)
    keys = grouping(query)
    events = df
    for k in query.partition:
        events = events.where(F.col(k).isNotNull())
    wanted = list(dict.fromkeys([*keys, event_type_column, *spec.attributes, *spec.kept_columns]))
    if time is not None:
        wanted.append(time) if time not in wanted else None
    events = checked_times(events.select(*wanted), spec)
    times = _KeyTimes(time, df.schema[time].dataType if time is not None else None)
    if watermark is not None:
        assert time is not None
        delay = (
            f"{int(_seconds(watermark, 'watermark') * 1000)} milliseconds"
            if isinstance(watermark, timedelta)
            else watermark
        )
        if times.is_timestamp:
            events = events.withWatermark(time, delay)
        else:
            check_integral(df.schema, time, "time")
            if query.schema.fields.get(time) == "time":
                raise DataError(
                    f"watermark= on {time!r}: a Timestamp attribute needs a timestamp column for "
                    "watermarks (integer columns are taken as seconds)",
                    column=time,
                )
            events = events.withColumn(EVENT_TIME, F.timestamp_seconds(F.col(time))).withWatermark(
                EVENT_TIME, delay
            )
    else:
        expiry = None
    events, keys, _ = with_groups(events, query, event_type_column)
    events, flagged = exact_integers(events)  # (as in batch: exact past pandas)
    spec = attrs.evolve(spec, null_flagged=flagged)
    spec = ship_as_file(spec, df.sparkSession)  # so the kernels go as a file instead
    check_shuffle_partitions(df)
    check_expiry(query, expiry)
    grouped = events.groupBy(*keys)
    api = _choose_api(df, stateful_api)
    if api == "transformWithState":
        processor = _make_processor(spec, late, expiry, times, events.columns)
        return grouped.transformWithStateInPandas(
            statefulProcessor=processor,
            outputStructType=schema,
            outputMode="Append",
            timeMode="EventTime" if expiry is not None else "None",
        )
    timeout = GroupStateTimeout.EventTimeTimeout if expiry is not None else GroupStateTimeout.NoTimeout
    return grouped.applyInPandasWithState(
        _with_state_function(spec, late, expiry, times),
        outputStructType=schema,
        stateStructType=_STATE_SCHEMA,
        outputMode="Append",
        timeoutConf=timeout,
    )


def _choose_api(df: DataFrame, requested: str) -> str:
    has_tws = hasattr(df.groupBy(), "transformWithStateInPandas")
    provider = df.sparkSession.conf.get("spark.sql.streaming.stateStore.providerClass", "") or ""
    rocksdb = "RocksDB" in provider
    protobuf = (
        importlib.util.find_spec("google") is not None
        and importlib.util.find_spec("google.protobuf") is not None
    )
    if requested == "auto":
        return "transformWithState" if has_tws and rocksdb and protobuf else "applyInPandasWithState"
    if requested == "transformWithState":
        if not has_tws:
            raise DataError("transformWithStateInPandas needs Spark 4 or later; use stateful_api='auto'")
        if not protobuf:
            raise DataError("transformWithStateInPandas needs the protobuf package: pip install protobuf")
        if not rocksdb:
            raise DataError(
                "transformWithStateInPandas needs the RocksDB state store: set "
                "spark.sql.streaming.stateStore.providerClass to "
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
            )
        return requested
    if requested != "applyInPandasWithState":
        raise DataError(f"unknown stateful_api {requested!r}")
    return requested


def _step(
    spec: RunnerSpec,
    late: str,
    times: _KeyTimes,
    blob: bytes | None,
    last_ms: int,
    frames: Iterator[pd.DataFrame],
) -> tuple[pd.DataFrame, KeyState, int]:
    """One key, one micro-batch: (new match rows, updated state, last event time in ms)."""
    parts = [f for f in frames if len(f)]
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    state = KeyState.loads(blob) if blob is not None else KeyState(spec.query.stream())
    if not len(frame):
        return frame, state, last_ms
    frame = exact_integer_columns(spec, frame)
    rows = advance(spec, state, frame, late=late)
    newest = times.last_ms(frame)
    return rows, state, max(last_ms, newest) if newest is not None else last_ms


def _with_state_function(spec: RunnerSpec, late: str, expiry: int | None, times: _KeyTimes) -> Any:
    """The function ``applyInPandasWithState`` calls per key and micro-batch."""

    def apply(key: Any, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        if state.hasTimedOut:
            # The key's windows passed the watermark: no match can follow, and the ones
            # that waited for their window to pass (an absence at the end) hold.
            rows = expire(spec, KeyState.loads(state.get[0]))
            state.remove()
            if len(rows):
                yield rows
            return
        blob, last_ms = (state.get[0], state.get[1]) if state.exists else (None, -1)
        rows, key_state, last_ms = _step(spec, late, times, blob, last_ms, frames)
        state.update((key_state.dumps(), last_ms))
        if expiry is not None and last_ms >= 0:
            deadline = last_ms + expiry + 1
            watermark = state.getCurrentWatermarkMs()
            if deadline > watermark:
                state.setTimeoutTimestamp(deadline)
            else:
                state.remove()
        if len(rows):
            yield rows

    return apply


def _make_processor(
    spec: RunnerSpec, late: str, expiry: int | None, times: _KeyTimes, columns: list[str]
) -> Any:
    """A ``StatefulProcessor`` for ``transformWithStateInPandas`` (Spark 4); ``columns``:
    the grouped DataFrame's, in order. Spark 4.0 hands the processor the columns that a
    ``withColumn`` made under positional names (``_4``, ``_5``, …), so they are named
    again here (the null flags of :func:`pycel.spark._batch.exact_integers` are read by
    name)."""

    def named(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            if list(frame.columns) != columns and len(frame.columns) == len(columns):
                frame.columns = columns
            yield frame

    from pyspark.sql.streaming.stateful_processor import (
        ExpiredTimerInfo,
        StatefulProcessor,
        StatefulProcessorHandle,
        TimerValues,
    )

    class PycelProcessor(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.handle = handle
            self.state = handle.getValueState("pycel", _STATE_SCHEMA)

        def handleInputRows(self, key: Any, rows: Any, timerValues: TimerValues) -> Iterator[pd.DataFrame]:
            got = self.state.get() if self.state.exists() else None
            blob, last_ms = (got[0], got[1]) if got is not None else (None, -1)
            out, key_state, last_ms = _step(spec, late, times, blob, last_ms, named(rows))
            self.state.update((key_state.dumps(), last_ms))
            if expiry is not None and last_ms >= 0:
                for old in list(self.handle.listTimers()):
                    self.handle.deleteTimer(old)
                self.handle.registerTimer(last_ms + expiry + 1)
            if len(out):
                yield out

        def handleExpiredTimer(
            self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
        ) -> Iterator[pd.DataFrame]:
            # The key's windows passed the watermark: no match can follow, and the ones
            # that waited for their window to pass (an absence at the end) hold.
            got = self.state.get() if self.state.exists() else None
            rows = expire(spec, KeyState.loads(got[0])) if got is not None else pd.DataFrame()
            self.state.clear()
            return iter([rows] if len(rows) else [])

        def close(self) -> None:
            pass

    return PycelProcessor()
