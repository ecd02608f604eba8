"""LAST, NEXT and MAX with windows (issue #17) against ALL and against CORE.

Since the strategies choose among the matches that fit the window, LAST/NEXT/MAX with a
window run in the ``windowed`` family: the ALL automaton's outputs that fit the window,
then the strategy's choice. This script times them next to ALL on the same queries and
next to CORE (``pycer``, run as in ``benchmarks/run.py``; CORE 0.1.6 ignores the strategy
keywords, so its output is ALL's: matches are compared where the strategy keeps
everything, i.e. ALL, and MAX on seq3 where no match contains another).

Workloads (the synthetic stream of ``benchmarks/workloads.py``, seed 42):
``seq3``: ``T0 ; T1 ; T2`` with ``v < 50`` on each, windows of 100 and 200 events;
``kleene``: ``T0 ; T1+ ; T2`` within 10 events, and, pycel only, within 100 and 200
events under LAST/NEXT/MAX (about 2**10 and 2**20 outputs per T0 and T2 fit the window:
the choice without listing them); and, pycel only, the seq3 query without a window under
LAST/NEXT (the ranked family, constant work per event: what the window's exact choice
costs next to it). Usage::

    python benchmarks/strategies.py --events 100000 --repeat 1
    python benchmarks/strategies.py --skip-core
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from canon import compare  # noqa: E402
from run import run_core, run_pycel, to_matchset  # noqa: E402
from workloads import FILTER_V, StreamSpec, Workload, _seq, generate  # noqa: E402

STRATEGIES = ("ALL", "LAST", "NEXT", "MAX")


def _kleene(strategy: str, window: int) -> Workload:
    def build(T: dict[str, Any]) -> Any:
        import pycel

        p = pycel.seq(T["T0"], pycel.plus(T["T1"]), T["T2"]).within(events=window)
        return p.strategy(strategy.lower()) if strategy != "ALL" else p

    prefix = f"SELECT {strategy} * " if strategy != "ALL" else "SELECT * "
    query = prefix + f"FROM S WHERE T0 ; T1+ ; T2 WITHIN {window} EVENTS"
    return Workload(f"kleene-w{window}-{strategy.lower()}", "kleene", query, build)


def workloads() -> list[Workload]:
    """The benchmark's queries, each with ALL, LAST, NEXT and MAX."""
    ws: list[Workload] = []
    for window in (100, 200):
        for s in STRATEGIES:
            name = f"seq3-w{window}-{s.lower()}"
            strategy = "" if s == "ALL" else s
            ws.append(_seq(name, "seq3", 3, filt=FILTER_V, absent=False, window=window, strategy=strategy))
    ws += [_kleene(s, 10) for s in STRATEGIES]
    # Wider windows, pycel only: ALL (and CORE, which outputs ALL) would list exponentially
    # many matches (about 2**10 and 2**20 per T0 and T2 at windows 100 and 200).
    for window in (100, 200):
        ws += [dataclasses.replace(_kleene(s, window), query="") for s in ("LAST", "NEXT", "MAX")]
    for s in ("LAST", "NEXT"):  # (MAX without a window outputs every seq3 match: no bound)
        ws.append(Workload(f"seq3-nowindow-{s.lower()}", "nowindow", "", _unwindowed_seq3(s)))
    return ws


def _unwindowed_seq3(strategy: str) -> Any:
    def build(T: dict[str, Any]) -> Any:
        import pycel

        atoms = [pycel.alias(T[f"T{i}"], f"e{i + 1}") for i in range(3)]
        return pycel.seq(*(a.where(a.v < FILTER_V) for a in atoms)).strategy(strategy.lower())

    return build


