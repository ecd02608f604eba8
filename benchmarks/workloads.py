"""Benchmark workloads: a CEQL query for CORE, the same pattern in pycel's DSL, and the
seeded synthetic stream both engines read.

The stream (after the CORE paper's synthetic setups): event types T0..T9 drawn uniformly,
each event with attributes ``pos`` (its 0-based position, which lets the CORE side
identify the events of a match), ``k`` (a partition key, uniform in [0, n_keys)) and
``v`` (uniform in [0, 100)). T10 is declared but never generated: appending it to a
sequence gives the paper's "no output" variant P'_n.

Example::

    w = WORKLOADS["seq3-all"]
    print(w.query)                       # SELECT * FROM S WHERE T0 ; T1 ; T2 WITHIN 100 EVENTS
    ev = generate(w.stream, 1000, seed=42)
    pattern = w.pattern(event_types())   # pycel.seq(T0, T1, T2).within(events=100)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: Attributes of every benchmark event type, in declaration (and CSV) order.
ATTRIBUTES = ("pos", "k", "v")
DECLARED_TYPES = 11  # T0..T10; T10 never occurs in generated streams
ABSENT = "T10"


@dataclass(frozen=True)
class StreamSpec:
    """Parameters of a generated stream: types T0..T{n_types-1} uniform, ``k`` uniform in
    [0, n_keys), ``v`` uniform in [0, v_max)."""

    n_types: int = 10
    n_keys: int = 10
    v_max: int = 100

    @property
    def key(self) -> str:
        return f"t{self.n_types}-k{self.n_keys}-v{self.v_max}"


def declaration() -> str:
    """The CORE ``CREATE STREAM`` text declaring T0..T10 with the benchmark attributes."""
    attrs = ", ".join(f"{a}:int" for a in ATTRIBUTES)
    events = ",\n  ".join(f"EVENT T{i} {{ {attrs} }}" for i in range(DECLARED_TYPES))
    return f"CREATE STREAM S {{\n  {events}\n}}"


@dataclass(frozen=True)
class Events:
    """A generated stream as arrays (type ids index ``T{id}``)."""

    type_id: npt.NDArray[np.int8]
    k: npt.NDArray[np.int64]
    v: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.type_id)

    def type_names(self) -> npt.NDArray[np.object_]:
        names = np.array([f"T{i}" for i in range(DECLARED_TYPES)], dtype=object)
        return names[self.type_id]

    def to_pandas(self) -> Any:
        """The DataFrame pycel reads: ``event_type`` plus one column per attribute."""
        import pandas as pd

        return pd.DataFrame(
            {
                "event_type": self.type_names(),
                "pos": np.arange(len(self), dtype=np.int64),
                "k": self.k,
                "v": self.v,
            }
        )

    def write_csv(self, path: Path) -> None:
        """CORE's input: header row, event type first, attributes in declaration order."""
        self.to_pandas().to_csv(path, index=False)

    def save(self, path: Path) -> None:
        np.savez(path, type_id=self.type_id, k=self.k, v=self.v)

    @classmethod
    def load(cls, path: Path) -> Events:
        with np.load(path) as z:
            return cls(z["type_id"], z["k"], z["v"])


def generate(spec: StreamSpec, n: int, seed: int) -> Events:
    """The seeded stream: the same (spec, n, seed) always gives the same events."""
    rng = np.random.default_rng([seed, spec.n_types, spec.n_keys, spec.v_max])
    return Events(
        rng.integers(0, spec.n_types, n).astype(np.int8),
        rng.integers(0, spec.n_keys, n).astype(np.int64),
        rng.integers(0, spec.v_max, n).astype(np.int64),
    )


@functools.cache
def event_types() -> dict[str, Any]:
    """pycel event classes T0..T10 (created once per process: pycel resolves data by
    class name, so a second T0 class would be ambiguous)."""
    import pycel

    base = type(
        "BenchEvent",
        (pycel.Event,),
        {
            "__module__": __name__,
            "__annotations__": {"pos": "pycel.Field[int]", "k": "pycel.Field[int]", "v": "pycel.Field[int]"},
        },
    )
    return {f"T{i}": type(f"T{i}", (base,), {"__module__": __name__}) for i in range(DECLARED_TYPES)}


