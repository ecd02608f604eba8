"""Realistic, fully typed use of pycel's DSL. Must stay clean under ``mypy --strict``
(pyproject's ``[tool.mypy] files`` includes this directory); tests/test_typing.py also
imports it and runs it, so every pattern here is valid at runtime too.

It exercises: event types with every field type, inheritance and ``__event_name__``,
aliases, ``seq``/``>>``/``|``/``&``/``plus``/``not_``, trends (``prev``), ``where`` with comparisons,
connectives, ``isin``/``not_in``/``between``/``like``/``matches`` and arithmetic,
``as_``, every ``within`` form, ``partition_by``, ``select``, ``strategy``, ``consume``,
``limit``, and reading results from ``Matches``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pycel
from pycel import Field, Match, Matches, Pattern, not_, plus, seq


class Stock(pycel.Event):
    name: Field[str]
    price: Field[float]
    volume: Field[int]
    time: Field[int]
    at: Field[pycel.Timestamp]
    halted: Field[bool]


class Buy(Stock): ...


class Sell(Stock): ...


class Halt(pycel.Event):
    __event_name__ = "HALT"
    name: Field[str]
    time: Field[int]
    at: Field[pycel.Timestamp]


def patterns() -> dict[str, Pattern]:
    """One pattern per feature, all well-typed."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    b2 = pycel.alias(Buy, "b2")

    # predicates are Expr[bool]; attributes keep their Python types
    cheap: pycel.Expr[bool] = (b.price < 20.5) & (b.volume >= 100)
    named: pycel.Expr[bool] = b.name.isin(["INTC", "MSFT"]) | b.name.like("A%")
    ranged: pycel.Expr[bool] = b.volume.between(100, 10_000) & ~b.halted
    arithmetic: pycel.Expr[bool] = b.price * b.volume > 1e3
    constant_first: pycel.Expr[bool] = 2 * b.price - 1 > 100 - b.volume / 4
    dated: pycel.Expr[bool] = s.at >= datetime(2024, 1, 1)
    joined: pycel.Expr[bool] = (s.name == b.name) & (s.volume == b.volume)
    previous_price: pycel.Expr[float] = pycel.prev(b).price  # b in the previous iteration
    rising: pycel.Expr[bool] = b.price > previous_price

    # ``Buy | Sell`` must be annotated: mypy reads an unannotated ``x = Buy | Sell``
    # as a type alias (types.UnionType), not as pycel's operator.
    either: Pattern = Buy | Sell

    return {
        "sequence": seq(s.where(s.name == "INTC"), b.where(cheap)),
        "operators": (s >> b) | (b >> s),
        "conjunction": (Buy & Sell).where(Buy.name == Sell.name),
        "either": seq(either, Halt).within(events=10),
        "kleene": seq(s, plus(b.where(named)), Halt.as_("h")).where(b.name == s.name),
        "trend": seq(s, plus(b.where(rising)), Halt),
        "contiguous": seq(s, b, contiguous=True) >> plus(b2, contiguous=True),
        "negation": seq(s, not_(Buy.where(Buy.price > 100), "nb"), b2),
        "filters": b.where(ranged & arithmetic & constant_first & b.name.matches("[A-Z]+")),
        "class attributes": seq(Stock, Halt).where((Stock.price > 1) & (Halt.name == Stock.name)),
        "base attribute on an atom": Buy.where(Stock.price > 1),
        "dates": s.where(dated).within(timedelta(minutes=5), on=Stock.at),
        "correlation": seq(s, b).where(joined).within(seconds=30, on=Stock.time),
        "post filter": seq(s, b).where(s.price < b.price, post_filter=True),
        "window in units": seq(s, b).within(60, on=Stock.time),
        "window in seconds": seq(s, b).within(seconds=timedelta(seconds=90), on=Stock.at),
        "partitioned": seq(Sell, Buy).partition_by(Stock.name, "volume"),
        "projection": seq(s, b, b2).as_("all").select(b, "b2", "all"),
        "strategy": seq(s, plus(b)).strategy("max"),
        "consumption": seq(s, b).partition_by(Stock.name).consume("partition"),
        "limit": seq(s, b).within(events=5).limit(10),
        "everything": (
            seq(s.where(s.price > 10), plus(b), Halt)
            .within(seconds=60, on=Stock.time)
            .partition_by(Stock.name)
            .strategy("last")
            .select(s, "b")
            .consume("any")
            .limit(3)
        ),
    }


def stream() -> list[pycel.Event]:
    t0 = datetime(2024, 1, 1, 9, 30)
    events: list[pycel.Event] = []
    for k in range(6):
        at = t0 + timedelta(seconds=10 * k)
        events.append(Sell(name="INTC", price=10.0 + k, volume=100, time=10 * k, at=at, halted=False))
        events.append(Buy(name="INTC", price=20.0 - k, volume=100, time=10 * k + 5, at=at, halted=False))
    events.append(Halt(name="INTC", time=100, at=t0 + timedelta(minutes=2)))
    return events


def summarize(matches: Matches) -> list[tuple[int, int, dict[str, tuple[int, ...]]]]:
    rows: list[tuple[int, int, dict[str, tuple[int, ...]]]] = []
    for m in matches:
        first: Match = m
        rows.append((first.start, first.end, first.variables))
        # (m["b"] is a KeyError for a query without a variable b)
        positions: tuple[int, ...] = m.variables.get("b", ()) + m.positions()
        assert all(isinstance(p, int) for p in positions)
    return rows


def detect(pattern: Pattern, events: Sequence[pycel.Event]) -> Matches:
    """The reference evaluator (the test oracle)."""
    return pycel.reference.evaluate(pattern, list(events))


def detect_with_engine(pattern: Pattern, events: Sequence[pycel.Event]) -> Matches:
    """The engine (type-checked here; tests/test_typing.py runs only the reference)."""
    query = pycel.compile(pattern)
    return query.run(list(events))


def values() -> tuple[str | None, float | None]:
    """Instance attributes are plain values of the declared types."""
    buy = Buy(name="X", price=2.5)
    name: str | None = buy.name
    price: float = buy.price
    return name, price + 1.0


def main() -> dict[str, int]:
    """Evaluate every pattern on a small stream; the number of matches per pattern."""
    events = stream()
    counts: dict[str, int] = {}
    for label, pattern in patterns().items():
        matches = detect(pattern, events)
        summarize(matches)
        counts[label] = len(matches)
    return counts


if __name__ == "__main__":
    for label, count in main().items():
        print(f"{label}: {count}")
