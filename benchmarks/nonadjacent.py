"""A comparison between occurrences that are not adjacent, pruned by the order of the runs
(docs/postfilter.md, "Ordered by the earlier occurrence").

``seq(a, c, b).where(b.x > a.x).within(events=w)``: c stands between a and b, so the
automaton cannot test the comparison on an edge; the enumerator checks it (residual). The
runs waiting after a are kept ordered by ``a.x``, and where ``b.x > a.x`` fails on one
the enumerator skips every run ordered above it. Two other forms return the same
matches: ``b.x > a.x % 1,000,000`` (residual too, checked at each a, but no order prunes
it: a modulo is not monotone; every a.x is below 100,000) and the comparison OR'ed with a
LIKE that never holds (not interpreted: every match is enumerated, then checked). The
script checks that the three agree (where a window runs more than one) and prints events/s
(CPU time), matches, the nodes the enumerator visited and the peak resident memory of the
process so far. CORE has no predicates between occurrences: no CORE row.

    python benchmarks/nonadjacent.py --events 200000 --windows 100 1000 10000
"""

from __future__ import annotations

import argparse
import resource
import warnings

import numpy as np
import pandas as pd
from postfilter import A, B, C, timed  # (the same event types and timing)

import pycel


def _frame(n: int, seed: int) -> pd.DataFrame:
    """A 60 %, B 39.5 %, C 0.5 %; a's x uniform in 0..99,999, b's in 0..99 (one a in
    2,000 is below a b on average)."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["A", "B", "C"], size=n, p=[0.6, 0.395, 0.005])
    x = np.where(kinds == "A", rng.integers(0, 100_000, size=n), rng.integers(0, 100, size=n))
    return pd.DataFrame({"event_type": kinds, "x": x, "s": "q"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--windows", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-node-up-to", type=int, default=1000, help="largest window of the modulo form")
    parser.add_argument("--unpruned-up-to", type=int, default=100, help="largest window of the LIKE form")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    frame = _frame(args.events, args.seed)
    a, b, c = pycel.alias(A, "a"), pycel.alias(B, "b"), pycel.alias(C, "c")
    print(f"{args.events:,} events (A 60 %, B 39.5 %, C 0.5 %), seq(a, c, b) with b.x > a.x")
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
        results = {name: timed(p, frame) for name, p in forms.items()}
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (before the check's sets)
        keys = [r[1].keys() for r in results.values()] if len(results) > 1 else []
        assert all(k == keys[0] for k in keys), "the forms disagree"
        for name, (seconds, matches, visits) in results.items():
            rate = args.events / seconds if seconds > 0 else float("inf")
            shown = f"{visits:,}" if visits else "-"
            print(f"| {w:,} | {name} | {rate:,.0f} | {len(matches):,} | {shown} | {peak:,.0f} |")


if __name__ == "__main__":
    main()
