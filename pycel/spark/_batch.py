"""Batch detection on a Spark DataFrame, stream positions, and the pandas-UDF form."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Protocol, cast

import attrs
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pycel.engine import CompiledQuery
from pycel.errors import DataError
from pycel.language.events import event_name

from ._plan import (
    PatternArg,
    TypesArg,
    as_list,
    check_columns,
    check_integral,
    compile_pattern,
    output_schema,
    runner_spec,
)
from ._ranges import (
    HOT,
    RANGE,
    RangePlan,
    plan_ranges,
    range_refusal,
    time_key,
    with_range_groups,
)
from ._runner import NULL_FLAG, RunnerSpec, run_group
from ._tasks import one_task_per_range

POSITION = "_pycel_position"
GROUP = "_pycel_group"
#: An unpartitioned group larger than this warns (on the executor) that it runs on one core.
LARGE_GROUP_ROWS = 5_000_000
#: How many repeated positions a DataError lists.
_SHOWN_DUPLICATES = 5


class SingleGroupWarning(UserWarning):
    """An unpartitioned pattern ran a large input as one group, on one core; or
    ``ranges=`` was refused for a pattern whose clauses look before its window."""


def with_positions(df: DataFrame, order_by: str | Sequence[str], column: str = "position") -> DataFrame:
    """``df`` with a ``column`` of stream positions: each row's 0-based index in the whole
    DataFrame ordered by ``order_by`` (ascending, nulls first).

    The positions are what :func:`pycel.spark.detect` reports, so this is the column to
    give :func:`pycel.spark.matcher`. Ties in ``order_by`` are broken arbitrarily: make
    the order total (add an id column) for reproducible positions.

    Example::

        events = pycel.spark.with_positions(df, ["time", "id"])
    """
    cols = as_list(order_by)
    if not cols:
        raise DataError("with_positions() needs at least one order_by column")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"the DataFrame has no order_by column {missing[0]!r}; it has {df.columns}")
    if hasattr(df, "zipWithIndex"):  # Spark >= 4.2: a distributed sort, then per-partition counts
        return df.orderBy(*cols).zipWithIndex(column)
    window = Window.orderBy(*cols)  # older Spark: one partition does the numbering
    return df.withColumn(column, F.row_number().over(window) - F.lit(1))


def stream_order(
    query: CompiledQuery, time: str | None, order_by: str | Sequence[str] | None, id_column: str | None
) -> tuple[str | None, list[str]]:
    """(event-time column, columns defining the stream order) from detect's arguments."""
    if time is None and query.window_unit in ("seconds", "units"):
        time = query.time_attribute
    cols = as_list(order_by) or ([time] if time is not None else [])
    if cols and id_column is not None and id_column not in cols:
        cols.append(id_column)  # ties in time are broken by id
    return time, cols


def join_group_column(query: CompiledQuery, type_column: str) -> Column | None:
    """For a join on differently named attributes (``o.sym == f.ticker``, no
    PARTITION BY): per event, the value its type's attribute carries for the join, so
    that groups by it hold whole matches; None when no such column applies.

    Values are normalized so that values the engine finds equal group together (ints as
    longs, floats with -0.0 as 0.0, anything else as text; merging unequal values is
    harmless, splitting equal ones is not). Events of types the join does not read get
    null and go to one group of their own, where the engine still checks them (unknown
    types are errors, not dropped)."""
    classes = _shared_classes(query)
    if query.consume == 1 or query.partition or not classes or grouping(query):
        return None
    attributes, dtype = classes[0]
    if dtype == "time":  # a Spark timestamp and epoch nanoseconds in a bigint have no common
        return None  # text or number here: one group, where the engine compares them exactly
    column: Column | None = None
    for tid, name in enumerate(query.schema.type_names):
        names = {a for t, a in attributes if t in query.schema.supertypes[tid]}
        if len(names) > 1:
            return None  # one group: the engine reports the ambiguity
        if not names:
            continue
        raw = F.col(names.pop())
        if dtype == "int":
            value = raw.cast("long")
        elif dtype == "float":
            value = raw.cast("double") + F.lit(0.0)
        else:
            value = raw.cast("string")
        is_type = F.col(type_column) == F.lit(name)
        column = F.when(is_type, value) if column is None else column.when(is_type, value)
    return column


