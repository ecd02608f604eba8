"""pycel on Apache Spark: find a pattern's matches in a (batch or streaming) DataFrame.

``import pycel`` never imports this module; ``import pycel.spark`` needs ``pyspark``
(``pip install pycel[spark]``). See ``docs/spark.md`` for the semantics in full.

Example::

    import pycel.spark

    matches = pycel.spark.detect(events_df, pattern, time="time")
    matches.select("name", "match_start", "match_end", "positions.s").show()

One output row per match: the pattern's ``partition_by`` key columns, ``match_start`` and
``match_end``, ``positions`` (a struct with one ``array<long>`` per variable), ``ids``
(the same with the values of ``id_column``) and, with ``include_events=True``, ``events``
(per variable, the matched rows as structs).

Positions are global, as in :meth:`pycel.CompiledQuery.run`: an event's position is its
0-based index in the whole DataFrame ordered by ``order_by`` (or ``time``), so the matches
equal ``query.run`` on the same rows sorted the same way. A streaming DataFrame has no
whole to number: it takes the positions from ``position_column``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from datetime import timedelta
from typing import Literal

from pyspark.sql import DataFrame

from ._batch import Matcher, SingleGroupWarning, detect_batch, matcher, with_positions
from ._errors import raise_pycel_errors
from ._plan import PatternArg, TypesArg
from ._runner import EVENTS, IDS, MATCH_END, MATCH_START, POSITIONS
from ._streaming import ShufflePartitionsWarning, WaitingMatchesWarning

__all__ = [
    "EVENTS",
    "IDS",
    "MATCH_END",
    "MATCH_START",
    "POSITIONS",
    "Matcher",
    "ShufflePartitionsWarning",
    "WaitingMatchesWarning",
    "SingleGroupWarning",
    "detect",
    "matcher",
    "raise_pycel_errors",
    "with_positions",
]


def detect(
    df: DataFrame,
    pattern: PatternArg,
    *,
    time: str | None = None,
    order_by: str | Sequence[str] | None = None,
    position_column: str | None = None,
    event_type_column: str = "event_type",
    id_column: str | None = None,
    include_events: bool = False,
    types: TypesArg = (),
    watermark: str | timedelta | None = None,
    state_timeout: float | timedelta | None = None,
    late: Literal["error", "drop"] = "error",
    stateful_api: Literal["auto", "transformWithState", "applyInPandasWithState"] = "auto",
    ranges: int | None = None,
) -> DataFrame:
    """The matches of ``pattern`` in ``df``, one row per match (see the module docstring).

    ``pattern``: a pycel pattern, a :class:`pycel.CompiledQuery`, or a CEQL query text
    (then ``types`` holds its declaration: text, a :class:`pycel.ceql.Declaration` or
    the Event classes). ``types``: event types in the data beyond the pattern's own.

    Batch DataFrames: the stream order is ``order_by`` (columns), else ``time`` (default:
    the attribute of the pattern's time window); ``id_column`` breaks ties. Positions are
    numbered in that order over the whole DataFrame, unless ``position_column`` already
    holds them. Patterns with ``partition_by``, or an equality join every event takes
    part in, run one group per key (``groupBy(keys).applyInPandas``); others run as a
    single group. A windowed pattern (count or time window) without CONSUME BY or
    LIMIT is cut into position ranges evaluated in parallel, each
    also reading the window's span before it (see docs/spark.md): the whole stream when
    it would run as one group, else the keys holding more than one range's share of
    the events. ``ranges`` sets how many (default: 2 per core, from the number of events
    and the cluster's cores; one core: no cut; 1: no cut); each range runs as a task.

    Streaming DataFrames: ``position_column`` is required (positions increasing in
    arrival order per key); each key's engine state lives in Spark's state store, so a
    query restarted from its checkpoint continues exactly. ``watermark`` (a delay such as
    ``"10 minutes"`` on the ``time`` column) lets keys whose window has passed drop their
    state; ``state_timeout`` does the same for patterns without a time window, that long
    (event time) after a key's last event. ``late``: what to do with an event at or
    before a position its key already processed. ``stateful_api`` picks Spark's
    ``transformWithStateInPandas`` (Spark 4, RocksDB state store) or
    ``applyInPandasWithState``; ``"auto"`` uses the first when it is available.

    Raises :class:`pycel.DataError` for missing or mistyped columns before Spark runs
    (and, in batch with ``position_column`` and a pattern grouped by key, for repeated or
    null positions: one small job). Bad rows (unknown event types, time going backwards
    within a key; repeated or null positions of a pattern without keys) fail the job at
    the action; inside :func:`raise_pycel_errors` that failure is a
    :class:`pycel.DataError` naming the event's position, id and key (a job ``detect``
    runs itself, to plan ranges or check positions, raises it directly). A timestamp
    outside the nanosecond range (before 1677-09-21, after 2262-04-11) is such a bad row.
    """
    if df.isStreaming:
        from ._streaming import detect_stream

        _ignored(order_by=order_by, ranges=ranges, kind="a batch")
        return detect_stream(
            df,
            pattern,
            time=time,
            position_column=position_column,
            event_type_column=event_type_column,
            id_column=id_column,
            include_events=include_events,
            types=types,
            watermark=watermark,
            state_timeout=state_timeout,
            late=late,
            stateful_api=stateful_api,
        )
    _ignored(watermark=watermark, state_timeout=state_timeout, kind="a streaming")
    with raise_pycel_errors():  # (the jobs detect runs itself to plan, over the same rows)
        return detect_batch(
            df,
            pattern,
            time=time,
            order_by=order_by,
            position_column=position_column,
            event_type_column=event_type_column,
            id_column=id_column,
            include_events=include_events,
            types=types,
            ranges=ranges,
        )


def _ignored(kind: str, **options: object) -> None:
    """Warn about ``options`` given (not None) that only ``kind`` DataFrame reads."""
    given = [name for name, value in options.items() if value is not None]
    if given:
        warnings.warn(
            f"{', '.join(f'{name}=' for name in given)} applies to {kind} DataFrame only; "
            "it is ignored here",
            UserWarning,
            stacklevel=3,
        )
