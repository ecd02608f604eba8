"""Event files (CSV, Parquet) as ``pycel run`` reads them: what the readers share (options,
the declaration's schema, checks and conversions of cells, delivery of the valid rows
before a bad one). The readers themselves are ``pycel/cli/_csv.py`` and
``pycel/cli/_parquet.py``; ``pycel.cli._data.open_source`` picks one. This module is
below both, so neither imports the other nor the module that picks them.

Both readers yield ``(base, frame)`` chunks of at most ``chunk_size`` rows whose columns
are those of the file that ``ReadOptions.columns`` names (all when None); an attribute the
file lacks is left out, and the engine reports it if the query reads it. The header is
checked whole (unknown and duplicate names), also for columns that are not read. The
general rules for missing and extra data are in ``docs/data.md``; the command line's in
``docs/cli.md``.

Rows in errors are counted over the whole input: ``row`` is the 0-based data row (= the
event's stream position); the command line prints it 1-based. When a chunk holds a bad
row r, ``chunks()`` first yields the rows before r (if any) and then raises
:class:`InputError` for row r, so every match ending before the bad row can be written.

Example::

    options = ReadOptions(chunk_size=50_000, columns=frozenset({"price"}))
    convert_column(pd.Series(["1", None]), "int", 0, "volume", "ns")   # [1.0, nan]
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs
import numpy as np
import pandas as pd

from pycel.errors import DataError

#: Multipliers from ``--time-unit`` to nanoseconds (integer timestamps).
TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_TRUE = frozenset({"true", "t", "1", "yes", "y"})
_FALSE = frozenset({"false", "f", "0", "no", "n"})
_EXACT_FLOAT = 2**53
# An ISO 8601 date-time that ends in a UTC offset (Z, +01, +0100, +01:00; pandas accepts
# the same with a space before it). Without one, the time is UTC.
_OFFSET = re.compile(r"[T ]\d.*(?:Z|[+-]\d{1,2}(?::?\d{2})?)$")


class InputError(DataError):
    """A data error located in the whole input: ``row`` is the 0-based global data row."""


@attrs.frozen
class ReadOptions:
    """How to read the events (the ``run`` options that concern the input)."""

    chunk_size: int = 100_000
    limit_rows: int | None = None
    header: bool = True
    positional: bool = False
    type_column: str | None = None
    time_unit: str = "ns"
    input_format: str | None = None  # csv | parquet; None: by the file name
    # The attributes to convert and deliver (a query's columns_read_by); None: every
    # column. The header is checked whole either way. The other columns' cells are still
    # checked (types, values of event types that lack the attribute) without being
    # converted, unless check_unread is False: then they are not read at all.
    columns: frozenset[str] | None = None
    check_unread: bool = True


@attrs.frozen
class Schema:
    """What the declaration says about the data: attribute types and each event's fields."""

    fields: dict[str, str]  # attribute -> dtype, in declaration order
    event_fields: dict[str, tuple[str, ...]]  # event name -> its attributes, in order

    @classmethod
    def of(cls, types: Mapping[str, type[Any]]) -> Schema:
        fields: dict[str, str] = {}
        event_fields: dict[str, tuple[str, ...]] = {}
        for name, t in types.items():
            own: dict[str, str] = t.__fields__
            event_fields[name] = tuple(own)
            for attr, dtype in own.items():
                fields.setdefault(attr, dtype)
        return cls(fields, event_fields)


def first_true(mask: Any) -> int:
    """The first row where ``mask`` (array or Series) is true."""
    return int(np.flatnonzero(np.asarray(mask))[0])


def check_event_types(names: pd.Series, schema: Schema, base: int, column: str) -> None:
    """Raise InputError at the first row whose event type is not declared."""
    unknown = names.notna() & ~names.isin(list(schema.event_fields))
    if unknown.any():
        k = first_true(unknown)
        raise InputError(
            f"unknown event type {names.iloc[k]!r}; the declaration has {', '.join(schema.event_fields)}",
            row=base + k,
            column=column,
        )


_EXPECTED = {
    "bool": "a boolean (true/false, 1/0, yes/no)",
    "int": "an integer",
    "float": "a number",
    "time": "an integer timestamp or an ISO 8601 date-time",
}


