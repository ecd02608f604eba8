"""CEQL typos a new user makes, and the syntax errors they get: the line and column of the
culprit and a hint at what CEQL writes instead."""

from __future__ import annotations

import re
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


# -- text that used to be read wrongly or crash the parser -------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("SELECT * FROM S WHERE SELL AS s ; BUY AS b /* note WITHIN 2 EVENTS", 1, 44),
        ("SELECT * FROM S\nWHERE SELL AS s ; BUY AS b\n  /* note\nWITHIN 2 EVENTS", 3, 3),
        ("SELECT * FROM S WHERE SELL /*", 1, 28),
    ],
)
def test_an_unterminated_block_comment_is_a_syntax_error(text: str, line: int, column: int) -> None:
    """An unterminated '/*' swallowed the rest of the query (its WITHIN clause) silently."""
    err = syntax_error(text)
    assert str(err).startswith("unterminated comment")
    assert (err.line, err.column) == (line, column)
    with pytest.raises(pycel.CeqlSyntaxError, match="unterminated comment"):
        ceql.parse_declaration("CREATE STREAM S { EVENT A { x: int } } /* the end")
    assert ceql.parse_query("SELECT * FROM S WHERE SELL /* a */ ; BUY /**/", DECL) == ceql.parse_query(
        "SELECT * FROM S WHERE SELL ; BUY", DECL
    )


@pytest.mark.parametrize(
    ("predicate", "column"),
    [
        ("price < 1e999", 50),
        ("price < -1e999", 50),
        ("price < 1 + 1.5e400", 54),
        ("price IN {1, 1e999}", 55),
        ("price IN {-1e999, 1}", 52),
        ("price IN {1..1e999}", 55),
        ("price IN {..1e999}", 54),
        ("price IN RANGE(0, 1e999)", 60),
    ],
)
def test_a_float_constant_that_overflows_has_its_line_and_column(predicate: str, column: int) -> None:
    """1e999 was read as infinity: explain printed 's.price < inf'."""
    with pytest.raises(pycel.PatternError, match=rf"infinity\) \(line 1, column {column}\)") as caught:
        ceql.parse_query(f"SELECT * FROM S WHERE SELL AS s FILTER s[{predicate}]", DECL)
    assert "is outside the range of 64-bit floats" in str(caught.value)
    assert str(caught.value).count("(line ") == 1
    small = ceql.parse_query("SELECT * FROM S WHERE SELL AS s FILTER s[price > 1e-999]", DECL)
    assert "s.price > 0.0" in repr(small)


def _deep(query: str) -> pycel.CeqlSyntaxError:
    """The syntax error of a query nested too deeply (never a RecursionError)."""
    err = syntax_error(query)
    assert str(err).startswith("query nested too deeply (more than "), str(err)
    return err


def test_deep_nesting_is_a_syntax_error_not_a_recursion_error() -> None:
    """500 parentheses, a 1000-term sum or a 400-atom sequence ended in RecursionError
    (the command line's "internal error"): in the parser, or later in the engine."""
    head = "SELECT * FROM S WHERE "
    err = _deep(head + "(" * 500 + "SELL" + ")" * 500)
    assert (err.line, err.column) == (1, len(head) + ceql.MAX_NESTING + 1)
    assert f"(more than {ceql.MAX_NESTING} parentheses, NOTs or signs inside each other)" in str(err)
    query = head + "SELL AS s FILTER s[volume > 1" + " + 1" * 1000 + "]"
    err = _deep(query)
    assert err.line == 1 and query[err.column - 1] == "+"
    assert f"(more than {ceql.MAX_DEPTH} levels)" in str(err)
    query = head + " ; ".join(f"SELL AS s{i}" for i in range(400))
    err = _deep(query)
    assert err.line == 1 and query[err.column - 1] == ";"
    assert str(err).startswith(
        f"query nested too deeply (more than {ceql.MAX_DEPTH} levels; "
        "the engine supports at most 62 atoms per pattern) at line 1"
    )
    for body in (
        "SELL AS s FILTER s[" + "(" * 300 + "volume > 1" + ")" * 300 + "]",
        "SELL AS s FILTER s[" + "NOT " * 300 + "(volume > 1)]",
        "SELL AS s FILTER s[volume > " + "- " * 300 + "volume]",
        "SELL AS s FILTER s[volume > 1" + " * 1" * 300 + "]",
        "SELL AS s FILTER " + "(" * 300 + "s[volume > 1]" + ")" * 300,
        "SELL AS s FILTER s[volume > 1]" + " AND s[volume > 1]" * 1000,
        "SELL AS s FILTER s[volume > 1]" + " OR s[volume > 1]" * 1000,
        "SELL AS s" + " FILTER s[volume > 1]" * 300,
        "SELL" + "+" * 300,
        "SELL" + " AS x" * 300,
        " OR ".join(["SELL"] * 300),
        "NOT(SELL FILTER SELL[" + "(" * 300 + "volume > 1" + ")" * 300 + "])",
    ):
        _deep(head + body)


