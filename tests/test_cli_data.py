"""The readers behind ``pycel run`` (``pycel/cli/_csv.py``, ``_parquet.py``): bad input is a
data error naming its row and column, never a traceback, and every match ending before the
first bad row is written (checked against ``pycel.reference.evaluate`` on those rows).

Covered: integers outside int64 (CSV text, Parquet uint64 and floats), ISO times with and
without a UTC offset in one column, bytes that are not UTF-8 (file or stdin, any chunk),
corrupted Parquet files, rows with too few or too many fields, cells of attributes the row's
event type does not declare, columns the query reads that the file lacks.
"""

from __future__ import annotations

import io
import json
import random
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ceql_paper_queries import STOCK_DECLARATION

import pycel
from pycel import ceql
from pycel.cli import main
from pycel.cli._data import InputError, ReadOptions, Schema, open_source

NAMES = ("INTC", "RIMM", "QQQ", "MSFT")
QUERY = (
    "SELECT * FROM S WHERE SELL AS s ; BUY AS b FILTER s[name = 'INTC'] AND b[name = 'RIMM'] WITHIN 12 EVENTS"
)
Row = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


def stock_frame(n: int, seed: int = 5) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame(
        {
            "event_type": [rng.choice(("BUY", "SELL")) for _ in range(n)],
            "name": [rng.choice(NAMES) for _ in range(n)],
            "volume": [rng.choice((100, 500, 1000)) for _ in range(n)],
            "price": [round(rng.uniform(5, 40), 2) for _ in range(n)],
            "stock_time": [1000 + 10 * k for k in range(n)],
        }
    )


def reference_rows(decl_text: str, query_text: str, events: Any) -> list[Row]:
    decl = ceql.parse_declaration(decl_text)
    pattern = ceql.parse_query(query_text, decl)
    return sorted((m.start, m.end, m.valuation) for m in pycel.reference.evaluate(pattern, events))


def jsonl_rows(text: str) -> list[Row]:
    rows = []
    for line in text.splitlines():
        obj = json.loads(line)
        start, end = obj.pop("start"), obj.pop("end")
        rows.append((start, end, tuple(sorted((v, tuple(p)) for v, p in obj.items() if p))))
    return sorted(rows)


