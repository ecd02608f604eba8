"""Rough edges a new user of ``pycel run`` / ``pycel explain`` meets: empty files, a
header row that is not there, a JSON file, swapped arguments. Each case checks the exit
status and that the message names what is wrong; where matches are written they are
compared with the reference evaluator.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pycel
from pycel import ceql
from pycel.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "data"
DECL = EXAMPLES / "stocks.ceql"
WINDOWED = "SELECT * FROM S WHERE SELL AS s ; BUY AS b WITHIN 5000 [stock_time]"


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


Row = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


def reference_rows(query: str, data: pd.DataFrame) -> list[Row]:
    """The reference evaluator's matches of ``query``, sorted."""
    decl = ceql.parse_declaration(DECL.read_text())
    matches = pycel.reference.evaluate(ceql.parse_query(query, decl), data)
    return sorted((m.start, m.end, m.valuation) for m in matches)


def jsonl_rows(out: str) -> list[Row]:
    """The matches of ``pycel run -f jsonl`` output, sorted."""
    rows = []
    for line in out.splitlines():
        obj = json.loads(line)
        start, end = obj.pop("start"), obj.pop("end")
        rows.append((start, end, tuple(sorted((v, tuple(p)) for v, p in obj.items() if p))))
    return sorted(rows)


# -- an empty CSV file, a blank header line ----------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n", "\r\n\n  \n"])
@pytest.mark.parametrize("query", [WINDOWED, "SELECT * FROM S WHERE SELL"])
def test_an_empty_csv_file_is_an_empty_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, query: str
) -> None:
    """No header and no rows: no events, exit 0 and a warning saying the file is empty
    (it used to be a data error listing internal column names such as '\\x000' when the
    query read an attribute)."""
    data = tmp_path / "empty.csv"
    data.write_text(content)
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", query, data)
    assert code == 0, err
    assert out == ""
    assert "\\x00" not in err and "\0" not in err
    assert f"warning: {data} is empty" in err
    assert "0 events, 0 matches" in err
    code, out, err = cli(capsys, "run", "-q", "-d", DECL, "--query", query, data)
    assert (code, out, err) == (0, "", "")


def test_a_blank_first_line_before_rows_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A blank line where the header should be, then rows: the rows used to be read with
    no attribute at all (a query that reads none found matches, unchecked). Now a data
    error naming line 1."""
    rows = (EXAMPLES / "stocks.csv").read_text().splitlines()[1:]
    data = tmp_path / "blank.csv"
    data.write_text("\n" + "\n".join(rows) + "\n")
    for query in ("SELECT * FROM S WHERE SELL AS s ; BUY AS b", WINDOWED):
        code, out, err = cli(capsys, "run", "-d", DECL, "--query", query, data)
        assert code == 1, err
        assert out == ""
        assert "the header row (line 1) is empty" in err
        assert "--no-header" in err
        assert "\\x00" not in err


# -- a file pycel run does not read ------------------------------------------------------------


@pytest.mark.parametrize("name", ["events.json", "events.JSONL", "events.ndjson"])
def test_a_json_file_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A JSON file was read as CSV: the error blamed a header column 'name:"ORCL"'."""
    data = tmp_path / name
    pd.read_csv(EXAMPLES / "stocks.csv").to_json(data, orient="records", lines=True)
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, data)
    assert code == 2, err
    assert out == ""
    assert f"pycel: error: {data} looks like JSON" in err
    assert "CSV or Parquet" in err
    assert "header" not in err


def test_a_json_named_file_is_read_as_csv_when_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "events.json"
    data.write_text((EXAMPLES / "stocks.csv").read_text())
    code, out, err = cli(
        capsys, "run", "-d", DECL, "--query", WINDOWED, data, "--input-format", "csv", "-f", "jsonl"
    )
    assert code == 0, err
    assert jsonl_rows(out) == reference_rows(WINDOWED, pd.read_csv(EXAMPLES / "stocks.csv"))


# -- the declaration and the query mixed up ----------------------------------------------------


def test_swapped_declaration_and_query_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    """--declaration s3.ceql --query stocks.ceql said "drop --declaration", which left the
    user without a query; now both files are named for what they hold."""
    query = EXAMPLES / "s3.ceql"
    code, out, err = cli(capsys, "run", "-d", query, "--query", DECL, EXAMPLES / "stocks.csv")
    assert (code, out) == (2, "")
    assert f"{DECL} holds a declaration but no SELECT query" in err
    assert f"{query} holds a query" in err and "swapped" in err
    assert "drop --declaration" not in err
    code, _, err = cli(capsys, "explain", DECL, "-d", query)
    assert code == 2 and "swapped" in err


