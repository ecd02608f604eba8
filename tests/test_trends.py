"""Trends: ``pycel.prev(b)`` inside ``plus`` compares an iteration with the one before.

The language side (docs/semantics.md, Trends): the DSL and its typing, the reference
evaluator on hand-written streams (a rising trend, a V-shape, the vacuous first iteration,
nulls, several positions per iteration, nested pluses), the static rules, CEQL's
``PREV(b)[price]`` (parse, print, round trip, error positions), and the reference's
trends against a direct brute force over every subsequence of generated streams.
"""

from __future__ import annotations

import itertools
import operator
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pycel
from pycel import DataError, PatternError, plus, prev, seq
from pycel.ceql import parse_query, to_ceql, to_declaration
from pycel.language.checks import is_equality_join, trend_conditions
from pycel.language.evaluate import eval_scalar, prev_key
from pycel.language.expr import Attr, expr_key, reads_prev
from pycel.reference import evaluate


class Stock(pycel.Event):
    name: pycel.Field[str]
    price: pycel.Field[float]
    volume: pycel.Field[int]


class Mark(pycel.Event):
    name: pycel.Field[str]


b = pycel.alias(Stock, "b")
d, u = pycel.alias(Stock, "d"), pycel.alias(Stock, "u")
m = pycel.alias(Mark, "m")


def stocks(*prices: float | None, volume: int = 1) -> list[pycel.Event]:
    return [Stock(name="X", price=p, volume=volume) for p in prices]


def positions(pattern: object, events: list[pycel.Event]) -> list[tuple[int, ...]]:
    return sorted(match.positions() for match in evaluate(pattern, events))


Row = tuple[int, int, dict[str, tuple[int, ...]]]


def rows(pattern: object, events: list[pycel.Event]) -> list[Row]:
    """The matches as (start, end, valuation), in a fixed order (:func:`ordered`)."""
    return ordered([(match.start, match.end, match.variables) for match in evaluate(pattern, events)])


def ordered(found: list[Row]) -> list[Row]:
    return sorted(found, key=lambda row: (row[1], row[0], sorted(row[2].items())))


RISING = plus(b.where(b.price > prev(b).price))


# -- the DSL ------------------------------------------------------------------------------
def test_prev_attributes_are_attrs_of_the_previous_iteration() -> None:
    cond = b.price > prev(b).price
    attr = prev(b).price
    assert isinstance(attr, Attr) and attr.prev and attr.var == "b" and attr.dtype == "float"
    assert repr(attr) == "prev(b).price" and repr(cond) == "b.price > prev(b).price"
    assert cond.variables() == frozenset({"b"})
    assert reads_prev(cond) and reads_prev(~cond & (b.volume > 1)) and not reads_prev(b.price > 3)
    assert expr_key(prev(b).price) != expr_key(b.price)  # patterns with and without differ
    assert RISING != plus(b.where(b.price > b.price))
    assert repr(RISING) == "(Stock AS b FILTER b.price > prev(b).price)+"
    assert pycel.prev is prev and "prev" in pycel.__all__
    assert repr(prev(b)) == "prev(b)"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: prev(Stock), r"named occurrence, not the event type Stock.*pycel.alias\(Stock"),
        (lambda: prev(3), "prev\\(\\) takes an alias"),  # type: ignore[arg-type]
        (lambda: prev(prev(b)), "prev\\(\\) takes an alias"),
        (lambda: seq(b, prev(b)), "prev\\(b\\) is the previous iteration's 'b'.*not a pattern"),
        (lambda: plus(prev(b)), "not a pattern"),
        (lambda: prev(b).where(b.price > 1), "not a pattern"),
        (lambda: b.price > prev(b), "prev\\(b\\) is an occurrence.*read an attribute"),
        (lambda: prev(b).colour, "no attribute 'colour'"),
        (lambda: prev(b).price > "x", "cannot compare"),
    ],
)
def test_prev_misuse_is_a_pattern_error(build: Callable[[], object], message: str) -> None:
    with pytest.raises(PatternError, match=message):
        build()


def test_eval_scalar_reads_previous_values_under_their_own_key() -> None:
    env = {"b": {"price": 4.0}, prev_key("b"): {"price": 3.0}}
    assert eval_scalar(b.price > prev(b).price, env) is True
    assert eval_scalar(b.price < prev(b).price, env) is False
    assert eval_scalar(b.price > prev(b).price, {"b": {"price": 4.0}, prev_key("b"): {}}) is None


def test_a_trend_is_not_an_equality_join() -> None:
    a = pycel.alias(Stock, "a")
    assert is_equality_join(b.price == a.price)
    assert not is_equality_join(b.price == prev(a).price)


