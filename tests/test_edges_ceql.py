"""CEQL typos a new user makes, and the syntax errors they get: the line and column of the
culprit and a hint at what CEQL writes instead."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import pycel
from pycel import ceql

DECL = ceql.parse_declaration(
    (Path(__file__).resolve().parent.parent / "examples/data/stocks.ceql").read_text()
)


def syntax_error(text: str) -> pycel.CeqlSyntaxError:
    with pytest.raises(pycel.CeqlSyntaxError) as caught:
        ceql.parse_query(text, DECL)
    return caught.value


@pytest.mark.parametrize(
    ("text", "word", "column"),
    [
        ("SELECT NEX * FROM S WHERE SELL", "NEX", 8),
        ("SELECT LST s FROM S WHERE SELL AS s", "LST", 8),
        ("SELECT\n  maxx * FROM S WHERE SELL", "maxx", 3),
    ],
)
def test_a_misspelt_strategy_is_named(text: str, word: str, column: int) -> None:
    """'SELECT NEX *' said "expected FROM or WHERE, found '*'", pointing past the typo."""
    err = syntax_error(text)
    assert str(err).startswith(f"{word!r} is not a selection strategy (ALL, ANY, NEXT, LAST, MAX, STRICT)")
    assert (err.line, err.column) == (text.count("\n", 0, text.index(word)) + 1, column)


def test_a_selection_list_is_not_taken_for_a_strategy() -> None:
    err = syntax_error("SELECT s b FROM S WHERE SELL AS s ; BUY AS b")
    assert "is not a selection strategy" in str(err) and "'s'" in str(err)
    assert ceql.parse_query("SELECT s, b FROM S WHERE SELL AS s ; BUY AS b", DECL) is not None
    assert ceql.parse_query("SELECT next s FROM S WHERE SELL AS s", DECL) is not None


@pytest.mark.parametrize(
    ("text", "hint", "column"),
    [
        ("SELECT * FROM S WHERE SELL* ; BUY", "repeat with '+'", 27),
        ("SELECT * FROM S WHERE SELL AS s, BUY", "a sequence is written with ';'", 32),
        ("SELECT * FROM S WHERE (SELL, BUY)", "a sequence is written with ';'", 28),
    ],
)
def test_operators_of_other_languages_get_a_hint(text: str, hint: str, column: int) -> None:
    err = syntax_error(text)
    assert hint in str(err)
    assert (err.line, err.column) == (1, column)


@pytest.mark.parametrize(
    ("predicate", "column"),
    [
        ("volume > 99999999999999999999", 51),
        ("volume > -99999999999999999999", 51),
        ("price < 1 + 10000000000000000000", 54),
    ],
)
def test_an_integer_constant_out_of_range_has_its_line_and_column(predicate: str, column: int) -> None:
    """The PatternError had no position (the IN list's had one)."""
    with pytest.raises(
        pycel.PatternError, match=rf"outside the 64-bit range of int attributes \(line 1, column {column}\)"
    ):
        ceql.parse_query(f"SELECT * FROM S WHERE SELL AS s FILTER s[{predicate}]", DECL)


def test_the_smallest_int64_is_a_constant() -> None:
    """-9223372036854775808 is an int64, though 9223372036854775808 is not: it was refused."""
    pattern = ceql.parse_query(
        "SELECT * FROM S WHERE SELL AS s FILTER s[volume > -9223372036854775808]", DECL
    )
    sell = DECL["SELL"]
    events = [
        sell(name="A", volume=v, price=1.0, stock_time=t) for t, v in enumerate((-(2**63), 0, 2**63 - 1))
    ]
    found = pycel.compile(pattern).run(events)
    assert found.keys() == pycel.reference.evaluate(pattern, events).keys()
    assert [m.end for m in found] == [1, 2]


class Stock(pycel.Event):
    name: pycel.Field[str]
    price: pycel.Field[float]


class Buy(Stock): ...


class Sell(Stock): ...


def test_to_ceql_refuses_an_absence_filter_that_ceql_reads_otherwise() -> None:
    """ABSENT(Buy FILTER Buy[…]) next to `Buy AS b` was printed, and the text did not parse
    back (in CORE, 'Buy' there would also mean b); now UnsupportedError, as for FILTER."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    clash = pycel.seq(s, pycel.absent(Buy.where(Buy.price > 3)), b)
    with pytest.raises(pycel.UnsupportedError, match=r"ABSENT\(… FILTER Buy: no CEQL text means"):
        ceql.to_ceql(clash)
    x = pycel.alias(Buy, "x")
    for fine in (
        pycel.seq(s, pycel.absent(x.where(x.price > 3)), b),  # renamed: no clash
        pycel.seq(s, pycel.absent(Buy.where(Buy.price > s.price)), Sell.as_("t")),  # no Buy renamed
    ):
        text = ceql.to_ceql(fine)
        assert ceql.parse_query(text, [Stock, Buy, Sell]) == fine


def test_a_seconds_window_on_a_number_attribute_is_warned() -> None:
    """WITHIN 1 SECONDS over stock_time (an int holding milliseconds in CORE's data) reads
    its values as seconds: one unit, silently. Now a CeqlWarning says so."""
    text = "SELECT * FROM S WHERE SELL AS s ; BUY AS b WITHIN 1 MINUTES [stock_time]"
    with pytest.warns(ceql.CeqlWarning, match=r"stock_time is a number \(int\), not a timestamp") as caught:
        pattern = ceql.parse_query(text, DECL)
    message = str(caught[0].message)
    assert "stock_time(end) - stock_time(start) <= 60" in message and "(line 1, column 51)" in message
    sell, buy = DECL["SELL"], DECL["BUY"]
    events = [sell(name="A", volume=1, price=1.0, stock_time=t) for t in (0, 100)]
    events += [buy(name="A", volume=1, price=1.0, stock_time=t) for t in (150, 200)]
    found = pycel.compile(pattern).run(events)
    assert found.keys() == pycel.reference.evaluate(pattern, events).keys()
    assert sorted((m.start, m.end) for m in found) == [(1, 2)]  # 60 units, as warned


def test_a_seconds_window_on_a_timestamp_is_not_warned() -> None:
    decl = ceql.parse_declaration(
        "CREATE STREAM S { EVENT A { t: primary_time }, EVENT B { t: primary_time } }"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ceql.parse_query("SELECT * FROM S WHERE A ; B WITHIN 1 MINUTES", decl)
        ceql.parse_query("SELECT * FROM S WHERE SELL ; BUY WITHIN 60000 [stock_time]", DECL)
