"""The ``pycel`` command line: ``pycel run`` against the engine and the reference
evaluator, the output formats, CSV and Parquet input, chunking, errors and exit codes, and
``pycel explain``.

Most tests call ``pycel.cli.main([...])`` in-process (capsys); a few run
``python -m pycel`` in a subprocess.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from ceql_paper_queries import OTHER_OPERATORS, S3_LITERAL, STOCK_DECLARATION, stock_query
from hypothesis import given, settings
from hypothesis import strategies as st

import pycel
from pycel import ceql
from pycel.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "data"
NAMES = ("INTC", "RIMM", "QQQ", "MSFT", "ORCL", "CSCO", "AMAT")

Row = tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]


def stock_csv(path: Path, n: int, seed: int = 1, *, step: tuple[int, int] = (50, 900)) -> pd.DataFrame:
    """A seeded CORE-style stock CSV (header row, event type first) and its DataFrame."""
    rng = random.Random(seed)
    rows = []
    t = 1000
    for _ in range(n):
        rows.append(
            {
                "event_type": rng.choice(("BUY", "SELL")),
                "name": rng.choice(NAMES),
                "volume": rng.choice((100, 500, 1000, 4000)),
                "price": round(rng.uniform(5, 40), 2),
                "stock_time": t,
            }
        )
        t += rng.randint(*step)
    df = pd.DataFrame(rows)
    df.to_csv(path, index=False)
    return df


@pytest.fixture
def stock(tmp_path: Path) -> dict[str, Any]:
    decl = tmp_path / "stocks.ceql"
    decl.write_text(STOCK_DECLARATION)
    query = tmp_path / "s3.ceql"
    query.write_text(S3_LITERAL)
    data = tmp_path / "stocks.csv"
    df = stock_csv(data, 400)
    return {"dir": tmp_path, "decl": str(decl), "query": str(query), "data": str(data), "df": df}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def rows_of_jsonl(text: str, variables: list[str] | None = None) -> list[Row]:
    rows = []
    for line in text.splitlines():
        obj = json.loads(line)
        start, end = obj.pop("start"), obj.pop("end")
        rows.append((start, end, tuple(sorted((v, tuple(p)) for v, p in obj.items() if p))))
    return rows


def rows_of_matches(matches: pycel.Matches) -> list[Row]:
    return [(m.start, m.end, m.valuation) for m in matches]


def engine_rows(decl_text: str, query_text: str, data: Any) -> list[Row]:
    decl = ceql.parse_declaration(decl_text)
    pattern = ceql.parse_query(query_text, decl)
    return rows_of_matches(pycel.compile(pattern, types=decl.values()).run(data))


# -- pycel run: agreement with the engine and the reference ------------------------------------


def test_jsonl_equals_the_engine(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-f", "jsonl"
    )
    assert code == 0, err
    expected = engine_rows(STOCK_DECLARATION, S3_LITERAL, stock["df"])
    assert expected, "the generated stream should have S3 matches"
    assert rows_of_jsonl(out) == expected
    first = json.loads(out.splitlines()[0])
    assert list(first) == ["start", "end", "T1", "T2", "T3"]  # pattern order


def test_small_file_equals_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    decl, query, data = EXAMPLES / "stocks.ceql", EXAMPLES / "s3.ceql", EXAMPLES / "stocks.csv"
    code, out, _ = cli(capsys, "run", "-d", decl, "--query", query, data, "-f", "jsonl", "--chunk-size", "5")
    assert code == 0
    types = ceql.parse_declaration(decl.read_text())
    pattern = ceql.parse_query(query.read_text(), types)
    expected = rows_of_matches(pycel.reference.evaluate(pattern, pd.read_csv(data)))
    assert len(expected) == 4
    assert sorted(rows_of_jsonl(out)) == sorted(expected)


@pytest.mark.parametrize("name", ["S3", "S6", "Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"])
def test_core_paper_queries_on_a_generated_stream(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = {"S3": stock_query(3), "S6": stock_query(6, window=40000), **OTHER_OPERATORS}[name]
    decl, query, data = tmp_path / "d.ceql", tmp_path / "q.ceql", tmp_path / "e.csv"
    decl.write_text(STOCK_DECLARATION)
    query.write_text(text)
    df = stock_csv(data, 600, seed=3, step=(20, 300))
    expected = engine_rows(STOCK_DECLARATION, text, df)
    for chunk in ("1000", "7"):
        code, out, err = cli(
            capsys, "run", "-d", decl, "--query", query, data, "-f", "jsonl", "--chunk-size", chunk
        )
        assert code == 0, err
        assert sorted(rows_of_jsonl(out)) == sorted(expected)
    if name in ("S3", "Q1", "Q4", "Q7"):
        assert expected  # these shapes have matches on this stream


def test_chunked_reading_equals_one_chunk(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    query = (
        "SELECT * FROM S WHERE SELL AS s ; (BUY OR SELL)+ AS b ; BUY AS e "
        "FILTER s[name = 'INTC'] AND b[name = 'QQQ'] AND e[name = 'RIMM'] WITHIN 30 EVENTS"
    )
    outputs = []
    for chunk in ("7", "100000"):
        code, out, _ = cli(
            capsys,
            "run",
            "-d",
            stock["decl"],
            "--query",
            query,
            stock["data"],
            "-f",
            "jsonl",
            "--chunk-size",
            chunk,
        )
        assert code == 0
        outputs.append(sorted(rows_of_jsonl(out)))
    assert outputs[0] == outputs[1]
    assert outputs[0] == sorted(engine_rows(STOCK_DECLARATION, query, stock["df"]))
    assert any(len(dict(v)["b"]) > 1 for _, _, v in outputs[0])  # Kleene matches span chunks


def test_an_absence_at_the_end_writes_the_matches_that_wait_until_the_data_ends(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # A sale of INTC with no later sale of INTC within 20 events: the last ones wait for
    # their window to pass, which only the end of the data decides.
    query = (
        "SELECT * FROM S WHERE SELL AS s ; ABSENT(SELL AS t FILTER t[name = 'INTC']) "
        "FILTER s[name = 'INTC'] WITHIN 20 EVENTS"
    )
    types = ceql.parse_declaration(STOCK_DECLARATION)
    events = [types[str(row.pop("event_type"))](**row) for row in stock["df"].to_dict("records")]
    expected = rows_of_matches(pycel.reference.evaluate(ceql.parse_query(query, types), events))
    assert any(end > len(stock["df"]) - 20 for _, end, _ in expected)  # some wait for the end
    for chunk in ("7", "100000"):
        code, out, err = cli(
            capsys, "run", "-d", stock["decl"], "--query", query, stock["data"], "-f", "jsonl",
            "--chunk-size", chunk,
        )  # fmt: skip
        assert code == 0, err
        assert sorted(rows_of_jsonl(out)) == sorted(expected)


def test_limit_rows(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    for limit in ("0", "1", "150"):
        code, out, err = cli(
            capsys,
            "run",
            "-d",
            stock["decl"],
            "--query",
            stock["query"],
            stock["data"],
            "-f",
            "jsonl",
            "--limit-rows",
            limit,
            "--chunk-size",
            "40",
        )
        assert code == 0
        assert rows_of_jsonl(out) == engine_rows(STOCK_DECLARATION, S3_LITERAL, stock["df"].head(int(limit)))
        assert f"{int(limit):,} events" in err


def test_parquet_input(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    parquet = stock["dir"] / "stocks.parquet"
    stock["df"].to_parquet(parquet, index=False)
    _, from_csv, _ = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-f", "jsonl"
    )
    code, from_parquet, _ = cli(
        capsys,
        "run",
        "-d",
        stock["decl"],
        "--query",
        stock["query"],
        parquet,
        "-f",
        "jsonl",
        "--chunk-size",
        "7",
    )
    assert code == 0
    assert from_parquet and rows_of_jsonl(from_parquet) == rows_of_jsonl(from_csv)
    code, limited, err = cli(
        capsys,
        "run",
        "-d",
        stock["decl"],
        "--query",
        stock["query"],
        parquet,
        "-f",
        "jsonl",
        "--limit-rows",
        "150",
        "--chunk-size",
        "64",
    )
    assert code == 0 and "150 events" in err
    assert rows_of_jsonl(limited) == engine_rows(STOCK_DECLARATION, S3_LITERAL, stock["df"].head(150))


def test_parquet_bad_rows_are_counted_over_the_whole_file(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    for row, edit, expected in (
        (
            57,
            {"event_type": "TRADE"},
            "row 58 (position 57), column 'event_type': unknown event type 'TRADE'",
        ),
        (80, {"stock_time": 0}, "row 81 (position 80), column 'stock_time': time goes backwards"),
    ):
        df = stock["df"].copy()
        for column, value in edit.items():
            df.loc[row, column] = value
        parquet = stock["dir"] / f"bad{row}.parquet"
        df.to_parquet(parquet, index=False)
        code, _, err = cli(
            capsys, "run", "-d", stock["decl"], "--query", stock["query"], parquet, "--chunk-size", "10"
        )
        assert code == 1
        assert expected in err
    df = stock["df"].astype({"price": str})
    df.to_parquet(stock["dir"] / "text.parquet", index=False)
    code, _, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["dir"] / "text.parquet"
    )
    assert code == 1 and "row 1 (position 0), column 'price': expected float" in err


# -- output formats ----------------------------------------------------------------------------


def test_text_and_csv_formats(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "-d", stock["decl"], "--query", stock["query"], stock["data"]]
    _, jsonl, _ = cli(capsys, *args, "-f", "jsonl")
    rows = rows_of_jsonl(jsonl)
    code, text, _ = cli(capsys, *args)
    assert code == 0
    lines = text.splitlines()
    assert len(lines) == len(rows)
    start, end, val = rows[0]
    assert lines[0] == f"[{start}, {end}]  " + "  ".join(f"{v}={','.join(map(str, p))}" for v, p in val)
    code, csv_text, _ = cli(capsys, *args, "-f", "csv")
    assert code == 0
    table = pd.read_csv(pd.io.common.StringIO(csv_text), dtype=str)
    assert list(table.columns) == ["start", "end", "T1", "T2", "T3"]
    assert [(int(r.start), int(r.end)) for r in table.itertuples()] == [(s, e) for s, e, _ in rows]
    assert table["T2"].tolist() == [str(dict(v)["T2"][0]) for _, _, v in rows]


def test_csv_format_joins_kleene_positions_and_leaves_unbound_empty(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    query = (
        "SELECT * FROM S WHERE (SELL AS s ; BUY+ AS b) OR BUY AS o "
        "FILTER s[name = 'INTC'] AND b[name = 'QQQ'] WITHIN 12 EVENTS"
    )
    code, out, err = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"], "-f", "csv")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "start,end,s,BUY,b,o"  # pattern order (BUY+ binds BUY too)
    cells = [line.split(",") for line in lines[1:]]
    assert any(" " in c[4] and c[5] == "" for c in cells)  # several b positions, o unbound
    assert any(c[2] == c[3] == c[4] == "" and c[5] for c in cells)  # only o bound
    code, jsonl, _ = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"], "-f", "jsonl")
    obj = json.loads(jsonl.splitlines()[0])
    assert set(obj) == {"start", "end", "s", "BUY", "b", "o"}  # every variable, [] when unbound


def test_select_projects_columns_in_select_order(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    query = S3_LITERAL.replace("SELECT *", "SELECT T3, T1")
    code, out, _ = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"], "-f", "csv")
    assert code == 0
    assert out.splitlines()[0] == "start,end,T3,T1"


def test_variables_named_start_and_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "e.csv"
    data.write_text("event_type,x\nA,1\nB,2\n")
    decl = "CREATE STREAM S { EVENT A { x: int }, EVENT B { x: int } }"
    code, out, _ = cli(
        capsys,
        "run",
        "-d",
        decl,
        "--query",
        "SELECT * FROM S WHERE A AS start ; B AS end",
        data,
        "-f",
        "jsonl",
    )
    assert code == 0
    assert json.loads(out) == {"start": 0, "end": 1, "var.start": [0], "var.end": [1]}


def test_output_file_and_summary(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    target = stock["dir"] / "out.jsonl"
    code, out, err = cli(
        capsys,
        "run",
        "-d",
        stock["decl"],
        "--query",
        stock["query"],
        stock["data"],
        "-f",
        "jsonl",
        "-o",
        target,
    )
    assert code == 0 and out == ""
    n = len(target.read_text().splitlines())
    assert err.startswith("pycel: 400 events, ")
    assert f"{n} matches in " in err and "events/s" in err
    code, out, err = cli(capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-q")
    assert code == 0 and err == "" and len(out.splitlines()) == n


def test_progress_line(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(
        capsys,
        "run",
        "-d",
        stock["decl"],
        "--query",
        stock["query"],
        stock["data"],
        "--progress",
        "--chunk-size",
        "50",
        "-q",
    )
    assert code == 0
    assert err.startswith("\r") and "%" in err and "events/s" in err
    assert err.endswith("\r")  # cleared; no summary with -q
    _, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"])
    assert "\r" not in err  # stderr is not a terminal here


# -- input variants ----------------------------------------------------------------------------


def test_inline_declaration_and_query_and_combined_file(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _, expected, _ = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-f", "jsonl"
    )
    code, inline, _ = cli(
        capsys, "run", "-d", STOCK_DECLARATION, "--query", S3_LITERAL, stock["data"], "-f", "jsonl"
    )
    assert code == 0 and inline == expected
    combined = stock["dir"] / "both.ceql"
    combined.write_text(STOCK_DECLARATION + "\n-- the query\n" + S3_LITERAL)
    code, both, _ = cli(capsys, "run", "--query", combined, stock["data"], "-f", "jsonl")
    assert code == 0 and both == expected
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", combined, stock["data"])
    assert code == 2 and "drop --declaration" in err


def test_positional_rows_without_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decl = "CREATE STREAM S { EVENT A { x: int, ok: boolean }, EVENT B { name: string, price: double } }"
    data = tmp_path / "e.csv"
    data.write_text("A,5,true\nB,QQQ,1.5\nA,7,0\nB,RIMM,2.5\nA,9,yes\n")
    query = "SELECT * FROM S WHERE A AS a ; B AS b FILTER a[x > 4 AND ok] AND b[price > 1]"
    code, out, err = cli(capsys, "run", "-d", decl, "--query", query, data, "--no-header", "-f", "jsonl")
    assert code == 0, err
    frame = pd.DataFrame(
        {
            "event_type": ["A", "B", "A", "B", "A"],
            "x": [5, None, 7, None, 9],
            "ok": [True, None, False, None, True],
            "name": [None, "QQQ", None, "RIMM", None],
            "price": [None, 1.5, None, 2.5, None],
        }
    )
    expected = engine_rows(decl, query, frame)
    assert (
        rows_of_jsonl(out)
        == expected
        == [(0, 1, (("a", (0,)), ("b", (1,)))), (0, 3, (("a", (0,)), ("b", (3,))))]
    )
    header = tmp_path / "h.csv"
    header.write_text("type,c1,c2\n" + data.read_text())
    code, out2, _ = cli(capsys, "run", "-d", decl, "--query", query, header, "--positional", "-f", "jsonl")
    assert code == 0 and out2 == out
    code, _, err = cli(capsys, "run", "-d", decl, "--query", query, header, "-f", "jsonl")
    assert code == 1 and "'c1'" in err and "--positional" in err


def test_empty_cells_fall_back_to_checked_reading(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock["df"].astype({"volume": object})
    df.loc[150, "volume"] = None  # the typed reader fails on this chunk and restarts as text
    df.loc[260, "volume"] = "1000.0"
    path = stock["dir"] / "holes.csv"
    df.to_csv(path, index=False)
    query = (
        "SELECT * FROM S WHERE SELL AS s ; BUY AS b "
        "FILTER s[volume >= 1000] AND b[volume = 1000] WITHIN 5 EVENTS"
    )
    code, out, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", query, path, "-f", "jsonl", "--chunk-size", "64"
    )
    assert code == 0, err
    expected = engine_rows(STOCK_DECLARATION, query, pd.read_csv(path))
    assert rows_of_jsonl(out) == expected
    assert [e for _, e, _ in expected if e >= 192]  # matches after the restart are found


def test_time_attributes_iso_and_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decl = "CREATE STREAM S { EVENT A { t: primary_time }, EVENT B { t: primary_time } }"
    query = "SELECT * FROM S WHERE A ; B WITHIN 2 SECONDS"
    seconds = tmp_path / "s.csv"
    seconds.write_text("event_type,t\nA,100\nA,101\nB,103\n")
    code, out, err = cli(
        capsys, "run", "-d", decl, "--query", query, seconds, "--time-unit", "s", "-f", "jsonl"
    )
    assert code == 0, err
    assert rows_of_jsonl(out) == [(1, 2, (("A", (1,)), ("B", (2,))))]
    iso = tmp_path / "iso.csv"
    iso.write_text("event_type,t\nA,2024-01-01T00:00:00Z\nA,2024-01-01T00:00:01Z\nB,2024-01-01T00:00:03Z\n")
    code, out2, _ = cli(capsys, "run", "-d", decl, "--query", query, iso, "-f", "jsonl")
    assert code == 0 and out2 == out


def test_empty_input_and_stdin(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    empty = stock["dir"] / "empty.csv"
    empty.write_text("event_type,name,volume,price,stock_time\n")
    code, out, err = cli(capsys, "run", "-d", stock["decl"], "--query", stock["query"], empty, "-f", "csv")
    assert code == 0 and out == "start,end,T1,T2,T3\n" and "0 events, 0 matches" in err
    _, expected, _ = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-f", "jsonl"
    )
    with open(stock["data"], "rb") as fh:
        command = ["run", "-d", stock["decl"], "--query", stock["query"], "-", "-f", "jsonl"]
        proc = subprocess.run(
            [sys.executable, "-m", "pycel", *command],
            stdin=fh, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


# -- errors and exit codes ---------------------------------------------------------------------


def test_bad_query_exits_2_with_line_and_column(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = stock["dir"] / "bad.ceql"
    bad.write_text("SELECT * FROM S\nWHERE SELL AS s ;; BUY\n")
    code, out, err = cli(capsys, "run", "-d", stock["decl"], "--query", bad, stock["data"])
    assert code == 2 and out == ""
    assert f"syntax error in {bad}:" in err and "line 2, column 18" in err
    assert "^" in err and "Traceback" not in err
    code, _, err = cli(
        capsys,
        "run",
        "-d",
        stock["decl"],
        "--query",
        "SELECT * FROM S WHERE SELL AS s FILTER s[cost > 1]",
        stock["data"],
    )
    assert code == 2 and "unknown attribute 'cost'" in err
    code, _, err = cli(
        capsys,
        "run",
        "-d",
        "CREATE STREAM S { EVENT A { x: nope } }",
        "--query",
        stock["query"],
        stock["data"],
    )
    assert code == 2 and "syntax error in <declaration>" in err


def test_unsupported_feature_exits_2_with_the_engine_message(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT * FROM S WHERE (SELL AS s)+ AND BUY AS b"
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"])
    assert code == 2
    decl = ceql.parse_declaration(STOCK_DECLARATION)
    with pytest.raises(pycel.UnsupportedError) as info:
        pycel.compile(ceql.parse_query(query, decl))
    assert str(info.value) in err
    # MAX runs in the engine now (it used to be the example of an unsupported feature).
    query = "SELECT MAX * FROM S WHERE SELL ; BUY"
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"], "-q")
    assert code == 0 and err == ""
    # A refusal that suggests a post-filter says how to write one (CEQL has no syntax).
    query = "SELECT * FROM S WHERE SELL AS s ; BUY AS b FILTER b[price + s.price > 1]"
    for args in (["run", "--query", query, stock["data"]], ["explain", query]):
        code, _, err = cli(capsys, *args, "-d", stock["decl"])
        assert code == 2 and "or pass where(..., post_filter=True)" in err
        assert "(CEQL cannot write a post-filter: in Python, read the query with pycel.ceql" in err


@pytest.mark.parametrize("chunk", ["7", "100000"])
def test_bad_rows_exit_1_naming_the_row(
    stock: dict[str, Any], chunk: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = Path(stock["data"]).read_text().splitlines()
    cases = {
        # data row (1-based) -> (line edit, column, message)
        23: (lambda f: [f[0], f[1], f[2], "cheap", f[4]], "price", "expected a number, got 'cheap'"),
        31: (lambda f: ["TRADE", *f[1:]], "event_type", "unknown event type 'TRADE'"),
        44: (lambda f: [f[0], f[1], "12.5", f[3], f[4]], "volume", "expected an integer, got '12.5'"),
        52: (lambda f: [*f[:4], "0"], "stock_time", "time goes backwards"),
    }
    for row, (edit, column, message) in cases.items():
        changed = list(lines)
        changed[row] = ",".join(edit(changed[row].split(",")))
        path = stock["dir"] / f"bad{row}.csv"
        path.write_text("\n".join(changed) + "\n")
        code, _, err = cli(
            capsys, "run", "-d", stock["decl"], "--query", stock["query"], path, "--chunk-size", chunk
        )
        assert code == 1, err
        assert f"data error in {path}, row {row} (position {row - 1}), column '{column}': {message}" in err
        assert "Traceback" not in err


def test_malformed_csv_and_missing_files(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    wide = stock["dir"] / "wide.csv"
    wide.write_text(Path(stock["data"]).read_text().replace("\n", ",1\n", 12).replace(",1\n", "\n", 11))
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", stock["query"], wide)
    assert code == 1 and "row 11 (position 10): row has more fields than the 5 columns" in err
    code, _, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["dir"] / "nope.csv"
    )
    assert code == 2 and "cannot read" in err
    code, _, err = cli(capsys, "run", "-d", "nope.ceql", "--query", stock["query"], stock["data"])
    assert code == 2 and "declaration file 'nope.ceql' not found" in err
    code, _, err = cli(capsys, "run", "--query", stock["query"], stock["data"])
    assert code == 2 and "no declaration" in err
    code, _, err = cli(capsys, "run", "-d", stock["decl"], stock["data"])
    assert code == 2 and "--query" in err
    code, _, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "--chunk-size", "0"
    )
    assert code == 2 and "at least 1" in err


def test_warnings_go_to_stderr_unless_quiet(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT * FROM S WHERE SELL AS x ; BUY AS x WITHIN 3 EVENTS"
    for _ in range(2):  # shown on every run, not once per process
        code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"])
        assert code == 0 and "pycel: warning: variables ['x'] are bound on both sides" in err
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"], "-q")
    assert code == 0 and err == ""


# -- explain -----------------------------------------------------------------------------------


def test_explain(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "explain", stock["query"], "-d", stock["decl"])
    assert code == 0
    assert "(((SELL AS T1 ; BUY AS T2) ; BUY AS T3) FILTER" in out
    assert "WHERE SELL AS T1 ; BUY AS T2 ; BUY AS T3 FILTER T1[name = 'INTC']" in out
    assert "window:       10000 [stock_time]" in out
    assert "atoms:       3 (4 states with the start)" in out
    assert "variables:   3 (T1, T2, T3)" in out
    assert "deterministic automaton: 4 states (with the start), 5 transitions over 5 predicate classes" in out
    assert out.rstrip().endswith("engine: supported")
    assert "MAX pair automaton" not in out


def test_explain_max_sizes_the_pair_automaton(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "explain", "SELECT MAX * FROM S WHERE SELL ; BUY+", "-d", stock["decl"])
    assert code == 0 and "strategy:     max" in out
    assert "MAX pair automaton (T, E, U): 6 states (with the start), 5 transitions" in out
    assert out.rstrip().endswith("engine: supported")
    windowed = "SELECT MAX * FROM S WHERE SELL ; BUY+ WITHIN 10 EVENTS"
    code, out, _ = cli(capsys, "explain", windowed, "-d", stock["decl"])
    assert code == 0 and "MAX pair automaton" not in out
    assert "MAX: chosen among the runs inside the window at each end" in out
    # A comparison between occurrences, no window: chosen on the run DAG among all runs.
    compared = "SELECT MAX * FROM S WHERE SELL AS s ; BUY+ AS b FILTER b[price > s.price]"
    code, out, _ = cli(capsys, "explain", compared, "-d", stock["decl"])
    assert code == 0 and "MAX pair automaton" not in out and "window" not in out.split("deterministic")[1]
    assert "MAX: chosen among all the runs at each end (no pair automaton)" in out


def test_explain_kleene_partition_and_unsupported(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "explain", STOCK_DECLARATION + OTHER_OPERATORS["Q6"])
    assert code == 0
    assert "partition by: volume" in out and "consume by:   any" in out
    code, out, _ = cli(capsys, "explain", OTHER_OPERATORS["Q7"], "-d", stock["decl"])
    assert code == 0 and "atoms:       4" in out and "first" in out and "final" in out
    code, out, err = cli(capsys, "explain", "SELECT * FROM S WHERE SELL AND BUY", "-d", stock["decl"])
    assert code == 0 and "atoms:       4" in out and out.rstrip().endswith("engine: supported")
    code, out, err = cli(capsys, "explain", "SELECT * FROM S WHERE SELL+ AND BUY", "-d", stock["decl"])
    assert code == 2 and "automaton: not built" in out and "a Kleene plus ('+') in SELL+" in out
    code, out, _ = cli(capsys, "explain", stock_query(24), "-d", stock["decl"])
    assert code == 0 and "not computed: 65792 predicate classes" in out


# -- python -m pycel ---------------------------------------------------------------------------


def test_python_dash_m_pycel_matches_in_process(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _, expected, _ = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-f", "jsonl"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pycel", "run", "--declaration", stock["decl"], "--query", stock["query"],
         stock["data"], "--format", "jsonl", "--chunk-size", "7"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert rows_of_jsonl(proc.stdout) == rows_of_jsonl(expected)
    assert "400 events" in proc.stderr
    command = ["run", "-d", stock["decl"], "--query", "SELECT * FROM S WHERE ;", stock["data"]]
    bad = subprocess.run(
        [sys.executable, "-m", "pycel", *command],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "line 1, column 23" in bad.stderr and "Traceback" not in bad.stderr


# -- data errors: nothing lost, no traceback ---------------------------------------------------

PAIR_QUERY = (
    "SELECT * FROM S WHERE SELL AS s ; BUY AS b "
    "FILTER s[name = 'INTC'] AND b[name = 'QQQ'] WITHIN 3000 [stock_time]"
)
DENSE_QUERY = (
    "SELECT * FROM S WHERE SELL AS s ; BUY AS b ; BUY AS c "
    "FILTER s[name = 'INTC'] AND b[name = 'RIMM'] AND c[name = 'QQQ'] WITHIN 3000 [stock_time]"
)


def reference_rows(decl_text: str, query_text: str, frame: pd.DataFrame) -> list[Row]:
    decl = ceql.parse_declaration(decl_text)
    return sorted(rows_of_matches(pycel.reference.evaluate(ceql.parse_query(query_text, decl), frame)))


@pytest.mark.parametrize("chunk", ["1000", "64"])
@pytest.mark.parametrize("fault", ["reader", "engine"])
def test_matches_before_a_bad_row_are_written(
    stock: dict[str, Any], chunk: str, fault: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bad row is inside a chunk: the chunk's rows before it are still evaluated and
    every match ending there written (the reader's error, or the engine's at push)."""
    df = stock_csv(stock["dir"] / "dense.csv", 300, seed=5, step=(10, 60))
    bad = 211  # 0-based data row; with --chunk-size 64 its chunk starts at row 192
    lines = (stock["dir"] / "dense.csv").read_text().splitlines()
    cells = lines[bad + 1].split(",")
    if fault == "reader":
        cells[3], column, message = "cheap", "price", "expected a number, got 'cheap'"
    else:
        cells[4], column, message = "5", "stock_time", "time goes backwards"
    lines[bad + 1] = ",".join(cells)
    path = stock["dir"] / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", PAIR_QUERY, path, "-f", "jsonl", "--chunk-size", chunk
    )
    assert code == 1
    assert f"data error in {path}, row {bad + 1} (position {bad}), column '{column}': {message}" in err
    assert f"output complete before row {bad + 1}: {bad} events, " in err
    expected = reference_rows(STOCK_DECLARATION, PAIR_QUERY, df.head(bad))
    assert len([e for _, e, _ in expected if e >= 192]) > 3  # the bad row's chunk has matches before it
    assert sorted(rows_of_jsonl(out)) == expected
    assert f"{len(expected)} matches" in err
    assert "Traceback" not in err and len(err.splitlines()) == 2