def run(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def read_all(path: Path, decl_text: str, **options: Any) -> tuple[list[tuple[int, int]], InputError | None]:
    """(base, rows) of every chunk the reader yields, and the error it ends with."""
    source = open_source(str(path), Schema.of(ceql.parse_declaration(decl_text)), ReadOptions(**options))
    spans = []
    try:
        for base, frame in source.chunks():
            spans.append((base, len(frame)))
    except InputError as err:
        return spans, err
    finally:
        source.close()
    return spans, None


# -- a bad row: every match before it is written, then the error names it ----------------------

BAD_ROW = 150  # 0-based position; the file's line BAD_ROW + 2 (after the header)


def _edit(fields: list[str], kind: str) -> str:
    edits = {
        "text in a number": lambda f: [*f[:3], "cheap", f[4]],
        "NUL in a number": lambda f: [*f[:3], f[3] + "\0" + "7", f[4]],
        "int above int64": lambda f: [*f[:2], "9223372036854775808", *f[3:]],
        "uint64 max": lambda f: [*f[:2], "18446744073709551615", *f[3:]],
        "int below int64": lambda f: [*f[:2], "-9223372036854775809", *f[3:]],
        "1e19 for an int": lambda f: [*f[:2], "1e19", *f[3:]],
        "short row": lambda f: f[:4],
        "long row": lambda f: [*f, "1"],
        "two extra fields": lambda f: [*f, "1", "2"],
        "unknown event type": lambda f: ["TRADE", *f[1:]],
    }
    return ",".join(edits[kind](fields))


CASES = {
    # kind -> (column named in the error or None, words of the message)
    "text in a number": ("price", "expected a number, got 'cheap'"),
    "NUL in a number": ("price", "expected a number, got '"),  # numpy would stop at the NUL
    "int above int64": ("volume", "64-bit range"),
    "uint64 max": ("volume", "64-bit range"),
    "int below int64": ("volume", "64-bit range"),
    "1e19 for an int": ("volume", "64-bit range"),
    "short row": (None, "row has fewer fields than the 5 columns"),
    "long row": (None, "row has more fields than the 5 columns"),
    "two extra fields": (None, "row has more fields than the 5 columns"),
    "unknown event type": ("event_type", "unknown event type 'TRADE'"),
    "not UTF-8": ("name", "not UTF-8 text: b'IN\\xffTC'"),
}


def _bad_csv(path: Path, df: pd.DataFrame, kind: str) -> None:
    lines = df.to_csv(index=False).encode().splitlines()
    if kind == "not UTF-8":
        lines[BAD_ROW + 1] = lines[BAD_ROW + 1].replace(
            b"," + df["name"][BAD_ROW].encode() + b",", b",IN\xffTC,"
        )
    else:
        lines[BAD_ROW + 1] = _edit(lines[BAD_ROW + 1].decode().split(","), kind).encode()
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize("chunk", [1, 64, 100_000])
@pytest.mark.parametrize("kind", list(CASES))
def test_a_bad_csv_row_keeps_every_match_before_it(
    kind: str, chunk: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_frame(300)
    path = tmp_path / "bad.csv"
    _bad_csv(path, df, kind)
    column, message = CASES[kind]
    code, out, err = run(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl", "--chunk-size", chunk
    )
    assert code == 1 and "Traceback" not in err
    where = f"row {BAD_ROW + 1} (position {BAD_ROW})" + ("" if column is None else f", column '{column}'")
    assert f"data error in {path}, {where}: " in err and message in err
    expected = reference_rows(STOCK_DECLARATION, QUERY, df.head(BAD_ROW))
    assert [e for _, e, _ in expected if e >= 128]  # matches in the bad row's chunk of 64 rows
    assert jsonl_rows(out) == expected
    spans, error = read_all(path, STOCK_DECLARATION, chunk_size=chunk)
    assert error is not None and error.row == BAD_ROW
    assert sum(n for _, n in spans) == BAD_ROW and all(
        a + n == b for (a, n), (b, _) in zip(spans, spans[1:], strict=False)
    )


@pytest.mark.parametrize("kind", ["text in a number", "two extra fields", "unknown event type", "not UTF-8"])
def test_positional_rows_keep_every_match_before_a_bad_row(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_frame(300)
    path = tmp_path / "bad.csv"
    _bad_csv(path, df, kind)
    code, out, err = run(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl", "--chunk-size", 64,
        "--positional",
    )  # fmt: skip
    assert code == 1 and "Traceback" not in err
    assert f"row {BAD_ROW + 1} (position {BAD_ROW})" in err
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, df.head(BAD_ROW))


def test_positional_rows_of_one_width_are_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = stock_frame(120)
    lines = df.to_csv(index=False, header=False).encode().splitlines()
    lines[90] = lines[90].rsplit(b",", 1)[0]  # a short row: stock_time left out
    path = tmp_path / "nohead.csv"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")  # with a byte-order mark
    code, out, err = run(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl", "--no-header",
        "--chunk-size", 32,
    )  # fmt: skip
    assert code == 1 and "row 91 (position 90): row has fewer fields than the 5 columns" in err
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, df.head(90)) != []


def test_the_first_bad_row_wins_over_later_ones_in_other_columns(tmp_path: Path) -> None:
    df = stock_frame(100).astype({"volume": object, "price": object})
    df.loc[70, "price"] = "cheap"
    df.loc[40, "volume"] = "2.5"
    df.loc[55, "name"] = None
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False)
    spans, error = read_all(path, STOCK_DECLARATION, chunk_size=100)
    assert error is not None and (error.row, error.column) == (40, "volume")
    assert spans == [(0, 40)]


# -- non-UTF-8 bytes: the row and column, on stdin too -----------------------------------------


