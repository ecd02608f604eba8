"""What the first line of a CSV file tells about it, before ``pycel run`` reads it as
CORE-style CSV: data that is not CSV text (compressed, an archive, Parquet), a header
split by another separator, a data row where the header should be, or (``--no-header``)
a header row where data should be. Each is an :class:`InputError` saying what the file
looks like and what to do, instead of an error about its cells.

Example::

    refuse_not_csv(handle.readline())   # b"PAR1..." -> "the file looks like Parquet: ..."
"""

from __future__ import annotations

from typing import Any

from pycel.data.files import InputError, Schema

#: The first bytes of files that are not CSV text, and what to say about them.
_NOT_CSV = (
    (b"\x1f\x8b", "gzip-compressed data: decompress it first (gunzip), pycel run reads plain CSV"),
    (b"PK\x03\x04", "a zip archive: extract the CSV file first"),
    (b"PAR1", "Parquet: name it .parquet or give --input-format parquet"),
)
_OTHER_SEPARATORS = ";\t|"


def refuse_not_csv(line: bytes) -> None:
    """Raise when the file's first line starts like a binary format."""
    for magic, kind in _NOT_CSV:
        if line.startswith(magic):
            raise InputError(f"the file looks like {kind}, not CSV text")


def refuse_foreign_header(header: list[str], schema: Schema, type_column: str | None) -> None:
    """Raise when the header row is one column split by another separator, or is a data
    row (it holds a declared event type): taken as a header it would drop that event."""
    other = next((sep for sep in _OTHER_SEPARATORS if len(header) == 1 and sep in header[0]), None)
    if other is not None:
        raise InputError(
            f"the header row holds {other!r} but no ',': pycel run reads comma-separated values "
            f"(convert the file, e.g. pandas.read_csv(path, sep={other!r}).to_csv(new_path, index=False))"
        )
    events = [name for name in header if name in schema.event_fields and name not in schema.fields]
    if events and type_column not in header:
        cells = ",".join(header)
        raise InputError(
            f"line 1 looks like an event ({cells[:80]}), not a header row: the first line must "
            "name the columns; give --no-header if the file has no header row"
        )


def refuse_header_row(first: Any, schema: Schema, type_column: str) -> None:
    """With --no-header: raise when the first row (a pandas Series of text cells) is the
    file's header row, its type not declared and its cells naming declared attributes."""
    if first[type_column] in schema.event_fields:
        return
    named = [c for c in first.tolist() if isinstance(c, str) and c.strip() in schema.fields]
    if named:
        raise InputError(
            f"the row looks like a header row (it names the attributes {', '.join(named)}): "
            "drop --no-header if the file has one",
            row=0,
            column=type_column,
        )