def convert_column(text: pd.Series, dtype: str, base: int, column: str, time_unit: str) -> Any:
    """A column of CSV cells (str or NaN; or numbers already, from a typed read) as values
    of ``dtype`` the engine ingests."""
    if text.dtype.kind in "iuf":
        values = text.to_numpy()
        if dtype != "time":
            return values
        limit = np.iinfo(np.int64).max // TIME_UNITS[time_unit]
        over = (values >= limit) | (values <= -limit)  # (np.abs(-2**63) is -2**63)
        scale = np.int64(TIME_UNITS[time_unit])
        _raise_bad(text, over, "a timestamp in the 64-bit nanosecond range", base, column)
        return pd.Series((values * scale).astype("datetime64[ns]"))
    present = text.notna().to_numpy()
    if dtype == "str":
        return text
    # numpy and pandas parse numbers and times as C strings: "2.5\0" would read as 2.5;
    # Python's int() and float() also take "1_000" and other scripts' digits ("１２"),
    # which pandas and Arrow refuse: one rule whichever path a chunk takes.
    cells = text.to_numpy(dtype=object)  # (a loop: a third of the time of one str.contains)
    odd = np.fromiter(
        (isinstance(c, str) and (not c.isascii() or "_" in c or "\0" in c) for c in cells),
        np.bool_,
        len(cells),
    )
    _raise_bad(text, present & odd, _EXPECTED[dtype], base, column)
    if dtype == "bool":
        lowered = text.str.strip().str.lower()
        truth = lowered.isin(_TRUE).to_numpy()
        bad = present & ~truth & ~lowered.isin(_FALSE).to_numpy()
        _raise_bad(text, bad, "a boolean (true/false, 1/0, yes/no)", base, column)
        if present.all():
            return truth
        flags = np.full(len(text), None, dtype=object)
        flags[present] = truth[present]
        return flags
    fast = _fast_numbers(text, present, dtype, time_unit)
    if fast is not None:
        return fast
    numbers = pd.to_numeric(text, errors="coerce", dtype_backend="numpy_nullable")
    parsed = numbers.notna().to_numpy()
    if dtype == "float":
        nan_text = text.str.strip().str.lower().isin(["nan"]).to_numpy()
        _raise_bad(text, present & ~parsed & ~nan_text, "a number", base, column)
        return numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    if dtype == "int":
        exact = _exact_integers(text, present & parsed)
        missing = np.array([v is None for v in exact], dtype=np.bool_)
        _raise_bad(text, present & (~parsed | missing), "an integer", base, column)
        out_of_range = np.array([v is not None and not -(2**63) <= v < 2**63 for v in exact], dtype=np.bool_)
        _raise_bad(text, out_of_range, "an integer in the 64-bit range", base, column)
        return _integers(exact, present)
    # time: integers (in time_unit) or ISO 8601 date-times
    stamps = np.zeros(len(text), dtype=np.int64)
    if parsed.any():
        exact = _exact_integers(text, parsed)
        unit = int(TIME_UNITS[time_unit])
        nanos = [None if v is None else v * unit for v in exact]
        wrong = parsed & np.array([v is None or not -(2**63) < v < 2**63 for v in nanos], dtype=np.bool_)
        _raise_bad(text, wrong, "an integer timestamp or an ISO 8601 date-time", base, column)
        stamps[parsed] = np.array([v for v, ok in zip(nanos, parsed, strict=True) if ok], dtype=np.int64)
    dated = present & ~parsed
    if dated.any():
        stamps[dated], bad = _iso_stamps(text[dated])
        where = np.zeros(len(text), dtype=np.bool_)
        where[np.flatnonzero(dated)] = bad
        if where.any() and _is_date_time(text.iloc[first_true(where)]):
            _raise_bad(text, where, f"a date-time {_NANOSECOND_RANGE}", base, column)
        _raise_bad(text, where, "an integer timestamp or an ISO 8601 date-time", base, column)
    out = pd.Series(stamps.astype("datetime64[ns]"))
    return out.where(present)


#: Times are int64 nanoseconds since the epoch.
_NANOSECOND_RANGE = "from 1677-09-21T00:12:43.145224193 to 2262-04-11T23:47:16.854775807 UTC"


def _is_date_time(cell: object) -> bool:
    """Whether ``cell`` is an ISO 8601 date-time (one outside the nanosecond range too)."""
    try:
        datetime.fromisoformat(str(cell).strip())
    except ValueError:
        return False
    return True


def _iso_stamps(text: pd.Series) -> tuple[Any, Any]:
    """(nanoseconds since the epoch, unparsable mask) of ISO 8601 date-times. A value with
    a UTC offset is converted with it, one without is UTC: decided per value (pandas
    parsing a column that mixes the two gives the later naive values the earlier offset,
    so the result would depend on which values share a chunk)."""
    cells = text.str.strip()
    offset = cells.str.contains(_OFFSET).to_numpy(dtype=np.bool_)
    nanos = np.zeros(len(text), dtype=np.int64)
    bad = np.zeros(len(text), dtype=np.bool_)
    for group in (offset, ~offset):
        if group.any():
            when = pd.to_datetime(cells[group], errors="coerce", utc=True, format="ISO8601")
            bad[group] = when.isna().to_numpy()
            nanos[group] = when.dt.tz_localize(None).to_numpy().astype("datetime64[ns]").view(np.int64)
    return nanos, bad


