"""Event files for ``pycel run``: :func:`open_source` picks the reader of a file (CSV in
``_csv.py``, Parquet in ``_parquet.py``); what the readers share (options, the
declaration's schema, checks and conversions of cells) is in ``pycel.data.files``, below
them, and is re-exported here.

Example::

    source = open_source("events.csv", Schema.of(declaration), ReadOptions())
    for base, frame in source.chunks():     # base: position of the frame's first row
        stream.push(frame, type_column=source.type_column)
"""

from __future__ import annotations

from pycel.data.files import TIME_UNITS, InputError, ReadOptions, Schema

from ._csv import CsvSource
from ._parquet import ParquetSource

__all__ = ["TIME_UNITS", "CsvSource", "InputError", "ParquetSource", "ReadOptions", "Schema", "open_source"]


def open_source(path: str, schema: Schema, options: ReadOptions) -> CsvSource | ParquetSource:
    """The reader for ``path``: Parquet for ``.parquet``/``.pq`` (or ``input_format``), else CSV."""
    fmt = options.input_format
    if fmt is None:
        fmt = "parquet" if path.lower().endswith((".parquet", ".pq")) else "csv"
    if fmt == "parquet":
        return ParquetSource(path, schema, options)
    return CsvSource(path, schema, options)