def with_groups(
    events: DataFrame, query: CompiledQuery, type_column: str
) -> tuple[DataFrame, list[str], bool]:
    """(``events`` with any derived group column, the group-by columns, whether the
    stream runs as one group)."""
    keys = grouping(query)
    if keys:
        return events, keys, False
    derived = join_group_column(query, type_column)
    if derived is not None:
        return events.withColumn(GROUP, derived), [GROUP], False
    return events.withColumn(GROUP, F.lit(0)), [GROUP], True


def grouping(query: CompiledQuery) -> list[str]:
    """The group-by keys: the pattern's PARTITION BY; else the attribute of an equality
    class that every event type reads under the same name (all events of a match share
    its value, so the groups are independent); else none (one group).

    CONSUME BY ANY discards partial matches of every partition when one produces output,
    so such a query cannot be split by key and runs as one group.
    """
    if query.consume == 1:
        return []
    if query.partition:
        return list(query.partition)
    for attributes, _ in _shared_classes(query):
        names = {attr for _, attr in attributes}
        if len(names) == 1:
            return [names.pop()]
    return []


def _shared_classes(query: CompiledQuery) -> list[tuple[tuple[tuple[str, str], ...], str]]:
    """The equality classes every event of a match takes part in, as ((event type,
    attribute), ...) and the values' type: the run keys, or the parallelized automaton's
    classes over all of its atoms."""
    classes = [(key.attributes, key.dtype) for key in query.join_keys]
    if query.hcq is not None:
        atoms = query.hcq.atoms
        for per_atom, dtype in zip(query.hcq.class_attrs, query.hcq.class_dtypes, strict=True):
            if all(a is not None for a in per_atom):
                pairs = {(event_name(atoms[i].event), a) for i, a in enumerate(per_atom) if a is not None}
                classes.append((tuple(sorted(pairs)), dtype))
    return classes


def detect_batch(
    df: DataFrame,
    pattern: PatternArg,
    *,
    time: str | None,
    order_by: str | Sequence[str] | None,
    position_column: str | None,
    event_type_column: str,
    id_column: str | None,
    include_events: bool,
    types: TypesArg,
    ranges: int | None = None,
) -> DataFrame:
    """The batch form of :func:`pycel.spark.detect` (it documents the arguments)."""
    if ranges is not None and (isinstance(ranges, bool) or not isinstance(ranges, int) or ranges < 1):
        raise DataError(f"ranges= must be a positive integer or None (automatic), got {ranges!r}")
    query = compile_pattern(pattern, types)
    time, order = stream_order(query, time, order_by, id_column)
    if position_column is None and not order:
        raise DataError(
            "detect() needs the order of the stream: pass order_by= (columns), time= (the "
            "event-time column) or position_column= (precomputed positions)"
        )
    # Every column the run reads is checked before Spark runs anything.
    if id_column is not None and id_column not in df.columns:
        raise DataError(f"the DataFrame has no id column {id_column!r}", column=id_column)
    if id_column is not None and position_column is None and id_column in order:
        if isinstance(df.schema[id_column].dataType, T.MapType):  # (ties in time sort by id)
            message = f"the id column {id_column!r} is a map, which Spark cannot sort"
            raise DataError(message, column=id_column)
    reserved = [c for c in df.columns if c.startswith("_pycel_")]
    if reserved:
        message = f"column {reserved[0]!r}: names starting with _pycel_ are pycel's own; rename it"
        raise DataError(message, column=reserved[0])
    ordering = [(c, "order_by") for c in order] if position_column is None else []
    positions = [(position_column, "position_column")] if position_column is not None else []
    check_columns(df.schema, query, event_type_column, [*positions, *ordering])
    keys = grouping(query)
    if position_column is not None:
        check_integral(df.schema, position_column, "position")
        if keys or join_group_column(query, event_type_column) is not None:
            # Groups by key: two keys' events at one position would meet in no group.
            check_distinct_positions(df, position_column, id_column)
        # Else every event is in one group, or in the range its position falls in: events
        # sharing a position meet in one group, whose check fails the job (a DataError).
    events = df if position_column is not None else with_positions(df, order, POSITION)
    spec = runner_spec(
        query,
        events.schema,
        type_column=event_type_column,
        position_column=position_column or POSITION,
        key_columns=list(query.partition),
        id_column=id_column,
        include_events=include_events,
        needed=[(time, "time=")] if time is not None else [],
    )
    schema = output_schema(spec, events.schema)
    # Events with a null key belong to no partition: they keep their positions but cannot
    # take part in a match, so they are left out before the shuffle.
    for k in query.partition:
        events = events.where(F.col(k).isNotNull())
    wanted = list(dict.fromkeys([*keys, event_type_column, *spec.attributes, *spec.kept_columns]))
    events = checked_times(events.select(*wanted), spec)
    events, keys, single = with_groups(events, query, event_type_column)
    events, keys, ranged = range_groups(events, query, spec.position_column, ranges, keys, single)
    if ranged is not None:
        spec = attrs.evolve(spec, range_column=RANGE, range_cut=ranged)
        single = False
    events, flagged = exact_integers(events)
    spec = attrs.evolve(spec, null_flagged=flagged)
    run = group_function(spec, warn_above=LARGE_GROUP_ROWS) if single else group_function(spec)
    return events.groupBy(*keys).applyInPandas(run, schema)