@pytest.mark.parametrize("row", [0, 7, 55])
def test_non_utf8_on_stdin_names_the_row(
    row: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_frame(70)
    lines = df.to_csv(index=False).encode().splitlines()
    lines[row + 1] = lines[row + 1].replace(b"BUY", b"B\xe9Y").replace(b"SELL", b"S\xe9LL")
    stdin = io.TextIOWrapper(io.BytesIO(b"\n".join(lines) + b"\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, "-", "-f", "jsonl", "--chunk-size", 5
    )
    assert code == 1 and "Traceback" not in err and "can't decode" not in err
    assert (
        f"data error in <stdin>, row {row + 1} (position {row}), column 'event_type': the cell is not UTF-8"
        in err
    )
    expected = reference_rows(STOCK_DECLARATION, QUERY, df.head(row))
    assert jsonl_rows(out) == expected and (expected or row < 10)


# -- time: an ISO time without offset is UTC, per value -----------------------------------------

TIME_DECL = (
    "CREATE STREAM S { EVENT A { x: string, t: primary_time }, EVENT B { x: string, t: primary_time } }"
)
TIME_QUERY = "SELECT * FROM S WHERE A ; B WITHIN 5 SECONDS"


INT_DECL = "CREATE STREAM S { EVENT A { v: long, t: primary_time }, EVENT B { v: long, t: primary_time } }"


@pytest.mark.parametrize("written", ["1.0", "1e3", "7"])
def test_large_integers_stay_exact_beside_cells_written_as_decimals(
    written: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell such as ``1.0`` or ``1e3`` in an int (or integer time) column took the whole
    chunk through float64: 2**53 + 1 read as 2**53, a nanosecond time rounded, and the
    answer depended on --chunk-size. Every cell is exact whatever its neighbours."""
    big, stamp = 2**53 + 1, 1_700_000_000_000_000_001
    path = tmp_path / "ints.csv"
    later = stamp + 2_000_000_000  # exactly 2 s after (float64 rounds stamp down by 1 ns)
    path.write_text(f"event_type,v,t\nA,{written},{written}\nA,{big},{stamp}\nB,{2**63 - 1},{later}\n")
    query = f"SELECT * FROM S WHERE A AS a ; B AS b FILTER a[v = {big}] WITHIN 2 SECONDS [t]"
    exact = float(written)
    events = pd.DataFrame(
        {
            "event_type": ["A", "A", "B"],
            "v": [int(exact), big, 2**63 - 1],
            "t": pd.to_datetime([int(exact), stamp, later], unit="ns", utc=True),
        }
    )
    expected = reference_rows(INT_DECL, query, events)
    assert expected == [(1, 2, (("a", (1,)), ("b", (2,))))]
    for chunk in ("1", "100000"):
        options = ("-f", "jsonl", "--chunk-size", chunk)
        code, out, err = run(capsys, "run", "-d", INT_DECL, "--query", query, path, *options)
        assert code == 0, err
        assert jsonl_rows(out) == expected, chunk


@pytest.mark.parametrize(
    "a_time",
    [
        "2024-01-01T00:00:00+01:00",  # 23:00 UTC the day before: an hour before B, no match
        "2024-01-01T01:00:00+01:00",  # 00:00 UTC: 3 seconds before B, a match
    ],
)
def test_times_with_and_without_offset_do_not_depend_on_chunks(
    a_time: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mixed.csv"
    path.write_text(f"event_type,x,t\nA,x,{a_time}\nB,x,2024-01-01T00:00:03\n")
    events = pd.DataFrame(
        {
            "event_type": ["A", "B"],
            "x": ["x", "x"],
            "t": [pd.Timestamp(a_time).tz_convert("UTC"), pd.Timestamp("2024-01-01T00:00:03", tz="UTC")],
        }
    )
    expected = reference_rows(TIME_DECL, TIME_QUERY, events)
    outputs = []
    for chunk in ("1", "100000"):
        code, out, err = run(
            capsys, "run", "-d", TIME_DECL, "--query", TIME_QUERY, path, "-f", "jsonl", "--chunk-size", chunk
        )
        assert code == 0, err
        outputs.append(jsonl_rows(out))
    assert outputs[0] == outputs[1] == expected
    assert bool(expected) == a_time.startswith("2024-01-01T01")


def test_a_date_time_beyond_the_nanosecond_range_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Year 2300 is an ISO 8601 date-time, but not one an int64 of nanoseconds holds: the
    message said "expected an integer timestamp or an ISO 8601 date-time" (a probe)."""
    path = tmp_path / "far.csv"
    path.write_text("event_type,x,t\nA,x,2024-01-01T00:00:00\nB,x,2300-01-01T00:00:00\nB,x,soon\n")
    code, out, err = run(capsys, "run", "-d", TIME_DECL, "--query", TIME_QUERY, path, "-f", "jsonl")
    assert code != 0 and "row 2" in err and "expected a date-time from 1677-09-21" in err, err
    path.write_text("event_type,x,t\nA,x,2024-01-01T00:00:00\nB,x,soon\n")
    code, out, err = run(capsys, "run", "-d", TIME_DECL, "--query", TIME_QUERY, path, "-f", "jsonl")
    assert code != 0 and "expected an integer timestamp or an ISO 8601 date-time, got 'soon'" in err, err


def test_a_column_mixing_offsets_and_utc_is_read_per_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(2)
    stamps = [pd.Timestamp("2024-03-01T12:00:00", tz="UTC") + pd.Timedelta(seconds=2 * k) for k in range(60)]
    cells = []
    for when in stamps:  # the same instant written with a random offset, or none (UTC), or Z
        hours = rng.choice([None, "Z", -5, 0, 1, 9])
        if hours is None:
            cells.append(when.tz_localize(None).isoformat())
        elif hours == "Z":
            cells.append(when.tz_localize(None).isoformat() + "Z")
        else:
            cells.append(when.tz_convert(f"Etc/GMT{-hours:+d}").isoformat())
    names = [rng.choice("AB") for _ in stamps]
    path = tmp_path / "mixed.csv"
    path.write_text("event_type,x,t\n" + "".join(f"{n},x,{c}\n" for n, c in zip(names, cells, strict=True)))
    expected = reference_rows(
        TIME_DECL, TIME_QUERY, pd.DataFrame({"event_type": names, "x": "x", "t": stamps})
    )
    assert expected
    for chunk in ("1", "7", "100000"):
        code, out, err = run(
            capsys, "run", "-d", TIME_DECL, "--query", TIME_QUERY, path, "-f", "jsonl", "--chunk-size", chunk
        )
        assert code == 0, err
        assert jsonl_rows(out) == expected


# -- Parquet: ints that do not fit, corrupted files --------------------------------------------


@pytest.mark.parametrize(
    ("arrow_type", "value"),
    [
        (pa.uint64(), 2**63),
        (pa.uint64(), 2**64 - 1),
        (pa.float64(), 1e19),
        (pa.float64(), -1e19),
        (pa.float64(), float("inf")),
        (pa.float64(), float("nan")),
        (pa.float64(), 1.5),
    ],
)
def test_parquet_ints_outside_int64_are_errors(
    arrow_type: Any, value: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_frame(300)
    volume = [*df["volume"].tolist()[:BAD_ROW], value, *df["volume"].tolist()[BAD_ROW + 1 :]]
    table = pa.Table.from_pandas(df, preserve_index=False).set_column(
        2, "volume", pa.array(volume, type=arrow_type, from_pandas=False)
    )
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    code, out, err = run(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl", "--chunk-size", 64
    )
    assert code == 1 and "Traceback" not in err
    assert f"row {BAD_ROW + 1} (position {BAD_ROW}), column 'volume': expected an" in err
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, df.head(BAD_ROW))
    # the same column with the bad value replaced by a fitting one is fine (uint64, floats)
    fine = [*volume[:BAD_ROW], 100, *volume[BAD_ROW + 1 :]]
    pq.write_table(table.set_column(2, "volume", pa.array(fine, type=arrow_type)), path)
    code, out, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl")
    assert code == 0, err
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, df.assign(volume=fine))


def test_parquet_integer_times_that_overflow_nanoseconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.parquet"
    pd.DataFrame({"event_type": ["A", "B", "B"], "x": "x", "t": [1, 3, 10**11]}).to_parquet(path, index=False)
    code, out, err = run(
        capsys, "run", "-d", TIME_DECL, "--query", TIME_QUERY, path, "-f", "jsonl", "--time-unit", "s"
    )
    assert code == 1 and "row 3 (position 2), column 't'" in err and "nanosecond range" in err
    events = pd.DataFrame({"event_type": ["A", "B"], "x": "x", "t": pd.to_datetime([1, 3], unit="s")})
    assert jsonl_rows(out) == reference_rows(TIME_DECL, TIME_QUERY, events) != []


@pytest.mark.parametrize("unit", ["s", "ns"])
@pytest.mark.parametrize("chunk", [1, 100_000])
def test_csv_integer_time_of_minus_two_to_the_63_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unit: str, chunk: int
) -> None:
    """-2**63 fits int64 but not as nanoseconds: in seconds it wrapped to the epoch, in ns
    it became NaT (a null); like Parquet, it is outside the nanosecond range."""
    path = tmp_path / "t.csv"
    path.write_text(f"event_type,x,t\nA,x,1\nA,x,{-(2**63)}\nB,x,3\n")
    code, out, err = run(
        capsys, "run", "-d", TIME_DECL, "--query", TIME_QUERY, path, "-f", "jsonl",
        "--time-unit", unit, "--chunk-size", chunk,
    )
    assert code == 1 and "row 2 (position 1), column 't'" in err and "nanosecond range" in err, err
    events = pd.DataFrame({"event_type": ["A"], "x": "x", "t": pd.to_datetime([1], unit=unit)})
    assert jsonl_rows(out) == reference_rows(TIME_DECL, TIME_QUERY, events)


def test_corrupted_parquet_is_a_one_line_data_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ok.parquet"
    stock_frame(200).to_parquet(path, index=False)
    good = path.read_bytes()
    # The pandas metadata in the footer (JSON) made invalid: pycel does not need it.
    meta = good.find(b'{"index_columns"')
    broken = good[:meta] + b"[" + good[meta + 1 :]
    path.write_bytes(broken)
    code, out, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl")
    assert code == 0, err
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, stock_frame(200))
    failures = 0
    for offset in range(4, len(good) - 8, 37):  # single corrupted bytes all over the file
        damaged = bytearray(good)
        damaged[offset] ^= 0xA5
        path.write_bytes(bytes(damaged))
        code, _, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-q")
        assert code in (0, 1) and "Traceback" not in err
        assert code == 0 or (len(err.strip().splitlines()) <= 2 and str(path) in err)
        failures += code == 1
    assert failures  # some damage is detected (Parquet has no checksums by default: not all)


