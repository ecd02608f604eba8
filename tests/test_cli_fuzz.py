"""``pycel run`` on damaged input: random corruptions of a generated CSV (bytes changed,
the file cut short, another encoding, huge numbers, missing and extra columns, bad rows)
and of a Parquet file.

For every case: the exit status is 0 or 1 (the query is fixed and valid, so 2 would
misreport bad data as bad usage), standard error has no traceback and every line of it is
a ``pycel: …`` message, and the matches written are the reference evaluator's on the rows
before the first bad row. Which row is the first bad one is decided here independently,
from the input rules of docs/cli.md (:func:`read_rows`), and must be the row the error
names.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import pycel
from pycel import ceql
from pycel.cli import main

DECLARATION = """CREATE STREAM S {
    EVENT BUY  { name: string, volume: int, price: double, t: int },
    EVENT SELL { name: string, volume: int, price: double, t: int }
}"""
#: Each query and the columns it reads (a file without one of them is refused).
READS = {
    "SELECT * FROM S WHERE SELL AS s ; BUY AS b FILTER s[volume > 40] AND b[name = 'A'] WITHIN 12 [t]": {
        "volume", "name", "t"
    },
    "SELECT * FROM S WHERE SELL AS s ; BUY+ AS b FILTER b[price > 1.5] WITHIN 5 EVENTS": {"price"},
    "SELECT * FROM S WHERE SELL AS s ; BUY AS b PARTITION BY [name] WITHIN 20 [t]": {"name", "t"},
}  # fmt: skip
QUERIES = tuple(READS)
COLUMNS = ("event_type", "name", "volume", "price", "t")
TYPES = {"name": "str", "volume": "int", "price": "float", "t": "int"}
#: Bytes a flip may write: anything but the CSV structure of quotes and line ends (NUL
#: included: numbers are once parsed as C strings, which end at a NUL).
FLIP_BYTES = b"0123456789aeEnxAB,.-+ _\t\xff\xc3\x80'\x00"
HUGE = ("9223372036854775808", "-9223372036854775809", "18446744073709551615", "1e19", "1e400", "inf")
INT64 = (-(2**63), 2**63 - 1)
DECL = ceql.parse_declaration(DECLARATION)
PATTERNS = {q: ceql.parse_query(q, DECL) for q in QUERIES}


# -- the input, independently -----------------------------------------------------------------


class Bad(Exception):
    """A row the input rules reject."""


_INT = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)", re.I)


def convert(cell: str, dtype: str) -> Any:
    """A CSV cell as the declared type: None for an empty cell; Bad when docs/cli.md's
    rules refuse it (an int must be integral and in int64; a double any number; blanks
    around a number are fine)."""
    if cell == "":
        return None
    if dtype == "str":
        return cell
    cell = cell.strip(" \t")  # numbers may have blanks around them, as Python's int() allows
    if not _NUMBER.fullmatch(cell):
        raise Bad(f"not a number: {cell!r}")
    if dtype == "float":
        return float(cell)
    if _INT.fullmatch(cell):
        value = int(cell)
    else:
        number = float(cell)
        if not math.isfinite(number) or number != int(number):
            raise Bad(f"not an integer: {cell!r}")
        value = int(number)
    if not INT64[0] <= value <= INT64[1]:
        raise Bad(f"outside int64: {cell!r}")
    return value


def read_rows(data: bytes, query: str) -> tuple[list[dict[str, Any]], int | None, bool]:
    """(events of the rows before the first bad one, its 0-based index or None, whether
    the whole file is refused before any row: a bad header, or a column the query reads
    missing). The window's time attribute ``t`` must be present and non-decreasing when
    the query has a time window."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        return [], None, False
    try:
        header = lines[0].decode("utf-8").removeprefix("\ufeff").split(",")
    except UnicodeDecodeError:
        return [], None, True
    names = [h.strip() for h in header]
    attrs = names[1:]
    if len(set(names)) != len(names) or any(a not in TYPES for a in attrs):
        return [], None, True
    if not READS[query] <= set(attrs):
        return [], None, True
    events: list[dict[str, Any]] = []
    last_t: int | None = None
    for k, raw in enumerate(lines[1:]):
        try:
            cells = raw.decode("utf-8").split(",")
            if len(cells) != len(names):
                raise Bad("field count")
            if cells[0] not in ("BUY", "SELL"):
                raise Bad(f"event type {cells[0]!r}")
            event: dict[str, Any] = {"event_type": cells[0]}
            for attr, cell in zip(attrs, cells[1:], strict=True):
                value = convert(cell, TYPES[attr])
                if value is not None:
                    event[attr] = value
            if "[t]" in query:  # the window's time: present and non-decreasing
                t = event.get("t")
                if t is None or (last_t is not None and t < last_t):
                    raise Bad("time missing or going backwards")
                last_t = t
        except (UnicodeDecodeError, Bad):
            return events, k, False
        events.append(event)
    return events, None, False


