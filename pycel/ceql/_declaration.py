"""CORE stream declarations: ``CREATE STREAM S { EVENT T { attr: type, … }, … }``.

Event types are built as ordinary :class:`pycel.Event` subclasses. The same declaration
(name and attributes) always yields the same class object, and the classes pickle: their
qualified name encodes the declaration, so an unpickling process rebuilds them on demand
(the module-level ``__getattr__`` below).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import cast

from pycel.errors import PatternError
from pycel.language.events import Event, EventMeta, Field, event_name

from ._lexer import Cursor, Token, quote_ident

#: CEQL attribute types (case-insensitive) → pycel dtype. CORE spells them int, long,
#: double, string, boolean and primary_time; the others are pycel synonyms.
TYPE_NAMES: dict[str, str] = {
    "int": "int",
    "integer": "int",
    "long": "int",
    "double": "float",
    "float": "float",
    "string": "str",
    "str": "str",
    "boolean": "bool",
    "bool": "bool",
    "primary_time": "time",
    "timestamp": "time",
}
_PYTHON_TYPE: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool, "time": datetime}
_CEQL_TYPE = {"int": "int", "float": "double", "str": "string", "bool": "boolean", "time": "primary_time"}

_PREFIX = "_ceql_event_"
_REGISTRY: dict[str, type[Event]] = {}


def event_class(name: str, fields: Sequence[tuple[str, str]]) -> type[Event]:
    """The pycel event type ``name`` with ``fields`` ((attribute, dtype) pairs, in order).

    Equal arguments give the same class object. Example::

        Buy = event_class("BUY", [("name", "str"), ("price", "float")])
        Buy.price > 10      # an Expr[bool]
    """
    spec = json.dumps([name, [list(f) for f in fields]], separators=(",", ":")).encode()
    key = _PREFIX + base64.urlsafe_b64encode(spec).decode().rstrip("=")
    cls = _REGISTRY.get(key)
    if cls is None:
        annotations = {attr: Field[_PYTHON_TYPE[dtype]] for attr, dtype in fields}  # type: ignore[valid-type]
        namespace = {
            "__annotations__": annotations,
            "__module__": __name__,
            "__qualname__": key,
            "__doc__": f"Event type {name} (declared in CEQL).",
        }
        cls = cast("type[Event]", EventMeta(name, (Event,), namespace))
        _REGISTRY[key] = cls
    return cls


def __getattr__(name: str) -> type[Event]:
    """Rebuild a declared event type from its qualified name (used by pickle)."""
    if name.startswith(_PREFIX):
        try:
            encoded = name[len(_PREFIX) :]
            spec = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            event, fields = json.loads(spec.decode())
            return event_class(event, [(str(a), str(d)) for a, d in fields])
        except (ValueError, TypeError, KeyError) as err:
            raise AttributeError(name) from err
    raise AttributeError(name)


class Declaration(dict[str, type[Event]]):
    """The event types of one or more CEQL stream declarations, by event name.

    A ``dict`` from event name to :class:`pycel.Event` subclass, plus ``streams`` (stream
    name → its event names, in declaration order), ``stream`` (the first stream's name)
    and ``time_attribute`` (the attribute declared ``primary_time``, if exactly one name is).

    Example::

        decl = parse_declaration("CREATE STREAM S { EVENT BUY { name: string, price: double } }")
        decl["BUY"].price > 10      # an Expr[bool]
        decl.stream                 # 'S'
    """

    def __init__(
        self,
        events: Mapping[str, type[Event]],
        streams: Mapping[str, Sequence[str]],
        time_attribute: str | None = None,
    ) -> None:
        super().__init__(events)
        self.streams: dict[str, tuple[str, ...]] = {s: tuple(e) for s, e in streams.items()}
        self.time_attribute = time_attribute

    @property
    def stream(self) -> str:
        """The name of the first declared stream."""
        return next(iter(self.streams))

    def __repr__(self) -> str:
        return f"Declaration({dict(self)!r}, streams={self.streams!r})"


def parse_declaration(text: str) -> Declaration:
    """Parse CORE stream declarations into pycel event types.

    ``text`` holds one or more ``CREATE STREAM name { EVENT type { attr: type, … }, … }``
    (``DECLARE STREAM`` is accepted too; keywords and type names are case-insensitive;
    types: int, long, double, string, boolean, primary_time, and the pycel synonyms
    integer, float, str, bool, timestamp). An event type may appear in several streams
    with the same attributes. An attribute name must have one type across all events,
    so that ``name`` means the same thing in every filter.

    Raises CeqlSyntaxError (with line and column) on malformed text and PatternError on
    conflicting declarations.

    Example::

        decl = parse_declaration('''
            CREATE STREAM Stock {
                EVENT BUY  { name: string, price: double, volume: int, stock_time: int },
                EVENT SELL { name: string, price: double, volume: int, stock_time: int }
            }''')
        decl["SELL"]     # <class SELL>, a pycel.Event subclass
    """
    cur = Cursor(text)
    events: dict[str, list[tuple[str, str]]] = {}
    event_at: dict[str, Token] = {}
    streams: dict[str, list[str]] = {}
    attr_types: dict[str, tuple[str, str]] = {}  # attribute → (dtype, first event declaring it)
    time_attrs: set[str] = set()
    while True:
        if cur.peek().kind == "eof" and streams:
            break
        if not cur.accept_keyword("CREATE", "DECLARE"):
            raise cur.error("expected CREATE STREAM")
        cur.expect_keyword("STREAM")
        stream_tok = cur.expect_ident("a stream name")
        if stream_tok.value in streams:
            raise _located(f"stream {stream_tok.value!r} is declared twice", stream_tok)
        members = streams.setdefault(stream_tok.value, [])
        cur.expect_op("{")
        while True:
            cur.expect_keyword("EVENT", "EVENT (an event declaration)")
            name_tok = cur.expect_ident("an event name")
            fields = _parse_fields(cur, name_tok.value, attr_types, time_attrs)
            name = name_tok.value
            if name in members:
                raise _located(f"event {name!r} is declared twice in stream {stream_tok.value!r}", name_tok)
            if name in events and events[name] != fields:
                first = event_at[name]
                raise _located(
                    f"event {name!r} is declared with different attributes than at line "
                    f"{first.line}, column {first.column}",
                    name_tok,
                )
            events.setdefault(name, fields)
            event_at.setdefault(name, name_tok)
            members.append(name)
            if cur.accept_op(","):
                if cur.at_op("}"):
                    break  # trailing comma
                continue
            break
        cur.expect_op("}", "',' or '}'")
        cur.accept_op(";")
    classes = {name: event_class(name, fields) for name, fields in events.items()}
    time_attribute = next(iter(time_attrs)) if len(time_attrs) == 1 else None
    return Declaration(classes, streams, time_attribute)


def _parse_fields(
    cur: Cursor, event: str, attr_types: dict[str, tuple[str, str]], time_attrs: set[str]
) -> list[tuple[str, str]]:
    cur.expect_op("{")
    fields: list[tuple[str, str]] = []
    seen: set[str] = set()
    while not cur.at_op("}"):
        attr_tok = cur.expect_ident("an attribute name")
        attr = attr_tok.value
        if not attr.isidentifier():
            raise _located(f"attribute name {attr!r} must be a Python identifier", attr_tok)
        cur.expect_op(":")
        type_tok = cur.peek()
        if type_tok.kind not in ("ident", "keyword") or type_tok.text.lower() not in TYPE_NAMES:
            raise cur.error("expected a type (" + ", ".join(sorted(TYPE_NAMES)) + ")")
        cur.next()
        dtype = TYPE_NAMES[type_tok.text.lower()]
        if attr in seen:
            raise _located(f"attribute {attr!r} is declared twice in event {event!r}", attr_tok)
        seen.add(attr)
        if attr in attr_types and attr_types[attr][0] != dtype:
            other_dtype, other_event = attr_types[attr]
            raise _located(
                f"attribute {attr!r} of event {event!r} is {dtype}, but event {other_event!r} "
                f"declares it {other_dtype}; an attribute name must have one type in all events",
                attr_tok,
            )
        attr_types.setdefault(attr, (dtype, event))
        if type_tok.text.lower() == "primary_time":
            time_attrs.add(attr)
        fields.append((attr, dtype))
        if not cur.accept_op(","):
            break
    cur.expect_op("}", "',' or '}'")
    return fields


def _located(message: str, tok: Token) -> PatternError:
    return PatternError(f"{message} (line {tok.line}, column {tok.column})")


def to_declaration(types: Iterable[type[Event]], stream: str = "S") -> str:
    """A ``CREATE STREAM`` declaration of ``types`` (the inverse of :func:`parse_declaration`).

    Timestamp attributes are declared ``primary_time``. Example::

        to_declaration([Buy, Sell], "Stock")
        # CREATE STREAM Stock {\\n  EVENT Buy { name: string, price: double },\\n  ... }
    """
    lines = []
    for cls in types:
        fields = ", ".join(f"{quote_ident(a)}: {_CEQL_TYPE[d]}" for a, d in cls.__fields__.items())
        lines.append(f"  EVENT {quote_ident(event_name(cls))} {{ {fields} }}")
    return f"CREATE STREAM {quote_ident(stream)} {{\n" + ",\n".join(lines) + "\n}"