def _fast_numbers(text: pd.Series, present: Any, dtype: str, time_unit: str) -> Any:
    """The common case, converted by numpy: every present cell a plain number (integers
    for int and time). None when some cell needs the slower, checking path."""
    cells = text.to_numpy(dtype=object)[present]
    try:
        if dtype == "float":
            floats = np.full(len(text), np.nan)
            floats[present] = cells.astype(np.float64)
            return floats
        ints = cells.astype(np.int64)
    except (ValueError, TypeError, OverflowError):
        return None
    if dtype == "time":
        scale = np.int64(TIME_UNITS[time_unit])
        limit = np.iinfo(np.int64).max // scale
        if len(ints) and (ints.max() >= limit or ints.min() <= -limit):  # (np.abs(-2**63) is -2**63)
            return None
        stamps = np.zeros(len(text), dtype=np.int64)
        stamps[present] = ints * scale
        return pd.Series(stamps.astype("datetime64[ns]")).where(present)
    if present.all():
        return ints
    if not len(ints) or np.abs(ints).max() < _EXACT_FLOAT:
        floats = np.full(len(text), np.nan)
        floats[present] = ints
        return floats
    out = np.full(len(text), None, dtype=object)
    out[present] = ints.tolist()
    return out


def _exact_integers(text: pd.Series, which: Any) -> Any:
    """The cells ``which`` marks as Python ints, read exactly ("12", "1.0", "1e3", and
    integers beyond 2**53 that a float would round), None where a cell is not an integer
    (or not marked): an object array. This is the path of the chunks whose cells are not
    all plain integers."""
    exact = np.full(len(text), None, dtype=object)
    # Plain integers of at most 18 digits (inside int64) by numpy, the rest one by one.
    plain = which & text.astype(str).str.fullmatch(r"\s*[+-]?\d{1,18}\s*").to_numpy(dtype=np.bool_)
    exact[plain] = text[plain].astype(str).str.strip().to_numpy(dtype=object).astype(np.int64).tolist()
    for k in np.flatnonzero(which & ~plain):
        cell = text.iloc[k]
        try:
            number = decimal.Decimal(str(cell).strip())
        except decimal.InvalidOperation:
            continue
        if number.is_finite() and number == number.to_integral_value():
            exact[k] = int(number)
    return exact


def _integers(exact: Any, present: Any) -> Any:
    """Integer column from exact Python ints (None where absent): int64 without nulls; else
    float64 (exact below 2**53) or objects."""
    if present.all():
        return exact.astype(np.int64)
    if all(v is None or abs(v) < _EXACT_FLOAT for v in exact):
        return np.where(present, exact, np.nan).astype(np.float64)
    return exact


def _raise_bad(text: pd.Series, bad: Any, expected: str, base: int, column: str) -> None:
    if bad.any():
        k = first_true(bad)
        cell = text.iloc[k]
        shown = cell.item() if isinstance(cell, np.generic) else cell  # 5, not np.int64(5)
        raise InputError(f"expected {expected}, got {shown!r}", row=base + k, column=column)


def check_declared(frame: pd.DataFrame, names: pd.Series, schema: Schema, base: int) -> None:
    """Raise InputError at the first non-null cell of an attribute that its row's event type
    does not declare (a file's column is shared by every event type in it)."""
    for attr in frame.columns:
        declaring = [event for event, own in schema.event_fields.items() if attr in own]
        if attr not in schema.fields or len(declaring) == len(schema.event_fields):
            continue
        stray = frame[attr].notna().to_numpy() & ~names.isin(declaring).to_numpy()
        if stray.any():
            k = first_true(stray)
            raise InputError(
                f"event type {names.iloc[k]} has no attribute {attr!r}, but the row has a value for it "
                f"({frame[attr].iloc[k]!r})",
                row=base + k,
                column=str(attr),
            )


def deliver(convert: Callable[[int], pd.DataFrame], n: int, base: int) -> Iterator[tuple[int, pd.DataFrame]]:
    """Yield ``(base, convert(n))``, the checked frame of a chunk of ``n`` rows. When that
    raises :class:`InputError` at row r, yield the rows before it first (``convert`` of the
    prefix, which may find an earlier bad row: repeat until the prefix is clean), then
    raise the error of the first bad row."""
    try:
        frame = convert(n)
    except InputError as err:
        error = err
        while error.row is not None and base < error.row < base + n:
            try:
                prefix = convert(error.row - base)
            except InputError as earlier:
                if earlier.row is None or earlier.row >= error.row:
                    raise
                error = earlier
                continue
            yield base, prefix
            break
        raise error from None
    yield base, frame
