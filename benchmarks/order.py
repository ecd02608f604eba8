"""Benchmark comparisons between occurrences and trends: on the automaton vs post-filters.

A seeded stream of ``--events`` events (default 1M) over ``--keys`` stocks (default 1,000):
sells (5 %), ticks (90 %) and buys (5 %), each for a uniformly drawn stock whose price is a
random walk (±0.2 % a step). For each count window w of ``--windows`` it runs

* **rise**: ``seq(s, b).where(b.price > s.price * 1.002)`` — a buy 0.2 % above a sell, per stock;
* **trend**: ``seq(s, plus(t.where(t.price > prev(t).price)), b).where(t.price > s.price)``
  with ``limit(1)`` — a sell, a rising run of ticks all above it, a buy, per stock; every
  end reports one match (the trend's matches grow exponentially with the window);

each once with the comparisons on the automaton (the ordered run index) and once as
``where(..., post_filter=True)`` (the trend's ``prev`` stays on the automaton: it has no
post-filter form). The rise gives identical matches both ways (checked); the trend with
``limit(1)`` gives a match at the same ends both ways (checked), and each match it
reports is checked to satisfy every comparison. The post-filter form enumerates every
match before filtering (exponentially many for the trend), so above ``--post-max-window``
the trend's post-filter form is not run.

Timings are the median of ``--repeat`` runs after one untimed run (compile or cache load);
CPU seconds of the process, since the machine may be shared. CORE has no counterpart: it
evaluates such comparisons after enumerating.

    python benchmarks/order.py                      # 1M events, windows 100 … 100,000
    python benchmarks/order.py --events 200000 --windows 100,1000 --repeat 1

``--strategies`` (default ``last,next``) also runs the trend without ``limit(1)`` under
LAST and NEXT with each window: the loop chooses one match per end.

Results: printed, and written to benchmarks/results/order.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pycel  # noqa: E402


class Quote(pycel.Event):
    stock: pycel.Field[int]
    price: pycel.Field[float]


class Sell(Quote): ...


class Tick(Quote): ...


class Buy(Quote): ...


def quotes(n: int, keys: int, seed: int = 1) -> pd.DataFrame:
    """Sells, ticks and buys over ``keys`` stocks, each stock's price a random walk."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["Sell", "Tick", "Buy"], size=n, p=[0.05, 0.9, 0.05])
    stock = rng.integers(0, keys, size=n)
    steps = rng.normal(0.0, 0.002, size=n)
    # Each stock's walk: cumulative steps within the stock, in stream order.
    order = np.lexsort((np.arange(n), stock))
    walk = np.empty(n)
    sorted_steps = steps[order]
    starts = np.r_[0, np.flatnonzero(np.diff(stock[order])) + 1]
    cum = np.cumsum(sorted_steps)
    base = np.repeat(cum[starts] - sorted_steps[starts], np.diff(np.r_[starts, n]))
    walk[order] = 100.0 * np.exp(cum - base)
    return pd.DataFrame({"event_type": kinds, "stock": stock, "price": walk.round(4)})


def rise(window: int, post: bool) -> pycel.Pattern:
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    body = pycel.seq(s, b).where(b.price > s.price * 1.002, post_filter=post)
    return body.within(events=window).partition_by("stock")


def trend(window: int, post: bool) -> pycel.Pattern:
    s, t, b = pycel.alias(Sell, "s"), pycel.alias(Tick, "t"), pycel.alias(Buy, "b")
    rising = pycel.plus(t.where(t.price > pycel.prev(t).price))
    body = pycel.seq(s, rising, b).where(t.price > s.price, post_filter=post)
    return body.within(events=window).partition_by("stock").limit(1)


