"""Rough edges of writing patterns: slips that are legal but almost surely not meant get a
:class:`pycel.PatternWarning` naming them, and the engine still returns exactly the
reference evaluator's matches."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import pycel
from pycel import ceql
from pycel.cli import main
from pycel.language.checks import PatternWarning


class Reading(pycel.Event):
    sensor: pycel.Field[str]
    value: pycel.Field[float]


class Alarm(pycel.Event):
    level: pycel.Field[int]


class Base(pycel.Event):
    v: pycel.Field[int]


class Keyed(Base):
    key: pycel.Field[str]


r, a = pycel.alias(Reading, "r"), pycel.alias(Alarm, "a")
EVENTS = [Reading(sensor="x", value=1.0), Alarm(level=2), Reading(sensor="x", value=3.0), Alarm(level=1)]


def compiled_with_warnings(pattern: pycel.Pattern) -> tuple[pycel.CompiledQuery, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        query = pycel.compile(pattern)
    return query, [str(w.message) for w in caught if issubclass(w.category, PatternWarning)]


def test_a_partition_key_an_atoms_type_lacks_is_warned() -> None:
    """partition_by(Reading.sensor) over Alarm atoms: an Alarm has no sensor, so it is in
    no partition and seq(r, a) can never match; this compiled silently."""
    pattern = pycel.seq(r, a).partition_by(Reading.sensor)
    query, said = compiled_with_warnings(pattern)
    assert len(said) == 1
    assert "partition_by('sensor')" in said[0] and "['Alarm']" in said[0]
    assert "never match" in said[0]
    with pytest.warns(PatternWarning, match="partition_by"):  # the oracle runs the same checks
        expected = pycel.reference.evaluate(pattern, EVENTS)
    assert query.run(EVENTS).keys() == expected.keys() == set()


def test_an_absence_whose_type_lacks_the_partition_key_is_warned() -> None:
    """seq(r, absent(Alarm), r2) per sensor: an Alarm is in no partition, so it blocks no
    match; the warning says so (not that an atom never matches)."""
    pattern = pycel.seq(r, pycel.absent(Alarm), pycel.alias(Reading, "r2")).partition_by(Reading.sensor)
    query, said = compiled_with_warnings(pattern)
    assert len(said) == 1 and "['Alarm']" in said[0] and "never block a match" in said[0]
    with pytest.warns(PatternWarning, match="never block"):
        expected = pycel.reference.evaluate(pattern, EVENTS)
    assert query.run(EVENTS).keys() == expected.keys() == {(0, 2, (("r", (0,)), ("r2", (2,))))}


def test_no_warning_when_every_atom_can_have_the_key() -> None:
    both = pycel.seq(r, pycel.alias(Reading, "r2")).partition_by(Reading.sensor)
    _, said = compiled_with_warnings(both)
    assert said == []
    # A base type whose subclass declares the key: its atom matches Keyed events.
    keyed = pycel.seq(pycel.alias(Keyed, "k"), pycel.alias(Base, "b")).partition_by(Keyed.key)
    query, said = compiled_with_warnings(keyed)
    assert said == []
    events = [Keyed(v=1, key="p"), Keyed(v=2, key="p"), Base(v=3)]
    found = query.run(events)
    assert found.keys() == pycel.reference.evaluate(keyed, events).keys()
    assert len(found) == 1
    # not_(Alarm) matches events of every other type: no warning for it.
    _, said = compiled_with_warnings(pycel.seq(r, pycel.not_(Alarm)).partition_by(Reading.sensor))
    assert said == []


def test_the_cli_prints_the_partition_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decl = ceql.to_declaration([Reading, Alarm])
    data = tmp_path / "events.csv"
    data.write_text("event_type,sensor,value,level\nReading,x,1.0,\nAlarm,,,2\n")
    code = main(
        [
            "run",
            "-d",
            decl,
            "--query",
            "SELECT * FROM S WHERE Reading AS r ; Alarm AS a PARTITION BY [sensor]",
            str(data),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == ""
    assert "pycel: warning: partition_by('sensor')" in err


# -- event types written like dataclasses ------------------------------------------------------


def test_a_field_default_is_refused() -> None:
    """`qty: Field[int] = 5` was accepted and ignored: Order() had qty null, and a filter
    qty == 5 found nothing."""
    with pytest.raises(pycel.PatternError, match=r"Order\.qty = 5: an attribute takes no default value"):

        class Order(pycel.Event):
            qty: pycel.Field[int] = 5


def test_an_annotation_without_field_is_named_in_the_errors() -> None:
    """`price: float` (no Field) is not an attribute; the errors said only 'its attributes
    are []'. Now they say how to declare it."""

    class Tick(pycel.Event):
        price: float
        venue: pycel.Field[str]

    hint = r"Tick annotates 'price' without pycel\.Field: write price: pycel\.Field\[float\]"
    with pytest.raises(pycel.PatternError, match=hint):
        Tick(price=1.0)
    t = pycel.alias(Tick, "t")
    with pytest.raises(pycel.PatternError, match=hint):
        t.price  # noqa: B018
    with pytest.raises(AttributeError, match=hint):
        Tick.price  # type: ignore[misc]  # noqa: B018
    # The declared attribute works as usual.
    pattern = t.where(t.venue == "X")
    events = [Tick(venue="X"), Tick(venue="Y")]
    assert pycel.compile(pattern).run(events).keys() == pycel.reference.evaluate(pattern, events).keys()
    assert not hasattr(Tick, "nothing")


@pytest.mark.parametrize("parts", [63, 400, 3000])
def test_a_pattern_with_too_many_parts_is_refused_clearly(parts: int) -> None:
    """seq(a, a, ...) nests one level per part: 400 parts ended in a bare RecursionError
    in the planner's passes; any length gets the engine's atom limit in its message."""
    many = pycel.seq(*[r] * parts)
    with warnings.catch_warnings(), pytest.raises(pycel.UnsupportedError, match="at most 62 atoms"):
        warnings.simplefilter("ignore", PatternWarning)  # (r is bound many times over)
        pycel.compile(many)