def test_feeder_holds_at_most_a_batch_of_matches(tmp_path: Path) -> None:
    """Matches are written per push, and pushes shrink so that one holds at most about
    ``budget`` matches: on a dense S3-like stream the most matches held at once stays
    under the budget, and the output is the reference's."""
    from pycel.cli import Feeder
    from pycel.cli._output import Writer

    df = stock_csv(tmp_path / "dense.csv", 150, seed=7, step=(5, 30))
    decl = ceql.parse_declaration(STOCK_DECLARATION)
    pattern = ceql.parse_query(DENSE_QUERY, decl)
    query = pycel.compile(pattern, types=decl.values())
    expected = sorted(rows_of_matches(pycel.reference.evaluate(pattern, df)))
    ends = np.bincount([e for _, e, _ in expected])
    budget = 4 * int(ends.max())  # some rows end a quarter of the budget on their own
    per_frame = np.bincount([e // 75 for _, e, _ in expected])
    assert per_frame.max() > budget  # one push per 75-row frame would hold more
    out = io.StringIO()
    feeder = Feeder(query.stream(), Writer("jsonl", out, ["s", "b", "c"]), "event_type", budget)
    for at in range(0, len(df), 75):
        feeder.feed(df.iloc[at : at + 75].reset_index(drop=True))
    assert feeder.writer.written == len(expected)
    assert 0 < feeder.largest <= budget
    assert sorted(rows_of_jsonl(out.getvalue())) == expected


def test_match_batch_option_keeps_the_output(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    df = stock_csv(stock["dir"] / "dense.csv", 150, seed=7, step=(5, 30))
    outputs = []
    for batch in ("1", "7", "100000"):
        code, out, _ = cli(
            capsys, "run", "-d", stock["decl"], "--query", DENSE_QUERY, stock["dir"] / "dense.csv",
            "-f", "jsonl", "--match-batch", batch,
        )  # fmt: skip
        assert code == 0
        outputs.append(sorted(rows_of_jsonl(out)))
    assert outputs[0] == outputs[1] == outputs[2] == reference_rows(STOCK_DECLARATION, DENSE_QUERY, df)


def _per_match_lines(matches: pycel.Matches, fmt: str, variables: list[str]) -> str:
    """The output formats spelt out per match (the writer builds them with array operations)."""
    lines = []
    key = {v: f"var.{v}" if v in ("start", "end") else v for v in variables}
    for m in matches:
        bound = {v: list(m[v]) for v in variables}
        if fmt == "jsonl":
            lines.append(
                json.dumps({"start": m.start, "end": m.end, **{key[v]: bound[v] for v in variables}})
            )
        elif fmt == "csv":
            lines.append(
                ",".join([str(m.start), str(m.end), *(" ".join(map(str, bound[v])) for v in variables)])
            )
        else:
            shown = "  ".join(f"{v}={','.join(map(str, bound[v]))}" for v in variables if bound[v])
            lines.append(f"[{m.start}, {m.end}]  {shown}".rstrip())
    return "".join(line + "\n" for line in lines)


@given(data=st.data())
@settings(max_examples=60)
def test_writer_equals_per_match_formatting(data: st.DataObject) -> None:
    """Entries in any order, repeated, of variables not written; big positions."""
    from pycel.cli._output import Writer

    names = ["a", "start", "b", "end", "c"]
    n = data.draw(st.integers(0, 6))
    starts, ends, offsets, var_ids, positions = [], [], [0], [], []
    for _ in range(n):
        entries = data.draw(
            st.lists(
                st.tuples(st.integers(0, 4), st.sampled_from([0, 1, 9, 10, 99, 10**12, 2**62])), max_size=6
            )
        )
        var_ids += [v for v, _ in entries]
        positions += [p for _, p in entries]
        offsets.append(len(var_ids))
        starts.append(data.draw(st.integers(0, 10**6)))
        ends.append(data.draw(st.integers(0, 2**62)))
    matches = pycel.Matches(
        np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), np.array(offsets, dtype=np.int64),
        np.array(var_ids, dtype=np.int32), np.array(positions, dtype=np.int64), tuple(names),
    )  # fmt: skip
    written = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=4))
    for fmt in ("text", "jsonl", "csv"):
        out = io.StringIO()
        Writer(fmt, out, written).write(matches)
        header = "start,end," + ",".join(f"var.{v}" if v in ("start", "end") else v for v in written) + "\n"
        text = out.getvalue()
        if fmt == "csv":
            assert text.startswith(header.replace(",\n", "\n"))
            text = text.split("\n", 1)[1]
        assert text == _per_match_lines(matches, fmt, written)