PatternBuilder = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Workload:
    """One benchmark: CEQL text for CORE, a pycel DSL builder for the same query, the
    stream, and how to compare the engines' matches.

    ``compare``: ``exact`` (same set of (start, end, positions)), ``limit`` (exact except at
    end positions where LIMIT cut the enumeration: counts only there), or ``none``.
    ``group`` and ``x`` place the workload on the chart (x = sequence length or window
    multiple).
    """

    name: str
    group: str
    query: str
    pattern: PatternBuilder = field(repr=False)
    stream: StreamSpec = StreamSpec()
    compare: str = "exact"
    limit: int | None = None
    x: int | None = None
    note: str = ""


# -- query builders ---------------------------------------------------------------------
FILTER_V = 50  # v < 50 on every atom of the seq-N family: about half the events qualify


def _seq_ceql(n: int, *, filt: int | None, absent: bool, window: int, strategy: str = "") -> str:
    atoms = [f"T{i % 10} AS e{i + 1}" for i in range(n)]
    if absent:
        atoms.append(f"{ABSENT} AS ne")
    text = f"SELECT {strategy + ' ' if strategy else ''}* FROM S WHERE " + " ; ".join(atoms)
    if filt is not None:
        text += " FILTER " + " AND ".join(f"e{i + 1}[v < {filt}]" for i in range(n))
    return text + f" WITHIN {window} EVENTS"


def _seq_pattern(
    n: int, *, filt: int | None, absent: bool, window: int, strategy: str = ""
) -> PatternBuilder:
    def build(T: dict[str, Any]) -> Any:
        import pycel

        parts: list[Any] = []
        for i in range(n):
            a = pycel.alias(T[f"T{i % 10}"], f"e{i + 1}")
            parts.append(a.where(a.v < filt) if filt is not None else a)
        if absent:
            parts.append(pycel.alias(T[ABSENT], "ne"))
        p = pycel.seq(*parts).within(events=window)
        return p.strategy(strategy.lower()) if strategy else p

    return build


def _seq(
    name: str,
    group: str,
    n: int,
    *,
    filt: int | None,
    absent: bool,
    window: int = 100,
    strategy: str = "",
    x: int | None = None,
    note: str = "",
) -> Workload:
    return Workload(
        name,
        group,
        _seq_ceql(n, filt=filt, absent=absent, window=window, strategy=strategy),
        _seq_pattern(n, filt=filt, absent=absent, window=window, strategy=strategy),
        x=x if x is not None else n,
        note=note,
    )


def _seq3_plain(T: dict[str, Any]) -> Any:
    import pycel

    return pycel.seq(T["T0"], T["T1"], T["T2"]).within(events=100)


def _seq3_consume(T: dict[str, Any]) -> Any:
    return _seq3_plain(T).consume("any")


def _partition(T: dict[str, Any]) -> Any:
    return _seq3_plain(T).partition_by("k")


def _partition_consume(T: dict[str, Any]) -> Any:
    return _seq3_plain(T).partition_by("k").consume("partition")


def _attr_window(T: dict[str, Any]) -> Any:
    import pycel

    # CORE's attribute window is strict (span < 30); pycel's is inclusive (span <= 29).
    return pycel.seq(T["T0"], T["T1"], T["T2"]).within(29, on=T["T0"].pos)


def _kleene(T: dict[str, Any]) -> Any:
    import pycel

    return pycel.seq(T["T0"], pycel.plus(T["T1"]), T["T2"]).within(events=30).limit(1000)


def _disjunction(T: dict[str, Any]) -> Any:
    import pycel

    return pycel.seq(T["T0"], T["T1"] | T["T2"], T["T3"] | T["T4"]).within(events=30)