def test_a_query_given_as_the_declaration_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    query = EXAMPLES / "s3.ceql"
    code, out, err = cli(capsys, "run", "-d", query, "--query", query, EXAMPLES / "stocks.csv")
    assert (code, out) == (2, "")
    assert f"{query} holds a SELECT query, not a CREATE STREAM declaration" in err
    code, _, err = cli(
        capsys, "run", "-d", "SELECT * FROM S WHERE SELL", "--query", query, EXAMPLES / "stocks.csv"
    )
    assert code == 2 and "<declaration> holds a SELECT query" in err


def test_a_declaration_given_twice_still_says_drop_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    both = tmp_path / "both.ceql"
    both.write_text(DECL.read_text() + "\n" + (EXAMPLES / "s3.ceql").read_text())
    code, _, err = cli(capsys, "run", "-d", DECL, "--query", both, EXAMPLES / "stocks.csv")
    assert code == 2 and "starts with its own declaration; drop --declaration" in err


# -- a header row that is not there, or is there -----------------------------------------------


def test_a_file_without_header_names_no_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its first event was taken as a header, and the hint said --positional, which then
    dropped that event silently (39 of 40 events, positions off by one)."""
    data = tmp_path / "rows.csv"
    data.write_text("\n".join((EXAMPLES / "stocks.csv").read_text().splitlines()[1:]) + "\n")
    for extra in ([], ["--positional"]):
        code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, data, *extra)
        assert (code, out) == (1, ""), err
        assert "line 1 looks like an event (SELL,ORCL,500,18.01,1000), not a header row" in err
        assert "--no-header" in err and "--positional" not in err
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, data, "--no-header", "-f", "jsonl")
    assert code == 0, err
    expected = reference_rows(WINDOWED, pd.read_csv(EXAMPLES / "stocks.csv"))
    assert expected and jsonl_rows(out) == expected


def test_no_header_on_a_file_with_one_names_the_header(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys, "run", "-d", DECL, "--query", WINDOWED, EXAMPLES / "stocks.csv", "--no-header"
    )
    assert (code, out) == (1, ""), err
    assert "row 1 (position 0)" in err
    assert "looks like a header row" in err and "drop --no-header" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`pycel --version` was a usage error (a bug report asks for the command and version)."""
    code, out, err = cli(capsys, "--version")
    assert code == 0, err
    assert out.strip() == f"pycel {importlib.metadata.version('pycel')}"


# -- files that are not plain comma-separated text ---------------------------------------------


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


def _zip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("stocks.csv", data)
    return buffer.getvalue()


def _parquet(data: bytes) -> bytes:
    buffer = io.BytesIO()
    pd.read_csv(io.BytesIO(data)).to_parquet(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("pack", "said"),
    [
        (_gzip, "gzip-compressed"),
        (_zip, "a zip archive"),
        (_parquet, "Parquet: name it .parquet or give --input-format parquet"),
    ],
)
def test_a_binary_file_read_as_csv_says_what_it_looks_like(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pack: Any, said: str
) -> None:
    """The error showed the file's first 80 bytes as 'not UTF-8 text'."""
    data = tmp_path / "events.csv"
    data.write_bytes(pack((EXAMPLES / "stocks.csv").read_bytes()))
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, data)
    assert (code, out) == (1, ""), err
    assert f"looks like {said}" in err
    assert "\\x" not in err


@pytest.mark.parametrize("separator", [";", "\t", "|"])
def test_another_separator_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], separator: str
) -> None:
    """A semicolon- or tab-separated file: the error listed one column named by the whole
    header line."""
    data = tmp_path / "events.csv"
    pd.read_csv(EXAMPLES / "stocks.csv").to_csv(data, sep=separator, index=False)
    for query in (WINDOWED, "SELECT * FROM S WHERE SELL"):
        code, out, err = cli(capsys, "run", "-d", DECL, "--query", query, data)
        assert (code, out) == (1, ""), err
        assert f"the header row holds {separator!r} but no ','" in err
        assert "comma-separated" in err


def test_a_directory_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Parquet dataset directory (as Spark writes one) said only 'Is a directory'."""
    folder = tmp_path / "events.parquet"
    folder.mkdir()
    pd.read_csv(EXAMPLES / "stocks.csv").to_parquet(folder / "part-0.parquet")
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, folder)
    assert (code, out) == (2, ""), err
    assert f"{folder} is a directory: pycel run reads one CSV or Parquet file" in err
    assert "pyarrow.parquet.read_table" in err


def test_a_warning_is_printed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pycel explain checks the query and then compiles it: each warning was printed twice."""
    query = tmp_path / "q.ceql"
    query.write_text(
        "CREATE STREAM S { EVENT Reading { sensor: string }, EVENT Alarm { level: int } }\n"
        "SELECT * FROM S WHERE Reading AS r ; Alarm AS r PARTITION BY [sensor]\n"
    )
    code, out, err = cli(capsys, "explain", query)
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert "partition_by('sensor')" in lines[0] or "partition_by('sensor')" in lines[1]
    assert any("bound on both sides" in line for line in lines)


