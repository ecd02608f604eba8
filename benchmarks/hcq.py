"""Hierarchical conjunctions with nested join classes (the PCEA paper's Q0) on the
parallelized automaton: events/s as the window grows.

Q0 = T(x) AND S(x, y) AND R(x, y) over a seeded stream of T, S and R events with x over
``--keys`` values and y over 10, windows of 100 … 100,000 events. "no output" makes R
never join (its y is out of range), so the figure is the per-event update cost; "with
output" lets R join (windows up to 10,000: beyond, the output is tens of millions).
CORE has no conjunction with correlation, so there is no peer.

Run: ``python benchmarks/hcq.py [--events N] [--keys K] [--repeat R]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

import pycel


class T(pycel.Event):
    a: pycel.Field[int]


class S(pycel.Event):
    a: pycel.Field[int]
    b: pycel.Field[int]


class R(pycel.Event):
    a: pycel.Field[int]
    b: pycel.Field[int]


def stream(n: int, keys: int, joining: bool, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["T", "S", "R"], size=n, p=[0.45, 0.45, 0.1])
    b = rng.integers(0, 10, size=n)
    if not joining:
        b = np.where(kinds == "R", 99, b)
    return pd.DataFrame({"event_type": kinds, "a": rng.integers(0, keys, size=n), "b": b})


def q0(window: int) -> Any:
    t, s, r = pycel.alias(T, "t"), pycel.alias(S, "s"), pycel.alias(R, "r")
    return (t & s & r).where((t.a == s.a) & (s.a == r.a) & (s.b == r.b)).within(events=window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--windows", type=int, nargs="+", default=[100, 1_000, 10_000, 100_000])
    args = parser.parse_args()
    print(f"Q0 on {args.events:,} events, x over {args.keys:,} values (medians of {args.repeat})")
    print("| window | variant | events/s | matches | max heap depth |")
    print("|---:|---|---:|---:|---:|")
    for joining in (False, True):
        data = stream(args.events, args.keys, joining)
        for w in args.windows:
            if joining and w > 10_000:
                continue  # ~200 matches per R event: too many to materialize
            query = pycel.compile(q0(w))
            assert query.hcq is not None
            query.run(data.head(2_000))  # compile / load the Numba cache
            rates, found, depth = [], 0, 0
            for _ in range(args.repeat):
                st = query.stream()
                began = time.perf_counter()
                found = len(st.push(data))
                rates.append(args.events / (time.perf_counter() - began))
                depth = st.stats()["max_heap_depth"]
            variant = "with output" if joining else "no output"
            print(f"| {w:,} | {variant} | {statistics.median(rates):,.0f} | {found:,} | {depth} |")


if __name__ == "__main__":
    main()