@pytest.mark.parametrize("cell", ["0x10", "0X1F", "1_2", "\uff11\uff12", "\u0661"])
@pytest.mark.parametrize("column", ["volume", "price"])
def test_number_cells_read_alike_whatever_the_chunk_size(
    cell: str, column: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Arrow read "0x10" as 16 when it converted a whole chunk, Python's int() took "1_2"
    and full-width digits cell by cell: the same file matched or failed by --chunk-size
    (found by a probe). Each is now an error at its row, after the rows before it."""
    rows = ["SELL,INTC,7,1.5,1", "SELL,INTC,7,1.5,2", "SELL,INTC,7,1.5,3"]
    rows[1] = rows[1].replace("7", cell) if column == "volume" else rows[1].replace("1.5", cell)
    path = tmp_path / "cells.csv"
    path.write_text("\n".join(["event_type,name,volume,price,stock_time", *rows]) + "\n", encoding="utf-8")
    query = "SELECT * FROM S WHERE SELL AS s"
    for chunk in ("1", "2", "1000"):
        args = ["-d", STOCK_DECLARATION, "--query", query, path, "-f", "jsonl", "--chunk-size", chunk]
        code, out, err = run(capsys, "run", *args)
        assert code == 1 and f"row 2 (position 1), column '{column}'" in err, (chunk, err)
        assert jsonl_rows(out) == [(0, 0, (("s", (0,)),))], chunk


def test_a_damaged_row_group_keeps_the_output_of_the_groups_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyarrow reads ahead across row groups: a damaged last group failed the read of the
    first, so no match was written and the error named row group 0 (found by a probe)."""
    frame = stock_frame(3000)
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    column = pq.ParquetFile(path).metadata.row_group(5).column(0)
    damaged = bytearray(path.read_bytes())
    damaged[column.data_page_offset + column.total_compressed_size - 10] ^= 0xFF
    path.write_bytes(bytes(damaged))
    code, out, err = run(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl", "--chunk-size", "700"
    )
    assert code == 1 and "(row group 5, rows 2501 to 3000)" in err, err
    earned = reference_rows(STOCK_DECLARATION, QUERY, frame[:2500])  # the five intact groups
    assert earned and jsonl_rows(out) == earned


# -- missing and extra data (docs/data.md): one policy ----------------------------------------

AB_DECL = "CREATE STREAM S { EVENT A { x: int, t: int }, EVENT B { y: int, t: int } }"
AB_QUERY = "SELECT * FROM S WHERE A AS a ; B AS b FILTER a[x > 0] AND b[y > 0]"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_cell_for_an_attribute_the_type_lacks_is_an_error(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = pd.DataFrame(
        {
            "event_type": ["A", "B", "A", "B", "A"],
            "x": [1, None, 2, None, 3],
            "y": [None, 1, None, 2, 7],  # row 4 (an A) has a y
            "t": [1, 2, 3, 4, 5],
        }
    ).astype({"x": "Int64", "y": "Int64"})
    path = tmp_path / f"e.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    code, out, err = run(
        capsys, "run", "-d", AB_DECL, "--query", AB_QUERY, path, "-f", "jsonl", "--chunk-size", 2
    )
    assert code == 1 and "row 5 (position 4), column 'y': event type A has no attribute 'y'" in err
    assert jsonl_rows(out) == reference_rows(AB_DECL, AB_QUERY, df.head(4)) != []


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_column_the_query_reads_must_be_in_the_file(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_frame(50).drop(columns=["price"])
    path = tmp_path / f"e.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    spans, error = read_all(path, STOCK_DECLARATION)
    assert error is None and spans == [(0, 50)]
    frame = next(
        open_source(str(path), Schema.of(ceql.parse_declaration(STOCK_DECLARATION)), ReadOptions()).chunks()
    )[1]
    assert "price" not in frame.columns  # not made up as nulls
    query = QUERY.replace("b[name = 'RIMM']", "b[price > 10]")
    code, _, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", query, path)
    assert code == 1 and "column 'price'" in err and "Traceback" not in err
    code, out, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl")
    assert code == 0, err  # a query that does not read price runs
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, df)
    empty = tmp_path / f"empty.{fmt}"  # no rows: refused all the same
    df.head(0).to_csv(empty, index=False) if fmt == "csv" else df.head(0).to_parquet(empty, index=False)
    code, _, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", query, empty)
    assert code == 1 and "column 'price'" in err and "Traceback" not in err


def test_parquet_unknown_and_duplicate_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "e.parquet"
    indexed = stock_frame(60).set_axis([f"r{k}" for k in range(60)])
    indexed.to_parquet(path)  # the index is saved as a column: not an attribute, not read
    code, out, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl")
    assert code == 0, err
    assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, stock_frame(60))
    stock_frame(10).assign(colour="red").to_parquet(path, index=False)
    code, _, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path)
    assert code == 1 and "column 'colour'" in err
    table = pa.Table.from_pandas(stock_frame(10), preserve_index=False)
    pq.write_table(table.append_column("name", table.column("name")), path)
    code, _, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path)
    assert code == 1 and "two columns named 'name'" in err and "Traceback" not in err