def _kleene_checked(w: Workload, frame: Any, matches: Any) -> str:
    """For ``T0 ; T1+ ; T2`` within w events: the chosen matches, worked out directly. At a
    T2 at j, a T0 at i fits if j - i <= w and some T1 lies between; its maximal match
    takes every T1 between. MAX keeps one per such T0, LAST the latest T0's, NEXT the
    earliest's."""
    import numpy as np

    _, window, strategy = w.name.split("-")
    kinds = frame["event_type"].to_numpy()
    t0, t1, t2 = (np.flatnonzero(kinds == f"T{i}") for i in range(3))
    lo = t2 - int(window[1:])
    last_t1 = np.searchsorted(t1, t2) - 1  # the last T1 before each T2 (index into t1)
    before = np.where(last_t1 >= 0, t1[np.maximum(last_t1, 0)], -1)
    first, stop = np.searchsorted(t0, lo), np.searchsorted(t0, before)  # T0's in [lo, before)
    fitting = np.maximum(stop - first, 0)
    want = {(int(j), int(t0[k])) for j, a, b in zip(t2, first, stop, strict=True) for k in range(a, b)}
    if strategy != "max":
        pick = {}
        for j, i in want:
            pick[j] = max(pick.get(j, -1), i) if strategy == "last" else min(pick.get(j, 1 << 62), i)
        want = set(pick.items())
    assert sum(int(f) for f in fitting) >= len(want)
    got = {(m.end, m.start) for m in matches}
    ok = got == want and len(matches) == len(want)
    # (and each match takes every T1 between its ends; the first 1,000 checked)
    every_t1 = all(
        m.variables["T1"] == tuple(int(p) for p in t1[(t1 > m.start) & (t1 < m.end)])
        for m in list(matches)[:1000]
    )
    return "checked" if ok and every_t1 else f"DIFFER ({len(got ^ want)} (end, start) pairs)"


def _compared(w: Workload, core: dict[str, Any], pycel_matches: Any) -> str:
    """Whether CORE's matches (ALL's) equal pycel's, where they should coincide."""
    if core.get("status") != "ok":
        return f"CORE {core.get('status')}: {str(core.get('error'))[-80:]}"
    coincide = w.name.endswith("-all") or w.name.startswith("seq3") and w.name.endswith("-max")
    if not coincide:
        return f"CORE outputs ALL ({core['matches']:,})"
    from canon import MatchSet

    res = compare(MatchSet.load(core["matches_file"]), to_matchset(pycel_matches))
    if res["equal"]:
        return "equal"
    return f"DIFFER (core-only {res['only_core']}, pycel-only {res['only_other']})"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per engine (median)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--skip-core", action="store_true")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--match-cap", type=int, default=20_000_000)
    args = ap.parse_args(argv)
    events = generate(StreamSpec(), args.events, args.seed)
    frame = events.to_pandas()
    tmp = Path(tempfile.mkdtemp(prefix="pycel-strategies-"))
    core_python = None
    if not args.skip_core:
        from core_env import ensure_core_venv

        core_python = ensure_core_venv()
        csv_path = tmp / "events.csv"
        events.write_csv(csv_path)
    print(f"{args.events:,} events, seed {args.seed}")
    print("| workload | pycel events/s | pycel matches | CORE events/s | vs CORE | CORE matches |")
    print("|---|---:|---:|---:|---:|---|")
    try:
        for w in workloads():
            times, matches = [], None
            for _ in range(args.repeat):
                elapsed, matches, _, _ = run_pycel(w, frame)
                times.append(elapsed)
            rate = args.events / sorted(times)[len(times) // 2]
            core_cell, ratio, cmp = "-", "-", "-"
            if w.name.startswith("kleene") and not w.query:
                cmp = _kleene_checked(w, frame, matches)
            if core_python is not None and w.query:  # no CORE query: pycel only
                core = run_core(core_python, w, csv_path, tmp, args)
                if core.get("status") == "ok":
                    core_rate = args.events / sorted(core["times_s"])[len(core["times_s"]) // 2]
                    core_cell, ratio = f"{core_rate:,.0f}", f"{rate / core_rate:.1f}x"
                cmp = _compared(w, core, matches)
            row = [w.name, f"{rate:,.0f}", f"{len(matches):,}", core_cell, ratio, cmp]
            print("| " + " | ".join(row) + " |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - started:.0f} s)")
    sys.exit(code)