def chosen_trend(window: int, strategy: str) -> pycel.Pattern:
    """The trend without limit(1), one match per end chosen by ``strategy`` (LAST: the
    latest ticks; NEXT: the earliest sell and ticks) among those inside the window."""
    s, t, b = pycel.alias(Sell, "s"), pycel.alias(Tick, "t"), pycel.alias(Buy, "b")
    rising = pycel.plus(t.where(t.price > pycel.prev(t).price))
    body = pycel.seq(s, rising, b).where(t.price > s.price)
    return body.within(events=window).partition_by("stock").strategy(strategy)  # type: ignore[arg-type]


def run(pattern: pycel.Pattern, events: pd.DataFrame) -> pycel.Matches:
    return pycel.compile(pattern).run(events)


def index_shape(pattern: pycel.Pattern, events: pd.DataFrame, window: int) -> dict[str, float]:
    """What the indexed form's store holds after the stream (untimed): heap (treap) and
    extend nodes made per event, the largest treaps' mean number of nodes (per key, in the
    state whose treaps are largest) and mean node depth, the greatest treap height, and
    the heap arena's live nodes and capacity."""
    from pycel.jit.store import C_E_NEXT, C_MAX_DEPTH, C_U_NEXT, H_STATE, H_VAL, U_LEFT, U_MS, U_RIGHT

    stream = pycel.compile(pattern).stream()
    stream.push(events)
    store, n = stream.runner.store, len(events)
    U, HT, ctr = store.U, store.HT, store.ctr
    lo, mask, oldest = n - 1 - window, U.shape[1] - 1, int(ctr[C_U_NEXT]) - U.shape[1]
    sizes: dict[int, list[tuple[int, int]]] = {}  # state: (nodes, sum of depths) per key
    for slot in np.flatnonzero(HT[H_STATE] >= 0):
        todo, nodes, depths = [(int(HT[H_VAL, slot]), 1)], 0, 0
        while todo:
            node, depth = todo.pop()
            if node < 0 or node < oldest or U[U_MS, node & mask] < lo:
                continue
            nodes, depths = nodes + 1, depths + depth
            todo += [(int(U[U_LEFT, node & mask]), depth + 1), (int(U[U_RIGHT, node & mask]), depth + 1)]
        sizes.setdefault(int(HT[H_STATE, slot]), []).append((nodes, depths))
    largest = max(sizes.values(), key=lambda rows: sum(r[0] for r in rows), default=[(0, 0)])
    stats = stream.stats()
    return {
        "heap nodes/event": ctr[C_U_NEXT] / n,
        "extend nodes/event": ctr[C_E_NEXT] / n,
        "treap nodes": sum(r[0] for r in largest) / len(largest),
        "mean depth": sum(r[1] for r in largest) / max(1, sum(r[0] for r in largest)),
        "max height": int(ctr[C_MAX_DEPTH]),
        "live heap nodes": stats["live_heap_nodes"],
        "heap capacity": stats["heap_capacity"],
    }


def timed(f: Callable[[], pycel.Matches], repeat: int) -> tuple[float, pycel.Matches]:
    """(median CPU seconds of ``repeat`` calls after an untimed one, the last result)."""
    result = f()
    times = []
    for _ in range(repeat):
        began = time.process_time()
        result = f()
        times.append(time.process_time() - began)
    return statistics.median(times), result


