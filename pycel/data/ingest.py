"""Ingestion: event instances, dicts, pandas DataFrames and Arrow tables → columnar batches.

A :class:`Schema` is the plain-data description of the event types a stream may carry
(names, attributes, which types each type is a subtype of) plus the string dictionary.
:func:`to_batch` validates a whole input before anything is accepted, so a bad row raises a
:class:`~pycel.errors.DataError` naming it and leaves the schema's state as it was.

Example::

    schema = Schema.for_types([Buy, Sell])
    batch = to_batch([Buy(name="X", price=1.0, time=0)], schema)
    batch.row(0)     # ("Buy", {"name": "X", "price": 1.0, "time": 0})
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.errors import DataError, short_repr
from pycel.language.events import Event, event_name
from pycel.language.expr import INT64_MAX, INT64_MIN

DEFAULT_TYPE_COLUMN = "event_type"
_NUMPY_DTYPE = {"bool": np.bool_, "int": np.int64, "float": np.float64, "str": np.int32, "time": np.int64}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def all_event_types() -> dict[str, list[type[Event]]]:
    """Every Event subclass defined so far, by event name."""
    found: dict[str, list[type[Event]]] = {}
    todo = list(Event.__subclasses__())
    while todo:
        cls = todo.pop()
        found.setdefault(event_name(cls), []).append(cls)
        todo.extend(cls.__subclasses__())
    return found


def declared_attributes() -> set[str]:
    """The attributes some Event subclass defined so far declares (a column or key outside
    them is an error, whatever the rows' types)."""
    return {f for ts in all_event_types().values() for t in ts for f in t.__fields__}


@attrs.define
class Schema:
    """The event types of a stream, their attributes, and the string dictionary.

    ``supertypes[t]`` holds the names of every event type that type ``t`` is (itself and
    its Event base classes), so an atom of type ``Stock`` matches ``Buy`` events.
    """

    type_names: list[str] = attrs.field(factory=list)
    type_fields: list[dict[str, str]] = attrs.field(factory=list)
    supertypes: list[frozenset[str]] = attrs.field(factory=list)
    fields: dict[str, str] = attrs.field(factory=dict)
    strings: list[str] = attrs.field(factory=list)
    string_codes: dict[str, int] = attrs.field(factory=dict)

    @classmethod
    def for_types(cls, types: Iterable[type[Event]]) -> Schema:
        """A schema knowing ``types`` and all their subclasses."""
        schema = cls()
        for t in types:
            schema.add_type(t)
        return schema

    def add_type(self, cls: type[Event]) -> int:
        """Register ``cls`` (and its subclasses); return its type id."""
        name = event_name(cls)
        if name in self.type_names:
            return self.type_names.index(name)
        for attr, dtype in cls.__fields__.items():
            if self.fields.setdefault(attr, dtype) != dtype:
                raise DataError(
                    f"attribute {attr!r} is {dtype} in {name} but {self.fields[attr]} in "
                    "another event type of this stream"
                )
        self.type_names.append(name)
        self.type_fields.append(dict(cls.__fields__))
        self.supertypes.append(
            frozenset(
                event_name(b)
                for b in cls.__mro__
                if isinstance(b, type) and issubclass(b, Event) and b is not Event
            )
        )
        for sub in cls.__subclasses__():
            self.add_type(sub)
        return self.type_names.index(name)

    def type_id(self, name: str, *, row: int | None = None, column: str | None = None) -> int:
        """The id of event type ``name``, resolving Event subclasses defined anywhere."""
        try:
            return self.type_names.index(name)
        except ValueError:
            pass
        candidates = all_event_types().get(name, [])
        if len(candidates) == 1:
            return self.add_type(candidates[0])
        if not candidates:
            raise DataError(
                f"unknown event type {name!r}; known: {sorted(self.type_names)}",
                row=row,
                column=column,
            )
        raise DataError(f"event type name {name!r} is ambiguous: {candidates}", row=row, column=column)

    def encode(self, text: str) -> int:
        """The dictionary code of ``text`` (assigned on first sight)."""
        code = self.string_codes.get(text)
        if code is None:
            code = self.string_codes[text] = len(self.strings)
            self.strings.append(text)
        return code

    def copy(self) -> Schema:
        return Schema(
            list(self.type_names),
            [dict(f) for f in self.type_fields],
            list(self.supertypes),
            dict(self.fields),
            list(self.strings),
            dict(self.string_codes),
        )


@attrs.frozen
class EventBatch:
    """Columnar events: ``type_ids[k]`` and ``columns[attr][k]`` for row k at global
    position ``offset + k``; ``valid[attr][k]`` is False where the value is null.

    Strings are dictionary codes into ``schema.strings``; timestamps are int64 nanoseconds
    since the epoch (UTC). ``input_columns``: the attributes a columnar input (DataFrame,
    Arrow, CSV, Parquet) had as columns, so a query can tell an absent column from nulls;
    None for rows (Event instances, dicts), where a left-out key is a null.
    """

    schema: Schema
    offset: int
    type_ids: npt.NDArray[np.int32]
    columns: dict[str, np.ndarray[Any, Any]]
    valid: dict[str, npt.NDArray[np.bool_]]
    input_columns: frozenset[str] | None = None

    def __len__(self) -> int:
        return len(self.type_ids)

    def type_name(self, k: int) -> str:
        return self.schema.type_names[int(self.type_ids[k])]

    def value(self, attr: str, k: int) -> Any:
        """The decoded value of ``attr`` at row ``k`` (None when null or undeclared)."""
        if attr not in self.columns or not self.valid[attr][k]:
            return None
        raw = self.columns[attr][k]
        dtype = self.schema.fields[attr]
        if dtype == "str":
            return self.schema.strings[int(raw)]
        if dtype == "time":
            return int(raw)  # nanoseconds: windows compare these directly
        return {"bool": bool, "int": int, "float": float}[dtype](raw)

    def event(self, position: int) -> tuple[str, dict[str, Any]]:
        """Event type name and attribute values of the event at global ``position``."""
        return self.row(position - self.offset)

    def row(self, k: int) -> tuple[str, dict[str, Any]]:
        """Event type name and decoded attribute values of row ``k``."""
        fields = self.schema.type_fields[int(self.type_ids[k])]
        return self.type_name(k), {a: self.value(a, k) for a in fields}


def _check_null(value: Any) -> Any:
    """``value`` as a plain Python value, or None when it is null (None, NaN, NaT)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float | datetime) and value != value):
        return None
    return value


def _check_value(value: Any, dtype: str, row: int, column: str, schema: Schema) -> Any:
    """Validate one value against ``dtype``; return its columnar encoding (None if null)."""
    value = _check_null(value)
    if value is None:
        return None
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool)
        or (isinstance(value, float) and value.is_integer()),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "time": isinstance(value, (datetime, int)) and not isinstance(value, bool),
    }[dtype]
    if not ok:
        raise DataError(f"expected {dtype}, got {value!r} ({type(value).__name__})", row=row, column=column)
    if dtype == "str":
        return value
    if dtype == "time" and isinstance(value, datetime):
        if value.tzinfo is None:  # a time without an offset is UTC
            value = value.replace(tzinfo=UTC)
        delta = value - _EPOCH
        value = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
        if not INT64_MIN <= value <= INT64_MAX:
            message = f"time {value} ns after the epoch is outside the 64-bit range"
            raise DataError(message, row=row, column=column)
        return value
    if dtype in ("int", "time"):
        problem = int_problem(value, dtype)
        if problem is not None:
            raise DataError(problem, row=row, column=column)
        return int(value)
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            message = f"expected float, got {short_repr(value)}: too large for a 64-bit float"
            raise DataError(message, row=row, column=column) from None
    return value


def int_problem(value: int | float, dtype: str = "int") -> str | None:
    """Why ``value`` is not a valid ``dtype`` ("int", or "time" as an integer): ints are
    64-bit signed; a float must be integral and in range. None when it is valid."""
    shown = f"expected {dtype}, got {short_repr(value)} ({type(value).__name__})"
    if isinstance(value, float) and not value.is_integer():
        return shown
    if not INT64_MIN <= value <= INT64_MAX:
        return f"{shown}: outside the 64-bit range [-2**63, 2**63 - 1]"
    return None


def _records(
    data: Any, type_column: str, classes: list[type[Event] | None]
) -> tuple[list[str], list[Mapping[str, Any]]]:
    """(event type names, attribute mappings) of a row-oriented input; the class of each
    Event instance (None for a dict) is appended to ``classes``."""
    if data is None or isinstance(data, (str, bytes, Mapping, Event)) or not isinstance(data, Iterable):
        raise DataError(
            f"expected events: a list (or any iterable) of Event instances or dicts, a pandas "
            f"DataFrame or an Arrow table; got {type(data).__name__}"
            + (" (wrap a single event in a list)" if isinstance(data, (Mapping, Event)) else "")
        )
    names: list[str] = []
    values: list[Mapping[str, Any]] = []
    for k, item in enumerate(data):
        classes.append(type(item) if isinstance(item, Event) else None)
        if isinstance(item, Event):
            names.append(event_name(type(item)))
            values.append(item.__dict__)
        elif isinstance(item, Mapping):
            if type_column not in item:
                raise DataError(f"missing the event type field {type_column!r}", row=k)
            names.append(str(item[type_column]))
            values.append({a: v for a, v in item.items() if a != type_column})
        else:
            raise DataError(f"expected an Event or a dict, got {type(item).__name__}", row=k)
    return names, values


def to_batch(
    data: Any,
    schema: Schema,
    *,
    type_column: str = DEFAULT_TYPE_COLUMN,
    offset: int = 0,
) -> EventBatch:
    """Validate ``data`` and encode it as an :class:`EventBatch` starting at ``offset``.

    ``data``: a list of Event instances, a list of dicts holding ``type_column``, a pandas
    DataFrame or an Arrow table with a ``type_column`` column. The schema is only changed
    (new types, new strings) when the whole input is valid. Anything else is a
    :class:`DataError` saying what is accepted.
    """
    classes: list[type[Event] | None] = []
    if hasattr(data, "to_pydict") or hasattr(data, "columns") and hasattr(data, "iloc"):
        from .frames import frame_to_batch  # columnar fast path

        return frame_to_batch(data, schema, type_column=type_column, offset=offset)
    names, values = _records(data, type_column, classes)
    trial = schema.copy()
    declared_anywhere: set[str] | None = None  # computed on the first key a row's type lacks
    n = len(names)
    type_ids = np.empty(n, dtype=np.int32)
    cells: dict[str, list[Any]] = {}
    for k, (name, vals) in enumerate(zip(names, values, strict=True)):
        cls = classes[k] if classes else None
        if cls is None:
            tid = trial.type_id(name, row=k, column=type_column)
        else:  # an Event instance: its class is known, no need to resolve its name
            tid = trial.add_type(cls)
            if trial.type_fields[tid] != cls.__fields__:
                raise DataError(
                    f"two different event types are named {name!r} in this stream",
                    row=k,
                    column=type_column,
                )
        type_ids[k] = tid
        declared = trial.type_fields[tid]
        for attr, value in vals.items():
            if attr not in declared:
                if _check_null(value) is not None:
                    raise DataError(f"event type {name} has no attribute {attr!r}", row=k, column=attr)
                if declared_anywhere is None:
                    declared_anywhere = declared_attributes()
                if attr not in trial.fields and attr not in declared_anywhere:
                    message = f"unknown attribute {attr!r}: no event type declares it"
                    raise DataError(message, row=k, column=attr)
                continue
            column = cells.get(attr)
            if column is None:  # (not setdefault: its default list would be built every time)
                column = cells[attr] = [None] * n
            column[k] = _check_value(value, declared[attr], k, attr, trial)
    out_cols: dict[str, np.ndarray[Any, Any]] = {}
    valid: dict[str, npt.NDArray[np.bool_]] = {}
    for attr, dtype in trial.fields.items():
        raw = cells.get(attr, [None] * n)
        mask = np.fromiter((v is not None for v in raw), dtype=np.bool_, count=n)
        if dtype == "str":
            codes = (trial.encode(v) if v is not None else -1 for v in raw)
            arr = np.fromiter(codes, dtype=np.int32, count=n)
        else:
            zero = False if dtype == "bool" else 0
            arr = np.array([zero if v is None else v for v in raw], dtype=_NUMPY_DTYPE[dtype])
        out_cols[attr], valid[attr] = arr, mask
    # Commit the schema changes only now that the input is known to be valid.
    for field in attrs.fields(Schema):
        setattr(schema, field.name, getattr(trial, field.name))
    return EventBatch(schema, offset, type_ids, out_cols, valid)


def check_input_columns(given: Collection[str] | None, reads: Mapping[str, str]) -> None:
    """A columnar input (``given``: its column names; None for rows) must have a column for
    every attribute the query reads (a missing column is not a column of nulls: it is
    usually a typo or the wrong file)."""
    if given is None:
        return
    for name, where in reads.items():
        if name not in given:
            raise DataError(
                f"the data has no column {name!r}, which {where} reads; columns: {sorted(given)}",
                column=name,
            )


def _show_time(value: Any, dtype: str | None) -> str:
    if dtype == "time":
        return datetime.fromtimestamp(int(value) / 1e9, UTC).isoformat()
    return repr(value.item() if isinstance(value, np.generic) else value)


def time_values(batch: EventBatch, attr: str, previous: float | None = None) -> np.ndarray[Any, Any]:
    """The window's time column of ``batch``, checked: present on every event and
    non-decreasing (also with respect to ``previous``, the last time already accepted)."""
    if attr not in batch.columns:
        raise DataError(f"the window's time attribute {attr!r} is not in the data", column=attr)
    values, valid = batch.columns[attr], batch.valid[attr]
    missing = np.flatnonzero(~valid)
    if len(missing):
        k = int(missing[0])
        raise DataError(
            f"event of type {batch.type_name(k)} has no value for the window's time attribute",
            row=k,
            column=attr,
        )
    if len(values):
        prev = np.concatenate([[values[0] if previous is None else previous], values[:-1]])
        back = np.flatnonzero(values < prev)
        if len(back):
            k = int(back[0])
            shown = [_show_time(v, batch.schema.fields.get(attr)) for v in (values[k], prev[k])]
            raise DataError(f"time goes backwards: {shown[0]} after {shown[1]}", row=k, column=attr)
    return values
