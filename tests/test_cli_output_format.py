"""The match formats of ``pycel run`` (text, JSON lines, CSV), byte for byte.

The writer builds its text with column operations over all the matches of a batch
(``pycel/cli/_output.py``); :func:`spelt_out` here builds the same text the slow way,
one match and one variable at a time, from the rules of docs/cli.md. They must agree on
every format, on generated matches (entries in any order, repeated, of variables not
written, huge positions, variables named ``start``/``end`` or not ASCII) and on the
output of ``pycel run`` over generated stock data, whose matches are also the reference
evaluator's.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pycel
from pycel import ceql
from pycel.cli import main
from pycel.cli._output import FORMATS, Writer, render

DECLARATION = """CREATE STREAM S {
    EVENT BUY  { name: string, volume: int, price: double, stock_time: int },
    EVENT SELL { name: string, volume: int, price: double, stock_time: int }
}"""
#: Query, the variables it writes (SELECT lists are spelt out, so their order is known
#: here) and the rows of the stream (the reference evaluator is for small streams).
QUERIES = {
    # One event per variable: every cell holds at most one position.
    "single": (
        "SELECT s, b, c FROM S WHERE SELL AS s ; BUY AS b ; BUY AS c "
        "FILTER s[name = 'INTC'] AND b[name = 'RIMM'] AND c[name = 'QQQ'] WITHIN 600 [stock_time]",
        ["s", "b", "c"],
        150,
    ),
    # A variable selected twice is written once.
    "repeated": (
        "SELECT s, b, s FROM S WHERE SELL AS s ; BUY AS b "
        "FILTER s[name = 'INTC'] AND b[name = 'RIMM'] WITHIN 300 [stock_time]",
        ["s", "b"],
        150,
    ),
    # A Kleene plus: cells with several positions.
    "kleene": (
        "SELECT s, b, c FROM S WHERE SELL AS s ; BUY+ AS b ; SELL AS c "
        "FILTER b[price > 12.5] WITHIN 6 EVENTS",
        ["s", "b", "c"],
        24,
    ),
}


def _key(var: str) -> str:
    return f"var.{var}" if var in ("start", "end") else var


def spelt_out(matches: pycel.Matches, fmt: str, variables: Sequence[str]) -> str:
    """The lines of ``matches`` in ``fmt``, one match and one variable at a time (docs/cli.md:
    each variable's positions sorted, without repeats; unbound variables are left out of
    the text format, ``[]`` in JSON lines, an empty cell in CSV)."""
    lines = []
    for k in range(len(matches)):
        lo, hi = int(matches.offsets[k]), int(matches.offsets[k + 1])
        ids, positions = matches.var_ids[lo:hi], matches.positions[lo:hi]
        entries = [(matches.variables[int(i)], int(p)) for i, p in zip(ids, positions, strict=True)]
        bound = {v: sorted({p for w, p in entries if w == v}) for v in variables}
        start, end = int(matches.starts[k]), int(matches.ends[k])
        if fmt == "jsonl":
            fields = [("start", start), ("end", end), *((_key(v), bound[v]) for v in variables)]
            lines.append(
                "{" + ", ".join(f"{json.dumps(name)}: {json.dumps(value)}" for name, value in fields) + "}"
            )
        elif fmt == "csv":
            lines.append(",".join([str(start), str(end), *(" ".join(map(str, bound[v])) for v in variables)]))
        else:
            shown = "".join(f"  {v}={','.join(map(str, bound[v]))}" for v in variables if bound[v])
            lines.append(f"[{start}, {end}]{shown}")
    return "".join(line + "\n" for line in lines)


NAMES = ("a", "start", "b", "end", "é", "c")
POSITIONS = st.one_of(st.integers(0, 40), st.sampled_from([9, 10, 99, 100, 10**12, 2**62, 2**63 - 1]))


@st.composite
def generated_matches(draw: st.DrawFn) -> pycel.Matches:
    """Matches as an engine could store them, and some it would not: entries in any order,
    repeated, or (``single``) at most one entry per variable and match."""
    single = draw(st.booleans())
    starts, ends, offsets, var_ids, positions = [], [], [0], [], []
    for _ in range(draw(st.integers(0, 7))):
        if single:
            ids = draw(st.lists(st.integers(0, len(NAMES) - 1), unique=True, max_size=len(NAMES)))
        else:
            ids = draw(st.lists(st.integers(0, len(NAMES) - 1), max_size=8))
        var_ids += ids
        positions += [draw(POSITIONS) for _ in ids]
        offsets.append(len(var_ids))
        starts.append(draw(st.integers(0, 10**6)))
        ends.append(draw(st.integers(0, 2**63 - 1)))
    return pycel.Matches(
        np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), np.array(offsets, dtype=np.int64),
        np.array(var_ids, dtype=np.int32), np.array(positions, dtype=np.int64), NAMES,
    )  # fmt: skip


@given(
    matches=generated_matches(),
    variables=st.lists(st.sampled_from([*NAMES, "never"]), unique=True, max_size=5),
    fmt=st.sampled_from(FORMATS),
)
@settings(max_examples=300)
def test_render_equals_the_per_match_spelling(matches: pycel.Matches, variables: list[str], fmt: str) -> None:
    assert render(matches, fmt, variables) == spelt_out(matches, fmt, variables)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_variable_written_twice_shows_its_positions_twice(fmt: str) -> None:
    """``SELECT s, s``: both columns hold s's positions (the writer used to leave the first
    one empty, which claimed the match did not bind s)."""
    matches = pycel.Matches(
        np.array([0, 4], dtype=np.int64), np.array([3, 9], dtype=np.int64),
        np.array([0, 2, 5], dtype=np.int64),
        np.array([0, 1, 1, 0, 1], dtype=np.int32), np.array([0, 3, 9, 4, 7], dtype=np.int64), ("s", "b"),
    )  # fmt: skip
    assert render(matches, fmt, ["s", "b", "s"]) == spelt_out(matches, fmt, ["s", "b", "s"])


def test_writer_writes_the_csv_header_then_the_rows() -> None:
    matches = pycel.Matches(
        np.array([2], dtype=np.int64), np.array([5], dtype=np.int64), np.array([0, 3], dtype=np.int64),
        np.array([0, 1, 1], dtype=np.int32), np.array([2, 5, 3], dtype=np.int64), ("start", "q"),
    )  # fmt: skip
    out = io.StringIO()
    writer = Writer("csv", out, ["start", "q"])
    writer.write(matches)
    writer.write(matches)
    assert out.getvalue() == "start,end,var.start,q\n" + 2 * spelt_out(matches, "csv", ["start", "q"])
    assert writer.written == 2


def stock_csv(path: Path, n: int, seed: int) -> pd.DataFrame:
    """A seeded stock stream (header row, event type first), written to ``path``."""
    rng = random.Random(seed)
    rows, t = [], 1000
    for _ in range(n):
        rows.append(
            {
                "event_type": rng.choice(("BUY", "SELL")),
                "name": rng.choice(("INTC", "RIMM", "QQQ", "AMAT")),
                "volume": rng.choice((100, 500, 1000)),
                "price": round(rng.uniform(5, 40), 2),
                "stock_time": t,
            }
        )
        t += rng.randint(1, 60)
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False)
    return frame


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("query_name", sorted(QUERIES))
def test_pycel_run_writes_the_engines_matches_spelt_out(tmp_path: Path, fmt: str, query_name: str) -> None:
    """The file ``pycel run`` writes is, byte for byte, the engine's matches spelt out one by
    one, in the engine's order; as a set of lines it is the reference evaluator's."""
    query_text, variables, rows = QUERIES[query_name]
    frame = stock_csv(tmp_path / "stocks.csv", rows, seed=3)
    (tmp_path / "stocks.ceql").write_text(DECLARATION)
    out = tmp_path / f"matches.{fmt}"
    code = main([
        "run", "-d", str(tmp_path / "stocks.ceql"), "--query", query_text, str(tmp_path / "stocks.csv"),
        "-f", fmt, "-o", str(out), "-q", "--chunk-size", "40",
    ])  # fmt: skip
    assert code == 0
    decl = ceql.parse_declaration(DECLARATION)
    pattern = ceql.parse_query(query_text, decl)
    engine = pycel.compile(pattern, types=decl.values()).run(frame)
    expected = pycel.reference.evaluate(pattern, frame)
    assert len(expected) > 20
    if query_name == "kleene":  # some match binds b to several events
        assert int(np.diff(engine.offsets).max()) > len(variables)
    header = "start,end," + ",".join(variables) + "\n" if fmt == "csv" else ""
    written = out.read_text(encoding="utf-8")
    assert written == header + spelt_out(engine, fmt, variables)
    assert sorted(written.splitlines()) == sorted((header + spelt_out(expected, fmt, variables)).splitlines())
