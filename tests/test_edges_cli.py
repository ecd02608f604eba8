"""Rough edges a new user of ``pycel run`` / ``pycel explain`` meets: empty files, a
header row that is not there, a JSON file, swapped arguments. Each case checks the exit
status and that the message names what is wrong; where matches are written they are
compared with the reference evaluator.
"""

from __future__ import annotations

import json
from pathlib import Path

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


def reference_rows(query: str, data: pd.DataFrame) -> list[tuple[int, int, dict[str, list[int]]]]:
    decl = ceql.parse_declaration(DECL.read_text())
    matches = pycel.reference.evaluate(ceql.parse_query(query, decl), data)
    return [(m.start, m.end, {v: list(p) for v, p in m.valuation}) for m in matches]


def jsonl_rows(out: str) -> list[tuple[int, int, dict[str, list[int]]]]:
    rows = []
    for line in out.splitlines():
        obj = json.loads(line)
        start, end = obj.pop("start"), obj.pop("end")
        rows.append((start, end, {v: p for v, p in obj.items() if p}))
    return rows


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
