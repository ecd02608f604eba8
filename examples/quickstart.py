"""pycel in-process: declare event types, write a pattern, run it on a generated stream.

Run: ``python examples/quickstart.py [--events N]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import pycel


class Stock(pycel.Event):
    name: pycel.Field[str]
    price: pycel.Field[float]
    volume: pycel.Field[int]
    time: pycel.Field[int]


class Buy(Stock): ...


class Sell(Stock): ...


def generate(n: int, seed: int = 7) -> pd.DataFrame:
    """A seeded stream of BUY/SELL events over a few stock names, one per second."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "event_type": rng.choice(["Buy", "Sell"], size=n),
            "name": rng.choice(["INTC", "RIMM", "QQQ", "AAPL", "MSFT"], size=n),
            "price": np.round(rng.uniform(5, 50, size=n), 2),
            "volume": rng.integers(1, 1000, size=n),
            "time": np.arange(n, dtype=np.int64),
        }
    )


def quickstart_pattern() -> pycel.Pattern:
    """A SELL of INTC, then a BUY of RIMM above 10, then a BUY of QQQ, all within 10 seconds.

    Example: ``pycel.compile(quickstart_pattern()).run(generate(1000))``
    """
    s = pycel.alias(Sell, "s")
    b1, b2 = pycel.alias(Buy, "b1"), pycel.alias(Buy, "b2")
    return pycel.seq(
        s.where(s.name == "INTC"),
        b1.where((b1.name == "RIMM") & (b1.price > 10)),
        b2.where(b2.name == "QQQ"),
    ).within(seconds=10, on=Stock.time)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()

    pattern = quickstart_pattern()
    print("pattern:", pattern)

    started = time.perf_counter()
    query = pycel.compile(pattern)
    events = generate(args.events)
    matches = query.run(events)
    elapsed = time.perf_counter() - started
    for m in list(matches)[:5]:
        print(f"  match [{m.start}, {m.end}]: s={m['s']} b1={m['b1']} b2={m['b2']}")
    print(f"{len(events):,} events, {len(matches):,} matches, {elapsed:.2f} s")
    print("(the first run in a fresh environment includes Numba's one-time compilation)")


if __name__ == "__main__":
    main()
