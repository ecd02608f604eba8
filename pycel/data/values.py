"""Single values against declared types: the rules for one cell, shared by every input kind.

The columnar readers check whole columns with numpy (``pycel.data.columns``); these
functions serve the places that hold one Python value: a deferred column decoded on
demand, a constant in a predicate, and the error path that names the first bad cell.

Example::

    check_value(2.0, "int", 0, "volume")    # 2
    int_problem(2**63)                     # "expected int, got ...: outside the 64-bit range ..."
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from pycel.errors import DataError, short_repr
from pycel.language.expr import INT64_MAX, INT64_MIN

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def null_or_value(value: Any) -> Any:
    """``value`` as a plain Python value, or None when it is null (None, NaN, NaT)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float | datetime) and value != value):
        return None
    return value


def int_problem(value: int | float, dtype: str = "int") -> str | None:
    """Why ``value`` is not a valid ``dtype`` ("int", or "time" as an integer): ints are
    64-bit signed; a float must be integral and in range. None when it is valid.

    Example: ``int_problem(1.5)`` is ``"expected int, got 1.5 (float)"``.
    """
    shown = f"expected {dtype}, got {short_repr(value)} ({type(value).__name__})"
    if isinstance(value, float) and not value.is_integer():
        return shown
    if not INT64_MIN <= value <= INT64_MAX:
        return f"{shown}: outside the 64-bit range [-2**63, 2**63 - 1]"
    return None


def scalar_problem(v: Any, dtype: str) -> str | None:
    """Why one Python cell does not fit ``dtype`` (None when it does; ints may be floats
    with no fraction, within the int64 range). Example: ``scalar_problem("x", "int")``."""
    if isinstance(v, np.generic):
        v = v.item()
    bad = f"expected {dtype}, got {v!r} ({type(v).__name__})"
    if dtype == "str":
        return None if isinstance(v, str) else bad
    if dtype == "bool":
        return None if isinstance(v, bool) else bad
    if isinstance(v, (bool, str)):
        return bad
    if dtype == "float":
        if isinstance(v, int):
            try:
                float(v)
            except OverflowError:
                return f"expected float, got {short_repr(v)}: too large for a 64-bit float"
            return None
        return None if isinstance(v, float) else bad
    if dtype == "time" and isinstance(v, (datetime, np.datetime64)):
        return None
    if isinstance(v, (int, float)) and (dtype == "int" or isinstance(v, int)):
        return int_problem(v, dtype)
    return bad


def check_value(value: Any, dtype: str, row: int, column: str) -> Any:
    """Validate one value against ``dtype``; return it as the engine holds it (None when
    null): strings as they are, times as int nanoseconds since the epoch.

    Example: ``check_value(datetime(1970, 1, 1, 0, 0, 1), "time", 0, "t")`` is 10**9.
    """
    value = null_or_value(value)
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
