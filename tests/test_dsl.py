"""The pattern DSL: construction, CEQL-like reprs, and clear errors for misuse.

(The same misuses are mypy errors for typed code: see tests/test_typing.py.)
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import attrs
import numpy as np
import pytest

import pycel
from pycel import Event, Field, PatternError, not_, plus, seq
from pycel.dsl import And, As, Atom, Filter, NotAtom, Or, Plus, Seq, Within
from pycel.language.clauses import split_query
from pycel.language.expr import Attr, Compare, Const


class Stock(Event):
    name: Field[str]
    price: Field[float]
    volume: Field[int]
    time: Field[int]
    ts: Field[pycel.Timestamp]
    active: Field[bool]


class Buy(Stock): ...


class Sell(Stock): ...


class Quote(Event):
    __event_name__ = "QUOTE"
    bid: Field[float]


s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")

E = Any  # the tests below build deliberately ill-typed expressions


# -- event types --------------------------------------------------------------------------
def test_fields_are_collected_and_inherited() -> None:
    assert Stock.__fields__ == {
        "name": "str",
        "price": "float",
        "volume": "int",
        "time": "int",
        "ts": "time",
        "active": "bool",
    }
    assert Buy.__fields__ == Stock.__fields__
    assert Quote.__fields__ == {"bid": "float"}


def test_class_attribute_is_a_typed_expression_instance_attribute_is_the_value() -> None:
    assert isinstance(Stock.price, Attr)
    assert (Stock.price.var, Stock.price.name, Stock.price.dtype, Stock.price.owner) == (
        None,
        "price",
        "float",
        "Stock",
    )
    assert Buy.price.owner == "Buy"
    e = Buy(name="X", price=2.5)
    assert (e.name, e.price, e.volume) == ("X", 2.5, None)
    assert repr(e) == "Buy(name='X', price=2.5)"
    assert e == Buy(name="X", price=2.5)
    assert e != Sell(name="X", price=2.5)


def test_event_name_override() -> None:
    assert repr(Quote.pattern()) == "QUOTE"
    assert repr(Quote(bid=1.0)) == "QUOTE(bid=1.0)"


def test_annotations_as_objects_and_dynamic_types() -> None:
    """Classes built without ``from __future__ import annotations`` and by ``type()``."""
    Obj = type("Obj", (Event,), {"__annotations__": {"a": Field[int], "t": Field[pycel.Timestamp]}})
    assert Obj.__fields__ == {"a": "int", "t": "time"}
    Sub = type("Sub", (Obj,), {})
    assert Sub.__fields__ == {"a": "int", "t": "time"}
    assert repr(seq(Obj, Sub)) == "(Obj ; Sub)"


def test_event_errors() -> None:
    with pytest.raises(PatternError, match=r"Buy has no attribute 'nme'; it has \['active', "):
        Buy(nme="X")
    with pytest.raises(PatternError, match=r"Field\[list\] is not supported"):
        type("Bad", (Event,), {"__annotations__": {"a": Field[list]}})  # type: ignore[type-var]
    with pytest.raises(PatternError, match="Clash.price is str but a base class declares it float"):
        type("Clash", (Stock,), {"__annotations__": {"price": Field[str]}})
    with pytest.raises(PatternError, match="pycel.Event itself is not an event type"):
        seq(Event, Buy)


def test_alias() -> None:
    assert repr(s) == "alias(Sell, 's')"
    assert repr(s.price) == "s.price"
    assert s.price.owner == "Sell" and s.price.var == "s"
    assert s.pattern() == Atom(Sell, "s")
    with pytest.raises(PatternError, match="needs an Event subclass"):
        pycel.alias(int, "x")  # type: ignore[type-var]
    with pytest.raises(PatternError, match="must be an identifier"):
        pycel.alias(Sell, "not a name")
    with pytest.raises(AttributeError):
        s.no_such_attribute  # noqa: B018


# -- construction -------------------------------------------------------------------------
def test_operators_build_the_same_nodes_as_functions() -> None:
    assert Buy >> Sell == seq(Buy, Sell) == Seq(Atom(Buy, "Buy"), Atom(Sell, "Sell"))
    assert seq(Buy, Sell, Quote) == Seq(Seq(Atom(Buy, "Buy"), Atom(Sell, "Sell")), Atom(Quote, "QUOTE"))
    assert (Buy | Sell) == Or(Atom(Buy, "Buy"), Atom(Sell, "Sell"))
    assert (Buy & Sell) == And(Atom(Buy, "Buy"), Atom(Sell, "Sell"))
    assert (s | Buy) == Or(Atom(Sell, "s"), Atom(Buy, "Buy"))
    assert (s & b) == And(Atom(Sell, "s"), Atom(Buy, "b"))
    assert (s >> b) == seq(s, b)
    assert plus(Buy) == Plus(Atom(Buy, "Buy"))
    assert plus(Buy, contiguous=True) == Plus(Atom(Buy, "Buy"), contiguous=True)
    assert seq(Buy, Sell, contiguous=True) == Seq(Atom(Buy, "Buy"), Atom(Sell, "Sell"), True)
    assert Buy.as_("x") == Atom(Buy, "x") == Buy.pattern().as_("x")
    assert seq(Buy, Sell).as_("bs") == As(seq(Buy, Sell), "bs")
    # reflected operators with a pattern on the right
    assert Buy >> seq(Sell) == seq(Buy, Sell)
    assert (Buy | seq(Sell)) == Or(Atom(Buy, "Buy"), Atom(Sell, "Sell"))


def test_patterns_are_immutable_values() -> None:
    p = seq(Buy, Sell).where(Buy.price > 1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.inner = Buy.pattern()  # type: ignore[misc, attr-defined]
    assert p == seq(Buy, Sell).where(Buy.price > 1)
    assert hash(p) == hash(seq(Buy, Sell).where(Buy.price > 1))
    assert p != seq(Buy, Sell).where(Buy.price > 2)
    assert p != seq(Buy, Sell).where(Buy.price > 1.0)  # int and float constants differ
    assert not_(Buy.where(Buy.price > 1)) == not_(Buy.where(Buy.price > 1))
    assert len({p, seq(Buy, Sell).where(Buy.price > 1)}) == 1


def test_where_binds_class_attributes() -> None:
    # On an atom, class-level attributes (of the type or a base) read that atom.
    assert Buy.where(Buy.price > 1).predicate.left.var == "Buy"  # type: ignore[attr-defined]
    assert Buy.where(Stock.price > 1).predicate.left.var == "Buy"  # type: ignore[attr-defined]
    assert b.where(Buy.price > 1).predicate.left.var == "b"  # type: ignore[attr-defined]
    # On any other pattern, they read the occurrence named after their class.
    p = seq(Stock, Buy).where(Stock.price > Buy.price, post_filter=True)
    assert isinstance(p, Filter) and p.post_filter
    assert repr(p.predicate) == "Stock.price > Buy.price"
    assert {a.var for a in (p.predicate.left, p.predicate.right)} == {"Stock", "Buy"}  # type: ignore[attr-defined]


def test_filter_alias() -> None:
    assert Buy.filter(Buy.price > 1) == Buy.where(Buy.price > 1)
    assert seq(Buy, Sell).filter(Buy.price > 1) == seq(Buy, Sell).where(Buy.price > 1)


def test_not_atom() -> None:
    n = not_(Buy)
    assert n == NotAtom(Buy, "not_Buy", None)
    filtered = not_(b.where(b.price > 3), "nb")
    assert isinstance(filtered, NotAtom)
    assert filtered.var == "nb"
    assert repr(filtered.predicate) == "nb.price > 3"


def test_expression_nodes() -> None:
    e = Stock.price > 3
    assert isinstance(e, Compare) and e.op == ">" and isinstance(e.right, Const)
    assert e.dtype == "bool"
    assert (Stock.price + Stock.volume).dtype == "float"
    assert (Stock.volume + 1).dtype == "int"
    assert (Stock.volume / 2).dtype == "float"
    assert (Stock.volume - Stock.volume).variables() == {None}
    assert (s.price > b.price).variables() == {"s", "b"}
    assert (Stock.price > 3).bind("x").variables() == {"x"}


# -- reprs (CEQL-like) ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (Buy.pattern(), "Buy"),
        (Buy.as_("x"), "Buy AS x"),
        (seq(Buy, Sell), "(Buy ; Sell)"),
        (seq(Buy, Sell, contiguous=True), "(Buy : Sell)"),
        (Buy | Sell, "(Buy OR Sell)"),
        (Buy & Sell, "(Buy AND Sell)"),
        (plus(Buy), "Buy+"),
        (plus(Buy, contiguous=True), "Buy:+"),
        (seq(Buy, Sell).as_("bs"), "((Buy ; Sell) AS bs)"),
        (Buy.where(Buy.price > 10), "(Buy FILTER Buy.price > 10)"),
        (
            s.where((s.name == "INTC") & (s.price <= 2.5)),
            "(Sell AS s FILTER (s.name = 'INTC' AND s.price <= 2.5))",
        ),
        (
            Buy.where((Buy.volume == 1) | ~(Buy.active == True)),  # noqa: E712
            "(Buy FILTER (Buy.volume = 1 OR NOT Buy.active = TRUE))",
        ),
        (Buy.where(Buy.name.isin(["A", "B"])), "(Buy FILTER Buy.name IN {'A', 'B'})"),
        (Buy.where(Buy.volume.not_in([1])), "(Buy FILTER Buy.volume NOT IN {1})"),
        (Buy.where(Buy.name.like("IN%")), "(Buy FILTER Buy.name LIKE 'IN%')"),
        (Buy.where(Buy.price * 2 != Buy.volume), "(Buy FILTER (Buy.price * 2) != Buy.volume)"),
        (
            Buy.where(1 - Buy.price / 2 > 10 % Buy.volume),
            "(Buy FILTER (1 - (Buy.price / 2)) > (10 % Buy.volume))",
        ),
        (
            Buy.where(2 * Buy.price + 0.5 < 3 / Buy.price),
            "(Buy FILTER ((2 * Buy.price) + 0.5) < (3 / Buy.price))",
        ),
        (not_(Buy), "NOT(Buy) AS not_Buy"),
        (seq(Buy, Sell).within(events=5), "(Buy ; Sell) WITHIN 5 EVENTS"),
        (seq(Buy, Sell).within(seconds=10, on=Stock.time), "(Buy ; Sell) WITHIN 10 seconds [time]"),
        (seq(Buy, Sell).within(2.5, on=Stock.price), "(Buy ; Sell) WITHIN 2.5 [price]"),
        (seq(Buy, Sell).within(timedelta(minutes=1), on=Stock.ts), "(Buy ; Sell) WITHIN 60 seconds [ts]"),
        (seq(Buy, Sell).partition_by(Stock.name, "volume"), "(Buy ; Sell) PARTITION BY [name], [volume]"),
        (seq(Buy, Sell).select("Buy"), "SELECT Buy FROM ((Buy ; Sell))"),
        (seq(Buy, Sell).strategy("max"), "SELECT MAX * FROM ((Buy ; Sell))"),
        (seq(Buy, Sell).consume("any"), "(Buy ; Sell) CONSUME BY ANY"),
        (seq(Buy, Sell).limit(3), "(Buy ; Sell) LIMIT 3"),
    ],
)
def test_repr(pattern: pycel.Pattern, text: str) -> None:
    assert repr(pattern) == text


def test_repr_of_the_design_example() -> None:
    p = (
        seq(s.where(s.name == "INTC"), b.where((b.name == "RIMM") & (b.price > 10)))
        .within(seconds=10, on=Stock.time)
        .partition_by(Stock.name)
    )
    assert repr(p) == (
        "((Sell AS s FILTER s.name = 'INTC') ; (Buy AS b FILTER (b.name = 'RIMM' AND b.price > 10)))"
        " WITHIN 10 seconds [time] PARTITION BY [name]"
    )


# -- query clauses ------------------------------------------------------------------------
def test_split_query() -> None:
    spec = split_query(
        seq(Buy, Sell)
        .within(events=5)
        .partition_by(Stock.name)
        .select("Buy")
        .strategy("next")
        .consume("partition")
        .limit(3)
    )
    assert spec.body == seq(Buy, Sell)
    assert isinstance(spec.window, Within) and (spec.window.size, spec.window.unit) == (5.0, "events")
    assert spec.partition == ("name",)
    assert spec.select == ("Buy",)
    assert (spec.strategy, spec.consume, spec.limit) == ("next", "partition", 3)
    bare = split_query(Buy)
    assert (bare.body, bare.window, bare.partition, bare.select) == (Buy.pattern(), None, (), None)
    assert (bare.strategy, bare.consume, bare.limit) == ("all", "none", None)


def test_window_spec() -> None:
    w = split_query(seq(Buy, Sell).within(seconds=timedelta(milliseconds=1500), on=Stock.ts)).window
    assert w is not None and (w.size, w.unit, w.on) == (1.5, "seconds", "ts")
    w = split_query(seq(Buy, Sell).within(7, on=Stock.time)).window
    assert w is not None and (w.size, w.unit, w.on) == (7.0, "units", "time")


@pytest.mark.parametrize(
    ("kwargs", "seconds"),
    [
        ({"milliseconds": 1500}, 1.5),
        ({"minutes": 2}, 120.0),
        ({"minutes": 0.5}, 30.0),
        ({"hours": 0.1}, 360.0),  # rounded once: not 0.1 * 3600 = 360.00000000000006
        ({"hours": 0}, 0.0),
    ],
)
def test_window_in_other_time_units(kwargs: dict[str, float], seconds: float) -> None:
    """milliseconds=, minutes= and hours= are seconds= in those units: the same node."""
    pattern = seq(Buy, Sell).within(on=Stock.ts, **kwargs)
    assert pattern == seq(Buy, Sell).within(seconds=seconds, on=Stock.ts)


def test_clauses_only_at_the_top() -> None:
    with pytest.raises(PatternError, match=r"within\(\) applies to a whole query.*outermost"):
        split_query(seq(Buy.pattern().within(events=3), Sell))
    with pytest.raises(PatternError, match=r"limit\(\) applies to a whole query"):
        split_query(plus(seq(Buy, Sell).limit(1)))
    with pytest.raises(PatternError, match=r"limit\(\) is given twice"):
        split_query(seq(Buy, Sell).limit(1).within(events=2).limit(2))


# -- misuse: clear PatternErrors ----------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "message"),
    [
        # comparing attributes with values or attributes of another type
        (lambda: Stock.name > 3.5, "cannot compare Stock.name (str) with 3.5 (float)"),
        (lambda: Stock.price == "x", "cannot compare Stock.price (float) with 'x' (str)"),
        (lambda: Stock.price < Stock.name, "cannot compare Stock.price (float) with Stock.name (str)"),
        (lambda: Stock.ts > 3, "cannot compare Stock.ts (time) with 3 (int)"),
        (lambda: Stock.name.isin(["a", 1]), "Stock.name (str) cannot be compared with 1"),
        (lambda: Stock.price.between("a", "z"), "cannot compare Stock.price"),
        (lambda: Stock.price == None, "unsupported constant None"),  # noqa: E711
        (lambda: Stock.price == [1], "unsupported constant"),
        (lambda: Stock.name.isin("AB"), "isin() takes a collection of values, not the string 'AB'"),
        (lambda: Stock.name + 1, "arithmetic '+' needs numbers, but Stock.name is str"),
        (lambda: 1 - Stock.name, "arithmetic '-' needs numbers, but Stock.name is str"),
        (lambda: Stock.price.like("1%"), "like() needs a str expression, but Stock.price is float"),
        (lambda: Stock.name.matches(3), "matches() needs a str pattern"),
        # a pattern where a value is expected, a predicate where a pattern is expected
        (lambda: Stock.price == Buy, "is a pattern, but a value or attribute was expected"),
        (lambda: seq(Stock.price > 3), "is a predicate, but a pattern was expected; use .where()"),
        (lambda: Buy >> (Stock.price > 3), "is a predicate, but a pattern was expected"),
        (lambda: plus(Stock.price > 3), "is a predicate, but a pattern was expected"),
        (lambda: seq(Buy, 3), "3 is not a pattern"),
        (lambda: seq(), "seq() needs at least one pattern"),
        # a value or pattern where a predicate is expected
        (lambda: Buy.where(Buy.price), "where() needs a predicate, got Buy.price"),
        (lambda: Buy.where(seq(Sell)), "where() needs a predicate"),
        (lambda: seq(Buy, Sell).where(Buy.price + 1), "where() needs a predicate"),
        (lambda: ~Stock.price, "is a float expression, but a predicate was expected"),
        (lambda: Stock.price & (Stock.volume > 1), "is a float expression, but a predicate"),
        # Python's and/or/not/chained comparisons need bool(): use &, |, ~
        (lambda: (Stock.price > 1) and (Stock.price < 3), "use &, | and ~ instead of and/or/not"),
        (lambda: (Stock.price > 1) or (Stock.price < 3), "use &, | and ~ instead of and/or/not"),
        (lambda: not (Stock.price > 1), "not a Python bool"),
        (lambda: 1 < Stock.price < 3, "not a Python bool"),
        (lambda: seq(Buy, Sell) and Buy, "is a pattern, not a Python bool: use | and &"),
        # names
        (lambda: Buy.as_("1x"), "variable name '1x' must be an identifier"),
        (lambda: seq(Buy, Sell).as_(""), "must be an identifier"),
        (lambda: seq(Buy, Sell).select(), "select() needs at least one variable"),
        (lambda: seq(Buy, Sell).select(3), "expected a variable name or alias, got 3"),
        (lambda: seq(Buy, Sell).partition_by(), "partition_by() needs at least one attribute"),
        (lambda: seq(Buy, Sell).partition_by(Stock.price + 1), "partition_by() takes attributes"),
        (lambda: not_(seq(Buy, Sell)), "not_() takes one event type"),
        (lambda: not_(Buy, "no good"), "must be an identifier"),
        # query clauses
        (lambda: seq(Buy, Sell).strategy("greedy"), "unknown strategy 'greedy'"),
        (lambda: seq(Buy, Sell).consume("all"), "unknown consumption policy 'all'"),
        (lambda: seq(Buy, Sell).limit(0), "limit() needs a positive int, at most 2**63 - 1"),
        (
            lambda: seq(Buy, Sell).limit(2**63),
            "at most 2**63 - 1 (9223372036854775807); got 9223372036854775808",
        ),
        (lambda: seq(Buy, Sell).limit(2.0), "limit() needs a positive int"),
        (lambda: seq(Buy, Sell).limit(True), "limit() needs a positive int"),
    ],
)
def test_misuse_raises_pattern_error(build: Any, message: str) -> None:
    with pytest.raises(PatternError, match=re.escape(message)):
        build()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of: a size, events=, seconds="),
        ({"size": 3, "events": 3}, "exactly one of"),
        ({"events": 3, "seconds": 3}, "exactly one of"),
        ({"events": -1}, "needs a non-negative int, at most 2**53 (9007199254740992); got -1"),
        ({"events": 2.5}, "needs a non-negative int, at most 2**53 (9007199254740992); got 2.5"),
        ({"events": True}, "; got True"),
        ({"events": 2**63}, "at most 2**53 (9007199254740992); got 9223372036854775808"),
        ({"events": 3, "on": Stock.time}, "counts positions; it takes no on="),
        ({"size": 3}, "a time window needs on=<time attribute>"),
        ({"seconds": 3}, "a time window needs on="),
        ({"seconds": 3, "on": "time"}, "a time window needs on="),
        ({"seconds": 3, "on": Stock.time + 1}, "a time window needs on="),
        ({"size": 3, "on": Stock.name}, "a str attribute is not a time"),
        ({"size": 3, "on": Stock.active}, "a bool attribute is not a time"),
        ({"size": 3, "on": Stock.ts}, "is a timestamp: give the window as seconds= or a timedelta"),
        (
            {"size": -1, "on": Stock.time},
            "non-negative number or timedelta (finite, at most 1.798e+308), got -1",
        ),
        ({"seconds": float("inf"), "on": Stock.time}, "(finite, at most 1.798e+308), got inf"),
        ({"size": float("inf"), "on": Stock.time}, "(finite, at most 1.798e+308), got inf"),
        (
            {"size": 10**400, "on": Stock.time},
            "at most 1.798e+308), got 1000000000…0000000000 (401 characters)",
        ),
        ({"seconds": timedelta(seconds=-1), "on": Stock.ts}, "non-negative number or timedelta"),
        ({"seconds": float("nan"), "on": Stock.time}, "non-negative number"),
        (
            {"size": "5", "on": Stock.time},
            "non-negative number or timedelta (finite, at most 1.798e+308), got '5'",
        ),
        ({"size": datetime(2020, 1, 1), "on": Stock.time}, "non-negative number or timedelta"),
        (
            {"minutes": 1, "seconds": 60, "on": Stock.ts},
            "exactly one of: a size, events=, seconds=, milliseconds=",
        ),
        (
            {"hours": -1, "on": Stock.ts},
            "within(hours=...) needs a non-negative number, at most 1.798e+308 seconds; got -1",
        ),
        (
            {"minutes": timedelta(minutes=1), "on": Stock.ts},
            "within(minutes=...) needs a non-negative number",
        ),
        ({"milliseconds": float("nan"), "on": Stock.ts}, "within(milliseconds=...) needs a non-negative"),
        (
            {"hours": 1e307, "on": Stock.ts},
            "within(hours=...) needs a non-negative number, at most 1.798e+308 seconds; got 1e+307",
        ),
        ({"minutes": 1}, "a time window needs on="),
    ],
)
def test_bad_window_arguments(kwargs: dict[str, Any], message: str) -> None:
    size = kwargs.pop("size", None)
    with pytest.raises(PatternError, match=re.escape(message)):
        seq(Buy, Sell).within(size, **kwargs)


def test_error_messages_are_plain_sentences() -> None:
    """The message names the offending expression in the DSL's own notation."""
    with pytest.raises(PatternError) as err:
        s.where(s.price > "cheap")
    assert str(err.value) == "cannot compare s.price (float) with 'cheap' (str)"
    assert isinstance(err.value, TypeError)  # PatternError is also a TypeError
    assert re.search(r"\bs\.price\b", str(err.value))