# -- generated corruptions --------------------------------------------------------------------

CORRUPTIONS = ("flip", "truncate", "latin-1", "utf-16", "huge", "insert", "delete", "quote", "drop column")


def _corrupt(base: bytes, rng: random.Random) -> tuple[bytes, str]:
    data = bytearray(base)
    kind = rng.choice(CORRUPTIONS)
    if kind == "flip":
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == "truncate":
        del data[rng.randrange(len(data)) :]
    elif kind == "latin-1":
        data = bytearray(base.decode().replace("INTC", "ÎNTC").encode("latin-1"))
    elif kind == "utf-16":
        data = bytearray(base.decode().encode("utf-16"))
    elif kind == "huge":
        big = rng.choice([b"9223372036854775808", b"1e400", b"-1e19", b"nan", b"inf", b"1" * 30])
        k = rng.randrange(1, base.count(b"\n"))
        lines = base.split(b"\n")
        fields = lines[k].split(b",")
        fields[2] = big
        lines[k] = b",".join(fields)
        data = bytearray(b"\n".join(lines))
    elif kind in ("insert", "quote"):
        k = rng.randrange(len(data))
        data[k:k] = rng.choice([b",", b"\n", b'"', b",,", b"\r", b"\x00"]) if kind == "insert" else b'"x\ny"'
    elif kind == "delete":
        k = rng.randrange(len(data))
        del data[k : k + rng.randint(1, 5)]
    else:  # the price column left out of the header and every row
        data = bytearray(
            b"\n".join(b",".join(r.split(b",")[:3] + r.split(b",")[4:]) for r in base.split(b"\n"))
        )
    return bytes(data), kind


