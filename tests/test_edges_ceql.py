"""CEQL typos a new user makes, and the syntax errors they get: the line and column of the
culprit and a hint at what CEQL writes instead."""

from __future__ import annotations

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
