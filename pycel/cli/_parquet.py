"""Parquet event files for ``pycel run``: columns matched by name, one record batch of
``chunk_size`` rows at a time; the engine checks the values' types.

Example::

    source = ParquetSource("events.parquet", schema, ReadOptions(chunk_size=50_000))
    for base, frame in source.chunks():
        stream.push(frame, type_column=source.type_column)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from ._data import TIME_UNITS, InputError, ReadOptions, Schema, check_event_types


class ParquetSource:
    """A Parquet file read one record batch of ``chunk_size`` rows at a time."""

    def __init__(self, path: str, schema: Schema, options: ReadOptions) -> None:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        self.schema = schema
        self.options = options
        with open(path, "rb"):  # a missing or unreadable file is an OSError, as for CSV
            pass
        try:
            self.file = pq.ParquetFile(path)
        except Exception as err:  # pyarrow raises several types for a bad file
            raise InputError(f"cannot read {path} as Parquet: {err}") from None
        names = list(self.file.schema_arrow.names)
        if not names:
            raise InputError("the Parquet file has no columns")
        self.type_column = options.type_column or names[0]
        if self.type_column not in names:
            raise InputError(f"the file has no column {self.type_column!r}: {', '.join(names)}")
        for name in names:
            if name != self.type_column and name not in schema.fields:
                raise InputError(
                    f"column {name!r} is not an attribute of any declared event "
                    f"(attributes: {', '.join(schema.fields)})",
                    column=name,
                )
        self.total = self.file.metadata.num_rows
        if options.limit_rows is not None:
            self.total = min(self.total, options.limit_rows)
        self.rows = 0

    def close(self) -> None:
        self.file.close()

    def fraction(self) -> float | None:
        return self.rows / self.total if self.total else None

    def chunks(self) -> Iterator[tuple[int, pd.DataFrame]]:
        for batch in self.file.iter_batches(batch_size=self.options.chunk_size):
            if self.rows >= self.total:
                return
            frame = batch.to_pandas()
            frame = frame.iloc[: self.total - self.rows].reset_index(drop=True)
            base = self.rows
            self.rows += len(frame)
            names = frame[self.type_column]
            check_event_types(names.astype(object).where(names.notna()), self.schema, base, self.type_column)
            for attr, dtype in self.schema.fields.items():
                if dtype == "time" and attr in frame.columns and frame[attr].dtype.kind in "iuf":
                    frame[attr] = _stamps(frame[attr], TIME_UNITS[self.options.time_unit])
            yield base, frame


def _stamps(numbers: pd.Series, scale: int) -> pd.Series:
    """Integer timestamps in some unit (floats when the column has nulls) as datetime64[ns]."""
    present = numbers.notna().to_numpy()
    if numbers.dtype.kind == "f" and (numbers.fillna(0) % 1 != 0).any():
        return numbers  # fractional: the engine reports the first bad value
    ints = numbers.astype("Int64").to_numpy(dtype=np.int64, na_value=0) * np.int64(scale)
    return pd.Series(ints.astype("datetime64[ns]")).where(present)