#: The timestamps pandas holds (datetime64[ns]), in microseconds since 1970 (Spark's unit):
#: the ends of the int64 nanosecond range, rounded inwards.
_FIRST_MICROS, _LAST_MICROS = -(2**63) // 1000 + 1, (2**63 - 1) // 1000


def checked_times(events: DataFrame, spec: RunnerSpec) -> DataFrame:
    """``events`` whose timestamp columns fail the job with a pycel DataError (position,
    id, column) at a value outside the nanosecond range, checked where Spark computes the
    column: handing it to pandas would fail inside PySpark's Arrow conversion, with no
    row named (a year-1500 timestamp). :func:`pycel.spark.raise_pycel_errors` reads the
    error's ``pycel.errors.DataError:`` line as a worker's."""
    for field in events.schema.fields:
        name, col = field.name, F.col(field.name)
        if isinstance(field.dataType, T.TimestampType):
            micros = F.unix_micros(col)
            outside = (micros < F.lit(_FIRST_MICROS)) | (micros > F.lit(_LAST_MICROS))
        elif isinstance(field.dataType, T.TimestampNTZType):  # wall-clock: no zone to convert
            first, last = (
                F.lit(str(pd.Timestamp(m, unit="us"))).cast("timestamp_ntz")
                for m in (_FIRST_MICROS, _LAST_MICROS)
            )
            outside = (col < first) | (col > last)
        else:
            continue
        where = [F.lit(" (position "), F.col(spec.position_column).cast("string")]
        if spec.id_column is not None and spec.id_column in events.columns:
            ident = F.col(spec.id_column).cast("string")
            if isinstance(events.schema[spec.id_column].dataType, T.StringType):  # as repr() shows it
                ident = F.concat(F.lit("'"), ident, F.lit("'"))
            where += [F.lit(f", {spec.id_column}="), F.coalesce(ident, F.lit("None"))]
        message = F.concat(
            # (own lines: Spark adds its error class before and SQLSTATE after)
            F.lit("\npycel.errors.DataError: time "),
            col.cast("string"),
            F.lit(" is outside the range pycel holds (1677-09-21 to 2262-04-11, nanoseconds since 1970)"),
            *where,
            F.lit(f", column {name!r})\n"),
        )
        events = events.withColumn(name, F.when(outside, F.raise_error(message)).otherwise(col))
    return events


def exact_integers(events: DataFrame) -> tuple[DataFrame, tuple[str, ...]]:
    """``events`` with each nullable integer column as its values (0 for null) and a flag
    column (``NULL_FLAG + name``), and the names of those columns: Spark hands a group's
    integer column that holds a null to pandas as float64 (2**53 + 1 rounds, an
    epoch-nanosecond time becomes a float); the executor rebuilds them exactly
    (:func:`pycel.spark._runner.exact_integer_columns`)."""
    flagged = tuple(
        f.name for f in events.schema.fields if f.nullable and isinstance(f.dataType, T.IntegralType)
    )
    for name in flagged:
        zero = F.lit(0).cast(events.schema[name].dataType)
        events = events.withColumn(NULL_FLAG + name, F.col(name).isNull())
        events = events.withColumn(name, F.coalesce(F.col(name), zero))
    return events, flagged


