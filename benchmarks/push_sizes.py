"""What a push costs by its size: the quickstart query on a stream pushed in batches.

Each ``Stream.push`` checks and encodes its batch and calls the compiled loop once, so a
push has a fixed cost besides its per-event work. This runs the quickstart pattern (a
SELL of INTC, a BUY of RIMM above 10, a BUY of QQQ, within 10 seconds) over its generated
stream pushed in batches of 1 … 200,000 events (DataFrame slices), after one untimed
push (the compile or cache load), and prints events per CPU-second and CPU microseconds
per push; every size's matches are checked equal to one ``query.run``. Usage::

    python benchmarks/push_sizes.py
    python benchmarks/push_sizes.py --events 100000 --sizes 1,100,10000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pycel  # noqa: E402
from examples.quickstart import generate, quickstart_pattern  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--sizes", default="1,10,100,1000,10000,200000", help="push sizes, comma-separated")
    parser.add_argument(
        "--small-events", type=int, default=20_000, help="events pushed for sizes below 1,000 (default 20000)"
    )
    args = parser.parse_args()
    query = pycel.compile(quickstart_pattern())
    events = generate(args.events)
    query.stream().push(events.iloc[:10])  # compile or load the loop
    print("| push size | events | events/CPU-s | CPU µs per push |")
    print("|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        n = min(len(events), args.small_events) if size < 1000 else len(events)
        data = events.iloc[:n]
        pieces = [data.iloc[i : i + size] for i in range(0, n, size)]
        stream = query.stream()
        pushed = []
        started = time.process_time()
        for piece in pieces:
            # Only the arrays are kept, as a consumer would: a Matches also holds its
            # batch, and thousands of batches alive would slow the pushes down (memory).
            m = stream.push(piece)
            pushed.append((m.starts, m.ends, m.offsets, m.var_ids, m.positions))
        seconds = time.process_time() - started
        variables = query.plan.variables
        found = set().union(*(pycel.Matches(*arrays, variables).keys() for arrays in pushed))
        if found != query.run(data).keys():
            raise SystemExit(f"push size {size}: the matches differ from one run's")
        rate = n / seconds
        print(f"| {size:,} | {n:,} | {rate / 1e6:.3f}M | {seconds / len(pieces) * 1e6:,.0f} |")


if __name__ == "__main__":
    main()