# -- queries the parser used to misread or crash on --------------------------------------------


def test_an_unterminated_comment_is_a_syntax_error(capsys: pytest.CaptureFixture[str]) -> None:
    """The comment swallowed the WITHIN clause: exit 0 with the matches of another query."""
    query = "SELECT * FROM S WHERE SELL AS s ; BUY AS b /* note WITHIN 2 EVENTS"
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", query, EXAMPLES / "stocks.csv")
    assert (code, out) == (2, ""), err
    assert "syntax error in <query>: unterminated comment at line 1, column 44" in err


@pytest.mark.parametrize(
    "body",
    [
        " ; ".join(f"SELL AS s{i}" for i in range(400)),
        "(" * 500 + "SELL" + ")" * 500,
        "SELL AS s FILTER s[volume > 1" + " + 1" * 1000 + "]",
    ],
)
def test_a_deeply_nested_query_is_a_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    """They ended in "internal error … RecursionError"."""
    query = tmp_path / "deep.ceql"
    query.write_text("SELECT * FROM S WHERE " + body + "\n")
    for command in (
        ["run", "-d", DECL, "--query", query, EXAMPLES / "stocks.csv"],
        ["explain", "-d", DECL, query],
    ):
        code, out, err = cli(capsys, *command)
        assert (code, out) == (2, ""), err
        assert f"syntax error in {query}: query nested too deeply (more than " in err
        assert "internal error" not in err and "Recursion" not in err


def test_queries_at_the_nesting_limit_run(capsys: pytest.CaptureFixture[str]) -> None:
    """The parser's limits leave the engine's passes (planning, printing) room to recurse:
    queries at the limits run, and find what their flat spellings find."""
    n, depth = ceql.MAX_NESTING, ceql.MAX_DEPTH
    for body, flat in (
        (
            "SELL AS s FILTER s[volume > 1" + " + 1" * (depth - 3) + "]",
            f"SELL AS s FILTER s[volume > {depth - 2}]",
        ),
        (
            "SELL AS s FILTER s[" + "(" * n + "volume > 1000" + ")" * n + "]",
            "SELL AS s FILTER s[volume > 1000]",
        ),
        # 62 SELLs in a row: no match in 40 events
        (" ; ".join(f"SELL AS s{i}" for i in range(62)) + " FILTER s0[volume > 1] WITHIN 70 EVENTS", None),
    ):
        outputs = []
        for query in (body, flat):
            if query is not None:
                command = [
                    "run",
                    "-d",
                    DECL,
                    "--query",
                    "SELECT * FROM S WHERE " + query,
                    EXAMPLES / "stocks.csv",
                ]
                code, out, err = cli(capsys, *command, "-f", "jsonl")
                assert code == 0, err
                outputs.append(out)
        if flat is None:
            assert outputs == [""]
        else:
            assert outputs[1] and outputs[0] == outputs[1]
        code, out, err = cli(capsys, "explain", "-d", DECL, "SELECT * FROM S WHERE " + body)
        assert code == 0 and "engine: supported" in out, err


def test_a_recursion_error_while_preparing_is_a_user_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A safety net: a query the parser lets through but the engine's compiler recurses on
    too deeply is the query's error, not an internal one."""

    def recurse(*_: Any, **__: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("pycel.cli.compile_query", recurse)
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, EXAMPLES / "stocks.csv")
    assert (code, out) == (2, ""), err
    assert "pycel: error in <query>: the query is nested too deeply or too large to compile" in err
    assert "internal error" not in err
    monkeypatch.setattr(sys.modules["pycel.cli._explain"], "compile_query", recurse)
    code, out, err = cli(capsys, "explain", "-d", DECL, WINDOWED)
    assert (code, out) == (2, ""), err
    assert "pycel: error in <query>: the query is nested too deeply or too large to compile" in err
    monkeypatch.setattr("pycel.cli._load.parse_query", recurse)
    code, out, err = cli(capsys, "explain", "-d", DECL, WINDOWED)
    assert (code, out) == (2, ""), err
    assert "pycel: error in <query>: the query is nested too deeply or too large to compile" in err


