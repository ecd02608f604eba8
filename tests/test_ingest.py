"""Ingestion: events, dicts, pandas and Arrow to columnar batches; validation errors.

Every DataError names the offending row (0-based) and column, and a failed ``to_batch``
leaves the schema (types, string dictionary) as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import pycel
from pycel import DataError, Event, Field, seq
from pycel.data.ingest import EventBatch, Schema, time_values, to_batch
from pycel.reference import evaluate


class Reading(Event):
    sensor: Field[str]
    value: Field[float]
    count: Field[int]
    ok: Field[bool]
    at: Field[pycel.Timestamp]


class Temp(Reading): ...


class Hum(Reading):
    __event_name__ = "HUMIDITY"


class Door(Event):
    opened: Field[bool]


def schema() -> Schema:
    return Schema.for_types([Reading, Door])


def decoded(batch: EventBatch) -> list[tuple[str, dict[str, Any]]]:
    return [batch.row(k) for k in range(len(batch))]


T0 = datetime(2024, 5, 1, 8, 0, 0, tzinfo=UTC)
NS = 1_000_000_000


# -- schema -------------------------------------------------------------------------------
def test_schema_knows_types_subtypes_and_fields() -> None:
    sch = schema()
    assert set(sch.type_names) == {"Reading", "Temp", "HUMIDITY", "Door"}
    hum = sch.type_names.index("HUMIDITY")
    assert sch.supertypes[hum] == frozenset({"HUMIDITY", "Reading"})
    assert sch.type_fields[hum] == Reading.__fields__
    assert sch.fields == {**Reading.__fields__, "opened": "bool"}


def test_schema_rejects_one_attribute_with_two_types() -> None:
    class Other(Event):
        value: Field[str]

    with pytest.raises(DataError, match="attribute 'value' is str in Other but float"):
        Schema.for_types([Reading, Other])


# -- inputs -------------------------------------------------------------------------------
EXPECTED = [
    ("Temp", {"sensor": "s1", "value": 21.5, "count": 3, "ok": True, "at": T0.timestamp() * NS}),
    ("HUMIDITY", {"sensor": "s2", "value": 40.0, "count": None, "ok": None, "at": (T0.timestamp() + 1) * NS}),
    ("Door", {"opened": False}),
]


def test_event_instances() -> None:
    events = [
        Temp(sensor="s1", value=21.5, count=3, ok=True, at=T0),
        Hum(sensor="s2", value=40, at=T0 + timedelta(seconds=1)),
        Door(opened=False),
    ]
    batch = to_batch(events, schema())
    assert decoded(batch) == EXPECTED
    assert batch.type_name(1) == "HUMIDITY"
    assert batch.offset == 0 and len(batch) == 3


def test_dicts_with_event_type_field() -> None:
    rows = [
        {"event_type": "Temp", "sensor": "s1", "value": 21.5, "count": 3, "ok": True, "at": T0},
        {"event_type": "HUMIDITY", "sensor": "s2", "value": 40, "at": T0 + timedelta(seconds=1)},
        {"event_type": "Door", "opened": False},
    ]
    assert decoded(to_batch(rows, schema())) == EXPECTED


def test_custom_type_column_and_offset() -> None:
    rows = [{"kind": "Door", "opened": True}]
    batch = to_batch(rows, schema(), type_column="kind", offset=10)
    assert batch.offset == 10
    assert batch.event(10) == ("Door", {"opened": True})


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "event_type": ["Temp", "HUMIDITY", "Door"],
            "sensor": ["s1", "s2", None],
            "value": [21.5, 40.0, np.nan],
            "count": [3, None, None],  # pandas turns this into float64 with NaN
            "ok": [True, None, None],
            "at": [T0, T0 + timedelta(seconds=1), pd.NaT],
            "opened": [None, None, False],
        }
    )


def test_pandas_dataframe() -> None:
    assert decoded(to_batch(frame(), schema())) == EXPECTED


def test_arrow_table() -> None:
    table = pa.Table.from_pandas(frame())
    assert decoded(to_batch(table, schema())) == EXPECTED
    assert decoded(to_batch(table.to_batches()[0], schema())) == EXPECTED


def test_frame_with_custom_type_column() -> None:
    df = frame().rename(columns={"event_type": "type"})
    assert decoded(to_batch(df, schema(), type_column="type")) == EXPECTED


def test_columnar_layout() -> None:
    batch = to_batch(frame(), schema())
    assert batch.type_ids.dtype == np.int32
    assert batch.columns["value"].dtype == np.float64
    assert batch.columns["count"].dtype == np.int64
    assert batch.columns["ok"].dtype == np.bool_
    assert batch.columns["at"].dtype == np.int64  # nanoseconds since the epoch (UTC)
    assert batch.columns["sensor"].dtype == np.int32  # dictionary codes
    assert batch.valid["count"].tolist() == [True, False, False]
    assert batch.valid["opened"].tolist() == [False, False, True]


def test_event_name_and_subtype_matching() -> None:
    """``__event_name__`` is the name in data; an atom of a base type matches subtypes."""
    rows = [{"event_type": "HUMIDITY", "value": 1.0}, {"event_type": "Temp", "value": 2.0}]
    assert [m.positions() for m in evaluate(Hum, rows)] == [(0,)]
    assert [m.positions() for m in evaluate(Reading, rows)] == [(0,), (1,)]
    with pytest.raises(DataError, match="unknown event type 'Hum'"):
        to_batch([{"event_type": "Hum"}], schema())


def test_dynamic_event_types() -> None:
    class DynBase(Event):
        x: Field[int]

    t0 = type("Dyn0", (DynBase,), {})
    t1 = type("Dyn1", (DynBase,), {"__event_name__": "one"})
    batch = to_batch([t0(x=1), t1(x=2)], Schema.for_types([DynBase]))
    assert decoded(batch) == [("Dyn0", {"x": 1}), ("one", {"x": 2})]
    # types defined after the schema are found (by class for instances, by name for dicts)
    t2 = type("T2_dynamic_ingest", (DynBase,), {})
    sch = Schema.for_types([t0])
    assert decoded(to_batch([t2(x=3), {"event_type": "T2_dynamic_ingest", "x": 4}], sch)) == [
        ("T2_dynamic_ingest", {"x": 3}),
        ("T2_dynamic_ingest", {"x": 4}),
    ]
    assert [m.positions() for m in evaluate(seq(t0, t1), [t0(x=0), t2(x=0), t1(x=0)])] == [(0, 2)]


def test_instances_of_types_with_clashing_names_elsewhere() -> None:
    """An instance's type comes from its class, even when another class (here, defined in
    a function) has the same name."""

    def make() -> type[Event]:
        class Door(Event):
            width: Field[float]

        return Door

    other_door = make()
    assert decoded(to_batch([Door(opened=True)], Schema())) == [("Door", {"opened": True})]
    with pytest.raises(DataError, match="two different event types are named 'Door'") as err:
        to_batch([Door(opened=True), other_door(width=1.0)], Schema())
    assert (err.value.row, err.value.column) == (1, "event_type")


# -- values -------------------------------------------------------------------------------
def test_string_dictionary_encoding() -> None:
    sch = schema()
    b1 = to_batch([Temp(sensor="a"), Temp(sensor="b"), Temp(sensor="a"), Temp()], sch)
    assert b1.columns["sensor"].tolist() == [0, 1, 0, -1]
    assert b1.valid["sensor"].tolist() == [True, True, True, False]
    assert sch.strings == ["a", "b"]
    assert sch.string_codes == {"a": 0, "b": 1}
    # codes are stable across batches of one schema; new strings get new codes
    b2 = to_batch([Temp(sensor="c"), Temp(sensor="a")], sch, offset=4)
    assert b2.columns["sensor"].tolist() == [2, 0]
    assert sch.strings == ["a", "b", "c"]
    assert b2.value("sensor", 0) == "c"


def test_timestamps() -> None:
    naive = datetime(2024, 5, 1, 8, 0, 0)  # naive datetimes are taken as UTC
    paris = ZoneInfo("Europe/Paris")
    aware = datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=paris)
    batch = to_batch([Temp(at=naive), Temp(at=aware), Temp(at=5)], schema())
    assert batch.columns["at"].tolist() == [
        int(T0.timestamp()) * NS,
        int(T0.timestamp()) * NS + 123_456_000,  # 10:00 CEST is 08:00 UTC
        5,  # an int is taken as nanoseconds
    ]
    before_epoch = to_batch([Temp(at=datetime(1969, 12, 31, 23, 59, 59))], schema())
    assert before_epoch.columns["at"].tolist() == [-NS]


@pytest.mark.parametrize("tz", [None, "UTC"])
def test_empty_and_all_null_datetime_columns(tz: str | None) -> None:
    """An empty frame (or Arrow table) with a datetime64 time column raised numpy's
    DTypePromotionError; now no events. All NaT: no values (a window needs them: DataError)."""
    dtype = f"datetime64[ns, {tz}]" if tz else "datetime64[ns]"
    a, b = pycel.alias(Temp, "a"), pycel.alias(Temp, "b")
    query = pycel.compile(seq(a, b).within(seconds=5, on=Reading.at))
    empty = pd.DataFrame({"event_type": pd.Series([], dtype=object), "at": pd.Series([], dtype=dtype)})
    assert len(query.run(empty)) == 0 and len(query.stream().push(empty)) == 0
    table = pa.table({"event_type": pa.array([], pa.string()), "at": pa.array([], pa.timestamp("ns", tz=tz))})
    assert len(query.run(table)) == 0
    nat = pd.DataFrame({"event_type": ["Temp", "Temp"], "at": pd.Series([pd.NaT, pd.NaT], dtype=dtype)})
    assert to_batch(nat, schema()).valid["at"].tolist() == [False, False]
    with pytest.raises(DataError, match="no value for the window's time attribute"):
        query.run(nat)


def test_numeric_coercions() -> None:
    batch = to_batch(
        [
            Temp(count=np.int32(4), value=3),  # numpy scalars; an int is a valid float
            Temp(count=5.0, value=np.float32(0.5)),  # an integral float is a valid int
            Temp(ok=np.bool_(True)),
        ],
        schema(),
    )
    assert decoded(batch)[0][1]["count"] == 4
    assert decoded(batch)[0][1]["value"] == 3.0
    assert decoded(batch)[1][1]["count"] == 5
    assert decoded(batch)[1][1]["value"] == 0.5
    assert decoded(batch)[2][1]["ok"] is True


def test_nulls() -> None:
    batch = to_batch(
        [Temp(value=float("nan"), count=None), Temp(at=pd.NaT), Temp(at=np.datetime64("NaT"))],
        schema(),
    )
    assert all(v is None for _, row in decoded(batch) for v in row.values())


# -- errors -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "message", "row", "column"),
    [
        # unknown event type
        ([Door(), {"event_type": "Window"}], "unknown event type 'Window'", 1, "event_type"),
        (pd.DataFrame({"event_type": ["Door", "Window"]}), "unknown event type 'Window'", 1, "event_type"),
        # unknown attribute
        ([{"event_type": "Door", "opened": True, "colour": "red"}], "has no attribute 'colour'", 0, "colour"),
        # (a key that is not a string among them: sorted with the others, not a TypeError)
        ([{"event_type": "Door", 7: True, "colour": "red"}], "has no attribute 'colour'", 0, "colour"),
        ([Door(), {"event_type": "Door", "value": 1.0}], "Door has no attribute 'value'", 1, "value"),
        (
            pd.DataFrame({"event_type": ["Door", "Door"], "colour": [None, "red"]}),
            "unknown attribute 'colour'",
            1,
            "colour",
        ),
        # wrong type
        ([Temp(count=1), Temp(count="2")], "expected int, got '2' (str)", 1, "count"),
        ([{"event_type": "Temp", "value": "hot"}], "expected float, got 'hot' (str)", 0, "value"),
        ([Temp(count=2.5)], "expected int, got 2.5 (float)", 0, "count"),
        ([Temp(count=True)], "expected int, got True (bool)", 0, "count"),
        ([Temp(ok=1)], "expected bool, got 1 (int)", 0, "ok"),
        ([Temp(sensor=3)], "expected str, got 3 (int)", 0, "sensor"),
        ([Temp(at="2024-05-01")], "expected time, got '2024-05-01' (str)", 0, "at"),
        (pd.DataFrame({"event_type": ["Temp", "Temp"], "count": ["1", "x"]}), "expected int", 0, "count"),
        (pa.table({"event_type": ["Door", "Temp"], "sensor": [None, 7]}), "expected str, got", 1, "sensor"),
        # malformed rows
        ([Door(), {"opened": True}], "missing the event type field 'event_type'", 1, None),
        ([Door(), 42], "expected an Event or a dict, got int", 1, None),
    ],
)
def test_errors_name_row_and_column(data: Any, message: str, row: int | None, column: str | None) -> None:
    with pytest.raises(DataError) as err:
        to_batch(data, schema())
    assert message in str(err.value)
    assert (err.value.row, err.value.column) == (row, column)
    where = ", ".join(
        [f"row {row}"] * (row is not None) + [f"column {column!r}"] * (column is not None)
    )
    assert str(err.value).endswith(f"({where})")


def test_missing_type_column_in_a_frame() -> None:
    with pytest.raises(DataError) as err:
        to_batch(pd.DataFrame({"opened": [True]}), schema())
    assert "missing the event type column 'event_type'" in str(err.value)


def test_time_attribute_missing_or_going_backwards() -> None:
    sch = schema()
    batch = to_batch([Temp(at=T0), Temp(at=T0), Door(opened=True)], sch)
    with pytest.raises(DataError, match="event of type Door has no value for the window's time") as err:
        time_values(batch, "at")
    assert (err.value.row, err.value.column) == (2, "at")

    batch = to_batch([Temp(at=T0), Temp(at=T0 + timedelta(seconds=1)), Temp(at=T0)], sch)
    with pytest.raises(DataError) as err:
        time_values(batch, "at")
    assert (err.value.row, err.value.column) == (2, "at")
    assert "time goes backwards: 2024-05-01T08:00:00+00:00 after 2024-05-01T08:00:01+00:00" in str(err.value)

    # against the last time of the previous batch
    numeric = to_batch([Temp(count=3), Temp(count=4)], sch)
    assert time_values(numeric, "count", previous=3).tolist() == [3, 4]
    with pytest.raises(DataError, match="time goes backwards: 3 after 5") as err:
        time_values(numeric, "count", previous=5)
    assert (err.value.row, err.value.column) == (0, "count")


def test_time_errors_through_a_window() -> None:
    p = seq(Temp, Temp.as_("t2")).within(seconds=5, on=Reading.at)
    with pytest.raises(DataError) as err:
        evaluate(p, [Temp(at=T0), Temp(at=T0 - timedelta(seconds=1))])
    assert (err.value.row, err.value.column) == (1, "at")
    with pytest.raises(DataError) as err:
        evaluate(p, pd.DataFrame({"event_type": ["Temp", "Temp"], "at": [T0, pd.NaT]}))
    assert (err.value.row, err.value.column) == (1, "at")


def test_failed_to_batch_leaves_the_schema_unchanged() -> None:
    class LateType(Reading): ...

    sch = Schema.for_types([Door])
    to_batch([{"event_type": "Door", "opened": True}], sch)
    before = sch.copy()
    bad = [
        LateType(sensor="new string"),  # a type and a string the schema has not seen
        {"event_type": "Temp", "sensor": "another"},
        {"event_type": "Temp", "count": "not a number"},
    ]
    with pytest.raises(DataError):
        to_batch(bad, sch)
    assert sch == before
    assert "LateType" not in sch.type_names and sch.strings == []
    # the same data without the bad row goes in, and then the schema has grown
    to_batch(bad[:2], sch)
    assert "LateType" in sch.type_names and sch.strings == ["new string", "another"]


# -- missing and extra data (docs/data.md) ------------------------------------------------
def test_a_column_the_query_reads_must_be_in_a_columnar_input() -> None:
    """Absent is not null: a DataFrame / Arrow table without a column the query reads is a
    DataError naming it and what reads it; rows of dicts leave keys out as nulls."""
    r, t = pycel.alias(Reading, "r"), pycel.alias(Temp, "t")
    cases = [
        (r.where(r.value > 1), "value", "the filter r.value > 1"),
        (r.pattern().partition_by(Reading.sensor), "sensor", "PARTITION BY"),
        (seq(r, Temp).within(seconds=5, on=Reading.at), "at", "the window's time attribute"),
        (seq(r, t).where(r.sensor == t.sensor), "sensor", None),
    ]
    frame = pd.DataFrame({"event_type": ["Temp", "Temp"], "count": [1, 2]})
    for pattern, column, where in cases:
        for data in (frame, pa.Table.from_pandas(frame)):
            for run in (pycel.compile(pattern).run, lambda d, p=pattern: evaluate(p, d)):
                with pytest.raises(DataError, match="the data has no column") as err:
                    run(data)
                assert err.value.column == column
                if where is not None:
                    assert where in str(err.value)
    # rows: a left-out key is a null (no error, no match)
    rows = [{"event_type": "Temp", "count": 1}]
    assert len(pycel.compile(r.where(r.value > 1)).run(rows)) == 0


def test_the_read_columns_check_matches_the_reference() -> None:
    from pycel.language.clauses import split_query
    from pycel.reference import columns_read
    from pycel.runtime.predicates import columns_read_by

    r, t = pycel.alias(Reading, "r"), pycel.alias(Temp, "t")
    for pattern in [
        seq(r.where(r.value * 2 > r.count), t).where(r.sensor == t.sensor).within(seconds=3, on=Reading.at),
        seq(r, pycel.not_(Door.where(Door.opened), "d"), t).partition_by(Reading.sensor),
        seq(r, t).where(r.value < t.value, post_filter=True),
    ]:
        assert set(columns_read_by(pycel.compile(pattern))) == set(columns_read(split_query(pattern)))


def test_a_value_for_an_attribute_the_row_type_lacks_is_an_error_in_every_input() -> None:
    frame = pd.DataFrame({"event_type": ["Door", "Temp", "Door"], "count": [None, 3, 4]})
    for data in (frame, pa.Table.from_pandas(frame), frame.to_dict("records")):
        with pytest.raises(DataError, match="event type Door has no attribute 'count'") as err:
            to_batch(data, schema())
        assert (err.value.row, err.value.column) == (2, "count")
    # nulls there are fine: one frame can hold several event types
    assert decoded(to_batch(frame.iloc[:2], schema()))[0] == ("Door", {"opened": None})
    # also for an attribute that only a type absent from the data and the schema declares
    class Window(Event):
        width: Field[float]

    lone = pd.DataFrame({"event_type": ["Door", "Door"], "width": [None, 2.0]})
    with pytest.raises(DataError, match="event type Door has no attribute 'width'") as err:
        to_batch(lone, schema())
    assert (err.value.row, err.value.column) == (1, "width")
    assert Window.__fields__ == {"width": "float"}


def test_a_column_no_event_type_declares_is_an_error_even_when_null() -> None:
    for data in (
        pd.DataFrame({"event_type": ["Door"], "colour": [None]}),
        [{"event_type": "Door", "colour": None}],
    ):
        with pytest.raises(DataError, match="unknown attribute 'colour': no event type declares it") as err:
            to_batch(data, schema())
        assert err.value.column == "colour"


def test_duplicate_column_names_are_an_error() -> None:
    frame = pd.DataFrame([["Door", True, False]], columns=["event_type", "opened", "opened"])
    table = pa.Table.from_arrays([pa.array(["Door"]), pa.array([True]), pa.array([False])],
                                 names=["event_type", "opened", "opened"])
    for data in (frame, table):
        with pytest.raises(DataError, match="duplicate column name") as err:
            to_batch(data, schema())
        assert err.value.column == "opened"


@pytest.mark.parametrize("data", [None, 5, "Door", b"x", {"event_type": "Door"}, Door(opened=True)])
def test_what_is_not_events_is_a_data_error_saying_what_is_accepted(data: Any) -> None:
    query = pycel.compile(Door)
    for call in (query.run, query.stream().push, lambda d: evaluate(Door, d)):
        with pytest.raises(DataError, match="expected events: a list"):
            call(data)


# -- time without an offset is UTC, value by value ------------------------------------------
def test_naive_and_aware_times_mix_value_by_value_whatever_the_batches() -> None:
    """A pandas object column mixing datetimes with and without offsets: each naive one is
    UTC. 01:00+01:00 is 00:00 UTC, 3 s before the naive 00:00:03."""
    stamps = [
        datetime(2024, 1, 1, 1, 0, 0, tzinfo=timezone(timedelta(hours=1))),
        datetime(2024, 1, 1, 0, 0, 3),
        pd.Timestamp("2024-01-01T00:00:04"),
        np.datetime64("2024-01-01T00:00:05"),
    ]
    frame = pd.DataFrame({"event_type": ["Temp"] * 4, "at": pd.Series(stamps, dtype=object)})
    pattern = seq(Temp.as_("a"), Temp.as_("b")).within(seconds=3, on=Reading.at)
    expected = evaluate(pattern, frame).keys()
    assert {(m[0], m[1]) for m in expected} == {(0, 1), (1, 2), (1, 3), (2, 3)}
    for size in (1, 2, 4):
        stream = pycel.compile(pattern).stream()
        got = set().union(*(stream.push(frame.iloc[k : k + size]).keys() for k in range(0, 4, size)))
        assert got == expected
    assert to_batch(frame, schema()).columns["at"].tolist() == to_batch(
        [Temp(at=s.to_pydatetime() if isinstance(s, pd.Timestamp) else s) for s in stamps[:2]]
        + [Temp(at=pd.Timestamp(s).tz_localize(UTC).to_pydatetime()) for s in stamps[2:]],
        schema(),
    ).columns["at"].tolist()


def test_times_outside_64_bit_nanoseconds_are_errors_not_wrapped() -> None:
    late = np.array(["2000-01-01", "3000-01-01"], "datetime64[s]")
    for data in (
        pd.DataFrame({"event_type": ["Temp", "Temp"], "at": late}),
        pa.table({"event_type": ["Temp", "Temp"], "at": pa.array(late)}),
        [Temp(at=datetime(2000, 1, 1)), Temp(at=datetime(3000, 1, 1))],
        [Temp(at=0), Temp(at=2**63)],
    ):
        with pytest.raises(DataError) as err:
            to_batch(data, schema())
        assert (err.value.row, err.value.column) == (1, "at")


def test_the_earliest_coarse_times_are_errors_not_wrapped() -> None:
    """-9223372037 s is a second before what int64 nanoseconds hold: it wrapped to 2262."""
    early = np.array([-9223372036, -9223372037], "datetime64[s]")
    for data in (
        pd.DataFrame({"event_type": ["Temp", "Temp"], "at": early}),
        pa.table({"event_type": ["Temp", "Temp"], "at": pa.array(early)}),
        [Temp(at=e.item()) for e in early],
    ):
        with pytest.raises(DataError) as err:
            to_batch(data, schema())
        assert (err.value.row, err.value.column) == (1, "at")
