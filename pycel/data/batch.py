"""Events as columns: the :class:`Schema` of a stream's event types and the columnar
:class:`EventBatch` that ingestion builds (the lowest module of ``pycel.data``: the
readers of each input kind import it, never the other way round).

Example::

    schema = Schema.for_types([Buy, Sell])
    batch = to_batch([Buy(name="X", price=1.0, time=0)], schema)   # pycel.data.ingest
    batch.row(0)     # ("Buy", {"name": "X", "price": 1.0, "time": 0})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from pycel.errors import DataError
from pycel.language.events import Event, event_name

DEFAULT_TYPE_COLUMN = "event_type"


def all_event_types() -> dict[str, list[type[Event]]]:
    """Every Event subclass defined so far, by event name."""
    found: dict[str, list[type[Event]]] = {}
    todo = list(Event.__subclasses__())
    while todo:
        cls = todo.pop()
        found.setdefault(event_name(cls), []).append(cls)
        todo.extend(cls.__subclasses__())
    return found


#: An event type as plain data: its name, its attributes with their types, and the names
#: of every event type it is (itself and its Event base classes).
TypeDescription = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]


def _supertype_names(cls: type[Event]) -> frozenset[str]:
    return frozenset(
        event_name(b) for b in cls.__mro__ if isinstance(b, type) and issubclass(b, Event) and b is not Event
    )


def describe_event_types() -> tuple[TypeDescription, ...]:
    """Every Event subclass defined so far, as plain data: what a process that does not
    have those classes (a Spark executor, which unpickles only the query's own) needs to
    resolve the other event types of the data by name, as this process would.

    Example: ``("Buy", tuple(Buy.__fields__.items()), ("Buy", "Stock")) in describe_event_types()``
    """
    return tuple(
        (name, tuple(cls.__fields__.items()), tuple(sorted(_supertype_names(cls))))
        for name, classes in sorted(all_event_types().items())
        for cls in classes
    )


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
    #: Event types declared where the query was built (a Spark driver), resolved by name
    #: when this process has no Event subclass of that name (:func:`describe_event_types`).
    declared: tuple[TypeDescription, ...] = ()

    @classmethod
    def for_types(cls, types: Iterable[type[Event]]) -> Schema:
        """A schema knowing ``types`` and all their subclasses."""
        schema = cls()
        for t in types:
            schema.add_type(t)
        return schema

    def add_type(self, cls: type[Event]) -> int:
        """Register ``cls`` (and its subclasses); return its type id."""
        tid = self._add(event_name(cls), dict(cls.__fields__), _supertype_names(cls))
        for sub in cls.__subclasses__():
            self.add_type(sub)
        return tid

    def _add_described(self, described: TypeDescription) -> int:
        """Register a described type (and the described types that are it); its type id."""
        name, fields, supertypes = described
        tid = self._add(name, dict(fields), frozenset(supertypes))
        for sub in self.declared:
            if name in sub[2] and sub[0] != name:
                self._add_described(sub)
        return tid

    def _add(self, name: str, fields: dict[str, str], supertypes: frozenset[str]) -> int:
        if name in self.type_names:
            return self.type_names.index(name)
        for attr, dtype in fields.items():
            if self.fields.setdefault(attr, dtype) != dtype:
                raise DataError(
                    f"attribute {attr!r} is {dtype} in {name} but {self.fields[attr]} in "
                    "another event type of this stream"
                )
        self.type_names.append(name)
        self.type_fields.append(fields)
        self.supertypes.append(supertypes)
        return len(self.type_names) - 1

    def type_id(self, name: str, *, row: int | None = None, column: str | None = None) -> int:
        """The id of event type ``name``, resolving Event subclasses defined anywhere."""
        try:
            return self.type_names.index(name)
        except ValueError:
            pass
        candidates = all_event_types().get(name, [])
        if len(candidates) == 1:
            return self.add_type(candidates[0])
        described = [d for d in self.declared if d[0] == name] if not candidates else []
        if len(described) == 1:
            return self._add_described(described[0])
        if not candidates and not described:
            raise DataError(
                f"unknown event type {name!r}; known: {sorted(self.type_names)}",
                row=row,
                column=column,
            )
        what = candidates or f"{len(described)} event types of that name where the query was built"
        raise DataError(f"event type name {name!r} is ambiguous: {what}", row=row, column=column)

    def encode(self, text: str) -> int:
        """The dictionary code of ``text`` (assigned on first sight)."""
        code = self.string_codes.get(text)
        if code is None:
            code = self.string_codes[text] = len(self.strings)
            self.strings.append(text)
        return code

    def adopt(self, trial: Schema) -> None:
        """Take over the state of ``trial`` (a :meth:`copy` that ingestion extended with
        new types and strings), once the whole input is known to be valid."""
        for field in attrs.fields(Schema):
            setattr(self, field.name, getattr(trial, field.name))

    def copy(self) -> Schema:
        return Schema(
            list(self.type_names),
            [dict(f) for f in self.type_fields],
            list(self.supertypes),
            dict(self.fields),
            list(self.strings),
            dict(self.string_codes),
            self.declared,
        )


def decode(raw: Any, dtype: str, strings: list[str]) -> Any:
    """The Python value of one encoded cell: a string from its dictionary code, a time as
    int nanoseconds (what windows compare). Example: ``decode(np.int32(0), "str", ["a"])``."""
    if dtype == "str":
        return strings[int(raw)]
    if dtype == "time":
        return int(raw)
    return {"bool": bool, "int": int, "float": float}[dtype](raw)


class DeferredColumn(Protocol):
    """An input column that a query does not read: kept as the input gave it, checked and
    decoded only when an event's attributes are shown (``Match.events``, ``batch.row``)."""

    def value(self, k: int) -> Any:
        """The decoded value of row ``k`` (None when null); a :class:`DataError` naming
        the row and column when the column holds a value its type does not accept."""
        ...


@attrs.frozen
class EventBatch:
    """Columnar events: ``type_ids[k]`` and ``columns[attr][k]`` for row k at global
    position ``offset + k``; ``valid[attr][k]`` is False where the value is null.

    Strings are dictionary codes into ``schema.strings``; timestamps are int64 nanoseconds
    since the epoch (UTC). ``input_columns``: the attributes a columnar input (DataFrame,
    Arrow, CSV, Parquet) had as columns, so a query can tell an absent column from nulls;
    None for rows (Event instances, dicts), where a left-out key is a null.

    ``deferred``: the attributes that were ingested without being encoded (the query does
    not read them, see ``to_batch(columns=...)``); :meth:`value` decodes them on demand.
    """

    schema: Schema
    offset: int
    type_ids: npt.NDArray[np.int32]
    columns: dict[str, np.ndarray[Any, Any]]
    valid: dict[str, npt.NDArray[np.bool_]]
    input_columns: frozenset[str] | None = None
    deferred: Mapping[str, DeferredColumn] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return len(self.type_ids)

    def type_name(self, k: int) -> str:
        return self.schema.type_names[int(self.type_ids[k])]

    def value(self, attr: str, k: int) -> Any:
        """The decoded value of ``attr`` at row ``k`` (None when null or undeclared)."""
        if attr in self.deferred:
            return self.deferred[attr].value(k)
        if attr not in self.columns or not self.valid[attr][k]:
            return None
        return decode(self.columns[attr][k], self.schema.fields[attr], self.schema.strings)

    def event(self, position: int) -> tuple[str, dict[str, Any]]:
        """Event type name and attribute values of the event at global ``position``
        (a ``ValueError`` for a position outside this batch)."""
        k = position - self.offset
        if not 0 <= k < len(self):
            raise not_held(position)
        return self.row(k)

    def row(self, k: int) -> tuple[str, dict[str, Any]]:
        """Event type name and decoded attribute values of row ``k``."""
        fields = self.schema.type_fields[int(self.type_ids[k])]
        return self.type_name(k), {a: self.value(a, k) for a in fields}


def not_held(position: int) -> ValueError:
    """The error for an event a batch does not hold: a match of ``stream.push`` may reach
    into earlier pushes (or wait, ending with an absence, until a later one)."""
    return ValueError(
        f"the event at position {position} is not in the batch these matches were found in "
        "(a stream keeps only the events of its last push): join attributes to the matches "
        "of each push, or run the query on all the data"
    )
