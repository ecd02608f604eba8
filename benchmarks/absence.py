"""Benchmark absence: ``seq(o, absent(c), d)`` in the engine vs the workaround without it.

An order workflow over ``--keys`` orders (default 1,000): orders (40 %), deliveries (40 %)
and cancellations (``--cancel`` share, default 20 %), each event for a uniformly drawn
order id, ``--events`` events (default 1M). For each count window w of ``--windows`` it runs

* **absence**: ``seq(o, absent(c), d).within(events=w).partition_by("oid")`` — the engine
  blocks an order's waiting runs when its cancellation arrives;
* **workaround**: what a user writes without absence — ``seq(o, d)`` with the same window
  and partition, then drop, in numpy, every match with a cancellation of its order between
  o and d (a sorted array of cancellation positions per order and one searchsorted);
* **plain**: ``seq(o, d)`` alone, the matches before dropping (the cost of the sequence);
* **priced**: ``seq(o, absent(c), d).where(d.price > o.price)`` with the same window and
  partition, the comparison on the automaton (the ordered loop, whose treaps a
  cancellation moves) against the same comparison as ``post_filter=True``.

With ``--edges`` (the default) it also runs absences at a pattern's ends, per window:
``seq(o, absent(Deliver))`` (an order not delivered within the window: each match waits
until its window has passed) and ``seq(absent(Order), d)`` (a delivery with no order of
its id in the window before it), against the workaround: every order (delivery) from the
engine, then in numpy the next delivery (previous order) of its id by one searchsorted.

With ``--strategies`` (default ``last,next,max``) it also runs the absence query under
those strategies, for each window and without one, and checks each choice against the
same choice made in numpy from ALL's matches (per delivery: the latest order for LAST,
the earliest for NEXT, all of them for MAX, whose matches all have two events).

Both ways, and both priced forms, must give identical matches (checked). Timings are the
median of ``--repeat`` runs after one untimed run (compile or cache load); CPU seconds of
the process, since the machine may be shared. pycel has no CORE counterpart here: CORE has
no absence.

    python benchmarks/absence.py                    # 1M events, windows 1000, 10000, 100000
    python benchmarks/absence.py --events 200000 --windows 1000,10000 --repeat 1
    python benchmarks/absence.py --events 200000 --keys 100000 --windows 1000,100000 \\
        --repeat 1 --strategies "" --push-sizes 100,1000

Results: printed, and written to benchmarks/results/absence.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pycel  # noqa: E402


class Order(pycel.Event):
    oid: pycel.Field[int]
    price: pycel.Field[int]


class Cancel(pycel.Event):
    oid: pycel.Field[int]


class Deliver(pycel.Event):
    oid: pycel.Field[int]
    price: pycel.Field[int]


def workflow(n: int, keys: int, cancel: float, seed: int = 1) -> pd.DataFrame:
    """A seeded stream of orders, deliveries and cancellations over ``keys`` order ids."""
    rng = np.random.default_rng(seed)
    rest = (1.0 - cancel) / 2
    kinds = rng.choice(["Order", "Deliver", "Cancel"], size=n, p=[rest, rest, cancel])
    oid, price = rng.integers(0, keys, size=n), rng.integers(0, 100, size=n)
    # a cancellation has no price: its cells are null
    priced = pd.array(price, dtype="Int64")
    priced[kinds == "Cancel"] = pd.NA
    return pd.DataFrame({"event_type": kinds, "oid": oid, "price": priced})


def absence_query(window: int) -> pycel.CompiledQuery:
    o, c, d = pycel.alias(Order, "o"), pycel.alias(Cancel, "c"), pycel.alias(Deliver, "d")
    return pycel.compile(pycel.seq(o, pycel.absent(c), d).within(events=window).partition_by("oid"))


def priced_query(window: int, post_filter: bool) -> pycel.CompiledQuery:
    o, c, d = pycel.alias(Order, "o"), pycel.alias(Cancel, "c"), pycel.alias(Deliver, "d")
    pattern = pycel.seq(o, pycel.absent(c), d).where(d.price > o.price, post_filter=post_filter)
    return pycel.compile(pattern.within(events=window).partition_by("oid"))


def strategy_query(window: int | None, strategy: str) -> pycel.CompiledQuery:
    o, c, d = pycel.alias(Order, "o"), pycel.alias(Cancel, "c"), pycel.alias(Deliver, "d")
    pattern = pycel.seq(o, pycel.absent(c), d).partition_by("oid").strategy(strategy)  # type: ignore[arg-type]
    return pycel.compile(pattern if window is None else pattern.within(events=window))


def chosen(every: pycel.Matches, strategy: str) -> set[tuple[int, int]]:
    """The (o, d) pairs ``strategy`` keeps among ALL's matches ``every``, per delivery."""
    frame = every.to_pandas("wide")
    if strategy == "max":
        return set(zip(frame["o"].tolist(), frame["d"].tolist(), strict=True))
    per_end = frame.groupby("d")["o"].agg("max" if strategy == "last" else "min")
    return set(zip(per_end.tolist(), per_end.index.tolist(), strict=True))


