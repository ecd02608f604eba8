"""Event types: ``pycel.Event`` subclasses with typed ``pycel.Field`` attributes.

The technique is SQLAlchemy 2.0's ``Mapped[T]``: reading a field on the *class* gives a
typed expression (``Stock.price`` is an ``Expr[float]``), reading it on an *instance* gives
the value. ``alias(Sell, "s")`` names one occurrence of an event type in a pattern.

Example::

    class Stock(pycel.Event):
        name: pycel.Field[str]
        price: pycel.Field[float]
        time: pycel.Field[int]

    class Buy(Stock): ...

    b = pycel.alias(Buy, "b")
    b.price > 10            # an Expr[bool] over occurrence "b"
    Buy(name="X", price=3.0, time=1).price   # 3.0

``prev(b)`` is the same occurrence in the previous iteration of a ``plus`` (a trend:
``plus(b.where(b.price > prev(b).price))``).

The operators (``Sell >> Buy``, ``Buy.where(...)``) build :mod:`pycel.dsl` patterns, so
this module imports the DSL and not the other way round: the DSL recognises event types
and aliases only by their ``__pycel_pattern__`` method (:mod:`pycel.language.patternlike`).
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast, overload

from pycel.dsl import Atom, seq
from pycel.errors import PatternError

from .expr import Attr, Expr
from .patternlike import as_pattern
from .patternlike import event_name as event_name

if TYPE_CHECKING:
    from pycel.dsl import Pattern

    from .patternlike import PatternLike

T = TypeVar("T")
E = TypeVar("E", bound="Event")

#: The type to declare event-time attributes with: ``time: Field[Timestamp]``.
Timestamp = datetime

_DTYPE_OF_PY: dict[object, str] = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    datetime: "time",
    "bool": "bool",
    "int": "int",
    "float": "float",
    "str": "str",
    "datetime": "time",
    "Timestamp": "time",
    "pycel.Timestamp": "time",
}


class Field(Generic[T]):
    """A typed attribute of an event type; declare it as an annotation.

    Example::

        class Stock(pycel.Event):
            price: pycel.Field[float]

        Stock.price        # Expr[float], usable in predicates
        Stock(price=2.5).price   # 2.5
    """

    def __init__(self, dtype: str, name: str = "") -> None:
        self.dtype = dtype
        self.name = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: Any) -> Attr[T]: ...
    @overload
    def __get__(self, obj: object, owner: Any) -> T: ...
    def __get__(self, obj: object, owner: Any) -> Any:
        if obj is None:
            return Attr(None, self.name, self.dtype, event_name(owner))
        return obj.__dict__.get(self.name)

    def __repr__(self) -> str:
        return f"Field[{self.dtype}]({self.name!r})"


def _dtype_from_annotation(ann: object, module: str) -> str | None:
    """The dtype of a ``Field[...]`` annotation, or None when it is not a Field."""
    if isinstance(ann, str):
        m = re.fullmatch(r"\s*(?:[\w.]+\.)?Field\[\s*([\w.]+)\s*\]\s*", ann)
        if m is None:
            return None
        arg: object = m.group(1)
        if arg not in _DTYPE_OF_PY:
            arg = sys.modules[module].__dict__.get(str(arg), arg)
    else:
        if getattr(ann, "__origin__", None) is not Field:
            return None
        arg = ann.__args__[0]  # type: ignore[attr-defined]
    if arg not in _DTYPE_OF_PY:
        raise PatternError(
            f"Field[{getattr(arg, '__name__', arg)}] is not supported: use int, float, bool, "
            "str or pycel.Timestamp"
        )
    return _DTYPE_OF_PY[arg]


class EventMeta(type):
    """Metaclass of event types: collects fields and lets classes combine into patterns."""

    __fields__: dict[str, str]

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> EventMeta:
        fields: dict[str, str] = {}
        for base in reversed(bases):
            fields.update(getattr(base, "__fields__", {}))
        plain: dict[str, str] = {}  # annotations that are not Field[...]: for error hints
        for base in reversed(bases):
            plain.update(getattr(base, "__plain_annotations__", {}))
        for attr, ann in ns.get("__annotations__", {}).items():
            dtype = _dtype_from_annotation(ann, ns.get("__module__", "builtins"))
            if dtype is None:
                if not attr.startswith("_"):
                    plain[attr] = getattr(ann, "__name__", str(ann))
                continue
            if attr in ns:
                raise PatternError(
                    f"{name}.{attr} = {ns[attr]!r}: an attribute takes no default value (an "
                    "attribute left out of an event is null); give the value when creating events"
                )
            if attr in fields and fields[attr] != dtype:
                raise PatternError(f"{name}.{attr} is {dtype} but a base class declares it {fields[attr]}")
            fields[attr] = dtype
            ns[attr] = Field(dtype, attr)
        ns["__fields__"] = fields
        ns["__plain_annotations__"] = {a: t for a, t in plain.items() if a not in fields}
        return super().__new__(mcs, name, bases, ns)

    if not TYPE_CHECKING:  # (mypy must keep refusing unknown class attributes)

        def __getattr__(cls, name: str) -> Any:
            raise AttributeError(
                f"type object {cls.__name__!r} has no attribute {name!r}{field_hint(cls, name)}"
            )

    def __pycel_pattern__(cls) -> Pattern:
        """The one-event pattern an event type stands for (see :mod:`pycel.language.patternlike`).

        It is defined here, on the metaclass, so that a type is a pattern and its instances
        (events) are not. Example: ``Buy.__pycel_pattern__()`` is ``Atom(Buy, "Buy")``.
        """
        if cls is Event:
            raise PatternError("pycel.Event itself is not an event type; subclass it")
        return Atom(cast("type[Event]", cls), event_name(cls))

    # Patterns from bare classes: ``Sell >> Buy``, ``Buy | Sell``, ``Buy & Sell``.
    def __rshift__(cls, other: PatternLike) -> Pattern:
        return seq(cast("type[Event]", cls), other)

    def __rrshift__(cls, other: PatternLike) -> Pattern:
        return seq(other, cast("type[Event]", cls))

    def __or__(cls, other: PatternLike) -> Pattern:  # type: ignore[override]
        return as_pattern(cast("type[Event]", cls)) | other

    def __ror__(cls, other: PatternLike) -> Pattern:  # type: ignore[override]
        return as_pattern(other) | cast("type[Event]", cls)

    def __and__(cls, other: PatternLike) -> Pattern:
        return as_pattern(cast("type[Event]", cls)) & other

    def __rand__(cls, other: PatternLike) -> Pattern:
        return as_pattern(other) & cast("type[Event]", cls)


def field_hint(cls: type, attr: str) -> str:
    """``"; T annotates 'x' without pycel.Field: …"`` when class ``cls`` annotates ``attr``
    with a plain type (a dataclass habit), else ``""``: for errors about unknown attributes."""
    plain: dict[str, str] = getattr(cls, "__plain_annotations__", {})
    if attr not in plain:
        return ""
    fix = f"{attr}: pycel.Field[{plain[attr]}]"
    return f"; {event_name(cls)} annotates {attr!r} without pycel.Field: write {fix}"


class Event(metaclass=EventMeta):
    """Base class of event types. Subclass it and annotate attributes with ``Field[T]``.

    Instances are events: ``Buy(name="INTC", price=21.5, time=3)``. An attribute left
    out is null. Set ``__event_name__`` to use a name other than the class name in data.

    The class-level methods build patterns of one occurrence named after the type, e.g.
    ``Buy.where(Buy.price > 10)``; use :func:`alias` to name occurrences yourself.
    """

    __fields__: ClassVar[dict[str, str]] = {}

    def __init__(self, **values: Any) -> None:
        cls = type(self)
        for key, value in values.items():
            if key not in cls.__fields__:
                raise PatternError(
                    f"{event_name(cls)} has no attribute {key!r}; it has {sorted(cls.__fields__)}"
                    + field_hint(cls, key)
                )
            self.__dict__[key] = value

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{event_name(type(self))}({body})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    # -- one-occurrence patterns (see dsl.Pattern for what each does) ----------------------
    @classmethod
    def where(cls, predicate: Expr[bool], *, post_filter: bool = False) -> Pattern:
        """This event type, kept when ``predicate`` holds: ``Buy.where(Buy.price > 10)``.

        ``post_filter=True`` checks ``predicate`` on complete matches instead of on each
        event as it arrives, as in ``pattern.where`` (see docs/postfilter.md):
        ``Buy.where(Buy.price > 10, post_filter=True)``.
        """
        return as_pattern(cls).where(predicate, post_filter=post_filter)

    filter = where

    @classmethod
    def as_(cls, var: str) -> Pattern:
        """This event type bound to variable ``var`` (CEQL ``Buy AS b``)."""
        return as_pattern(cls).as_(var)

    @classmethod
    def pattern(cls) -> Pattern:
        """This event type as a one-event pattern."""
        return as_pattern(cls)


class UnknownAttributeError(PatternError, AttributeError):
    """An attribute that the event type of an alias does not declare (``s.cost``)."""


class Alias:
    """A named occurrence of an event type; see :func:`alias`."""

    def __init__(self, cls: type[Event], var: str) -> None:
        self._cls = cls
        self._var = var

    def __pycel_pattern__(self) -> Pattern:
        """The one-event pattern of this occurrence (see :mod:`pycel.language.patternlike`).

        Example: ``alias(Buy, "b").__pycel_pattern__()`` is ``Atom(Buy, "b")``.
        """
        return Atom(self._cls, self._var)

    def __getattr__(self, name: str) -> Any:
        cls = self.__dict__["_cls"]
        if name in cls.__fields__:
            return Attr(self._var, name, cls.__fields__[name], event_name(cls))
        if not name.startswith("_") and hasattr(Atom, name):  # a pattern method: where, within, …
            return getattr(Atom(cls, self._var), name)
        if name.startswith("_"):
            raise AttributeError(name)
        # An AttributeError (so hasattr() works) that is also a PatternError, naming the type.
        raise UnknownAttributeError(
            f"{self._var!r} is an occurrence of event type {event_name(cls)}, which has no "
            f"attribute {name!r}; its attributes are {sorted(cls.__fields__)}{field_hint(cls, name)}"
        )

    def __rshift__(self, other: PatternLike) -> Pattern:
        return seq(self.__pycel_pattern__(), other)

    def __rrshift__(self, other: PatternLike) -> Pattern:
        return seq(other, self.__pycel_pattern__())

    def __or__(self, other: PatternLike) -> Pattern:
        return self.__pycel_pattern__() | other

    def __and__(self, other: PatternLike) -> Pattern:
        return self.__pycel_pattern__() & other

    def __repr__(self) -> str:
        return f"alias({event_name(self._cls)}, {self._var!r})"


def alias(cls: type[E], name: str) -> type[E]:
    """Name one occurrence of event type ``cls`` so a pattern can refer to it.

    The result is typed as the class itself, so ``alias(Sell, "s").price`` is an
    ``Expr[float]`` about occurrence ``s`` (SQLAlchemy's ``aliased()`` technique).

    Example::

        s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
        pycel.seq(s.where(s.name == "INTC"), b).where(s.name == b.name)
    """
    if not (isinstance(cls, type) and issubclass(cls, Event)):
        raise PatternError(f"alias() needs an Event subclass, got {cls!r}")
    if not name.isidentifier():
        raise PatternError(f"alias name {name!r} must be an identifier")
    return cast("type[E]", Alias(cls, name))


class PrevAlias:
    """The previous iteration's occurrence of an alias; see :func:`prev`. Only its
    attributes are meaningful (``prev(b).price``): it is not a pattern."""

    #: Marks it for the expression builder, which refuses it where a value is expected.
    previous_occurrence = True

    def __init__(self, cls: type[Event], var: str) -> None:
        self._cls = cls
        self._var = var

    def __pycel_pattern__(self) -> Pattern:
        raise PatternError(
            f"{self!r} is the previous iteration's {self._var!r}, usable only in conditions "
            f"({self!r}.attribute); it is not a pattern: use the alias {self._var!r} itself"
        )

    def __getattr__(self, name: str) -> Any:
        cls = self.__dict__["_cls"]
        if name in cls.__fields__:
            return Attr(self._var, name, cls.__fields__[name], event_name(cls), prev=True)
        if name.startswith("_"):
            raise AttributeError(name)
        if hasattr(Atom, name):  # where, within, …: a pattern method
            self.__pycel_pattern__()
        raise UnknownAttributeError(
            f"{self!r} reads occurrence {self._var!r} of event type {event_name(cls)}, which has "
            f"no attribute {name!r}; its attributes are {sorted(cls.__fields__)}{field_hint(cls, name)}"
        )

    def __repr__(self) -> str:
        return f"prev({self._var})"


def prev(occurrence: type[E]) -> type[E]:
    """The previous iteration's occurrence of ``occurrence`` (an alias), for trends.

    Inside ``pycel.plus(p)``, a condition may compare an occurrence bound in ``p`` with the
    same occurrence in the previous iteration; the first iteration has none, and there the
    condition holds. Typed like :func:`alias`, so ``pycel.prev(b).price`` is an
    ``Expr[float]``.

    Example (a rising trend)::

        b = pycel.alias(Stock, "b")
        rising = pycel.plus(b.where(b.price > pycel.prev(b).price))
    """
    if isinstance(occurrence, Alias):
        return cast("type[E]", PrevAlias(occurrence._cls, occurrence._var))
    if isinstance(occurrence, type) and issubclass(occurrence, Event):
        name = event_name(occurrence)
        raise PatternError(
            f"prev() needs a named occurrence, not the event type {name}: name it with "
            f'pycel.alias({name}, "x") and use prev(x)'
        )
    raise PatternError(f'prev() takes an alias (pycel.alias(T, "x")), got {occurrence!r}')