def test_errors_without_traceback(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The cases of issue 12 that printed a traceback: one line each, exit 1 for data and 2
    for the query."""
    run = ["run", "-d", stock["decl"], "--query"]
    not_utf8 = stock["dir"] / "latin1.csv"
    not_utf8.write_bytes(
        b"event_type,name,volume,price,stock_time\nSELL,INTC,1,2.0,10\nBUY,M\xfcller,1,2.0,11\n"
    )
    code, _, err = cli(capsys, *run, stock["query"], not_utf8)
    assert code == 1 and "row 2 (position 1), column 'name'" in err and "UTF-8" in err
    parquet = stock["dir"] / "stocks.parquet"
    stock["df"].to_parquet(parquet, index=False)
    raw = parquet.read_bytes()
    footer, page = stock["dir"] / "footer.parquet", stock["dir"] / "page.parquet"
    footer.write_bytes(raw[:-20] + b"x" * 12 + raw[-8:])
    page.write_bytes(raw[:100] + bytes(b ^ 0xFF for b in raw[100:400]) + raw[400:])
    for path in (footer, page):
        code, out, err = cli(capsys, *run, stock["query"], path)
        assert code == 1 and out == "" and f"data error in {path}" in err
    queries = {
        "SELECT * FROM S WHERE SELL ; BUY LIMIT 9223372036854775808": "LIMIT",
        "SELECT * FROM S WHERE SELL ; BUY WITHIN 9223372036854775807 EVENTS": "WITHIN",
        "SELECT * FROM S WHERE SELL ; BUY WITHIN 1e400 [stock_time]": "WITHIN",
    }
    for query, word in queries.items():
        code, out, err = cli(capsys, *run, query, stock["data"])
        assert code == 2 and out == "" and f"error in <query>: {word}" in err
        assert len(err.splitlines()) == 1
    for _, _, err in [cli(capsys, *run, stock["query"], p) for p in (not_utf8, footer, page)]:
        assert "Traceback" not in err


def test_non_utf8_on_stdin_names_the_row(stock: dict[str, Any]) -> None:
    data = b"event_type,name,volume,price,stock_time\nSELL,INTC,1,2.0,10\nBUY,\xff,1,2.0,11\n"
    proc = subprocess.run(
        [sys.executable, "-m", "pycel", "run", "-d", stock["decl"], "--query", stock["query"], "-"],
        input=data, capture_output=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err
    assert "data error in <stdin>, row 2 (position 1), column 'name'" in err


def test_unexpected_exceptions_are_one_line_internal_errors(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug is reported in one line asking for a report: exit 1 once data is being read,
    2 before; PYCEL_DEBUG=1 adds the traceback."""
    from pycel.engine import Stream

    args = ["run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "--chunk-size", "100"]
    real_push = Stream.push

    def failing_push(self: Stream, data: Any, **kwargs: Any) -> pycel.Matches:
        if self.offset >= 100:
            raise RuntimeError("boom\nsecond line")
        return real_push(self, data, **kwargs)

    monkeypatch.setattr(Stream, "push", failing_push)
    code, _, err = cli(capsys, *args)
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[0] == (
        f"pycel: internal error while reading {stock['data']} after row 100: RuntimeError: boom second line "
        "(please report this with the command; PYCEL_DEBUG=1 shows the traceback)"
    )
    assert "output complete before row 101: 100 events" in err
    monkeypatch.setenv("PYCEL_DEBUG", "1")
    code, _, err = cli(capsys, *args)
    assert code == 1 and "Traceback" in err and "internal error" in err
    monkeypatch.delenv("PYCEL_DEBUG")

    def failing_compile(*_: Any, **__: Any) -> Any:
        raise OverflowError("int too large")

    monkeypatch.setattr("pycel.cli.compile_query", failing_compile)
    code, _, err = cli(capsys, *args)
    assert code == 2 and "internal error while preparing the run: OverflowError: int too large" in err
    assert "Traceback" not in err


def test_a_failing_output_is_a_clear_error(stock: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    code, _, err = cli(
        capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"], "-o", "/dev/full"
    )
    assert code == 1 and "pycel: cannot write the matches: No space left on device" in err
    assert "Traceback" not in err


def test_missing_time_attribute_names_the_option(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT * FROM S WHERE SELL ; BUY WITHIN 5 SECONDS"
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", query, stock["data"])
    assert code == 2 and "give --time-attribute ATTR" in err and "parse_query" not in err
    code, _, err = cli(capsys, "explain", query, "-d", stock["decl"])
    assert code == 2 and "give --time-attribute ATTR" in err


def test_within_n_on_a_timestamp_counts_the_time_unit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CORE's ``WITHIN n [t]`` on a primary_time attribute: n in ``--time-unit``."""
    decl = "CREATE STREAM S { EVENT A { t: primary_time }, EVENT B { t: primary_time } }"
    data = tmp_path / "s.csv"
    data.write_text("event_type,t\nA,100\nA,101\nB,103\nB,110\n")
    outputs = {}
    for query in ("SELECT * FROM S WHERE A ; B WITHIN 2 [t]", "SELECT * FROM S WHERE A ; B WITHIN 2 SECONDS"):
        code, out, err = cli(
            capsys, "run", "-d", decl, "--query", query, data, "--time-unit", "s", "-f", "jsonl"
        )
        assert code == 0, err
        outputs[query] = rows_of_jsonl(out)
    assert list(outputs.values())[0] == list(outputs.values())[1] == [(1, 2, (("A", (1,)), ("B", (2,))))]
    code, out, _ = cli(
        capsys, "explain", "SELECT * FROM S WHERE A ; B WITHIN 2 [t]", "-d", decl, "--time-unit", "ms"
    )
    assert code == 0 and "2000000 [t]" in out


@pytest.mark.parametrize("fault", ["overflow", "time"])
def test_feeder_pushes_the_rows_before_an_engine_error(fault: str) -> None:
    """A push that fails (an int overflow in a filter: raised after the tuple keys of a
    two-column partition were assigned; time going backwards) changes nothing: the rows
    before the bad one are pushed again and give the reference's matches."""
    from pycel.cli import Feeder
    from pycel.cli._data import InputError
    from pycel.cli._output import Writer

    fields = "{ k: int, j: string, v: int, t: int }"
    decl_text = f"CREATE STREAM S {{ EVENT A {fields}, EVENT B {fields} }}"
    query = "SELECT * FROM S WHERE A AS a ; B AS b FILTER a[v * v > 0] PARTITION BY [k, j] WITHIN 8 [t]"
    decl = ceql.parse_declaration(decl_text)
    pattern = ceql.parse_query(query, decl)
    rng = np.random.default_rng(3)
    n = 60
    frame = pd.DataFrame(
        {
            "event_type": rng.choice(["A", "B"], n),
            "k": rng.integers(0, 3, n),
            "j": rng.choice(["x", "y"], n),
            "v": rng.integers(1, 5, n),
            "t": np.arange(n),
        }
    )
    bad = 47
    if fault == "overflow":
        frame.loc[bad, ["event_type", "v"]] = ["A", 2**40]
    else:
        frame.loc[bad, "t"] = 3
    out = io.StringIO()
    feeder = Feeder(
        pycel.compile(pattern, types=decl.values()).stream(),
        Writer("jsonl", out, ["a", "b"]),
        "event_type",
        8,
    )
    feeder.feed(frame.iloc[:20].reset_index(drop=True))
    with pytest.raises(InputError) as info:
        feeder.feed(frame.iloc[20:].reset_index(drop=True))
    assert info.value.row == bad and feeder.stream.offset == bad
    expected = sorted(rows_of_matches(pycel.reference.evaluate(pattern, frame.head(bad))))
    assert len(expected) > 10 and sorted(rows_of_jsonl(out.getvalue())) == expected


def test_a_read_failure_midway_is_a_one_line_data_error(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error after some chunks (a disk failing, a file cut while read): exit 1, one
    line, the matches of the rows read before it written."""
    import pycel.cli as cli_module

    real_open = cli_module.open_source

    def failing_source(*args: Any) -> Any:
        source = real_open(*args)
        chunks = source.chunks

        def some_chunks() -> Any:
            for base, frame in chunks():
                if base >= 200:
                    raise OSError("Input/output error\nat block 7")
                yield base, frame

        source.chunks = some_chunks
        return source

    monkeypatch.setattr(cli_module, "open_source", failing_source)
    args = [
        "run",
        "-d",
        stock["decl"],
        "--query",
        stock["query"],
        stock["data"],
        "-f",
        "jsonl",
        "--chunk-size",
        "100",
    ]
    code, out, err = cli(capsys, *args)
    assert code == 1 and "Traceback" not in err
    where = f"pycel: data error in {stock['data']}, after row 200"
    assert err.splitlines()[0] == f"{where}: cannot read further: Input/output error at block 7"
    assert rows_of_jsonl(out) == engine_rows(STOCK_DECLARATION, S3_LITERAL, stock["df"].head(200))


def test_a_query_error_raised_by_the_engine_exits_2(
    stock: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query refused only when data reaches the engine is a query error (exit 2)."""
    from pycel.engine import Stream

    def refusing_push(self: Stream, data: Any, **kwargs: Any) -> pycel.Matches:
        raise pycel.UnsupportedError("not with this data")

    monkeypatch.setattr(Stream, "push", refusing_push)
    code, _, err = cli(capsys, "run", "-d", stock["decl"], "--query", stock["query"], stock["data"])
    assert code == 2 and err.splitlines()[0] == f"pycel: error in {stock['query']}: not with this data"
    assert "Traceback" not in err