@pytest.mark.parametrize("seed", range(16))
def test_generated_corruptions_never_lose_a_match_before_the_first_bad_row(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random damage to a CSV file: exit status 0, 1 or 2, no traceback, the reader yields
    every row before the one it reports (the rows before the damage unchanged), and the
    matches written are the reference's on exactly those rows."""
    rng = random.Random(seed)
    df = stock_frame(120, seed=seed)
    base = df.to_csv(index=False).encode()
    query = QUERY.replace("b[name = 'RIMM']", "b[name = 'RIMM' AND price > 10]")
    for _ in range(4):
        data, kind = _corrupt(base, rng)
        path = tmp_path / "damaged.csv"
        path.write_bytes(data)
        changed = next(
            (k for k, (a, b) in enumerate(zip(data, base, strict=False)) if a != b), min(len(data), len(base))
        )
        intact = max(base[:changed].count(b"\n") - 1, 0)  # rows before the first damaged byte
        chunk = rng.choice([1, 7, 100_000])
        code, out, err = run(
            capsys,
            "run",
            "-d",
            STOCK_DECLARATION,
            "--query",
            query,
            path,
            "-f",
            "jsonl",
            "--chunk-size",
            chunk,
        )
        assert code in (0, 1, 2) and "Traceback" not in err, (kind, err)
        frames: list[pd.DataFrame] = []
        error = None
        try:
            source = open_source(
                str(path), Schema.of(ceql.parse_declaration(STOCK_DECLARATION)), ReadOptions(chunk_size=chunk)
            )
            try:
                for _, frame in source.chunks():
                    frames.append(frame)
            finally:
                source.close()
        except InputError as bad:
            error = bad
        delivered = pd.concat(frames, ignore_index=True) if frames else df.head(0)
        if error is not None and error.row is not None:
            assert len(delivered) == error.row, (kind, str(error))
        head = min(intact, len(delivered))
        pd.testing.assert_frame_equal(
            delivered.head(head).astype(object),
            df.head(head)[list(delivered.columns)].astype(object),
            check_dtype=False,
        )
        if code == 2 or "price" not in delivered.columns:
            continue
        assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, query, delivered), (kind, err)