def _all_workloads() -> list[Workload]:
    ws: list[Workload] = [
        Workload(
            "seq3-all",
            "reference",
            "SELECT * FROM S WHERE T0 ; T1 ; T2 WITHIN 100 EVENTS",
            _seq3_plain,
            x=3,
            note="all matches, no filter (~5 matches per event)",
        ),
        Workload(
            "consume-any",
            "consume",
            "SELECT * FROM S WHERE T0 ; T1 ; T2 WITHIN 100 EVENTS CONSUME BY ANY",
            _seq3_consume,
            x=3,
        ),
    ]
    for n in (3, 6, 9, 12, 24):
        ws.append(
            _seq(
                f"seq{n}",
                "seq-output",
                n,
                filt=FILTER_V,
                absent=False,
                note=f"T0..T9 cyclic, every atom v < {FILTER_V}",
            )
        )
    for n in (3, 6, 9, 12, 24):
        ws.append(
            _seq(
                f"seq{n}-noout",
                "seq-nooutput",
                n,
                filt=FILTER_V,
                absent=True,
                note=f"seq{n} followed by {ABSENT}, which never occurs",
            )
        )
    ws.append(
        Workload(
            "attr-window",
            "reference",
            "SELECT * FROM S WHERE T0 ; T1 ; T2 WITHIN 30 [pos]",
            _attr_window,
            x=3,
            note="window on an attribute: CORE's span < 30 is pycel's within(29, on=pos)",
        )
    )
    ws.append(
        Workload(
            "kleene",
            "kleene",
            "SELECT * FROM S WHERE T0 ; T1+ ; T2 WITHIN 30 EVENTS LIMIT 1000",
            _kleene,
            compare="limit",
            limit=1000,
        )
    )
    ws.append(
        Workload(
            "disjunction",
            "disjunction",
            "SELECT * FROM S WHERE T0 ; (T1 OR T2) ; (T3 OR T4) WITHIN 30 EVENTS",
            _disjunction,
        )
    )
    for m in (1, 2, 3, 4):
        ws.append(
            _seq(
                f"window-x{m}",
                "window",
                3,
                filt=FILTER_V,
                absent=True,
                window=100 * m,
                x=m,
                note=f"seq3-noout, window {100 * m} events",
            )
        )
    notes = {
        "last": "CORE paper App. H; no output, so strategies agree",
        "next": "last-x with NEXT; no output, so strategies agree",
        "max": "last-x with MAX; no output, so strategies agree",
    }
    for strategy in ("last", "next", "max"):
        for m in (1, 2, 3, 4):
            ws.append(
                _seq(
                    f"{strategy}-x{m}",
                    strategy,
                    3,
                    filt=FILTER_V,
                    absent=True,
                    window=100 * m,
                    x=m,
                    strategy=strategy.upper(),
                    note=notes[strategy],
                )
            )
    # Every seq3 match is maximal (three events, no two with the same end contain each
    # other), so CORE's output, which ignores MAX, is the right one: a real comparison.
    ws.append(
        _seq("seq3-max", "max", 3, filt=FILTER_V, absent=False, strategy="MAX", note="MAX = ALL here")
    )
    ws.append(
        Workload(
            "partition",
            "partition",
            "SELECT * FROM S WHERE T0 ; T1 ; T2 PARTITION BY [k] WITHIN 100 EVENTS",
            _partition,
            note="10 keys; positions and count window global",
        )
    )
    ws.append(
        Workload(
            "partition-consume",
            "partition",
            "SELECT * FROM S WHERE T0 ; T1 ; T2 PARTITION BY [k] WITHIN 100 EVENTS CONSUME BY PARTITION",
            _partition_consume,
        )
    )
    return ws


WORKLOADS: dict[str, Workload] = {w.name: w for w in _all_workloads()}

#: Workloads of the pycel-only large run (memory flatness on a long stream).
LARGE_WORKLOADS = ("seq3-noout", "consume-any")
