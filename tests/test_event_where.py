"""``Event.where`` (the class form, ``Bid.where(pred)``) takes ``post_filter=`` like every
other ``where``: the same pattern as the alias form, the same matches as the reference
evaluator, the same rejections, and the same static type (checked by mypy --strict)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_typing import mypy_setup, run_mypy, write_snippets  # noqa: F401 (a fixture)

import pycel
from pycel.dsl import Filter, Pattern
from pycel.errors import UnsupportedError


class Quote(pycel.Event):
    x: pycel.Field[int]
    s: pycel.Field[str]
    time: pycel.Field[int]


class Bid(Quote): ...


class Ask(Quote): ...


seq, plus = pycel.seq, pycel.plus


def quotes(n: int, seed: int) -> list[Quote]:
    rng = np.random.default_rng(seed)
    kinds = (Bid, Ask)
    return [
        kinds[int(rng.integers(0, 2))](x=int(rng.integers(0, 4)), s=str(rng.choice(["u", "v"])), time=k // 2)
        for k in range(n)
    ]


def test_class_form_is_the_alias_form() -> None:
    pred = Bid.x > 1
    by_class = Bid.where(pred, post_filter=True)
    assert isinstance(by_class, Filter) and by_class.post_filter
    assert by_class == pycel.alias(Bid, "Bid").where(pred, post_filter=True)
    assert by_class == Bid.filter(pred, post_filter=True)
    assert by_class != Bid.where(pred)  # the default stays a filter on each event
    assert Bid.where(pred) == Bid.where(pred, post_filter=False)


CASES: list[Pattern] = [
    seq(Ask, Bid.where(Bid.x > 1, post_filter=True)).within(events=4),
    seq(Ask.where((Ask.x * 2 > Ask.time % 3) & (Ask.s == "u"), post_filter=True), Bid, Bid.as_("b2")).within(
        events=5
    ),
    # on one branch of an OR: the other branch never binds Bid
    (seq(Ask, Bid.where(Bid.s == "v", post_filter=True)) | seq(Bid.as_("b2"), Ask.as_("a2"))).within(
        events=3
    ),
]


@pytest.mark.parametrize("pattern", CASES, ids=[repr(p)[:70] for p in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_engine_equals_reference(pattern: Pattern, seed: int) -> None:
    events = quotes(60, seed)
    expected = pycel.reference.evaluate(pattern, events)
    got = pycel.compile(pattern).run(events)
    assert len(expected) > 0
    assert len(got) == len(got.keys())
    assert got.keys() == expected.keys()


def test_rejected_like_the_alias_form() -> None:
    """A post-filter inside ``plus`` is refused, with the alias form's message."""
    pred = (Bid.x + Bid.time) % 2 == 0
    messages = []
    by_alias = pycel.alias(Bid, "Bid").where(pred, post_filter=True)
    for filtered in (Bid.where(pred, post_filter=True), by_alias):
        with pytest.raises(UnsupportedError, match="inside plus") as caught:
            pycel.compile(seq(Ask, plus(filtered)).within(events=5))
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_static_type(mypy_setup: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    """mypy --strict accepts the keyword, and rejects a non-bool or a positional one."""
    snippets = {
        "accepted": "p: pycel.Pattern = Buy.where(Buy.price > 1, post_filter=True)",
        "not a bool": 'p = Buy.where(Buy.price > 1, post_filter="yes")',
        "positional": "p = Buy.where(Buy.price > 1, True)",
    }
    paths = write_snippets(tmp_path, snippets)
    _, errors = run_mypy(mypy_setup, list(paths.values()))
    assert paths["accepted"].name not in errors
    assert any(
        'Argument "post_filter" to "where" of "Event" has incompatible type "str"' in message
        for _, message in errors[paths["not a bool"].name]
    )
    assert any("Too many positional arguments" in message for _, message in errors[paths["positional"].name])