def test_files_with_a_byte_order_mark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A query file saved with a UTF-8 BOM was "unexpected character '\\ufeff'" (data files
    with one were fine)."""
    _, expected, _ = cli(
        capsys, "run", "-d", DECL, "--query", WINDOWED, EXAMPLES / "stocks.csv", "-f", "jsonl"
    )
    assert expected
    decl = tmp_path / "decl.ceql"
    decl.write_text(DECL.read_text(), encoding="utf-8-sig")
    query = tmp_path / "query.ceql"
    query.write_text(WINDOWED, encoding="utf-8-sig")
    both = tmp_path / "both.ceql"
    both.write_text(DECL.read_text() + "\n" + WINDOWED, encoding="utf-8-sig")
    assert both.read_bytes().startswith(b"\xef\xbb\xbf")
    for args in (
        ["-d", decl, "--query", query],
        ["--query", both],
        ["-d", decl, "--query", "\ufeff" + WINDOWED],
    ):
        code, out, err = cli(capsys, "run", *args, EXAMPLES / "stocks.csv", "-f", "jsonl")
        assert (code, out) == (0, expected), err
    bad = tmp_path / "bad.ceql"
    bad.write_text("SELECT * FROM S\nWHERE SELL ;; BUY", encoding="utf-8-sig")
    code, _, err = cli(capsys, "run", "-d", decl, "--query", bad, EXAMPLES / "stocks.csv")
    assert code == 2 and "at line 2, column 13" in err


def test_a_query_path_that_is_no_file_says_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'--query /dev/null' and '-d <directory>' said "file … not found"."""
    data = EXAMPLES / "stocks.csv"
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", "/dev/null", data)
    assert (code, out) == (2, ""), err
    assert "pycel: error: no query in /dev/null (it is empty)" in err
    code, out, err = cli(capsys, "run", "-d", "/dev/null", "--query", WINDOWED, data)
    assert (code, out) == (2, ""), err
    assert "pycel: error: no declaration in /dev/null (it is empty)" in err
    empty = tmp_path / "empty.ceql"
    empty.write_text("-- nothing yet\n")
    code, out, err = cli(capsys, "explain", "-d", DECL, empty)
    assert (code, out) == (2, ""), err
    assert f"pycel: error: no query in {empty} (it is empty)" in err
    code, out, err = cli(capsys, "run", "-d", tmp_path, "--query", WINDOWED, data)
    assert (code, out) == (2, ""), err
    assert f"pycel: error: declaration {tmp_path} is a directory, not a file" in err
    code, out, err = cli(capsys, "explain", "-d", DECL, tmp_path)
    assert (code, out) == (2, ""), err
    assert f"pycel: error: query {tmp_path} is a directory, not a file" in err
    assert "not found" not in err


def test_parquet_on_standard_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'-' with --input-format parquet said "cannot read <stdin>: No such file or directory"."""
    parquet = tmp_path / "stocks.parquet"
    pd.read_csv(EXAMPLES / "stocks.csv").to_parquet(parquet)
    _, expected, _ = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, parquet, "-f", "jsonl")
    assert expected

    class Stdin:
        buffer = io.BytesIO(parquet.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin())
    code, out, err = cli(
        capsys, "run", "-d", DECL, "--query", WINDOWED, "-", "--input-format", "parquet", "-f", "jsonl"
    )
    assert (code, out) == (0, expected), err

    class Garbage:
        buffer = io.BytesIO(b"event_type,name\nSELL,A\n")

    monkeypatch.setattr("sys.stdin", Garbage())
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", WINDOWED, "-", "--input-format", "parquet")
    assert (code, out) == (1, ""), err
    assert "pycel: data error in <stdin>: cannot read <stdin> as Parquet" in err


def test_a_csv_file_with_cr_line_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Lines ending in CR alone (classic Mac OS) were an "internal error" from the csv
    module; CRLF ends read like LF ones."""
    rows = ["event_type,name,volume,price,stock_time", "SELL,INTC,1,1,1", "BUY,RIMM,1,2,2"]
    query = "SELECT * FROM S WHERE SELL ; BUY"
    outputs = []
    for end in ("\n", "\r\n"):
        data = tmp_path / f"ends{len(end)}.csv"
        data.write_bytes(end.join(rows).encode() + end.encode())
        code, out, err = cli(capsys, "run", "-d", DECL, "--query", query, data, "-f", "jsonl")
        assert code == 0 and out.count("\n") == 1, err
        outputs.append(out)
    assert outputs[0] == outputs[1]
    data = tmp_path / "mac.csv"
    data.write_bytes("\r".join(rows).encode() + b"\r")
    code, out, err = cli(capsys, "run", "-d", DECL, "--query", query, data)
    assert (code, out) == (1, ""), err
    assert "the file's lines end in CR alone" in err and "internal error" not in err


def test_an_unknown_time_attribute_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """--time-attribute with a typo was ignored when the query had no SECONDS window."""
    for attr, why in (("nosuch", "no event type has it"), ("name", "it is str")):
        args = ["-d", DECL, "--query", "SELECT * FROM S WHERE SELL ; BUY", EXAMPLES / "stocks.csv"]
        code, out, err = cli(capsys, "run", *args, "--time-attribute", attr)
        assert (code, out) == (2, ""), err
        assert f"--time-attribute '{attr}': {why}" in err