def test_trend_conditions_belong_to_the_innermost_plus() -> None:
    inner = plus(b.where((b.price > prev(b).price) & (b.volume > 0)))
    outer = plus(seq(d.where(d.price < prev(d).price), inner))
    assert [repr(c) for c in trend_conditions(outer)] == ["d.price < prev(d).price"]
    assert isinstance(inner, pycel.dsl.Plus)
    assert [repr(c) for c in trend_conditions(inner)] == ["b.price > prev(b).price"]


# -- the reference evaluator ----------------------------------------------------------------
def test_rising_trend() -> None:
    # prices 1 3 2 4: every strictly increasing subsequence, and nothing else
    assert positions(RISING, stocks(1.0, 3.0, 2.0, 4.0)) == [
        (0,), (0, 1), (0, 1, 3), (0, 2), (0, 2, 3), (0, 3), (1,), (1, 3), (2,), (2, 3), (3,),
    ]  # fmt: skip


def test_rising_trend_between_other_events() -> None:
    p = seq(m, plus(b.where((b.price > prev(b).price) & (b.volume > 0))), m.as_("e"))
    events = [Mark(name="s"), *stocks(2.0, 1.0), Stock(name="X", price=3.0, volume=0), Mark(name="e")]
    # between the marks: 2.0, 1.0, and 3.0 with volume 0 (not a b): no rise of two
    assert rows(p.select("b"), events) == ordered([(0, 4, {"b": (1,)}), (0, 4, {"b": (2,)})])


def test_first_iteration_holds_vacuously() -> None:
    never_after = plus(b.where(b.price > prev(b).price + 100))
    assert positions(never_after, stocks(1.0, 2.0, 3.0)) == [(0,), (1,), (2,)]
    assert positions(RISING, stocks(5.0)) == [(0,)]


def test_v_shape() -> None:
    v = seq(plus(d.where(d.price < prev(d).price)), plus(u.where(u.price > prev(u).price)))
    # prices 3 1 2: d falls (its last iteration below the one before), then u rises
    assert rows(v, stocks(3.0, 1.0, 2.0)) == ordered(
        [
            (0, 1, {"d": (0,), "u": (1,)}),
            (0, 2, {"d": (0,), "u": (2,)}),
            (0, 2, {"d": (0, 1), "u": (2,)}),
            (0, 2, {"d": (0,), "u": (1, 2)}),
            (1, 2, {"d": (1,), "u": (2,)}),
        ]
    )


def test_v_shape_contiguous_and_maximal() -> None:
    down = plus(d.where(d.price < prev(d).price), contiguous=True)
    up = plus(u.where(u.price > prev(u).price), contiguous=True)
    v = seq(down, up, contiguous=True).strategy("max")
    assert rows(v, stocks(5.0, 4.0, 6.0, 7.0, 1.0)) == ordered(
        [
            (0, 1, {"d": (0,), "u": (1,)}),
            (0, 2, {"d": (0,), "u": (1, 2)}),  # the same events, split two ways
            (0, 2, {"d": (0, 1), "u": (2,)}),
            (0, 3, {"d": (0,), "u": (1, 2, 3)}),
            (0, 3, {"d": (0, 1), "u": (2, 3)}),
            (3, 4, {"d": (3,), "u": (4,)}),  # 7 then 1: a fall of one, a rise of one
        ]
    )


def test_nulls_are_unknown_on_either_side() -> None:
    events = stocks(1.0, None, 2.0)
    assert positions(RISING, events) == [(0,), (0, 2), (1,), (2,)]
    # the negation fails on a null too
    not_falling = plus(b.where(~(b.price <= prev(b).price)))
    assert positions(not_falling, events) == [(0,), (0, 2), (1,), (2,)]


def test_several_positions_per_iteration_compare_every_combination() -> None:
    g, h = pycel.alias(Stock, "g"), pycel.alias(Stock, "h")
    # each iteration binds w to two events; both must be above both of the iteration before
    pairs = plus(
        seq(g, h).as_("w").where(pycel.alias(Stock, "w").price > prev(pycel.alias(Stock, "w")).price)
    )
    two = {"g": (0, 2), "h": (1, 3), "w": (0, 1, 2, 3)}
    assert (0, 3, two) in rows(pairs, stocks(1.0, 2.0, 3.0, 4.0))
    # 3 > 2 and 1.5 > 1 (g above g, h above h), but 1.5 > 2 fails: not a match
    assert (0, 3, two) not in rows(pairs, stocks(2.0, 1.0, 3.0, 1.5))
    assert (0, 3, {"g": (0,), "h": (3,), "w": (0, 3)}) in rows(pairs, stocks(2.0, 1.0, 3.0, 1.5))