# -- generated input and its corruptions ---------------------------------------------------------


@st.composite
def tables(draw: st.DrawFn) -> list[list[str]]:
    """A valid CSV as rows of cells (header first)."""
    n = draw(st.integers(1, 30))
    rows = [list(COLUMNS)]
    t = 0
    for _ in range(n):
        t += draw(st.integers(0, 4))
        rows.append(
            [
                draw(st.sampled_from(["BUY", "SELL"])),
                draw(st.sampled_from(["A", "B", "C"])),
                str(draw(st.integers(0, 100))),
                str(draw(st.integers(0, 300)) / 100),
                str(t),
            ]
        )
    return rows


def to_bytes(rows: list[list[str]], encoding: str = "utf-8") -> bytes:
    return "".join(",".join(r) + "\n" for r in rows).encode(encoding)


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[str, bytes]:
    """(what was done, the damaged CSV)."""
    rows = draw(tables())
    kind = draw(
        st.sampled_from(
            ["none", "flip", "flips", "cut", "latin1", "utf16", "huge", "drop", "extra", "short", "long",
             "type", "back", "empty"]
        )
    )  # fmt: skip
    k = draw(st.integers(1, len(rows) - 1))
    col = draw(st.integers(1, len(COLUMNS) - 1))
    data = to_bytes(rows)
    if kind in ("flip", "flips"):
        damaged = bytearray(data)
        for _ in range(1 if kind == "flip" else draw(st.integers(2, 6))):
            at = draw(st.integers(0, len(damaged) - 1))
            if damaged[at] not in b"\n":
                damaged[at] = draw(st.sampled_from(list(FLIP_BYTES)))
        return kind, bytes(damaged)
    if kind == "cut":
        return kind, data[: draw(st.integers(0, len(data) - 1))]
    if kind == "latin1":
        rows[k][1] = "Müller"
        return kind, to_bytes(rows, "latin-1")
    if kind == "utf16":
        return kind, to_bytes(rows, "utf-16")
    if kind == "huge":
        rows[k][draw(st.sampled_from([2, 4]))] = draw(st.sampled_from(HUGE))
    elif kind == "drop":
        rows = [r[:col] + r[col + 1 :] for r in rows]
    elif kind == "extra":
        rows = [r + (["extra"] if i == 0 else ["1"]) for i, r in enumerate(rows)]
    elif kind == "short":
        rows[k] = rows[k][:-1]
    elif kind == "long":
        rows[k] = [*rows[k], "1"]
    elif kind == "type":
        rows[k][0] = draw(st.sampled_from(["TRADE", "", "buy"]))
    elif kind == "back":
        rows[k][4] = "-1"
    elif kind == "empty":
        rows[k][col] = ""
    return kind, to_bytes(rows)


# -- running the command -------------------------------------------------------------------------


def run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


Row = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


def written(path: Path) -> list[Row]:
    """The matches in a JSON lines output file (none when the run stopped before creating it)."""
    rows = []
    for line in (path.read_text() if path.exists() else "").splitlines():
        obj = json.loads(line)
        start, end = obj.pop("start"), obj.pop("end")
        rows.append((start, end, tuple(sorted((v, tuple(p)) for v, p in obj.items() if p))))
    return sorted(rows)


