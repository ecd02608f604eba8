"""The driver side shared by batch and streaming: compile the pattern, check the DataFrame's
columns against it, and describe the output schema.

Every check that can be made from the schema alone is made here, before Spark runs
anything, so a missing column or a column of the wrong type is a :class:`DataError` on the
driver rather than a failed task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from pyspark.sql import types as T

from pycel.data.batch import describe_event_types
from pycel.engine import CompiledQuery, compile
from pycel.errors import DataError, PatternError
from pycel.language.events import Event
from pycel.language.expr import Attr, Expr

from ._runner import EVENTS, IDS, MATCH_END, MATCH_START, POSITIONS, RunnerSpec, warm_kernels

#: What a pattern may be: a DSL pattern, a compiled query, or a CEQL query text.
PatternArg = Any
#: Extra event types: classes, a CEQL Declaration / mapping, or CEQL declaration text.
TypesArg = Iterable[type[Event]] | Mapping[str, type[Event]] | str

#: Columns pycel adds to a DataFrame start with this; they never appear in messages or output.
INTERNAL_PREFIX = "_pycel_"

_ACCEPTS: dict[str, tuple[type[T.DataType], ...]] = {
    "int": (T.IntegralType,),
    "float": (T.IntegralType, T.FloatType, T.DoubleType),
    "bool": (T.BooleanType,),
    "str": (T.StringType, T.VarcharType, T.CharType),
    "time": (T.TimestampType, T.TimestampNTZType, T.IntegralType),
}


def compile_pattern(pattern: PatternArg, types: TypesArg = ()) -> CompiledQuery:
    """A :class:`CompiledQuery` from a DSL pattern, a compiled query or a CEQL text.

    For CEQL text, ``types`` gives the event types (classes, a
    :class:`pycel.ceql.Declaration`, or the ``CREATE STREAM`` declaration text).
    """
    if isinstance(pattern, CompiledQuery):
        return pattern
    classes: list[type[Event]]
    if isinstance(types, str) or isinstance(pattern, str):
        try:
            from pycel import ceql
        except ImportError as err:  # pragma: no cover - the CEQL parser is part of pycel
            raise PatternError("CEQL text needs pycel.ceql, which is not available") from err
        decl: Any = ceql.parse_declaration(types) if isinstance(types, str) else types
        if isinstance(pattern, str):
            if not decl:
                raise PatternError(
                    "a CEQL query needs its event types: pass types= (a CREATE STREAM declaration "
                    "text, a pycel.ceql.Declaration or the Event classes)"
                )
            pattern = ceql.parse_query(pattern, decl)
        classes = list(decl.values()) if isinstance(decl, Mapping) else list(decl)
    elif isinstance(types, Mapping):
        classes = list(types.values())
    else:
        classes = list(types)
    return compile(pattern, types=classes)


def query_strategy(query: CompiledQuery) -> str:
    """The query's selection strategy (``"all"``, ``"next"``, ...), whether the compiled
    query names it ``strategy`` or, as before, ``spec_strategy``."""
    found = getattr(query, "strategy", None)
    return found if isinstance(found, str) else str(getattr(query, "spec_strategy", "all"))


def column_readers(query: CompiledQuery) -> dict[str, list[str]]:
    """For each attribute the query reads, the parts of the query that read it (for the
    missing-column message): the filters of each variable, ``partition_by``, equality
    joins, post-filters and the time window."""
    readers: dict[str, list[str]] = {}

    def add(column: str, reader: str) -> None:
        seen = readers.setdefault(column, [])
        if reader not in seen:
            seen.append(reader)

    def walk(e: Expr[Any], reader: str) -> None:
        if isinstance(e, Attr):
            add(e.name, reader)
        for child in e.children():
            walk(child, reader)

    for atom in query.nfa.atoms:
        variables = "/".join(sorted(atom.labels)) or atom.event
        for pred in (*atom.filters, atom.type_predicate):
            if pred is not None:
                walk(pred, f"the filter on {variables}")
    for k in query.partition:
        add(k, "partition_by")
    for key in query.join_keys:
        for _, attr in key.attributes:
            add(attr, "an equality join")
    if query.hcq is not None:
        for per_atom in query.hcq.class_attrs:
            for maybe in per_atom:
                if maybe is not None:
                    add(maybe, "an equality join")
    if query.post_filters is not None:
        for attr in query.post_filters.attributes:
            add(attr, "a post-filter")
    if query.time_attribute is not None:
        add(query.time_attribute, "the time window")
    return readers


def user_columns(names: Iterable[str]) -> list[str]:
    """Column names without pycel's internal ones (``_pycel_position``, ...), for messages."""
    return [n for n in names if not n.startswith(INTERNAL_PREFIX)]


def output_variables(query: CompiledQuery) -> tuple[str, ...]:
    """The variables a match reports (all, or those of ``select()``), in pattern order."""
    return tuple(v for k, v in enumerate(query.variables) if query.projection_mask >> k & 1)


