"""The values a query's modifiers accept: window sizes and units, limits, strategy names.

Both front ends build the same nodes (``Within``, ``Limit``, ``Strategy_``, ``Consume``
in :mod:`pycel.dsl`), so the checks live here, below both: the DSL's ``within()`` and
``limit()`` parse their arguments with them, the nodes re-check what CEQL or a hand-built
node gives them, and they hold the values to what the engine can run (:mod:`pycel.limits`).

Example::

    window_of(None, events=None, seconds=10, on=Stock.time)   # (10.0, "seconds", "time")
    check_limit(0)                                             # raises PatternError
"""

from __future__ import annotations

import math
import sys
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Literal

from pycel.errors import PatternError, short_repr
from pycel.limits import MAX_COUNT_WINDOW, MAX_LIMIT

from .expr import Attr

Strategy = Literal["all", "any", "next", "last", "max", "strict"]
Policy = Literal["none", "any", "partition"]
STRATEGIES: tuple[str, ...] = ("all", "any", "next", "last", "max", "strict")
POLICIES: tuple[str, ...] = ("none", "any", "partition")


#: ``within()``'s time keywords besides ``seconds=``, and how many seconds one is.
TIME_KEYWORDS: dict[str, Fraction] = {
    "milliseconds": Fraction(1, 1000),
    "minutes": Fraction(60),
    "hours": Fraction(3600),
}


def window_of(
    size: object,
    *,
    events: object,
    seconds: object,
    on: Attr[float] | Attr[datetime] | None,
    milliseconds: object = None,
    minutes: object = None,
    hours: object = None,
) -> tuple[float, str, str | None]:
    """The ``(size, unit, attribute)`` of a ``within()`` call, or a PatternError.

    Exactly one of ``size``, ``events``, ``seconds`` and the :data:`TIME_KEYWORDS`
    (``milliseconds``, ``minutes``, ``hours``, converted to seconds) is given.
    The unit is ``events`` (a count of positions, no attribute), ``seconds`` (a timedelta
    or a number of seconds on a time attribute) or ``units`` (a number in the attribute's
    own units).

    Example: ``window_of(timedelta(minutes=1), events=None, seconds=None, on=Stock.time)``
    is ``(60.0, "seconds", "time")``, and so is ``window_of(None, events=None,
    seconds=None, on=Stock.time, minutes=1)``.
    """
    given_units = {"milliseconds": milliseconds, "minutes": minutes, "hours": hours}
    amounts = {k: v for k, v in given_units.items() if v is not None}
    given = [x is not None for x in (size, events, seconds)]
    if sum(given) + len(amounts) != 1:
        raise PatternError(
            "within() takes exactly one of: a size, events=, seconds=, milliseconds=, minutes=, hours="
        )
    for keyword, value in amounts.items():
        seconds = _in_seconds(value, keyword)
    if events is not None:
        if on is not None:
            raise PatternError("within(events=...) counts positions; it takes no on=")
        if not isinstance(events, int) or isinstance(events, bool) or not 0 <= events <= MAX_COUNT_WINDOW:
            raise PatternError(
                f"within(events=...) needs a non-negative int, at most 2**53 ({MAX_COUNT_WINDOW}); "
                f"got {short_repr(events)}"
            )
        return float(events), "events", None
    if not isinstance(on, Attr):
        raise PatternError("a time window needs on=<time attribute>, e.g. on=Stock.time")
    if on.dtype not in ("int", "float", "time"):
        raise PatternError(f"window on {on!r}: a {on.dtype} attribute is not a time")
    if seconds is not None:
        return _window_amount(seconds, "seconds="), "seconds", on.name
    if isinstance(size, timedelta):
        return _window_amount(size, "size"), "seconds", on.name
    if on.dtype == "time":
        raise PatternError(f"{on!r} is a timestamp: give the window as seconds= or a timedelta")
    return _window_amount(size, "size"), "units", on.name


def _window_amount(value: object, what: str) -> float:
    """A window size as a finite non-negative float (a timedelta counts in seconds)."""
    amount = value.total_seconds() if isinstance(value, timedelta) else value
    if not isinstance(amount, int | float) or isinstance(amount, bool) or not 0 <= amount < math.inf:
        raise PatternError(
            f"within({what}) needs a non-negative number or timedelta (finite, at most "
            f"{sys.float_info.max:.4g}), got {short_repr(value)}"
        )
    try:
        return float(amount)
    except OverflowError:  # an int beyond the largest float
        raise PatternError(
            f"within({what}) needs a non-negative number (finite, at most {sys.float_info.max:.4g}), "
            f"got {short_repr(value)}"
        ) from None


def _in_seconds(value: object, keyword: str) -> float:
    """``value`` of a ``within(<keyword>=...)`` in seconds, rounded once (0.1 hours is
    360.0 s, not 360.00000000000006)."""
    seconds = math.inf
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        try:
            seconds = float(Fraction(value) * TIME_KEYWORDS[keyword])
        except OverflowError:  # beyond the largest float once in seconds
            pass
    if seconds == math.inf:
        raise PatternError(
            f"within({keyword}=...) needs a non-negative number, at most "
            f"{sys.float_info.max:.4g} seconds; got {short_repr(value)}"
        )
    return seconds


def check_window_size(size: object, unit: str) -> None:
    """Raise PatternError unless ``size`` is a valid window size for ``unit``.

    A count window (``unit == "events"``) is a whole number from 0 to 2**53; a time window
    (``seconds``, or ``units`` of its attribute) a finite number ≥ 0.

    Example: ``check_window_size(float("inf"), "seconds")`` raises PatternError.
    """
    if unit not in ("events", "seconds", "units"):
        raise PatternError(f"window unit {unit!r} is not events, seconds or units")
    number = size if isinstance(size, int | float) and not isinstance(size, bool) else None
    if unit == "events":
        if number is None or not (0 <= number <= MAX_COUNT_WINDOW and float(number).is_integer()):
            raise PatternError(
                f"a count window needs a whole number of events from 0 to 2**53 ({MAX_COUNT_WINDOW}), "
                f"got {short_repr(size)}"
            )
    elif number is None or not 0 <= number <= sys.float_info.max:
        raise PatternError(
            f"a time window needs a finite size from 0 to {sys.float_info.max:.4g}, got {short_repr(size)}"
        )


def limit_of(n: object) -> int:
    """The argument of ``limit(n)`` as an int, or a PatternError naming ``limit()``.

    Example: ``limit_of(3)`` is 3; ``limit_of(True)`` raises PatternError.
    """
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_LIMIT:
        raise PatternError(
            f"limit() needs a positive int, at most 2**63 - 1 ({MAX_LIMIT}); got {short_repr(n)}"
        )
    return n


def check_limit(n: object) -> None:
    """Raise PatternError unless ``n`` is a valid LIMIT: an int from 1 to 2**63 - 1.

    Example: ``check_limit(2**63)`` raises PatternError.
    """
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_LIMIT:
        raise PatternError(
            f"a limit needs a whole number from 1 to 2**63 - 1 ({MAX_LIMIT}), got {short_repr(n)}"
        )
