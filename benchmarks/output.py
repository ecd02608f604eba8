"""Output speed: enumeration and the tables of ``Matches`` on seq3 with all matches.

The workload is ``seq3-all`` of ``benchmarks/run.py`` (T0 ; T1 ; T2 within 100 events,
no filter, 300k seeded events: about 1.5M matches, 4.5M positions). Reported, best of
``--repeat`` runs (wall clock; CPU time and the rate by CPU time beside it, since the
machine may be shared):

* ``run``: ``query.run(frame)`` whole, and positions written per second;
* ``enumeration``: the same minus a run of the pattern with an absent fourth atom
  (``seq3 ; T10``: same ingestion and event loop, no output), positions per second;
* ``to_pandas`` / ``to_arrow`` in the long form (rows = positions) and the wide form
  (rows = matches), and the wide form with every attribute joined in.

Run: ``python benchmarks/output.py [--events N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from workloads import ABSENT, WORKLOADS, event_types, generate  # noqa: E402

import pycel  # noqa: E402


def best_of(repeat: int, work: Callable[[], Any]) -> tuple[float, float, Any]:
    """(best wall seconds, CPU seconds of that run, the last result) over ``repeat`` runs."""
    best = (float("inf"), 0.0)
    result = None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best[0], best[1], result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)

    w = WORKLOADS["seq3-all"]
    frame = generate(w.stream, args.events, args.seed).to_pandas()
    types = event_types()
    query = pycel.compile(w.pattern(types))
    silent = pycel.compile(pycel.seq(types["T0"], types["T1"], types["T2"], types[ABSENT]).within(events=100))
    query.run(frame.iloc[:1000])  # compile (or load from the cache) before timing
    silent.run(frame.iloc[:1000])

    run_s, run_cpu, matches = best_of(args.repeat, lambda: query.run(frame))
    quiet_s, quiet_cpu, _ = best_of(args.repeat, lambda: silent.run(frame))
    positions, n = len(matches.positions), len(matches)
    print(f"seq3-all, {args.events:,} events: {n:,} matches, {positions:,} positions\n")
    print("| what | seconds (CPU) | rate (by CPU time) |")
    print("|---|---|---|")
    print(f"| run | {run_s:.3f} ({run_cpu:.3f}) | {positions / run_s / 1e6:.1f}M positions/s "
          f"({positions / max(run_cpu, 1e-9) / 1e6:.1f}M) |")
    print(f"| run, no output (seq3 ; {ABSENT}) | {quiet_s:.3f} ({quiet_cpu:.3f}) | |")
    enum_s, enum_cpu = max(run_s - quiet_s, 1e-9), max(run_cpu - quiet_cpu, 1e-9)
    print(f"| enumeration (difference) | {enum_s:.3f} ({enum_cpu:.3f}) | {positions / enum_s / 1e6:.1f}M "
          f"positions/s ({positions / enum_cpu / 1e6:.1f}M) |")

    tables: list[tuple[str, int, Callable[[], Any]]] = [
        ("to_pandas() long", positions, lambda: matches.to_pandas()),
        ("to_arrow() long", positions, lambda: matches.to_arrow()),
        ("to_pandas('wide')", n, lambda: matches.to_pandas("wide")),
        ("to_arrow('wide')", n, lambda: matches.to_arrow("wide")),
        ("to_pandas('wide', attributes=True)", n, lambda: matches.to_pandas("wide", attributes=True)),
    ]
    for name, rows, build in tables:
        try:
            seconds, cpu, _ = best_of(args.repeat, build)
        except (AttributeError, TypeError):  # an older pycel without this form
            print(f"| {name} | n/a | |")
            continue
        print(f"| {name} | {seconds:.3f} ({cpu:.3f}) | {rows / seconds / 1e6:.1f}M rows/s "
              f"({rows / max(cpu, 1e-9) / 1e6:.1f}M) |")


if __name__ == "__main__":
    main()
