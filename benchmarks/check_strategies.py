"""Check pycel's NEXT, LAST and MAX output against the brute-force oracle on a prefix of the
benchmark stream.

The prefix is cut from the full benchmark stream (``--stream-events``, 300,000 as
run.py): a shorter generated stream would hold different events. The benchmark
workloads next-x*/last-x*/max-x* end in T10, which never occurs, so they have no
output and comparing them is vacuous. This script therefore compares two things on the
first ``--events`` events of the same seeded stream (seed 42, as benchmarks/run.py):

1. the benchmark patterns themselves (seq3 v < 50 ; T10, window 100..400 events);
2. the same patterns without the T10 atom (seq3 v < 50, window 100..400 events), which do
   produce output, with NEXT, LAST, MAX and ALL (ALL for scale; MAX equals ALL here, as
   no seq3 match contains another with the same end).

Matches are compared exactly: (start, end, variable -> positions). Usage::

    python benchmarks/check_strategies.py --events 2000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from workloads import FILTER_V, WORKLOADS, StreamSpec, _seq_pattern, event_types, generate


def _key(matches: Any) -> list[tuple[Any, ...]]:
    return sorted((m.start, m.end, m.valuation) for m in matches)


def check(events: int, seed: int, stream_events: int) -> list[dict[str, Any]]:
    import pycel
    import pycel.reference

    frame = generate(StreamSpec(), stream_events, seed).to_pandas().iloc[:events]
    types = event_types()
    rows: list[dict[str, Any]] = []
    for absent in (True, False):
        for strategy in ("NEXT", "LAST", "MAX", "ALL"):
            if absent and strategy == "ALL":
                continue
            strat = "" if strategy == "ALL" else strategy
            for m in (1, 2, 3, 4):
                pattern = _seq_pattern(3, filt=FILTER_V, absent=absent, window=100 * m, strategy=strat)(types)
                t0 = time.perf_counter()
                ref = _key(pycel.reference.evaluate(pattern, frame))
                t_ref = time.perf_counter() - t0
                query = pycel.compile(pattern, types=list(types.values()))
                got = _key(query.run(frame))
                rows.append(
                    {
                        "pattern": f"seq3 v<{FILTER_V}" + (" ; T10" if absent else ""),
                        "strategy": strategy,
                        "window": 100 * m,
                        "reference": len(ref),
                        "pycel": len(got),
                        "equal": ref == got,
                        "reference_s": t_ref,
                    }
                )
                r = rows[-1]
                print(
                    f"{r['pattern']:16} {strategy:4} w={r['window']:3}  reference {r['reference']:6}  "
                    f"pycel {r['pycel']:6}  equal {r['equal']}  ({t_ref:.1f} s)",
                    flush=True,
                )
    return rows


def _median_rate(query: Any, frame: Any) -> tuple[int, float]:
    """(matches, events/s of the median of 3 runs) after a 2,000-event warm-up."""
    import statistics

    query.run(frame.iloc[:2000])
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        n = len(query.run(frame))
        times.append(time.perf_counter() - t0)
    return n, len(frame) / statistics.median(times)


def timing(seed: int, stream_events: int) -> None:
    """pycel only: seq3 v < 50 without T10 (it has output) under NEXT, LAST, MAX and ALL."""
    import pycel

    frame = generate(StreamSpec(), stream_events, seed).to_pandas()
    types = event_types()
    print("| pattern | strategy | window | matches | pycel ev/s (median of 3) |")
    print("|---|---|---:|---:|---:|")
    for strategy in ("NEXT", "LAST", "MAX", "ALL"):
        for window in (100, 400):
            pattern = _seq_pattern(
                3, filt=FILTER_V, absent=False, window=window, strategy="" if strategy == "ALL" else strategy
            )(types)
            n, rate = _median_rate(pycel.compile(pattern, types=list(types.values())), frame)
            print(f"| seq3 v<{FILTER_V} | {strategy} | {window} | {n:,} | {rate:,.0f} |", flush=True)
    # Where MAX differs from ALL: T0 ; T1+ ; T2 (the kleene workload, LIMIT 1000 per end).
    for strategy in ("MAX", "ALL"):
        pattern = WORKLOADS["kleene"].pattern(types)
        if strategy == "MAX":
            pattern = pattern.strategy("max")
        n, rate = _median_rate(pycel.compile(pattern, types=list(types.values())), frame)
        print(f"| T0 ; T1+ ; T2 | {strategy} | 30 | {n:,} | {rate:,.0f} |", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2000, help="prefix length (default 2000)")
    ap.add_argument("--seed", type=int, default=42, help="stream seed (default 42, as run.py)")
    ap.add_argument(
        "--stream-events", type=int, default=300_000, help="length of the stream cut (default 300000)"
    )
    ap.add_argument(
        "--timing", action="store_true", help="also time pycel (no T10) on the whole stream, median of 3"
    )
    args = ap.parse_args(argv)
    if args.timing:
        timing(args.seed, args.stream_events)
    rows = check(args.events, args.seed, args.stream_events)
    print("| pattern | strategy | window | matches (reference) | matches (pycel) | equal? |")
    print("|---|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['pattern']} | {r['strategy']} | {r['window']} | {r['reference']:,} | {r['pycel']:,} | "
            f"{'yes' if r['equal'] else 'NO'} |"
        )
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
