"""What may stand for a pattern: patterns, event types and aliases, recognised by protocol.

:mod:`pycel.language.events` builds on the pattern language (``Sell >> Buy``,
``Buy.where(...)`` and ``alias(Buy, "b").within(...)`` make :mod:`pycel.dsl` nodes), so
the pattern language must not import it. It recognises what stands for a pattern by one
special method, looked up on the type as Python looks up its own special methods: ``p``
stands for the pattern ``type(p).__pycel_pattern__(p)``. A pattern returns itself; an
event type its one-event ``Atom`` (the method is on the metaclass, so an event instance
is not a pattern); an alias the ``Atom`` of its occurrence.

Example::

    as_pattern(Buy)                 # Atom(Buy, "Buy")
    as_pattern(alias(Buy, "b"))     # Atom(Buy, "b")
    is_event_type(Buy), is_event_type(Buy(price=1.0))   # True, False
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias, TypeGuard

from pycel.errors import PatternError

from .expr import Expr

if TYPE_CHECKING:  # annotations only: both modules build on this one
    from pycel.dsl import Pattern
    from pycel.language.events import Event

#: What the combinators accept: a pattern, an event type or an alias (typed as its type).
PatternLike: TypeAlias = "Pattern | type[Event]"


def _pattern_hook(p: object) -> Callable[[object], Pattern] | None:
    # The MRO of type(p) only: getattr(type(p), ...) would also search the metaclass, and
    # find the event types' method for an event instance.
    for klass in type(p).__mro__:
        if "__pycel_pattern__" in klass.__dict__:
            hook = klass.__dict__["__pycel_pattern__"]
            return hook if callable(hook) else None
    return None


def stands_for_pattern(p: object) -> bool:
    """Whether ``p`` is a pattern, an event type or an alias.

    Example: ``stands_for_pattern(Buy)`` is True; ``stands_for_pattern("Buy")`` is False.
    """
    return _pattern_hook(p) is not None


def is_event_type(t: object) -> TypeGuard[type[Event]]:
    """Whether ``t`` is ``pycel.Event`` or a subclass (a class that stands for a pattern).

    Example: ``is_event_type(Buy)`` is True; ``is_event_type(Buy(price=1.0))`` is False.
    """
    return isinstance(t, type) and _pattern_hook(t) is not None


def event_name(cls: type) -> str:
    """The name of an event type in data and CEQL: ``__event_name__`` or the class name.

    It is also the variable an event type's occurrence is bound to in a pattern.
    Example: ``event_name(Buy)`` is ``"Buy"``, or ``"BUY"`` given ``__event_name__ = "BUY"``.
    """
    own = cls.__dict__.get("__event_name__")
    return own if isinstance(own, str) else cls.__name__


def as_pattern(p: object) -> Pattern:
    """Turn an event type, alias or pattern into a pattern node; reject anything else.

    Example: ``as_pattern(Buy)`` is ``Atom(Buy, "Buy")``; ``as_pattern(Buy.price > 3)``
    raises PatternError (a predicate is not a pattern).
    """
    hook = _pattern_hook(p)
    if hook is not None:
        return hook(p)
    if isinstance(p, Expr):
        raise PatternError(f"{p!r} is a predicate, but a pattern was expected; use .where()")
    raise PatternError(f"{p!r} is not a pattern (expected an Event subclass, alias or pattern)")
