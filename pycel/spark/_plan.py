"""The driver side shared by batch and streaming: compile the pattern, check the DataFrame's
columns against it, and describe the output schema.

Every check that can be made from the schema alone is made here, before Spark runs
anything, so a missing column or a column of the wrong type is a :class:`DataError` on the
driver rather than a failed task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import types as T

from ..engine import CompiledQuery, compile
from ..errors import DataError, PatternError
from ..events import Event
from ..expr import Attr, Expr
from ._runner import EVENTS, IDS, MATCH_END, MATCH_START, POSITIONS, RunnerSpec

#: What a pattern may be: a DSL pattern, a compiled query, or a CEQL query text.
PatternArg = Any
#: Extra event types: classes, a CEQL Declaration / mapping, or CEQL declaration text.
TypesArg = Iterable[type[Event]] | Mapping[str, type[Event]] | str

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
            from .. import ceql
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


def columns_read(query: CompiledQuery) -> set[str]:
    """The attributes the pattern's predicates, partition, join keys, post-filters and
    window read."""
    found: set[str] = set(query.partition)
    found.update(attr for key in query.join_keys for _, attr in key.attributes)
    if query.post_filters is not None:
        found.update(query.post_filters.attributes)
    if query.time_attribute is not None:
        found.add(query.time_attribute)

    def walk(e: Expr[Any]) -> None:
        if isinstance(e, Attr):
            found.add(e.name)
        for child in e.children():
            walk(child)

    for atom in query.nfa.atoms:
        for pred in (*atom.filters, atom.type_predicate):
            if pred is not None:
                walk(pred)
    return found


def output_variables(query: CompiledQuery) -> tuple[str, ...]:
    """The variables a match reports (all, or those of ``select()``), in pattern order."""
    return tuple(v for k, v in enumerate(query.variables) if query.projection_mask >> k & 1)


def as_list(columns: str | Sequence[str] | None) -> list[str]:
    if columns is None:
        return []
    return [columns] if isinstance(columns, str) else list(columns)


def check_columns(
    schema: T.StructType, query: CompiledQuery, type_column: str, needed: Iterable[str]
) -> list[str]:
    """Check the DataFrame schema against the query; return the attribute columns the
    engine reads (every declared attribute the DataFrame has)."""
    fields = {f.name: f.dataType for f in schema.fields}
    missing = [
        c for c in dict.fromkeys([type_column, *needed, *sorted(columns_read(query))]) if c not in fields
    ]
    if missing:
        raise DataError(
            f"the DataFrame has no column {missing[0]!r} (missing: {missing}); it has {list(fields)}"
        )
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
    needed: Iterable[str] = (),
) -> RunnerSpec:
    """Check the input schema and describe the work of one group."""
    attributes = check_columns(schema, query, type_column, [position_column, *key_columns, *needed])
    if id_column is not None and id_column not in schema.fieldNames():
        raise DataError(f"the DataFrame has no id column {id_column!r}", column=id_column)
    internal = (position_column,) if position_column.startswith("_pycel_") else ()
    event_columns = tuple(c for c in schema.fieldNames() if c not in internal) if include_events else ()
    return RunnerSpec(
        query=query,
        type_column=type_column,
        attributes=tuple(attributes),
        position_column=position_column,
        key_columns=tuple(key_columns),
        id_column=id_column,
        event_columns=event_columns,
        variables=output_variables(query),
    )


def output_schema(spec: RunnerSpec, schema: T.StructType) -> T.StructType:
    """The Spark schema of the match rows :func:`pycel.spark._runner.match_rows` builds."""

    def per_variable(element: T.DataType) -> T.StructType:
        return T.StructType([T.StructField(v, T.ArrayType(element, True), False) for v in spec.variables])

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