def as_list(columns: str | Sequence[str] | None) -> list[str]:
    if columns is None:
        return []
    return [columns] if isinstance(columns, str) else list(columns)


def check_columns(
    schema: T.StructType, query: CompiledQuery, type_column: str, needed: Iterable[tuple[str, str]]
) -> list[str]:
    """Check the DataFrame schema against the query; return the attribute columns the
    engine reads (every declared attribute the DataFrame has).

    ``needed``: further columns the run reads, each with what reads it (the position
    column, key columns, the event-time column)."""
    fields = {f.name: f.dataType for f in schema.fields}
    readers: dict[str, list[str]] = {type_column: ["event_type_column"]}
    for column, reader in [*((c, r) for c, rs in column_readers(query).items() for r in rs), *needed]:
        if reader not in readers.setdefault(column, []):
            readers[column].append(reader)
    missing = [c for c in readers if c not in fields]
    if missing:
        first = missing[0]
        others = f"; also missing: {missing[1:]}" if len(missing) > 1 else ""
        err = DataError(
            f"the DataFrame has no column {first!r} (read by {', '.join(readers[first])}){others}; "
            f"it has {user_columns(fields)}"
        )
        err.column = first
        raise err
    if not isinstance(fields[type_column], T.StringType | T.VarcharType | T.CharType):
        raise DataError(
            f"the event type column must be a string, but it is {fields[type_column].simpleString()}",
            column=type_column,
        )
    attributes = []
    for attr, dtype in query.schema.fields.items():
        if attr not in fields or attr == type_column:
            continue
        spark_type = fields[attr]
        if not isinstance(spark_type, _ACCEPTS[dtype]):
            raise DataError(
                f"attribute {attr!r} is declared {dtype} but the column is {spark_type.simpleString()}",
                column=attr,
            )
        attributes.append(attr)
    return attributes


def check_integral(schema: T.StructType, column: str, what: str) -> None:
    dtype = schema[column].dataType
    if not isinstance(dtype, T.IntegralType):
        raise DataError(
            f"the {what} column must hold integers, but it is {dtype.simpleString()}", column=column
        )


def runner_spec(
    query: CompiledQuery,
    schema: T.StructType,
    *,
    type_column: str,
    position_column: str,
    key_columns: Sequence[str],
    id_column: str | None,
    include_events: bool,
    needed: Iterable[tuple[str, str]] = (),
    ship_kernels: bool = True,
) -> RunnerSpec:
    """Check the input schema and describe the work of one group.

    ``needed``: further (column, what reads it) pairs, e.g. the event-time column.
    ``ship_kernels``: compile or load the query's kernels here and ship them with the spec
    (:func:`~pycel.spark._runner.warm_kernels`; streaming ships them as a file instead,
    :func:`~pycel.spark._runner.ship_as_file`: its state runner cannot load the broadcast
    a large function becomes)."""
    columns = [(position_column, "position_column"), *((k, "key_columns") for k in key_columns)]
    attributes = check_columns(schema, query, type_column, [*columns, *needed])
    if id_column is not None and id_column not in schema.fieldNames():
        raise DataError(f"the DataFrame has no id column {id_column!r}", column=id_column)
    event_columns = tuple(user_columns(schema.fieldNames())) if include_events else ()
    spec = RunnerSpec(
        query=query,
        type_column=type_column,
        attributes=tuple(attributes),
        position_column=position_column,
        key_columns=tuple(key_columns),
        id_column=id_column,
        event_columns=event_columns,
        variables=output_variables(query),
        declared_types=describe_event_types(),
    )
    return attrs.evolve(spec, compiled=warm_kernels(spec)) if ship_kernels else spec


def output_schema(spec: RunnerSpec, schema: T.StructType) -> T.StructType:
    """The Spark schema of the match rows :func:`pycel.spark._runner.match_rows` builds."""

    def per_variable(element: T.DataType) -> T.StructType:
        return T.StructType([T.StructField(v, T.ArrayType(element, True), False) for v in spec.variables])

    taken = [k for k in spec.key_columns if k in (MATCH_START, MATCH_END, POSITIONS, IDS, EVENTS)]
    if taken:  # (a row with the name twice: Spark failed the job with its own error)
        raise PatternError(
            f"partition_by({taken[0]!r}): the match rows have a column {taken[0]!r} of their own; "
            "rename that attribute in the data and its event type"
        )
    fields = [T.StructField(k, schema[k].dataType, True) for k in spec.key_columns]
    fields += [
        T.StructField(MATCH_START, T.LongType(), False),
        T.StructField(MATCH_END, T.LongType(), False),
        T.StructField(POSITIONS, per_variable(T.LongType()), False),
    ]
    if spec.id_column is not None:
        fields.append(T.StructField(IDS, per_variable(schema[spec.id_column].dataType), False))
    if spec.event_columns:
        event = T.StructType([T.StructField(c, schema[c].dataType, True) for c in spec.event_columns])
        fields.append(T.StructField(EVENTS, per_variable(event), False))
    return T.StructType(fields)