def test_nested_plus_reads_its_own_previous_iteration() -> None:
    p = plus(seq(m, plus(b.where(b.price > prev(b).price))))
    events = [Mark(name="a"), *stocks(5.0), Mark(name="a"), *stocks(1.0, 2.0)]
    found = positions(p, events)
    # the inner trends restart in each outer iteration: 5 then 1 is no fall across them
    assert (0, 1, 2, 3, 4) in found
    assert (0, 1, 2, 4) in found
    outer = plus(seq(m, b).where(b.price > prev(b).price))
    assert (0, 1, 2, 3) not in positions(outer, events)  # 1 > 5 fails
    assert (0, 1, 2, 4) not in positions(outer, events)


def test_trend_over_two_occurrences() -> None:
    a = pycel.alias(Stock, "a")
    p = plus(seq(a, b).where(a.price > prev(b).price))
    # iterations (a, b): each a is above the previous iteration's b
    events = stocks(1.0, 2.0, 3.0, 0.5)
    found = positions(p, events)
    assert (0, 1, 2, 3) in found  # a=0 b=1, then a=2 (3 > 2) b=3
    assert positions(plus(seq(a, b).where(a.price > prev(b).price)), stocks(1.0, 2.0, 1.5, 0.5)) == [
        (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3),
    ]  # fmt: skip


def test_trend_arithmetic_leaving_int64_is_a_data_error() -> None:
    """Each side of a trend condition is computed on every event of its type, the previous
    iteration's on the event that would be the previous one (the register it leaves), as
    a filter's arithmetic is: the error names the first event whose side overflows, also
    when no later iteration reads it (the reference once checked only the pairs it
    compared: row 1 here, and no error at all for the last event)."""
    p = plus(b.where(b.volume > prev(b).volume * 2**62))
    for run in (evaluate, lambda q, e: pycel.compile(q).run(e)):
        with pytest.raises(DataError, match="64-bit") as err:
            run(p, stocks(1.0, 2.0, volume=4))
        assert err.value.row == 0
    last_only = plus(b.where(b.volume * 2 > prev(b).volume))
    events = [*stocks(1.0, volume=1), *stocks(2.0, volume=2**62)]
    for run in (evaluate, lambda q, e: pycel.compile(q).run(e)):
        with pytest.raises(DataError, match="64-bit") as err:
            run(last_only, events)
        assert err.value.row == 1


# -- static rules ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (lambda: b.where(b.price > prev(b).price), "must be a condition on the repeated pattern inside"),
        (lambda: plus(b).where(b.price > prev(b).price), "write the condition inside the plus"),
        (lambda: seq(m, plus(b)).where(b.price > prev(b).price), "is not inside a plus"),
        (lambda: plus(b.where(b.price > prev(b).price, post_filter=True)), "post-filter"),
        (lambda: plus(b.where(prev(b).price > 3)), "reads only the previous iteration"),
        (lambda: plus(seq(b.where(b.price > prev(b).price), b)), r"\['b'\] is also bound elsewhere"),
        (lambda: plus(seq(b.where(b.price > prev(b).price), m).as_("b")), "also bound elsewhere"),
        (lambda: plus(seq(m.where(m.name == "x"), b).where(m.name < prev(b).name)), None),
        (lambda: plus(seq(d.where(d.price > prev(b).price), b)), "reads variable 'b', which"),
        (lambda: plus(pycel.not_(Stock.where(Stock.price > prev(b).price))), "negated or absent"),
        (lambda: plus(seq(m, pycel.absent(d.where(d.price > prev(b).price)), b)), "negated or absent"),
    ],
)
def test_misplaced_trend_conditions_are_refused(pattern: Callable[[], Any], message: str | None) -> None:
    built = pattern()
    if message is None:  # accepted: a trend may relate two occurrences
        evaluate(built, [Mark(name="x"), *stocks(1.0)])
        return
    with pytest.raises(PatternError, match=message):
        evaluate(built, stocks(1.0, 2.0))


# -- CEQL -----------------------------------------------------------------------------------
DECL = to_declaration([Stock, Mark])


def test_ceql_prev_parses_to_the_dsl_pattern() -> None:
    q = "SELECT * FROM S WHERE (Stock AS b FILTER b[price > PREV(b)[price]])+"
    assert parse_query(q, [Stock, Mark]) == RISING
    v = parse_query(
        "select * from S where (Stock as d filter d[price < prev(d)[price]])+ ; "
        "(Stock as u filter u[Prev(u)[price] < price])+",
        [Stock, Mark],
    )
    assert v == seq(plus(d.where(d.price < prev(d).price)), plus(u.where(prev(u).price < u.price)))