def range_groups(
    events: DataFrame,
    query: CompiledQuery,
    position_column: str,
    ranges: int | None,
    keys: list[str],
    single: bool,
) -> tuple[DataFrame, list[str], tuple[int, int] | None]:
    """(``events``, the group-by keys, the cut: (first position, range length), or None
    when they are not cut): the events cut by :func:`cut_into_ranges` when it cuts them,
    else as they are (``keys``: the group-by keys; ``single``: they are one constant
    group, :data:`GROUP`, which a cut stream no longer needs).

    A whole stream cut into ranges is repartitioned so that each range is a task of its
    own (:func:`pycel.spark._tasks.one_task_per_range`); hot keys' ranges share the
    shuffle with the other keys' groups."""
    by = [] if single else keys
    cut = None if ranges == 1 else cut_into_ranges(events, query, position_column, ranges, by)
    if cut is None:
        return events, keys, None
    cut_events, plan = cut
    where = (plan.first, plan.length)
    if not single:
        return cut_events, [*keys, RANGE], where
    placed, task = one_task_per_range(cut_events.drop(GROUP), plan.count)
    return placed, [task, RANGE], where


def cut_into_ranges(
    events: DataFrame, query: CompiledQuery, position_column: str, ranges: int | None, keys: list[str]
) -> tuple[DataFrame, RangePlan] | None:
    """``events`` copied into position ranges with their halos (pycel.spark._ranges)
    and the cut, or None to run as before: the pattern has no window or
    clauses that look before it (then ``ranges`` > 1 warns), one range suffices, or
    (with group-by ``keys``) no key is hot."""
    refusal = range_refusal(query)
    if refusal is not None:
        if ranges is not None and ranges > 1:
            groups = "one group per key" if keys else "one group"
            warnings.warn(
                f"pycel: ranges={ranges} ignored, the pattern runs as {groups}: {refusal}",
                SingleGroupWarning,
                stacklevel=4,
            )
        return None
    planned = plan_ranges(events, query, position_column, ranges, cluster_cores(events), keys)
    if planned is None:
        return None
    plan, hot = planned
    key = time_key(query, events.schema)
    time = key[0] if key is not None else None
    if hot is None:
        return with_range_groups(events, plan, position_column, time), plan
    marked = events.join(F.broadcast(hot), on=keys, how="left")
    cut = with_range_groups(marked, plan, position_column, time, hot=F.coalesce(F.col(HOT), F.lit(False)))
    return cut.drop(HOT), plan