# -- clear errors (issue 12 §7) ------------------------------------------------------------


def test_unknown_attribute_of_an_alias_names_the_type_and_its_attributes() -> None:
    q = pycel.alias(Quote, "q")
    with pytest.raises(PatternError) as err:
        q.price  # noqa: B018
    assert str(err.value) == (
        "'q' is an occurrence of event type QUOTE, which has no attribute 'price'; its attributes are ['bid']"
    )
    assert isinstance(err.value, AttributeError)  # hasattr() and getattr(x, n, default) work
    assert not hasattr(q, "price") and getattr(q, "price", None) is None
    assert q.within(events=2) == Within(Atom(Quote, "q"), 2.0, "events", None)  # pattern methods still work


def test_invalid_regular_expression_is_a_pattern_error() -> None:
    with pytest.raises(PatternError, match=r"matches\('\('\): invalid regular expression: missing \)"):
        Stock.name.matches("(")


def test_hand_built_clauses_are_checked_too() -> None:
    """CEQL and code that builds nodes directly get the same range checks as within()/limit()."""
    with pytest.raises(PatternError, match="a limit needs a whole number from 1 to 2"):
        pycel.dsl.Limit(Atom(Buy, "Buy"), 2**63)
    with pytest.raises(PatternError, match="a count window needs a whole number of events from 0 to 2"):
        Within(Atom(Buy, "Buy"), 2.0**63, "events", None)
    with pytest.raises(PatternError, match="a count window needs a whole number"):
        Within(Atom(Buy, "Buy"), 1.5, "events", None)
    with pytest.raises(PatternError, match="a time window needs a finite size"):
        Within(Atom(Buy, "Buy"), float("nan"), "seconds", "time")
    with pytest.raises(PatternError, match="window unit 'days'"):
        Within(Atom(Buy, "Buy"), 1.0, "days", "time")


