"""A comparison between occurrences that are not adjacent, pruned by the order of the runs
(docs/postfilter.md, "Ordered by the earlier occurrence").

``seq(a, c, b).where(b.x > a.x).within(events=w)``: c stands between a and b, so the
automaton cannot test the comparison on an edge; the enumerator checks it (residual). The
runs waiting after a are kept ordered by ``a.x``, and where ``b.x > a.x`` fails on one
the enumerator skips every run ordered above it. Two other forms return the same
matches: ``b.x > a.x % 1,000,000`` (residual too, checked at each a, but no order prunes
it: a modulo is not monotone; every a.x is below 100,000) and the comparison OR'ed with a
LIKE that never holds (not interpreted: every match is enumerated, then checked). The
ordered form runs also without the emptiness probes (pycel.jit.probe: a c whose a's all
fail is skipped with the c's before it), to show what they save where c's are many
(``--c-share``). The script checks that the forms agree and prints events/s (CPU time),
matches, the nodes the enumerator visited and the peak resident memory of the process so
far. CORE has no predicates between occurrences: no CORE row.

    python benchmarks/nonadjacent.py --events 200000 --windows 100 1000 10000
"""

from __future__ import annotations

import argparse
import resource
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from postfilter import A, B, C, timed  # (the same event types and timing)

import pycel
from pycel.runtime.runners.sequential import SequentialRunner

#: (CPU seconds, matches, nodes visited), as :func:`timed` returns them.
Timed = tuple[float, pycel.Matches, int]


def _frame(n: int, seed: int, c_share: float) -> pd.DataFrame:
    """C ``c_share`` of the events, A and B the rest as 60 : 39.5; a's x uniform in
    0..99,999, b's in 0..99 (one a in 2,000 is below a b on average)."""
    rng = np.random.default_rng(seed)
    rest = (1 - c_share) / 0.995
    kinds = rng.choice(["A", "B", "C"], size=n, p=[0.6 * rest, 0.395 * rest, c_share])
    x = np.where(kinds == "A", rng.integers(0, 100_000, size=n), rng.integers(0, 100, size=n))
    return pd.DataFrame({"event_type": kinds, "x": x, "s": "q"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--windows", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-node-up-to", type=int, default=1000, help="largest window of the modulo form")
    parser.add_argument("--unpruned-up-to", type=int, default=100, help="largest window of the LIKE form")
    parser.add_argument("--c-share", type=float, default=0.005, help="the share of C events")
    parser.add_argument("--repeats", type=int, default=2, help="runs per form (the fastest is shown)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    frame = _frame(args.events, args.seed, args.c_share)
    a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")
    print(f"{args.events:,} events (C {args.c_share:.1%}), seq(a, c, b) with b.x > a.x")
    print("| window | form | events/s (CPU) | matches | nodes visited | peak RSS (MB) |")
    print("|---:|---|---:|---:|---:|---:|")
    for w in args.windows:
        body = pycel.seq(a, c, b)
        # (the other forms visit every a of every c in the window: only small windows)
        forms = {"ordered (b.x > a.x)": body.where(b.x > a.x).within(events=w)}
        if w <= args.per_node_up_to:
            forms["per node (b.x > a.x % 1e6)"] = body.where(b.x > a.x % 1_000_000).within(events=w)
        if w <= args.unpruned_up_to:
            forms["complete matches (OR LIKE)"] = body.where(
                (b.x > a.x) | b.s.like("zz%"), post_filter=True
            ).within(events=w)
        # Best of --repeats: a process's first timed run also pays one-time costs.
        results = {name: _best(lambda p=p: timed(p, frame), args.repeats) for name, p in forms.items()}
        ordered = forms["ordered (b.x > a.x)"]
        results["ordered, without probes"] = _best(lambda p=ordered: _without_probes(p, frame), args.repeats)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (before the check's sets)
        keys = [r[1].keys() for r in results.values()] if len(results) > 1 else []
        assert all(k == keys[0] for k in keys), "the forms disagree"
        for name, (seconds, matches, visits) in results.items():
            rate = args.events / seconds if seconds > 0 else float("inf")
            shown = f"{visits:,}" if visits else "-"
            print(f"| {w:,} | {name} | {rate:,.0f} | {len(matches):,} | {shown} | {peak:,.0f} |")


def _best(run: Callable[[], Timed], repeats: int) -> Timed:
    """The fastest of ``repeats`` runs."""
    return min((run() for _ in range(repeats)), key=lambda r: r[0])


def _without_probes(pattern: Any, frame: pd.DataFrame) -> Timed:
    """:func:`timed` with the engine's emptiness probes turned off (as before them)."""
    probing = SequentialRunner._probing
    SequentialRunner._probing = lambda self, res, t: res  # type: ignore[method-assign]
    try:
        return timed(pattern, frame)
    finally:
        SequentialRunner._probing = probing  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