def cluster_cores(df: DataFrame) -> int:
    """The cluster's default parallelism (its cores), or 2 where Spark does not say."""
    try:
        return int(df.sparkSession.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return 2


def check_distinct_positions(df: DataFrame, position_column: str, id_column: str | None) -> None:
    """Raise a :class:`DataError` naming them if positions repeat or are null anywhere in
    ``df`` (one aggregation job over that column alone: each group checks only its own
    rows, and two events of different keys at one position would go unnoticed there;
    the ids of the events are read only when there is an error to report)."""
    count = "_pycel_count"
    bad = (
        df.groupBy(position_column)
        .agg(F.count(F.lit(1)).alias(count))
        .where((F.col(count) > 1) | F.col(position_column).isNull())
        .orderBy(F.col(position_column).asc_nulls_first())
        .limit(_SHOWN_DUPLICATES)
        .collect()
    )
    if not bad:
        return
    if bad[0][position_column] is None:
        null_rows = df.where(F.col(position_column).isNull())
        which = ""
        if id_column is not None:
            null_ids = [r[0] for r in null_rows.select(id_column).limit(_SHOWN_DUPLICATES).collect()]
            which = f" ({id_column} {null_ids})"
        raise DataError(f"null positions{which}: every event needs a position", column=position_column)
    ids: dict[object, tuple[object, object]] = {}
    if id_column is not None:
        repeated = df.where(F.col(position_column).isin([r[position_column] for r in bad]))
        spans = repeated.groupBy(position_column).agg(F.min(id_column), F.max(id_column)).collect()
        ids = {r[0]: (r[1], r[2]) for r in spans}
    shown = ", ".join(
        f"{r[position_column]} ({r[count]} events"
        + (
            f", {id_column} {ids[r[position_column]][0]!r} ... {ids[r[position_column]][1]!r}"
            if id_column is not None
            else ""
        )
        + ")"
        for r in bad
    )
    more = " and maybe more" if len(bad) == _SHOWN_DUPLICATES else ""
    raise DataError(
        f"positions occur more than once: {shown}{more}; positions must be unique in the whole "
        "DataFrame (an event's index in the stream)",
        column=position_column,
    )


def group_function(spec: RunnerSpec, warn_above: int | None = None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The function ``applyInPandas`` runs per group.

    A plain one-argument function: Spark counts the arguments to decide whether to pass
    the group key too, and a callable object's ``self`` would count.
    """

    def apply(frame: pd.DataFrame) -> pd.DataFrame:
        if warn_above is not None and len(frame) > warn_above:
            warnings.warn(
                f"pycel: the pattern has no partition_by(), so all {len(frame)} events run as one "
                "group on one core; partition the pattern if its semantics allow",
                SingleGroupWarning,
                stacklevel=1,
            )
        return run_group(spec, frame)

    return apply


class Matcher(Protocol):
    """What :func:`matcher` returns: a function of a group's key and pandas frame, for
    ``groupBy(...).applyInPandas(m, m.schema)``, with the output :attr:`schema` and the
    executor-side :attr:`spec` attached."""

    schema: T.StructType
    spec: RunnerSpec

    def __call__(self, key: tuple[object, ...], frame: pd.DataFrame | None = None) -> pd.DataFrame: ...


def matcher(
    pattern: PatternArg,
    schema: T.StructType,
    *,
    position_column: str,
    event_type_column: str = "event_type",
    key_columns: Sequence[str] | None = None,
    id_column: str | None = None,
    include_events: bool = False,
    types: TypesArg = (),
) -> Matcher:
    """A function for ``df.groupBy(...).applyInPandas(m, m.schema)`` that finds the
    pattern's matches in each group. It takes the group key and the group's frame
    (``m(key, frame)``, as ``applyInPandas`` calls it); anything else, such as
    ``mapInPandas`` handing it Arrow batches, is a :class:`TypeError`: a batch holds
    pieces of partitions, and matches across two batches would be lost.

    ``schema``: the input DataFrame's schema. ``position_column``: the events' global
    stream positions (see :func:`with_positions`). ``key_columns``: input columns copied
    into each match row (default: the pattern's ``partition_by`` keys). Every group must
    hold whole partitions of the pattern: grouping by the pattern's keys, or by anything
    coarser, gives the same matches as :func:`detect`.

    Example::

        m = pycel.spark.matcher(pattern, events.schema, position_column="position")
        matches = events.groupBy("name").applyInPandas(m, m.schema)
    """
    query = compile_pattern(pattern, types)
    if position_column not in schema.fieldNames():
        raise DataError(f"the DataFrame has no position column {position_column!r}", column=position_column)
    check_integral(schema, position_column, "position")
    keys = list(query.partition) if key_columns is None else list(key_columns)
    spec = runner_spec(
        query,
        schema,
        type_column=event_type_column,
        position_column=position_column,
        key_columns=keys,
        id_column=id_column,
        include_events=include_events,
    )
    fn = whole_group_function(spec)
    fn.schema = output_schema(spec, schema)  # type: ignore[attr-defined]
    fn.spec = spec  # type: ignore[attr-defined]
    fn.__doc__ = f"Matches of {query.text} in one group of events (pycel.spark.matcher)."
    return cast(Matcher, fn)


def whole_group_function(spec: RunnerSpec) -> Callable[..., pd.DataFrame]:
    """The two-argument function :func:`matcher` returns.

    It takes the group key as well as the frame so that only a grouped
    ``applyInPandas`` can call it: a pattern needs all the events of a partition at
    once, and ``mapInPandas`` (or any per-batch call) would hand it Arrow batches that
    cut partitions apart and silently lose the matches spanning two batches. Called with
    an iterator of batches (``mapInPandas(m, ...)``) or without a key tuple, it raises
    a :class:`TypeError` that says so.
    """

    # Two parameters: Spark then passes the key. The default lets mapInPandas's one
    # argument (an iterator of batches) reach the explanation below.
    def apply_to_group(key: tuple[object, ...], frame: pd.DataFrame | None = None) -> pd.DataFrame:
        if not isinstance(key, tuple) or not isinstance(frame, pd.DataFrame):
            raise TypeError(_WHOLE_GROUPS)
        return run_group(spec, frame)

    return apply_to_group


_WHOLE_GROUPS = (
    "pycel.spark.matcher() finds matches in whole groups: use it as "
    "df.groupBy(keys).applyInPandas(m, m.schema), which calls m(key, frame) with all of a "
    "group's events; per-batch use (mapInPandas, or calling it on chunks) would cut "
    "partitions apart and lose the matches that span two batches"
)
