"""Post-filters pruning the enumeration (docs/postfilter.md, "Pruning while enumerating").

``seq(a, plus(b), c).where(b.x > c.x + k, post_filter=True).within(events=w)``: every b
must be above the closing c. The enumerator walks each match from c back and stops at the
first b that fails. The same condition written as ``(b.x > c.x + k) | b.s.like("zz%")``
means the same here (no event's ``s`` starts with zz) but is not interpreted (LIKE), so it
shows the walk without pruning: every subset of the b's, then the complete-match check.
Both must return the same matches; the script prints events/s (CPU time), the matches and
the nodes the pruning enumerator visited. CORE has no predicates between occurrences, so
there is no CORE row; the pattern without the post-filter shows the engine's ALL rate. The
last row adds ``consume("any")``: only matches that pass the post-filter consume, which the
loop decides with the pruning checks.

    python benchmarks/postfilter.py --events 200000 --windows 8 12 16
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

import pycel
from pycel import Event, Field


class Tick(Event):
    x: Field[int]
    s: Field[str]


class A(Tick): ...


class B(Tick): ...


class C(Tick): ...


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["A", "B", "C"], size=n, p=[0.1, 0.7, 0.2])
    return pd.DataFrame({"event_type": kinds, "x": rng.integers(0, 100, size=n), "s": "q"})


def timed(pattern: Any, frame: pd.DataFrame) -> tuple[float, pycel.Matches, int]:
    """CPU seconds of one run on a fresh stream (compiled and warmed up first), the
    matches, and the nodes the pruning enumerator visited (0 without pruning)."""
    query = pycel.compile(pattern)
    query.stream().push(frame.iloc[:2000])  # compile or load the loop first
    stream = query.stream()
    began = time.process_time()
    matches = stream.push(frame)
    seconds = time.process_time() - began
    pruning = stream.__dict__.get("pruning")
    return seconds, matches, 0 if pruning is None else int(pruning.visits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--windows", type=int, nargs="+", default=[8, 12, 16])
    parser.add_argument("--margin", type=int, default=30, help="k in b.x > c.x + k")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    frame = _frame(args.events, args.seed)
    a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")
    k = args.margin
    print(f"{args.events:,} events (A 10 %, B 70 %, C 20 %, x uniform in 0..99), b.x > c.x + {k}")
    print("| window | form | events/s (CPU) | matches | nodes visited |")
    print("|---:|---|---:|---:|---:|")
    for w in args.windows:
        body = pycel.seq(a, pycel.plus(b), c)
        forms = {
            "no post-filter": body.within(events=w),
            "pruned": body.where(b.x > c.x + k, post_filter=True).within(events=w),
            "not pruned": body.where((b.x > c.x + k) | b.s.like("zz%"), post_filter=True).within(events=w),
            # consumption decided on the matches that pass (pruning must then be exact)
            "pruned, consume any": body.where(b.x > c.x + k, post_filter=True)
            .within(events=w)
            .consume("any"),
        }
        results = {name: timed(p, frame) for name, p in forms.items()}
        assert results["pruned"][1].keys() == results["not pruned"][1].keys(), "the two forms disagree"
        for name, (seconds, matches, visits) in results.items():
            rate = args.events / seconds if seconds > 0 else float("inf")
            shown = f"{visits:,}" if name.startswith("pruned") else "-"
            print(f"| {w} | {name} | {rate:,.0f} | {len(matches):,} | {shown} |")


if __name__ == "__main__":
    main()