@pytest.mark.parametrize(
    "pattern",
    [
        RISING,
        seq(m, plus(b.where((b.price * 2 >= prev(b).price + 1) & (b.name == prev(b).name))), m.as_("e")),
        seq(plus(d.where(prev(d).price > d.price)), plus(u.where(u.price > prev(u).price))).within(events=5),
        plus(seq(pycel.alias(Stock, "a"), b).where(pycel.alias(Stock, "a").price > prev(b).price)),
        plus(
            pycel.alias(Stock, "prev").where(
                pycel.alias(Stock, "prev").price > prev(pycel.alias(Stock, "prev")).price
            )
        ),
    ],
)
def test_ceql_round_trip(pattern: pycel.Pattern) -> None:
    text = to_ceql(pattern)
    assert "PREV(" in text
    assert parse_query(text, [Stock, Mark]) == pattern


def test_an_attribute_or_variable_named_prev_is_still_a_name() -> None:
    class Tick(pycel.Event):
        prev: pycel.Field[float]
        price: pycel.Field[float]

    p = parse_query("SELECT * FROM S WHERE (Tick AS t FILTER t[price > PREV(t)[prev] AND prev > 0])+", [Tick])
    t = pycel.alias(Tick, "t")
    assert p == plus(t.where((t.price > prev(t).prev) & (t.prev > 0)))
    assert parse_query(to_ceql(p), [Tick]) == p
    # back-quoted, PREV is a name (here an unknown attribute)
    with pytest.raises(PatternError, match="unknown attribute 'PREV'"):
        parse_query("SELECT * FROM S WHERE Tick AS t FILTER t[`PREV`(t)[price] > 0]", [Tick])


@pytest.mark.parametrize(
    ("text", "error", "line", "column", "message"),
    [
        (
            "(Stock AS b FILTER b[price > PREV(b[price]])+",
            pycel.CeqlSyntaxError,
            1,
            58,
            "expected '\\)' after PREV",
        ),
        (
            "(Stock AS b FILTER b[price > PREV()[price]])+",
            pycel.CeqlSyntaxError,
            1,
            57,
            "expected a variable",
        ),
        ("(Stock AS b FILTER b[price > PREV(b)price])+", pycel.CeqlSyntaxError, 1, 59, "expected '\\['"),
        ("(Stock AS b FILTER b[price > PREV(b)[]])+", pycel.CeqlSyntaxError, 1, 60, "expected an attribute"),
        ("(Stock AS b FILTER b[price > PREV(b)[price)+", pycel.CeqlSyntaxError, 1, 65, "expected '\\]'"),
        ("(Stock AS b FILTER b[price > PREV(c)[price]])+", PatternError, 1, 57, "variable 'c'"),
        ("(Stock AS b FILTER b[price > PREV(b)[cost]])+", PatternError, 1, 60, "unknown attribute 'cost'"),
        ("NOT(Stock FILTER Stock[price > PREV(Stock)[price]])", PatternError, 1, 54, "inside NOT"),
    ],
)
def test_ceql_prev_errors_have_positions(
    text: str, error: type[Exception], line: int, column: int, message: str
) -> None:
    with pytest.raises(error, match=message) as err:
        parse_query("SELECT * FROM S WHERE " + text, [Stock, Mark])
    if isinstance(err.value, pycel.CeqlSyntaxError):
        assert (err.value.line, err.value.column) == (line, column)
    else:
        assert f"(line {line}, column {column})" in str(err.value)


def test_ceql_misplaced_prev_is_refused_when_evaluated() -> None:
    p = parse_query("SELECT * FROM S WHERE Stock AS b FILTER b[price > PREV(b)[price]]", [Stock, Mark])
    with pytest.raises(PatternError, match="inside pycel.plus"):
        evaluate(p, stocks(1.0))


# -- typing -----------------------------------------------------------------------------------
def test_prev_is_typed_like_alias(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    from test_typing import PRELUDE

    accepted = tmp_path / "accepted.py"
    accepted.write_text(
        PRELUDE
        + "p: pycel.Expr[float] = pycel.prev(b).price\n"
        + "q: pycel.Pattern = plus(b.where(b.price > pycel.prev(b).price * 1.01))\n"
        + "r: pycel.Expr[str] = pycel.prev(s).name\n"
    )
    rejected = tmp_path / "rejected.py"
    lines = ['x = pycel.prev(b).price > "x"', "y = pycel.prev(b).colour", "z = pycel.prev(b).name + 1"]
    rejected.write_text(PRELUDE + "\n".join(lines) + "\n")
    out, err, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "c"),
            str(accepted),
        ]
    )
    assert status == 0, out + err
    out, _, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "c"),
            str(rejected),
        ]
    )
    first = PRELUDE.count("\n") + 1
    flagged = {int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line}
    assert status == 1 and flagged == {first, first + 1, first + 2}, out