def plain_query(window: int) -> pycel.CompiledQuery:
    o, d = pycel.alias(Order, "o"), pycel.alias(Deliver, "d")
    return pycel.compile(pycel.seq(o, d).within(events=window).partition_by("oid"))


def drop_cancelled(matches: pycel.Matches, events: pd.DataFrame) -> set[tuple[int, int]]:
    """The (o, d) pairs of ``matches`` with no cancellation of the order strictly between."""
    frame = matches.to_pandas("wide")
    o, d = frame["o"].to_numpy(np.int64), frame["d"].to_numpy(np.int64)
    oid = events["oid"].to_numpy(np.int64)
    cancels = np.flatnonzero(events["event_type"].to_numpy() == "Cancel")
    # Cancellations sorted by (order, position): one searchsorted finds the first after o.
    order = np.lexsort((cancels, oid[cancels]))
    keyed = oid[cancels][order] * (len(events) + 1) + cancels[order]
    first_after = np.searchsorted(keyed, oid[o] * (len(events) + 1) + o, side="right")
    nxt = np.full(len(o), np.iinfo(np.int64).max)
    inside = first_after < len(keyed)
    same = inside.copy()
    same[inside] = keyed[first_after[inside]] // (len(events) + 1) == oid[o[inside]]
    nxt[same] = keyed[first_after[same]] % (len(events) + 1)
    kept = nxt > d
    return set(zip(o[kept].tolist(), d[kept].tolist(), strict=True))


def edge_query(window: int, at_end: bool) -> pycel.CompiledQuery:
    o, d = pycel.alias(Order, "o"), pycel.alias(Deliver, "d")
    pattern = pycel.seq(o, pycel.absent(Deliver)) if at_end else pycel.seq(pycel.absent(Order), d)
    return pycel.compile(pattern.within(events=window).partition_by("oid"))


def single_query(at_end: bool) -> pycel.CompiledQuery:
    return pycel.compile(pycel.alias(Order, "o") if at_end else pycel.alias(Deliver, "d"))


