"""Parquet event files for ``pycel run``: columns matched by name, read one record batch of
``chunk_size`` rows at a time. Standard input (``-``) is read into memory first (Parquet's
metadata is at the end of the file).

The reader checks what the engine cannot see once pandas holds the values: integers that
do not fit ``int`` (uint64 above 2**63 - 1; floats that are not integral, infinite, NaN or
out of range; integer timestamps that overflow nanoseconds), cells of attributes that the
row's event type does not declare, missing and unknown event types. The engine checks the
rest of the types. A file that cannot be read (a corrupted footer or data page) is an
:class:`InputError` naming the file and the rows it was reading.

Example::

    source = ParquetSource("events.parquet", schema, ReadOptions(chunk_size=50_000))
    for base, frame in source.chunks():
        stream.push(frame, type_column=source.type_column)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pycel.data.batch import Schema as DataSchema
from pycel.data.columns import encode_column
from pycel.data.files import (
    TIME_UNITS,
    InputError,
    ReadOptions,
    Schema,
    check_declared,
    check_event_types,
    deliver,
    first_true,
)
from pycel.data.frames import nullable_dtype
from pycel.errors import DataError

_INT64_MAX = 2**63 - 1
_PANDAS_INDEX = re.compile(r"__index_level_\d+__")


class ParquetSource:
    """A Parquet file read one record batch of ``chunk_size`` rows at a time."""

    def __init__(self, path: str, schema: Schema, options: ReadOptions) -> None:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        self.path = "<stdin>" if path == "-" else path
        self.schema = schema
        self.options = options
        where: Any = path
        if path == "-":  # Parquet is read from its footer back: standard input goes into memory
            where = pa.BufferReader(sys.stdin.buffer.read())
        else:
            with open(path, "rb"):  # a missing or unreadable file is an OSError, as for CSV
                pass
        try:
            # Pages written with checksums (pyarrow's write_page_checksum) are verified.
            self.file = pq.ParquetFile(where, page_checksum_verification=True)
            names = list(self.file.schema_arrow.names)
            self.total = self.file.metadata.num_rows
        except Exception as err:  # pyarrow raises several types for a bad file
            raise InputError(f"cannot read {self.path} as Parquet: {_one_line(err)}") from None
        names = [n for n in names if not _PANDAS_INDEX.fullmatch(n)]  # pandas' saved index: not events
        if not names:
            raise InputError("the Parquet file has no columns")
        self.type_column = options.type_column or names[0]
        if self.type_column not in names:
            raise InputError(f"the file has no column {self.type_column!r}: {', '.join(names)}")
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise InputError(f"the file has two columns named {name!r}", column=name)
            seen.add(name)
            if name != self.type_column and name not in schema.fields:
                raise InputError(
                    f"column {name!r} is not an attribute of any declared event "
                    f"(attributes: {', '.join(schema.fields)})",
                    column=name,
                )
        self.columns = names
        # The columns delivered: the event type's and those in options.columns (all when
        # None); the header above was checked whole. The others are read only to be checked
        # (options.check_unread), and then mostly from their Arrow type alone.
        wanted = options.columns
        self.read_columns = [n for n in names if wanted is None or n == self.type_column or n in wanted]
        self.fetched_columns = names if options.check_unread else self.read_columns
        if options.limit_rows is not None:
            self.total = min(self.total, options.limit_rows)
        self.rows = 0

    def close(self) -> None:
        self.file.close()

    def fraction(self) -> float | None:
        return self.rows / self.total if self.total else None

    def chunks(self) -> Iterator[tuple[int, pd.DataFrame]]:
        """(position of the first row, frame) per record batch; on a bad row the rows
        before it are yielded first, then :class:`InputError` names its row and column."""
        # One row group at a time: pyarrow reads ahead across groups, so a damaged group
        # would fail the read of an earlier one (losing its rows and naming the wrong group).
        batches = (
            batch
            for g in range(self.file.metadata.num_row_groups)
            for batch in self.file.iter_batches(
                batch_size=self.options.chunk_size, row_groups=[g], columns=self.fetched_columns
            )
        )
        while self.rows < self.total:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except Exception as err:  # a corrupted page: pyarrow raises OSError, ArrowInvalid, ...
                raise InputError(
                    f"cannot read {self.path} ({self._where()}): {_one_line(err)}", row=None
                ) from None
            batch = batch.slice(0, self.total - self.rows)
            base = self.rows

            def convert(k: int, batch: Any = batch, base: int = base) -> pd.DataFrame:
                return self._frame(batch.slice(0, k), base)

            for start, frame in deliver(convert, batch.num_rows, base):
                self.rows = start + len(frame)
                yield start, frame

    def _where(self) -> str:
        """The row group and rows being read (1-based rows, as the command line prints them)."""
        first = 0
        for g in range(self.file.metadata.num_row_groups):
            n = self.file.metadata.row_group(g).num_rows
            if self.rows < first + n:
                return f"row group {g}, rows {first + 1} to {first + n}"
            first += n
        return f"after row {self.rows}"

    def _frame(self, batch: Any, base: int) -> pd.DataFrame:
        """The checked pandas frame of ``batch`` (its columns in ``read_columns``; the others
        are checked and left out)."""
        columns: dict[str, Any] = {}
        check_only: list[str] = []
        for name in batch.schema.names:
            cells = batch.column(name)
            dtype = self.schema.fields.get(name)
            if dtype == "int":
                cells = _checked_ints(cells, base, name)
            elif dtype == "time" and (pa.types.is_integer(cells.type) or pa.types.is_floating(cells.type)):
                cells = _checked_stamps(cells, TIME_UNITS[self.options.time_unit], base, name)
            if name not in self.read_columns:
                if self._valid_unread(name, cells):
                    continue
                check_only.append(name)
            columns[name] = cells
        try:
            # (nullable ints: an int64 column with nulls as float64 would round above 2**53)
            table = pa.table(columns)
            frame: pd.DataFrame = table.to_pandas(ignore_metadata=True, types_mapper=nullable_dtype)
        except Exception as err:  # e.g. a value pandas cannot hold
            raise InputError(f"cannot read {self.path} ({self._where()}): {_one_line(err)}") from None
        names = frame[self.type_column]
        names = names.astype(object).where(names.notna())
        missing = names.isna().to_numpy()
        if missing.any():
            raise InputError("missing event type", row=base + first_true(missing), column=self.type_column)
        check_event_types(names, self.schema, base, self.type_column)
        attributes = [c for c in frame.columns if c != self.type_column]
        check_declared(frame[attributes], names, self.schema, base)
        for name in check_only:  # the engine's checks of a column it would have read
            try:
                cells = frame[name]
                encode_column(cells, self.schema.fields[name], cells.notna().to_numpy(), DataSchema(), name)
            except DataError as err:
                row = None if err.row is None else base + err.row
                raise InputError(err.message, row=row, column=name) from None
        return frame.drop(columns=check_only)

    def _valid_unread(self, name: str, cells: Any) -> bool:
        """Whether a column that is not delivered is valid from its Arrow type (after the
        checks of ints and integer times above): every event type declares the attribute
        (or the cells are null) and the type is one the engine takes for the declared
        one as it is. False: the column is converted and checked as if it were read."""
        if cells.null_count == len(cells):
            return True
        if any(name not in own for own in self.schema.event_fields.values()):
            return False  # check_declared looks at its cells
        kind = cells.type
        natural = {
            "str": pa.types.is_string(kind) or pa.types.is_large_string(kind),
            "int": pa.types.is_signed_integer(kind),
            "float": pa.types.is_integer(kind) or pa.types.is_floating(kind),
            "bool": pa.types.is_boolean(kind),
            "time": pa.types.is_timestamp(kind) and kind.unit == "ns",
        }
        return bool(natural.get(self.schema.fields.get(name, ""), False))


def _raise_at(bad: Any, cells: Any, expected: str, base: int, column: str) -> None:
    """InputError at the first row where the Arrow boolean array ``bad`` is true."""
    mask = bad.fill_null(False).to_numpy(zero_copy_only=False)
    if mask.any():
        k = first_true(mask)
        raise InputError(f"expected {expected}, got {cells[k].as_py()!r}", row=base + k, column=column)


def _checked_ints(cells: Any, base: int, column: str) -> Any:
    """An ``int`` attribute's column, checked to fit 64-bit signed integers (uint64 above
    2**63 - 1 and floats that are not integral or out of range are errors)."""
    kind = cells.type
    if pa.types.is_uint64(kind):
        _raise_at(
            pc.greater(cells, pa.scalar(_INT64_MAX, pa.uint64())), cells, "an int (64-bit)", base, column
        )
        return cells.cast(pa.int64())
    if pa.types.is_floating(kind):
        floats = cells.cast(pa.float64())
        finite = pc.is_finite(floats)
        fits = pc.and_(pc.less(pc.abs(floats), 2.0**63), pc.equal(pc.floor(floats), floats))
        _raise_at(pc.invert(pc.and_(finite, fits)), cells, "an integral int (64-bit)", base, column)
    return cells


def _checked_stamps(cells: Any, scale: int, base: int, column: str) -> Any:
    """Integer timestamps in some unit as nanoseconds (timestamp[ns]), checked to be
    integral and to fit 64-bit nanoseconds."""
    limit = _INT64_MAX // scale
    if pa.types.is_integer(cells.type):  # compared exactly, not through floats
        bound = pa.scalar(limit, pa.uint64() if pa.types.is_uint64(cells.type) else pa.int64())
        fits = pc.less(cells, bound)
        if pa.types.is_signed_integer(cells.type):
            fits = pc.and_(fits, pc.greater(cells, pa.scalar(-limit, pa.int64())))
    else:
        floats = cells.cast(pa.float64())
        fits = pc.and_(pc.less(pc.abs(floats), float(limit)), pc.equal(pc.floor(floats), floats))
    _raise_at(pc.invert(fits), cells, "an integer timestamp in the 64-bit nanosecond range", base, column)
    nanos = pc.multiply(cells.cast(pa.int64()), pa.scalar(scale, pa.int64()))
    return nanos.cast(pa.timestamp("ns"))


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__