def test_to_ceql_refuses_a_pattern_nested_deeper_than_the_parser_reads() -> None:
    """A Python pattern can nest deeper than CEQL's limits; to_ceql printed text that did
    not parse back. It now says so, and a pattern at the limits still round-trips."""
    sell = DECL["SELL"]

    def alternating(n: int) -> pycel.Pattern:
        pattern: pycel.Pattern = sell.as_("s")
        for i in range(n):  # OR inside SEQ inside OR …: one more parenthesis per two levels
            pattern = pycel.seq(pattern, sell.as_(f"x{i}")) if i % 2 else pattern | sell.as_(f"y{i}")
        return pattern

    fits = alternating(ceql.MAX_DEPTH - 1)
    assert ceql.parse_query(ceql.to_ceql(fits), DECL) == fits
    for n in (ceql.MAX_DEPTH, 3 * ceql.MAX_NESTING):
        refused = "^CEQL text cannot say this pattern: query nested too deeply"
        with pytest.raises(pycel.UnsupportedError, match=refused):
            ceql.to_ceql(alternating(n))
    s = pycel.alias(sell, "s")
    volume = s.volume
    for _ in range(ceql.MAX_DEPTH):
        volume = volume + 1
    with pytest.raises(pycel.UnsupportedError, match="nested too deeply"):
        ceql.to_ceql(s.where(volume > 1))


def test_nesting_below_the_limit_parses() -> None:
    head = "SELECT * FROM S WHERE "
    n = ceql.MAX_NESTING
    ceql.parse_query(head + "(" * n + "SELL" + ")" * n, DECL)
    ceql.parse_query(head + "SELL AS s FILTER s[" + "(" * n + "volume > 1" + ")" * n + "]", DECL)
    ceql.parse_query(head + "SELL AS s FILTER s[" + "NOT " * n + "volume > 1]", DECL)
    ceql.parse_query(head + "SELL AS s FILTER s[volume > 1" + " + 1" * (ceql.MAX_DEPTH - 3) + "]", DECL)
    pattern = ceql.parse_query(
        head + " ; ".join(f"SELL AS s{i}" for i in range(62)) + " FILTER s0[volume > 1] WITHIN 5 EVENTS",
        DECL,
    )
    assert len(ceql.bound_variables(pattern)) == 62


def test_a_leading_byte_order_mark_is_skipped() -> None:
    """A query or declaration saved with a UTF-8 BOM was "unexpected character '\\ufeff'"."""
    text = "SELECT * FROM S WHERE SELL AS s ; BUY AS b WITHIN 5 EVENTS"
    assert ceql.parse_query("\ufeff" + text, DECL) == ceql.parse_query(text, DECL)
    decl = ceql.parse_declaration("\ufeffCREATE STREAM S { EVENT A { x: int } }")
    assert list(decl) == ["A"]
    err = syntax_error("\ufeffSELECT * FROM S\nWHERE SELL ;; BUY")
    assert (err.line, err.column) == (2, 13)
    err = syntax_error("\ufeffSELECT * FROM S WHERE SELL ;; BUY")
    assert (err.line, err.column) == (1, 29)
    assert [t.column for t in ceql.tokenize("\ufeffSELECT *")][:2] == [1, 8]
    err = syntax_error("SELECT * FROM S WHERE SELL ; \ufeffBUY")  # only a leading one
    assert "unexpected character '\\ufeff'" in str(err)


def test_a_syntax_error_in_a_long_line_shows_the_text_around_its_column() -> None:
    text = "SELECT * FROM S WHERE SELL AS s /* " + "a long comment " * 30 + "*/ ; BUY AS b )"
    with pytest.raises(pycel.CeqlSyntaxError) as caught:
        ceql.parse_query(text, DECL)
    shown, caret = str(caught.value).splitlines()[1:3]
    assert len(shown) < 110 and shown.strip().startswith("…")
    assert shown[caret.index("^")] == ")"  # the caret under the offending token


@pytest.mark.parametrize(("body", "found"), [("ABSENT()", "')'"), ("ABSENT(NOT(BUY))", "'NOT'")])
def test_absent_without_an_event_type_is_a_syntax_error(body: str, found: str) -> None:
    """ABSENT() said "unknown event type ')'", ABSENT(NOT(BUY)) "unknown event type 'NOT'"."""
    text = f"SELECT * FROM S WHERE SELL ; {body} ; BUY"
    err = syntax_error(text)
    expected = "expected an event type: ABSENT takes one event type, optionally filtered"
    assert str(err).startswith(f"{expected}, found {found}")
    assert (err.line, err.column) == (1, text.index(body) + len("ABSENT(") + 1)


@pytest.mark.parametrize(
    ("body", "operator"), [("ABSENT(BUY)+", "plus() (+)"), ("ABSENT(BUY) AS x", "as_() (AS)")]
)
def test_an_absence_as_an_operand_says_of_what(body: str, operator: str) -> None:
    """ABSENT(BUY)+ said only that the absence "must stand inside seq()", where it seems to."""
    pattern = ceql.parse_query(f"SELECT * FROM S WHERE SELL ; {body} ; BUY", DECL)
    with pytest.raises(pycel.PatternError, match=re.escape(f"here it is the operand of {operator}")):
        pycel.compile(pattern)
