"""Event files for ``pycel run``: CORE-style CSV and Parquet, read in bounded chunks.

CSV: one event per row, the event type in the first column (or ``--type-column``), then
the attributes. With a header row (the default) the header names the columns and the
attribute columns are matched by name; with ``positional=True`` (``--positional``, or
``--no-header``, which also means there is no header row) each row holds its event type's
attributes in declaration order, as CORE builds its events. Every cell is read as text and
converted with the declared type, so a bad cell is reported with its row and column.
Empty cells are null.

Parquet (``_parquet.py``): columns matched by name; the engine checks the types.

Rows in errors are counted over the whole input: ``row`` is the 0-based data row (= the
event's stream position); the command line prints it 1-based.

Example::

    source = open_source("events.csv", fields, options)
    for base, frame in source.chunks():     # base: position of the frame's first row
        stream.push(frame, type_column=source.type_column)
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs
import numpy as np
import pandas as pd

from ..errors import DataError

if TYPE_CHECKING:
    from ._parquet import ParquetSource

#: Multipliers from ``--time-unit`` to nanoseconds (integer timestamps).
TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_TRUE = frozenset({"true", "t", "1", "yes", "y"})
_FALSE = frozenset({"false", "f", "0", "no", "n"})
_OVERFLOW = "\0overflow"  # an extra column that catches rows with too many fields
_EXACT_FLOAT = 2**53


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


def _first(mask: Any) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def check_event_types(names: pd.Series, schema: Schema, base: int, column: str) -> None:
    """Raise InputError at the first row whose event type is not declared."""
    unknown = names.notna() & ~names.isin(list(schema.event_fields))
    if unknown.any():
        k = _first(unknown)
        raise InputError(
            f"unknown event type {names.iloc[k]!r}; the declaration has {', '.join(schema.event_fields)}",
            row=base + k,
            column=column,
        )


def convert_column(text: pd.Series, dtype: str, base: int, column: str, time_unit: str) -> Any:
    """A column of CSV cells (str or NaN; or numbers already, from a typed read) as values
    of ``dtype`` the engine ingests."""
    if text.dtype.kind in "iuf":
        values = text.to_numpy()
        if dtype != "time":
            return values
        scale = np.int64(TIME_UNITS[time_unit])
        over = np.abs(values) >= np.iinfo(np.int64).max // scale
        _raise_bad(text, over, "a timestamp in the 64-bit nanosecond range", base, column)
        return pd.Series((values * scale).astype("datetime64[ns]"))
    present = text.notna().to_numpy()
    if dtype == "str":
        return text
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
        values = numbers.to_numpy(dtype=np.float64, na_value=0.0)
        _raise_bad(text, present & (~parsed | (values % 1 != 0)), "an integer", base, column)
        _raise_bad(text, np.abs(values) >= 2.0**63, "an integer in the 64-bit range", base, column)
        return _integers(numbers, parsed)
    # time: integers (in time_unit) or ISO 8601 date-times
    stamps = np.zeros(len(text), dtype=np.int64)
    if parsed.any():
        values = numbers.to_numpy(dtype=np.float64, na_value=0.0)
        fractional = parsed & ((values % 1 != 0) | (np.abs(values) * TIME_UNITS[time_unit] >= 2.0**63))
        _raise_bad(text, fractional, "an integer timestamp or an ISO 8601 date-time", base, column)
        ints = numbers.astype("Int64").to_numpy(dtype=np.int64, na_value=0)
        stamps = np.where(parsed, ints * np.int64(TIME_UNITS[time_unit]), 0)
    dated = present & ~parsed
    if dated.any():
        when = pd.to_datetime(text[dated], errors="coerce", utc=True, format="ISO8601")
        bad = np.zeros(len(text), dtype=np.bool_)
        bad[np.flatnonzero(dated)] = when.isna().to_numpy()
        _raise_bad(text, bad, "an integer timestamp or an ISO 8601 date-time", base, column)
        naive = when.dt.tz_localize(None).to_numpy().astype("datetime64[ns]")
        stamps[np.flatnonzero(dated)] = naive.view(np.int64)
    out = pd.Series(stamps.astype("datetime64[ns]"))
    return out.where(present)


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
        if len(ints) and np.abs(ints).max() >= np.iinfo(np.int64).max // scale:
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


def _integers(numbers: pd.Series, parsed: Any) -> Any:
    """Integer column: int64 without nulls; else float64 (exact below 2**53) or objects."""
    if parsed.all():
        return numbers.astype("Int64").to_numpy(dtype=np.int64)
    ints = numbers.astype("Int64")
    if (ints.abs().fillna(0) < _EXACT_FLOAT).all():
        return ints.to_numpy(dtype=np.float64, na_value=np.nan)
    cells = [int(v) if ok else None for v, ok in zip(ints.tolist(), parsed, strict=True)]
    return np.array(cells, dtype=object)


def _raise_bad(text: pd.Series, bad: Any, expected: str, base: int, column: str) -> None:
    if bad.any():
        k = _first(bad)
        raise InputError(f"expected {expected}, got {text.iloc[k]!r}", row=base + k, column=column)


class CsvSource:
    """A CSV file (or ``-``: standard input) read in chunks of ``chunk_size`` rows."""

    def __init__(self, path: str, schema: Schema, options: ReadOptions) -> None:
        self.path = path
        self.schema = schema
        self.options = options
        self.handle: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        self.size = None if path == "-" else Path(path).stat().st_size
        self.rows = 0
        self.reader: Any = None
        self.type_column = options.type_column or "event_type"
        try:
            self.columns = self._columns()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()  # also closes the text wrapper pandas put around the handle
        if self.handle is not sys.stdin.buffer:
            self.handle.close()

    def _columns(self) -> list[str]:
        """The column names, after reading (and checking) the header row if there is one."""
        opts = self.options
        width = max((len(f) for f in self.schema.event_fields.values()), default=0)
        positions = [f"\0{k}" for k in range(width)]
        if not opts.header:
            return [self.type_column, *positions]
        try:
            first = self.handle.readline().decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise InputError(f"the header row is not UTF-8 text: {err}") from None
        if not first.strip():
            return [self.type_column, *positions]
        header = [name.strip() for name in next(csv.reader(io.StringIO(first)))]
        if opts.type_column is None:
            self.type_column = header[0]
        elif opts.type_column not in header:
            raise InputError(f"the header has no column {opts.type_column!r}: {', '.join(header)}")
        if opts.positional:
            if header[0] != self.type_column:
                raise InputError("with --positional the event type must be the first column")
            return [self.type_column, *positions]
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise InputError(f"the header names column {name!r} twice", column=name)
            seen.add(name)
            if name != self.type_column and name not in self.schema.fields:
                raise InputError(
                    f"the header names column {name!r}, which is not an attribute of any declared "
                    f"event (attributes: {', '.join(self.schema.fields)}); use --positional to "
                    "ignore the header's names",
                    column=name,
                )
        return header

    def fraction(self) -> float | None:
        """How much of the file has been read (for the progress line), if known."""
        if self.options.limit_rows:
            return min(1.0, self.rows / self.options.limit_rows)
        if not self.size:
            return None
        try:
            return min(1.0, self.handle.tell() / self.size)
        except (OSError, ValueError):
            return None

    def _reader(self, typed: bool) -> Any:
        """A chunked pandas reader from the handle's position: ``typed`` reads int, float
        and time columns with numpy dtypes (fast; fails on empty or unusual cells), else
        every cell as text (checked and converted by :func:`convert_column`)."""
        dtype: Any = str
        if typed:
            numpy_types = {"int": "int64", "time": "int64", "float": "float64"}
            dtype = {c: numpy_types.get(self.schema.fields.get(c, ""), object) for c in self.columns}
            dtype[self.type_column] = dtype[_OVERFLOW] = object
        self.reader = pd.read_csv(
            self.handle,
            header=None,
            names=[*self.columns, _OVERFLOW],
            dtype=dtype,
            keep_default_na=False,
            na_values=[""],
            index_col=False,
            chunksize=self.options.chunk_size,
            nrows=self.options.limit_rows,
            encoding="utf-8",
            float_precision="round_trip",
        )
        return self.reader

    def _restart(self) -> None:
        """Go back to the first data row (after a typed chunk failed)."""
        self.reader.close()
        self.reader = None
        self.handle.close()
        self.handle = open(self.path, "rb")  # noqa: SIM115
        if self.options.header:
            self.handle.readline()

    def chunks(self) -> Iterator[tuple[int, pd.DataFrame]]:
        """(position of the first row, frame) per chunk, frames ready for ``Stream.push``.

        Chunks are read typed while that works; at the first chunk that does not parse
        that way (an empty number, ``1.0`` for an int, a bad value, a malformed line) the
        file is read again as text from the start, skipping the rows already delivered,
        and every cell is checked, so errors name their row and column.
        """
        opts = self.options
        if opts.limit_rows == 0:
            return
        typed = self.path != "-" and not opts.positional
        reader = self._reader(typed)
        skip = 0
        while True:
            try:
                raw = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError as err:
                raise InputError(f"the file is not UTF-8 text: {err}") from None
            except (ValueError, OverflowError) as err:
                if not typed:
                    raise InputError(f"malformed CSV: {err}".strip()) from None
                typed, skip = False, self.rows
                self._restart()
                reader = self._reader(typed)
                continue
            if skip:
                dropped = min(skip, len(raw))
                raw, skip = raw.iloc[dropped:], skip - dropped
                if not len(raw):
                    continue
            base = self.rows
            raw = raw.reset_index(drop=True)
            self.rows += len(raw)
            yield base, self._convert(raw, base)

    def _convert(self, raw: pd.DataFrame, base: int) -> pd.DataFrame:
        extra = raw[_OVERFLOW].notna().to_numpy()
        if extra.any():
            k = _first(extra)
            raise InputError(f"row has more fields than the {len(self.columns)} columns", row=base + k)
        names = raw[self.type_column]
        missing = names.isna().to_numpy()
        if missing.any():
            raise InputError("missing event type", row=base + _first(missing), column=self.type_column)
        check_event_types(names, self.schema, base, self.type_column)
        positional = self.options.positional or not self.options.header
        text = self._positional(raw, names, base) if positional else raw
        out: dict[str, Any] = {self.type_column: names.to_numpy(dtype=object)}
        for attr, dtype in self.schema.fields.items():
            if attr in text.columns and attr != self.type_column:
                out[attr] = convert_column(text[attr], dtype, base, attr, self.options.time_unit)
        return pd.DataFrame(out)

    def _positional(self, raw: pd.DataFrame, names: pd.Series, base: int) -> pd.DataFrame:
        """Cells by attribute name, from each row's event type's attribute order."""
        n = len(raw)
        cells = {attr: np.full(n, np.nan, dtype=object) for attr in self.schema.fields}
        for event in pd.unique(names):
            rows = (names == event).to_numpy()
            attrs_in_order = self.schema.event_fields[str(event)]
            width = len(self.columns) - 1
            beyond = [f"\0{k}" for k in range(len(attrs_in_order), width)]
            if beyond:
                extra = rows & raw[beyond].notna().any(axis=1).to_numpy()
                if extra.any():
                    raise InputError(
                        f"event {event} has {len(attrs_in_order)} attributes but the row has more fields",
                        row=base + _first(extra),
                    )
            for k, attr in enumerate(attrs_in_order):
                cells[attr][rows] = raw[f"\0{k}"].to_numpy(dtype=object)[rows]
        return pd.DataFrame({a: pd.Series(v, dtype=object) for a, v in cells.items()})


def open_source(path: str, schema: Schema, options: ReadOptions) -> CsvSource | ParquetSource:
    """The reader for ``path``: Parquet for ``.parquet``/``.pq`` (or ``input_format``), else CSV."""
    from ._parquet import ParquetSource  # noqa: F811 (imported for annotations above)

    fmt = options.input_format
    if fmt is None:
        fmt = "parquet" if path.lower().endswith((".parquet", ".pq")) else "csv"
    if fmt == "parquet":
        return ParquetSource(path, schema, options)
    return CsvSource(path, schema, options)
