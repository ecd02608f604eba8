"""Correlation in-process: equality joins as run keys, a post-filter, AND, and absence.

Run: ``python examples/correlation.py [--events N]``

Orders and fills carry the stock symbol under different attribute names; the join
``o.sym == f.ticker`` relates them like PARTITION BY would, with the engine's guarantees.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import pycel


class Placed(pycel.Event):
    """An order placed."""

    sym: pycel.Field[str]
    qty: pycel.Field[int]
    time: pycel.Field[int]


class Filled(pycel.Event):
    """An order (partly) filled; the symbol is called ``ticker`` here."""

    ticker: pycel.Field[str]
    qty: pycel.Field[int]
    time: pycel.Field[int]


class Cancelled(pycel.Event):
    """An order cancelled."""

    sym: pycel.Field[str]
    time: pycel.Field[int]


def generate(n: int, seed: int = 11) -> pd.DataFrame:
    """A seeded stream of placed, filled and cancelled orders over 200 symbols, one per second."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["Placed", "Filled", "Cancelled"], size=n, p=[0.45, 0.45, 0.1])
    symbols = pd.Series([f"S{k:03d}" for k in rng.integers(0, 200, size=n)], dtype=object)
    return pd.DataFrame(
        {
            "event_type": kinds,
            "sym": symbols.where(kinds != "Filled", None),
            "ticker": symbols.where(kinds == "Filled", None),
            # Cancelled declares no qty: its cells are null (a value there is a DataError)
            "qty": pd.Series(rng.integers(1, 100, size=n), dtype="Int64").mask(kinds == "Cancelled"),
            "time": np.arange(n, dtype=np.int64),
        }
    )


def run(title: str, pattern: pycel.Pattern, events: pd.DataFrame) -> None:
    started = time.perf_counter()
    matches = pycel.compile(pattern).run(events)
    elapsed = time.perf_counter() - started
    print(f"{title}: {len(matches):,} matches in {elapsed:.2f} s")
    for m in list(matches)[:2]:
        print(f"  [{m.start}, {m.end}] {m.variables}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    events = generate(args.events)
    o, f, c = pycel.alias(Placed, "o"), pycel.alias(Filled, "f"), pycel.alias(Cancelled, "c")

    # An order, then a fill of the same symbol, within 60 seconds: a run key.
    filled = pycel.seq(o, f).where(o.sym == f.ticker)
    run("order then fill", filled.within(seconds=60, on=Placed.time), events)
    # ... where the fill is smaller than the order: checked on complete matches.
    partial = filled.where(f.qty < o.qty, post_filter=True)
    run("partial fill (post-filter)", partial.within(seconds=60, on=Placed.time), events)
    # An order and a cancel of the same symbol, in either order, within 30 seconds.
    both = (o & c).where(o.sym == c.sym).within(seconds=30, on=Placed.time)
    run("order and cancel (AND)", both, events)
    # An order with no fill of its symbol in the next 10 seconds: an absence at the end,
    # each match reported once its 10 seconds have passed (run() closes at the data's end).
    g = pycel.alias(Filled, "g")
    unfilled = pycel.seq(o, pycel.absent(g.where(g.ticker == o.sym))).within(seconds=10, on=Placed.time)
    run("order without a fill (absence)", unfilled, events)
    print("(the first run in a fresh environment includes Numba's one-time compilation)")


if __name__ == "__main__":
    main()
