"""CORE-style CSV event files for ``pycel run``, read in chunks of ``chunk_size`` rows.

One event per row, the event type in the first column (or ``--type-column``), then the
attributes. With a header row (the default) the header names the columns and the attribute
columns are matched by name; with ``positional=True`` (``--positional``, or ``--no-header``,
which also means there is no header row) each row holds its event type's attributes in
declaration order, as CORE builds its events. Every cell is read as text and converted with
the declared type, so a bad cell is reported with its row and column. Empty cells are null.

Rows are split by pyarrow, which counts each row's fields: a row with fewer or more fields
than the header (or, positional, than every event type's attributes) is an error naming
it. Bytes that are not UTF-8 are found per cell, so that error names the row and the
column too. Positional rows whose width depends on their event type are split by pandas,
which cannot tell a missing trailing field from an empty one (both are null).

Example::

    source = CsvSource("events.csv", Schema.of(declaration), ReadOptions(chunk_size=50_000))
    for base, frame in source.chunks():
        stream.push(frame, type_column=source.type_column)
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.csv as pacsv  # type: ignore[import-untyped]

from pycel.data.files import (
    TIME_UNITS,
    InputError,
    ReadOptions,
    Schema,
    check_declared,
    check_event_types,
    convert_column,
    deliver,
    first_true,
)

from ._sniff import refuse_foreign_header, refuse_header_row, refuse_not_csv

_OVERFLOW = "\0overflow"  # positional reading: an extra column that catches rows with too many fields
_SKIPPED = re.compile(r"Skipping line (\d+): expected (\d+) fields, saw (\d+)")
# A byte that is not part of UTF-8 text (always >= 0x80) is passed to pyarrow as the
# private-use character U+F0000 + byte, and comes back as the surrogate U+DC00 + byte
# (Python's surrogateescape), so the cell shows the bytes of the file.
_MARKS = "[\U000f0080-\U000f00ff]"
_UNMARK = {0xF0000 + b: 0xDC00 + b for b in range(0x80, 0x100)}


def _mark_bytes(err: UnicodeError) -> tuple[str, int]:
    assert isinstance(err, UnicodeDecodeError)
    _MarkedUtf8.marks += err.end - err.start
    return "".join(chr(0xF0000 + b) for b in err.object[err.start : err.end]), err.end


codecs.register_error("pycel-mark-bytes", _mark_bytes)


class _MarkedUtf8(io.RawIOBase):
    """``handle``'s bytes, with each byte that is not UTF-8 replaced by a private-use
    character: pyarrow gets valid UTF-8 (it fails on a bad row's text otherwise), and the
    reader still finds the bad bytes per cell. ``count``: how many bytes were replaced."""

    marks = 0  # replaced bytes, all readers (the error handler is global)

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="pycel-mark-bytes")
        self.pending = b""
        self.count = 0
        self.done = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes (all with -1 or None), as a binary file's read."""
        want = -1 if size is None else size
        while not self.done and (want < 0 or len(self.pending) < want):
            block = self.handle.read(max(want, 1 << 20))
            before = _MarkedUtf8.marks
            text = self.decoder.decode(block, final=not block)
            self.count += _MarkedUtf8.marks - before
            self.pending += text.encode("utf-8")
            self.done = not block
        if want < 0:
            out, self.pending = self.pending, b""
        else:
            out, self.pending = self.pending[:want], self.pending[want:]
        return out


class CsvSource:
    """A CSV file (or ``-``: standard input) read in chunks of ``chunk_size`` rows."""

    def __init__(self, path: str, schema: Schema, options: ReadOptions) -> None:
        self.path = path
        self.schema = schema
        self.options = options
        self.handle: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        self.size = None if path == "-" else Path(path).stat().st_size
        self.rows = 0
        self.reader: Any = None  # the pandas reader of positional rows
        self.marked = _MarkedUtf8(self.handle)
        self.type_column = options.type_column or "event_type"
        try:
            self.columns = self._columns()
        except BaseException:
            self.close()
            raise
        # The columns delivered: the event type's and the attributes in options.columns
        # (the header was checked whole). Positional rows are read whole: a field's
        # attribute depends on the row's event type. Pyarrow splits every field of a row
        # (and counts them) but converts only the columns parsed.
        wanted = options.columns
        keep = wanted is None or self.positional
        self.read_columns = [c for c in self.columns if keep or c == self.type_column or c in (wanted or ())]
        self.parsed_columns = self.columns if options.check_unread else self.read_columns

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()  # also closes the text wrapper pandas put around the handle
        if self.handle is not sys.stdin.buffer:
            self.handle.close()

    @property
    def positional(self) -> bool:
        return self.options.positional or not self.options.header

    @property
    def strict_width(self) -> bool:
        """Whether every row has the same number of fields (so pyarrow splits the rows and
        counts them): always with a header's names; positional rows only when every event
        type has as many attributes (else their width depends on their type)."""
        widths = {len(f) for f in self.schema.event_fields.values()}
        return not self.positional or len(widths) <= 1

    def _columns(self) -> list[str]:
        """The column names, after reading (and checking) the header row if there is one."""
        opts = self.options
        width = max((len(f) for f in self.schema.event_fields.values()), default=0)
        positions = [f"\0{k}" for k in range(width)]
        if not opts.header:
            self._skip_byte_order_mark()
            return [self.type_column, *positions]
        line = self.handle.readline()
        refuse_not_csv(line)
        try:
            first = line.decode("utf-8-sig")
        except UnicodeDecodeError:
            shown = line.rstrip(b"\r\n")
            raise InputError(f"the header row (line 1) is not UTF-8 text: {shown[:80]!r}") from None
        if not first.strip():
            return self._no_header_row()
        if "\r" in first.rstrip("\r\n"):
            raise InputError(
                "the header row (line 1) holds a carriage return: the file's lines end in CR "
                "alone (classic Mac OS); pycel reads LF or CRLF line ends (convert it, e.g. "
                "tr '\\r' '\\n' < old.csv > new.csv)"
            )
        try:
            header = [name.strip() for name in next(csv.reader(io.StringIO(first)))]
        except csv.Error as err:
            raise InputError(f"the header row (line 1) is not CSV: {err}") from None
        refuse_foreign_header(header, self.schema, opts.type_column)
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

    def _no_header_row(self) -> list[str]:
        """The columns of a file whose first line is blank: an empty file (only blank
        lines) is an empty stream, with a warning; rows after a blank first line are an
        error, since their columns have no names."""
        for line in self.handle:
            if line.strip():
                raise InputError(
                    "the header row (line 1) is empty; the first line must name the columns "
                    "(use --no-header if the file has no header row)"
                )
        shown = "<stdin>" if self.path == "-" else self.path
        warnings.warn(f"{shown} is empty (no header row, no events)", UserWarning, stacklevel=1)
        # No rows follow: every declared attribute counts as present, so a query that
        # reads some is not refused for a missing column.
        return [self.type_column, *(name for name in self.schema.fields if name != self.type_column)]

    def _skip_byte_order_mark(self) -> None:
        peek = getattr(self.handle, "peek", None)
        if peek is not None and peek(3)[:3] == b"\xef\xbb\xbf":
            self.handle.read(3)

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

    def chunks(self) -> Iterator[tuple[int, pd.DataFrame]]:
        """(position of the first row, frame) per chunk, frames ready for ``Stream.push``.

        On a bad row (a bad cell, the wrong number of fields, bytes that are not UTF-8) the
        rows before it are yielded first, then :class:`InputError` names its row.
        """
        if self.options.limit_rows == 0:
            return
        texts = self._arrow_text() if self.strict_width else self._pandas_text()
        for raw in texts:
            yield from self._checked(raw)

    def _checked(self, raw: pd.DataFrame) -> Iterator[tuple[int, pd.DataFrame]]:
        base = self.rows
        suspects = raw.attrs.get("undecoded", list(raw.columns))  # pandas: any column
        check_only: list[str] = raw.attrs.get("check_only", [])

        def convert(k: int) -> pd.DataFrame:
            return self._convert(raw.iloc[:k], base, suspects).drop(columns=check_only)

        for start, frame in deliver(convert, len(raw), base):
            self.rows = start + len(frame)
            yield start, frame

    # -- splitting rows: pyarrow (with a header) -----------------------------------------------

    def _arrow_text(self) -> Iterator[pd.DataFrame]:
        """Chunks of cells as text (None for empty cells); after the rows before a row with
        the wrong number of fields, InputError for that row."""
        wrong: list[tuple[int, int]] = []  # (0-based row, its number of fields), as pyarrow finds them

        def on_invalid(row: Any) -> str:
            wrong.append((-1 if row.number is None else row.number - 1, row.actual_columns))
            return "skip"  # parsing goes on, so the rows before it are delivered

        binary = {name: pa.binary() for name in self.parsed_columns}
        self.marked = _MarkedUtf8(self.handle)
        try:
            reader = pacsv.open_csv(
                self.marked,
                read_options=pacsv.ReadOptions(column_names=self.columns, use_threads=False),
                parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid, newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=binary,
                    include_columns=self.parsed_columns,
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        except (pa.ArrowInvalid, OSError) as err:
            if "Empty CSV file" in str(err):
                return
            raise InputError(f"malformed CSV: {err}") from None
        table: Any = None  # rows read and not yet delivered
        delivered = read = 0
        size, limit = self.options.chunk_size, self.options.limit_rows
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                batch = None
            except (pa.ArrowInvalid, OSError) as err:
                if table is not None and table.num_rows:
                    yield self._text_frame(table)
                raise InputError(f"malformed CSV after data row {read}: {err}") from None
            if batch is not None:
                part = pa.Table.from_batches([batch])
                table = part if table is None else pa.concat_tables([table, part])
                read += batch.num_rows
            cut = min(row for row, _ in wrong) if wrong else None
            ends = [x for x in (cut, limit) if x is not None]
            end = min(ends) if ends else None
            if end is not None and table is not None and delivered + table.num_rows > end:
                table = table.slice(0, max(end - delivered, 0))
            finished = batch is None or (end is not None and read >= end)
            while table is not None and table.num_rows and (table.num_rows >= size or finished):
                chunk, table = table.slice(0, size), table.slice(size)
                delivered += chunk.num_rows
                yield self._text_frame(chunk)
            if not finished:
                continue
            if cut is not None and (limit is None or cut < limit):
                fields = dict(wrong)[cut]
                raise InputError(
                    f"row has {'more' if fields > len(self.columns) else 'fewer'} fields than the "
                    f"{len(self.columns)} columns ({fields} field{'s' * (fields != 1)})",
                    row=None if cut < 0 else cut,
                )
            return

    def _text_frame(self, table: Any) -> pd.DataFrame:
        """The cells of ``table`` (binary columns) as text; bytes that are not UTF-8 come
        back as lone surrogates, reported by :meth:`_convert` with their row. Number columns
        whose cells are all plain numbers are parsed here by Arrow (the common case, fast);
        the others stay text for :func:`convert_column`, which checks every cell.

        A column parsed only to be checked (not in ``read_columns``) is left out when Arrow
        finds it valid; else it goes through the checks too (``attrs["check_only"]``) and
        is dropped after them."""
        columns: dict[str, Any] = {}
        undecoded: list[str] = []
        check_only: list[str] = []
        for name in self.parsed_columns:
            text = pc.cast(table.column(name), pa.string())  # valid UTF-8: see _MarkedUtf8
            text = pc.if_else(pc.equal(text, ""), None, text)
            marked = bool(self.marked.count) and pc.any(pc.match_substring_regex(text, _MARKS)).as_py()
            if name not in self.read_columns:
                if not marked and self._valid_unread(name, text):
                    continue
                check_only.append(name)
            if marked:
                columns[name] = pd.Series(text.to_pandas(), dtype=object).str.translate(_UNMARK)
                undecoded.append(name)
                continue
            numbers = _arrow_numbers(text, self.schema.fields.get(name, "str"))
            columns[name] = numbers if numbers is not None else pd.Series(text.to_pandas(), dtype=object)
        frame = pd.DataFrame(columns)
        frame.attrs["undecoded"] = undecoded
        frame.attrs["check_only"] = check_only
        return frame

    def _valid_unread(self, name: str, text: Any) -> bool:
        """Whether Arrow finds the cells of a column that is not delivered valid: every
        event type declares the attribute (or the cells are null), and they are all text,
        or all plain numbers of the declared type (an integer timestamp within the unit's
        range). False sends the column through :func:`convert_column` to be sure."""
        if text.null_count == len(text):
            return True
        if any(name not in own for own in self.schema.event_fields.values()):
            return False  # check_declared looks at its cells
        dtype = self.schema.fields.get(name, "str")
        if dtype == "str":
            return True
        target = {"int": pa.int64(), "time": pa.int64(), "float": pa.float64()}.get(dtype)
        if target is None:
            return False
        numbers = _arrow_cast(text, target)
        if numbers is None:
            return False
        if dtype != "time":
            return True
        limit = (2**63 - 1) // TIME_UNITS[self.options.time_unit]
        extremes = pc.min_max(numbers).as_py()
        return extremes["min"] is None or (-limit < extremes["min"] and extremes["max"] < limit)

    # -- splitting rows: pandas (positional) ----------------------------------------------------

    def _pandas_text(self) -> Iterator[pd.DataFrame]:
        """Chunks of cells as text (NaN for empty cells) for positional reading; bytes that
        are not UTF-8 become lone surrogates, reported by :meth:`_convert` with their row."""
        reader = pd.read_csv(
            self.handle,
            header=None,
            names=[*self.columns, _OVERFLOW],
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            index_col=False,
            chunksize=self.options.chunk_size,
            nrows=self.options.limit_rows,
            encoding="utf-8",
            encoding_errors="surrogateescape",
            on_bad_lines="warn",
        )
        self.reader = reader
        read = 0
        while True:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    raw = next(reader)
                except StopIteration:
                    return
                except ValueError as err:
                    raise InputError(f"malformed CSV after data row {read}: {err}".strip()) from None
            skipped = [_SKIPPED.search(str(w.message)) for w in caught]
            lines = [(int(m[1]) - 1, int(m[3])) for m in skipped if m]
            if lines:
                row, fields = min(lines)
                if row > read:
                    yield raw.iloc[: row - read].reset_index(drop=True)
                raise InputError(
                    f"row has more fields than the {len(self.columns)} columns ({fields} fields)", row=row
                )
            read += len(raw)
            yield raw.reset_index(drop=True)

    # -- checking and converting ---------------------------------------------------------------

    def _convert(self, raw: pd.DataFrame, base: int, suspects: list[str]) -> pd.DataFrame:
        """The checked frame of ``raw`` (text cells); ``suspects``: columns that may hold
        cells that are not UTF-8."""
        raw = raw.reset_index(drop=True)
        _check_utf8(raw, base, [c for c in suspects if c == self.type_column])
        if _OVERFLOW in raw.columns:
            extra = raw[_OVERFLOW].notna().to_numpy()
            if extra.any():
                k = first_true(extra)
                raise InputError(f"row has more fields than the {len(self.columns)} columns", row=base + k)
        names = raw[self.type_column]
        missing = names.isna().to_numpy()
        if missing.any():
            raise InputError("missing event type", row=base + first_true(missing), column=self.type_column)
        if not self.options.header and base == 0:
            refuse_header_row(raw.iloc[0], self.schema, self.type_column)
        check_event_types(names, self.schema, base, self.type_column)
        text = self._positional(raw, names, base) if self.positional else raw
        attributes = [c for c in text.columns if c in self.schema.fields and c != self.type_column]
        if self.positional:  # a positional column holds several attributes
            suspects = attributes if suspects else []
        _check_utf8(text, base, [c for c in suspects if c in attributes])
        check_declared(text[attributes], names, self.schema, base)
        out: dict[str, Any] = {self.type_column: names.to_numpy(dtype=object)}
        for attr in attributes:
            dtype = self.schema.fields[attr]
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
                        row=base + first_true(extra),
                    )
            for k, attr in enumerate(attrs_in_order):
                cells[attr][rows] = raw[f"\0{k}"].to_numpy(dtype=object)[rows]
        return pd.DataFrame({a: pd.Series(v, dtype=object) for a, v in cells.items()})


def _check_utf8(raw: pd.DataFrame, base: int, suspects: list[str]) -> None:
    """Raise InputError at the first cell that is not UTF-8 text: a string with lone
    surrogates (bytes decoded with ``surrogateescape``). Checked per column at C speed;
    only a column with a bad cell is searched cell by cell."""
    bad_rows: list[tuple[int, str]] = []
    for name in suspects:
        cells = raw[name]
        if cells.dtype != object:
            continue
        present = cells.dropna()
        try:
            "\n".join(present).encode("utf-8")
            continue
        except (TypeError, UnicodeEncodeError):
            pass
        for k, cell in enumerate(cells.tolist()):
            if isinstance(cell, str) and not _encodes(cell):
                bad_rows.append((k, str(name)))
                break
    if bad_rows:
        k, name = min(bad_rows)
        cell = raw[name].iloc[k]
        shown = cell.encode("utf-8", "surrogateescape")
        raise InputError(f"the cell is not UTF-8 text: {shown!r}", row=base + k, column=name)


def _arrow_numbers(text: Any, dtype: str) -> Any:
    """A column of ``int``, ``float`` or integer ``time`` cells parsed by Arrow: int64
    (without nulls) or float64 (NaN for nulls) numpy values, or None when a cell is not a
    plain number (``1.0`` for an int, a date-time, an integer beyond int64, a blank...) or
    an int column has nulls."""
    target = {"int": pa.int64(), "time": pa.int64(), "float": pa.float64()}.get(dtype)
    if target is None or (target == pa.int64() and text.null_count):
        return None
    numbers = _arrow_cast(text, target)
    return None if numbers is None else numbers.to_numpy()


def _arrow_cast(text: Any, target: Any) -> Any:
    """``text`` cast by Arrow to ``target``, or None where a cell is not a plain number of
    that type. (Arrow reads "0x10" as the int 16; the checking path refuses hexadecimal.)"""
    if target == pa.int64() and pc.any(pc.match_substring(text, "x", ignore_case=True)).as_py():
        return None
    try:
        return text.cast(target)
    except pa.ArrowInvalid:
        return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