# -- against a brute force ------------------------------------------------------------------
OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
_BUILD: dict[str, Callable[[Any, Any], Any]] = {
    "<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y,
}  # fmt: skip


def brute_force(
    values: list[int | None], kinds: list[bool], op: str, shift: int, contiguous: bool
) -> list[tuple[int, ...]]:
    """Every subsequence of the Stock events (``kinds[k]``: event k is a Stock) whose
    consecutive values satisfy ``x OP prev + shift`` (a null fails), adjacent in the stream
    when ``contiguous``."""
    found = []
    stock = [k for k, is_stock in enumerate(kinds) if is_stock]
    for size in range(1, len(stock) + 1):
        for chosen in itertools.combinations(stock, size):
            pairs = list(itertools.pairwise(chosen))
            if contiguous and any(q != p + 1 for p, q in pairs):
                continue
            if all(
                values[q] is not None and values[p] is not None and OPS[op](values[q], values[p] + shift)
                for p, q in pairs
            ):
                found.append(chosen)
    return sorted(found)


@given(
    values=st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=1, max_size=7),
    data=st.data(),
    op=st.sampled_from(sorted(OPS)),
    shift=st.integers(-1, 1),
    contiguous=st.booleans(),
)
def test_reference_trends_match_a_brute_force(
    values: list[int | None], data: st.DataObject, op: str, shift: int, contiguous: bool
) -> None:
    kinds = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    events: list[pycel.Event] = [
        Stock(name="X", price=1.0, volume=v) if is_stock else Mark(name="x")
        for v, is_stock in zip(values, kinds, strict=True)
    ]
    cond = _BUILD[op](b.volume, prev(b).volume + shift)
    pattern = plus(b.where(cond), contiguous=contiguous)
    assert positions(pattern, events) == brute_force(values, kinds, op, shift, contiguous)


@given(values=st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_reference_v_shapes_match_a_brute_force(values: list[int]) -> None:
    events = stocks(*(float(v) for v in values))
    v = seq(plus(d.where(d.price < prev(d).price)), plus(u.where(u.price > prev(u).price)))
    expected = set()
    for size in range(2, len(values) + 1):
        for chosen in itertools.combinations(range(len(values)), size):
            for cut in range(1, size):
                fall, rise = chosen[:cut], chosen[cut:]
                if all(values[q] < values[p] for p, q in itertools.pairwise(fall)) and all(
                    values[q] > values[p] for p, q in itertools.pairwise(rise)
                ):
                    expected.add((fall, rise))
    found = {(mm["d"], mm["u"]) for mm in evaluate(v, events)}
    assert found == expected


# -- the engine, where it runs trends ---------------------------------------------------------
ENGINE_TRENDS = {
    "rising": RISING,
    "not falling": plus(b.where(b.price >= prev(b).price)),
    "changing": plus(b.where(b.volume != prev(b).volume)),
    "arithmetic": plus(b.where(b.price * 2 < prev(b).price + 1)),
    "between marks": seq(m, plus(b.where((b.price > prev(b).price) & (b.volume > 0))), m.as_("e")),
    "windowed": RISING.within(events=3),
    "partitioned": RISING.partition_by("name"),
}


@pytest.mark.parametrize("name", sorted(ENGINE_TRENDS))
def test_engine_agrees_with_the_reference_where_it_runs_trends(name: str) -> None:
    pattern = ENGINE_TRENDS[name]
    query = pycel.compile(pattern)
    rng = random.Random(name)
    for _ in range(8):
        events: list[pycel.Event] = []
        for _ in range(rng.randint(1, 9)):
            if rng.random() < 0.2:
                events.append(Mark(name=rng.choice("XY")))
            else:
                price = rng.choice([None, 1.0, 2.0, 3.0])
                events.append(Stock(name=rng.choice("XY"), price=price, volume=rng.randint(0, 2)))
        expected = ordered([(mm.start, mm.end, mm.variables) for mm in evaluate(pattern, events)])
        found = ordered([(mm.start, mm.end, mm.variables) for mm in query.run(events)])
        assert found == expected, (name, events)