def nearest_of_key(events: pd.DataFrame, kind: str, at: np.ndarray, after: bool) -> np.ndarray:
    """For each position of ``at``: the next (``after``) or previous event of type ``kind``
    with the same order id, or a position far outside every window."""
    n = len(events)
    oid = events["oid"].to_numpy(np.int64)
    mine = np.flatnonzero(events["event_type"].to_numpy() == kind)
    keyed = np.sort(oid[mine] * (n + 1) + mine)
    probe = oid[at] * (n + 1) + at
    far = 2 * n + 1
    if not len(keyed):
        return np.full(len(at), far if after else -far)
    k = np.searchsorted(keyed, probe, side="right") - (0 if after else 1)
    inside = (k >= 0) & (k < len(keyed))
    found = np.where(inside, keyed[np.clip(k, 0, len(keyed) - 1)], -1)
    same = inside & (found // (n + 1) == oid[at])
    return np.where(same, found % (n + 1), far if after else -far)


def edge_workaround(single: pycel.Matches, events: pd.DataFrame, window: int, at_end: bool) -> set[int]:
    """The positions the edge query should report, from every order (delivery)."""
    at = single.starts
    if at_end:
        return set(at[nearest_of_key(events, "Deliver", at, True) - at > window].tolist())
    return set(at[at - nearest_of_key(events, "Order", at, False) > window].tolist())


def pairs(matches: pycel.Matches) -> set[tuple[int, int]]:
    frame = matches.to_pandas("wide")
    return set(zip(frame["o"].tolist(), frame["d"].tolist(), strict=True))


def pushed(query: pycel.CompiledQuery, events: pd.DataFrame, size: int) -> tuple[float, set[Any]]:
    """(CPU seconds, match keys) of ``events`` pushed into a stream ``size`` at a time, then
    closed (the matches still waiting leave). The keys are made after the clock stops:
    ``Matches.keys()`` builds a Python tuple per match, which is the check's cost, not
    the engine's (timed, it was most of the absence between parts at window 100,000)."""
    stream = query.stream()
    found: list[pycel.Matches] = []
    began = time.process_time()
    for lo in range(0, len(events), size):
        found.append(stream.push(events.iloc[lo : lo + size]))
    found.append(stream.close())
    seconds = time.process_time() - began
    keys: set[Any] = set()
    for part in found:
        keys |= part.keys()
    return seconds, keys


def push_rows(events: pd.DataFrame, windows: list[int], sizes: list[int]) -> list[str]:
    """Table rows: events/CPU-s of the absences at the end, at the start and between parts,
    pushed in batches of each size; each equal to one run over all the events."""
    rows = []
    for w in windows:
        queries = [edge_query(w, True), edge_query(w, False), absence_query(w)]
        whole = [q.run(events).keys() for q in queries]
        for size in sizes:
            rates = []
            for q, want in zip(queries, whole, strict=True):
                took, got = pushed(q, events, size)
                if got != want:
                    raise SystemExit(f"window {w}, pushes of {size}: not the matches of one run")
                rates.append(f"{len(events) / took / 1e6:.3f}M")
            rows.append(f"| {w:,} | {size:,} | " + " | ".join(rates) + " |")
            print(rows[-1], flush=True)
    return rows


def timed(f: Callable[[], object], repeat: int) -> tuple[float, object]:
    """(median CPU seconds of ``repeat`` calls after an untimed one, the last result)."""
    result = f()
    times = []
    for _ in range(repeat):
        began = time.process_time()
        result = f()
        times.append(time.process_time() - began)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--cancel", type=float, default=0.2, help="share of cancellations (default 0.2)")
    parser.add_argument("--windows", default="1000,10000,100000", help="count windows, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategies", default="last,next,max", help="comma-separated; '' for none")
    parser.add_argument("--no-edges", dest="edges", action="store_false", help="skip absences at the ends")
    parser.add_argument(
        "--push-sizes", default="", help="also push the edges and the absence between in batches of these"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "absence.md"))
    args = parser.parse_args()
    events = workflow(args.events, args.keys, args.cancel)
    rows = []
    for w in (int(x) for x in args.windows.split(",")):
        absent_s, found = timed(lambda w=w: absence_query(w).run(events), args.repeat)
        plain_s, plain = timed(lambda w=w: plain_query(w).run(events), args.repeat)
        drop_s, kept = timed(lambda plain=plain: drop_cancelled(plain, events), args.repeat)  # type: ignore[arg-type]
        assert isinstance(found, pycel.Matches) and isinstance(plain, pycel.Matches)
        if pairs(found) != kept:
            raise SystemExit(f"window {w}: absence and the workaround disagree")
        indexed_s, indexed = timed(lambda w=w: priced_query(w, False).run(events), args.repeat)
        post_s, post = timed(lambda w=w: priced_query(w, True).run(events), args.repeat)
        assert isinstance(indexed, pycel.Matches) and isinstance(post, pycel.Matches)
        if pairs(indexed) != pairs(post) or len(indexed) != len(post):
            raise SystemExit(f"window {w}: the priced query indexed and as a post-filter disagree")
        rows.append(
            (
                w,
                len(found),
                len(plain),
                args.events / absent_s,
                args.events / (plain_s + drop_s),
                absent_s,
                plain_s,
                drop_s,
                len(indexed),
                args.events / indexed_s,
                args.events / post_s,
            )
        )
        print(f"window {w}: {rows[-1]}", flush=True)
    lines = [
        "# Absence: the engine vs the workaround without it",
        "",
        f"`python benchmarks/absence.py --events {args.events} --keys {args.keys} --cancel {args.cancel} "
        f"--windows {args.windows} --repeat {args.repeat}`; {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; CPU seconds (median of {args.repeat}); identical matches checked.",
        "",
        "| window | matches | seq(o, d) matches | absence ev/CPU-s | workaround ev/CPU-s "
        "| absence s | seq s | drop s | priced matches | priced indexed ev/CPU-s "
        "| priced post-filter ev/CPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {w} | {m:,} | {p:,} | {a / 1e6:.2f}M | {b / 1e6:.2f}M | {x:.3f} | {y:.3f} | {z:.3f} "
        f"| {pm:,} | {pi / 1e6:.2f}M | {pp / 1e6:.2f}M |"
        for w, m, p, a, b, x, y, z, pm, pi, pp in rows
    ]
    if args.edges:
        lines += [
            "",
            "Absence at the ends: `seq(o, absent(Deliver))` (waits until the window passed) and "
            "`seq(absent(Order), d)`, per order id, against every order (delivery) from the "
            "engine and the next delivery (previous order) of its id found in numpy.",
            "",
            "| window | pattern | matches | ev/CPU-s | s | workaround ev/CPU-s | workaround s |",
            "|---|---|---|---|---|---|---|",
        ]
    for w in (int(x) for x in args.windows.split(",")) if args.edges else []:
        for at_end in (True, False):
            took, got = timed(lambda w=w, at_end=at_end: edge_query(w, at_end).run(events), args.repeat)
            single_s, single = timed(lambda at_end=at_end: single_query(at_end).run(events), args.repeat)
            assert isinstance(got, pycel.Matches) and isinstance(single, pycel.Matches)
            work_s, want = timed(
                lambda single=single, w=w, at_end=at_end: edge_workaround(single, events, w, at_end),  # type: ignore[misc]
                args.repeat,
            )
            if set(got.starts.tolist()) != want or len(got) != len(want):  # type: ignore[arg-type]
                raise SystemExit(f"window {w}: the absence at the {'end' if at_end else 'start'} disagrees")
            name = "seq(o, absent(Deliver))" if at_end else "seq(absent(Order), d)"
            lines.append(
                f"| {w} | `{name}` | {len(got):,} | {args.events / took / 1e6:.2f}M | {took:.3f} "
                f"| {args.events / (single_s + work_s) / 1e6:.2f}M | {single_s + work_s:.3f} |"
            )
            print(lines[-1], flush=True)
    strategies = [name for name in args.strategies.split(",") if name]
    if strategies:
        lines += [
            "",
            "Strategies: `seq(o, absent(c), d).partition_by(\"oid\")` under each strategy, checked "
            "against the same choice among ALL's matches.",
            "",
            "| window | strategy | family | matches | ev/CPU-s | s | ALL s |",
            "|---|---|---|---|---|---|---|",
        ]
    windows: list[int | None] = [*(int(x) for x in args.windows.split(",")), None]
    for w in windows if strategies else []:
        every_s, every = timed(lambda w=w: strategy_query(w, "all").run(events), args.repeat)
        assert isinstance(every, pycel.Matches)
        for name in strategies:
            query = strategy_query(w, name)
            took, got = timed(lambda query=query: query.run(events), args.repeat)
            assert isinstance(got, pycel.Matches)
            if pairs(got) != chosen(every, name):
                raise SystemExit(f"window {w}, {name}: not the strategy's choice among ALL's matches")
            rate = args.events / took / 1e6
            lines.append(
                f"| {w or 'none'} | {name} | {query.plan.family} | {len(got):,} | {rate:.2f}M "
                f"| {took:.3f} | {every_s:.3f} |"
            )
            print(lines[-1], flush=True)
    sizes = [int(x) for x in args.push_sizes.split(",") if x]
    if sizes:
        lines += [
            "",
            "Pushed in batches (events/CPU-s, one run each; the same matches as one run): "
            "`seq(o, absent(Deliver))` (end), `seq(absent(Order), d)` (start), "
            "`seq(o, absent(c), d)` (between), per order id.",
            "",
            "| window | push size | end | start | between |",
            "|---|---|---|---|---|",
            *push_rows(events, [int(x) for x in args.windows.split(",")], sizes),
        ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