def reference(query: str, events: list[dict[str, Any]]) -> list[Row]:
    if not events:
        return []
    return sorted((m.start, m.end, m.valuation) for m in pycel.reference.evaluate(PATTERNS[query], events))


def check_stderr(code: int, err: str) -> None:
    assert code in (0, 1), err
    assert "Traceback" not in err, err
    assert all(line.startswith("pycel: ") for line in err.splitlines()), err
    assert "internal error" not in err, err


_ROW = re.compile(r"^pycel: data error in .*?, row ([0-9]+) \(position ([0-9]+)\)", re.M)


@given(case=corrupted(), query=st.sampled_from(QUERIES), chunk=st.sampled_from(["1", "2", "5", "1000"]),
       batch=st.sampled_from(["1", "3", "100000"]))  # fmt: skip
@settings(max_examples=60)
def test_damaged_csv(
    tmp_path_factory: Any, case: tuple[str, bytes], query: str, chunk: str, batch: str
) -> None:
    kind, data = case
    folder = tmp_path_factory.mktemp("fuzz")
    path, out = folder / "events.csv", folder / "matches.jsonl"
    path.write_bytes(data)
    args = ["run", "-d", DECLARATION, "--query", query, str(path), "-f", "jsonl", "-o", str(out)]
    code, _, err = run([*args, "--chunk-size", chunk, "--match-batch", batch])
    check_stderr(code, err)
    events, bad_row, refused = read_rows(data, query)
    found = _ROW.search(err)
    if refused:  # (the error may name a row found bad before the missing column)
        assert code == 1, (kind, err)  # also with no data rows: the header is checked
        assert written(out) == [], (kind, err)
        return
    if bad_row is None:
        assert code == 0, (kind, err)
    else:
        assert code == 1 and found is not None, (kind, err)
        assert int(found.group(2)) == bad_row, (kind, err, data.split(b"\n")[bad_row + 1])
    assert written(out) == reference(query, events), (kind, err)


@given(data=st.data(), query=st.sampled_from(QUERIES))
@settings(max_examples=15)
def test_damaged_parquet(tmp_path_factory: Any, data: st.DataObject, query: str) -> None:
    """A damaged Parquet file (no checksums: a changed value may go unnoticed, so only the
    exit status and the messages are checked)."""
    rows = data.draw(tables())
    frame = pd.DataFrame(rows[1:], columns=list(rows[0])).astype({"volume": int, "price": float, "t": int})
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "events.parquet"
    frame.to_parquet(path, index=False)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 8))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path.write_bytes(bytes(raw))
    code, out, err = run(
        ["run", "-d", DECLARATION, "--query", query, str(path), "-f", "jsonl", "--chunk-size", "4"]
    )
    check_stderr(code, err)
    if code == 1:
        assert "pycel: data error in " in err.splitlines()[0], err


def test_reader_rules_of_this_module(tmp_path: Path) -> None:
    """The independent reader above agrees with the command on hand-picked cells."""
    assert convert("1e3", "int") == 1000 and convert("-0", "int") == 0 and convert("", "int") is None
    for cell in ("1.5", "1e19", "nan", "x", "9223372036854775808"):
        try:
            convert(cell, "int")
        except Bad:
            continue
        raise AssertionError(cell)
    rows = [list(COLUMNS), ["SELL", "A", "50", "1.0", "1"], ["BUY", "A", "1", "2.0", "2"]]
    events, bad, refused = read_rows(to_bytes(rows), QUERIES[0])
    assert bad is None and not refused and len(events) == 2
    path, out = tmp_path / "e.csv", tmp_path / "m.jsonl"
    path.write_bytes(to_bytes(rows))
    code, _, _ = run(
        ["run", "-d", DECLARATION, "--query", QUERIES[0], str(path), "-f", "jsonl", "-o", str(out)]
    )
    assert code == 0 and written(out) == reference(QUERIES[0], events) == [(0, 1, (("b", (1,)), ("s", (0,))))]