def check_trend(matches: pycel.Matches, events: pd.DataFrame) -> None:
    """Every reported trend match: ticks rising, all above the sell."""
    price = events["price"].to_numpy()
    for m in matches:
        ticks = [price[p] for p in m["t"]]
        sell = price[m["s"][0]]
        if any(b <= a for a, b in zip(ticks, ticks[1:], strict=False)) or min(ticks) <= sell:
            raise SystemExit(f"trend match {m} breaks a comparison")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--windows", default="100,1000,10000,100000", help="count windows, comma-separated")
    parser.add_argument("--post-max-window", type=int, default=10_000, help="largest trend post-filter run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategies", default="last,next", help="chosen-trend strategies, or empty")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "order.md"))
    args = parser.parse_args()
    events = quotes(args.events, args.keys)
    rows = []
    shapes: list[tuple[str, int, dict[str, float]]] = []
    for name, make in (("rise", rise), ("trend", trend)):
        for w in (int(x) for x in args.windows.split(",")):
            indexed_s, indexed = timed(lambda m=make, w=w: run(m(w, False), events), args.repeat)
            post_s: float | None = None
            if name == "rise" or w <= args.post_max_window:  # the rise's post-filter form stays linear
                post_s, post = timed(lambda m=make, w=w: run(m(w, True), events), args.repeat)
                same = indexed.keys() == post.keys() if name == "rise" else (
                    {m.end for m in indexed} == {m.end for m in post}
                )
                if not same:
                    raise SystemExit(f"{name}, window {w}: the two forms disagree")
            if name == "trend":
                check_trend(indexed, events)
            rows.append((name, w, len(indexed), args.events / indexed_s, indexed_s, post_s))
            shapes.append((name, w, index_shape(make(w, False), events, w)))
            print(f"{name} window {w}: {rows[-1]} {shapes[-1][2]}", flush=True)
    chosen = []
    for strategy in filter(None, args.strategies.split(",")):
        for w in (int(x) for x in args.windows.split(",")):
            chosen_s, matches = timed(lambda st=strategy, w=w: run(chosen_trend(w, st), events), args.repeat)
            check_trend(matches, events)
            chosen.append((strategy, w, len(matches), args.events / chosen_s, chosen_s))
            print(f"trend {strategy} window {w}: {chosen[-1]}", flush=True)
    lines = [
        "# Comparisons between occurrences: the ordered run index vs post-filters",
        "",
        f"`python benchmarks/order.py --events {args.events} --keys {args.keys} --windows {args.windows} "
        f"--post-max-window {args.post_max_window} --repeat {args.repeat}`; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}; CPU seconds (median of {args.repeat}); the two forms "
        "checked to agree (rise: identical matches; trend with limit(1): the same ends, and every "
        "match reported satisfies the comparisons).",
        "",
        "| pattern | window | matches | indexed ev/CPU-s | indexed s | post-filter s | post / indexed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, w, m, rate, x, y in rows:
        post_text = f"{y:.3f}" if y is not None else "not run"
        ratio = f"{y / x:.1f}×" if y is not None else "-"
        lines.append(f"| {name} | {w:,} | {m:,} | {rate / 1e6:.2f}M | {x:.3f} | {post_text} | {ratio} |")
    lines += [
        "",
        "What the indexed form's store holds after the stream (untimed; `index_shape`): heap (treap)",
        "and extend nodes made per event; per key, in the state whose treaps are largest, the mean",
        "number of treap nodes inside the window and their mean depth; the greatest treap height;",
        "the heap arena's nodes made inside the window and its capacity.",
        "",
        "| pattern | window | heap nodes/event | extend nodes/event | treap nodes | mean depth | max height "
        "| live heap nodes | heap capacity |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, w, sh in shapes:
        lines.append(
            f"| {name} | {w:,} | {sh['heap nodes/event']:.2f} | {sh['extend nodes/event']:.2f} "
            f"| {sh['treap nodes']:.1f} | {sh['mean depth']:.2f} | {sh['max height']} "
            f"| {int(sh['live heap nodes']):,} | {int(sh['heap capacity']):,} |"
        )
    if chosen:
        lines += [
            "",
            "The trend without `limit(1)`, LAST or NEXT choosing one match per end among those inside",
            "the window (the loop's chooser, `pycel/jit/choose.py`; every match checked rising and above",
            "the sell). ALL would enumerate every rising run.",
            "",
            "| strategy | window | matches | ev/CPU-s | s |",
            "|---|---|---|---|---|",
        ]
        for strategy, w, m, rate, x in chosen:
            lines.append(f"| {strategy} | {w:,} | {m:,} | {rate / 1e6:.2f}M | {x:.3f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