def test_largest_limit_and_windows_run_like_the_reference() -> None:
    events = [Sell(name="A", time=0), Buy(name="A", time=5), Buy(name="A", time=9)]
    for pattern in [
        seq(s, b).limit(2**63 - 1),
        seq(s, b).within(events=2**53),
        seq(s, b).within(seconds=1e300, on=Stock.time),
        seq(s, b).within(minutes=0.15, on=Stock.time),  # 9 seconds: both buys
        seq(s, b).within(1.7e308, on=Stock.time),
    ]:
        expected = pycel.reference.evaluate(pattern, events).keys()
        assert len(expected) == 2 and pycel.compile(pattern).run(events).keys() == expected


def test_numpy_scalars_are_constants() -> None:
    """s.volume > np.int64(3) (what reading an array gives) was "unsupported constant"
    (found by a probe); numpy scalars are the Python values they hold."""
    s = pycel.alias(Sell, "s")
    assert repr(s.volume > np.int64(3)) == repr(s.volume > 3)
    assert repr(s.price >= np.float64(1.5)) == repr(s.price >= 1.5)
    assert repr(s.volume.isin(np.array([1, 2]))) == repr(s.volume.isin([1, 2]))
    assert repr(s.name.isin(np.array(["A", "B"]))) == repr(s.name.isin(["A", "B"]))
    assert type((s.volume > np.int64(3)).right.value) is int  # type: ignore[attr-defined]
    events = [Sell(name="A", price=2.0, volume=v) for v in (1, 5)]
    pattern = s.where((s.volume > np.int64(3)) & s.name.isin(np.array(["A"])))
    assert pycel.compile(pattern).run(events).keys() == pycel.reference.evaluate(pattern, events).keys()
    assert len(pycel.compile(pattern).run(events)) == 1