def test_parquet_page_checksums_are_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = stock_frame(200)
    path = tmp_path / "summed.parquet"
    options: dict[str, Any] = {"use_dictionary": False, "compression": "none"}
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, write_page_checksum=True, **options)
    good = path.read_bytes()
    value = int(df["stock_time"][120]).to_bytes(8, "little")
    assert good.count(value) == 1
    at = good.index(value)
    path.write_bytes(good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1 :])  # stock_time 2200 -> 2201
    code, out, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl")
    assert code == 1 and f"cannot read {path}" in err and "Traceback" not in err
    assert out == ""  # the damaged page is the first: nothing read from it is used


# -- only the columns a query reads are converted and pushed ---------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("check_unread", [True, False])
def test_readers_deliver_only_the_columns_asked_for(fmt: str, check_unread: bool, tmp_path: Path) -> None:
    df = stock_frame(300)
    path = tmp_path / f"e.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    options = ReadOptions(chunk_size=64, columns=frozenset({"name"}), check_unread=check_unread)
    source = open_source(str(path), Schema.of(ceql.parse_declaration(STOCK_DECLARATION)), options)
    try:
        frames = [frame for _, frame in source.chunks()]
    finally:
        source.close()
    assert source.columns == list(df.columns)  # the header, checked whole
    assert all(list(frame.columns) == ["event_type", "name"] for frame in frames)
    assert [v for f in frames for v in f["name"].tolist()] == df["name"].tolist()


def test_pycel_run_pushes_only_the_columns_the_query_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pycel.cli as cli
    import pycel.cli._csv as csv_reader

    pushed: list[list[str]] = []
    converted: list[str] = []
    feed, convert = cli.Feeder.feed, csv_reader.convert_column

    def spy_feed(self: Any, frame: pd.DataFrame, *args: Any) -> None:
        pushed.append(list(frame.columns))
        feed(self, frame, *args)

    def spy_convert(text: pd.Series, dtype: str, base: int, column: str, unit: str) -> Any:
        converted.append(column)
        return convert(text, dtype, base, column, unit)

    monkeypatch.setattr(cli.Feeder, "feed", spy_feed)
    monkeypatch.setattr(csv_reader, "convert_column", spy_convert)
    df = stock_frame(300)
    for fmt in ("csv", "parquet"):
        path = tmp_path / f"e.{fmt}"
        df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
        code, out, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path, "-f", "jsonl")
        assert code == 0, err
        assert jsonl_rows(out) == reference_rows(STOCK_DECLARATION, QUERY, df) != []
    assert pushed and all(columns == ["event_type", "name"] for columns in pushed)
    assert set(converted) == {"name"}  # volume, price, stock_time: checked by Arrow, not converted


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_unread_columns_are_checked_unless_told_not_to(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_frame(300).astype({"volume": object})
    df.loc[BAD_ROW, "volume"] = 12.5
    path = tmp_path / f"e.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    name_only = frozenset({"name"})
    spans, error = read_all(path, STOCK_DECLARATION, columns=name_only)
    assert error is not None and (error.row, error.column) == (BAD_ROW, "volume")
    assert sum(n for _, n in spans) == BAD_ROW
    spans, error = read_all(path, STOCK_DECLARATION, columns=name_only, check_unread=False)
    assert error is None and sum(n for _, n in spans) == 300  # volume is not read at all
    code, _, err = run(capsys, "run", "-d", STOCK_DECLARATION, "--query", QUERY, path)
    assert code == 1 and f"row {BAD_ROW + 1} (position {BAD_ROW}), column 'volume'" in err


def test_the_header_is_checked_whole_when_columns_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    stock_frame(20).assign(colour="red").to_csv(path, index=False)
    with pytest.raises(InputError, match="the header names column 'colour'"):
        read_all(path, STOCK_DECLARATION, columns=frozenset({"name"}), check_unread=False)
    parquet = path.with_suffix(".parquet")
    stock_frame(20).assign(colour="red").to_parquet(parquet, index=False)
    with pytest.raises(InputError, match="column 'colour' is not an attribute"):
        read_all(parquet, STOCK_DECLARATION, columns=frozenset({"name"}), check_unread=False)


def test_a_stray_cell_in_an_unread_column_is_an_error(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {"event_type": ["A", "B", "A"], "x": [1, None, 2], "y": [None, 1, 5], "t": [1, 2, 3]}
    ).astype({"x": "Int64", "y": "Int64"})
    for fmt in ("csv", "parquet"):
        path = tmp_path / f"e.{fmt}"
        df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
        spans, error = read_all(path, AB_DECL, columns=frozenset({"x"}))
        assert error is not None and (error.row, error.column) == (2, "y")
        assert "event type A has no attribute 'y'" in str(error)


def test_parquet_int_column_with_nulls_stays_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(An int64 column with nulls went through float64: 2**53 + 1 became 2**53, a silent
    wrong answer.)"""
    decl = "CREATE STREAM S { EVENT A { x: int, t: int } }"
    query = f"SELECT * FROM S WHERE A AS a FILTER a[x = {2**53 + 1}]"
    x = pd.array([2**53 + 1, None, 2**53], dtype="Int64")
    df = pd.DataFrame({"event_type": ["A", "A", "A"], "x": x, "t": [1, 2, 3]})
    path = tmp_path / "e.parquet"
    df.to_parquet(path, index=False)
    code, out, err = run(capsys, "run", "-d", decl, "--query", query, path, "-f", "jsonl")
    assert code == 0, err
    assert jsonl_rows(out) == reference_rows(decl, query, df) == [(0, 0, (("a", (0,)),))]
