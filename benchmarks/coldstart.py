"""Cold and warm first-query times per automaton family (issue #13, "Cold start").

For each family a fresh Python process with an empty Numba cache directory
(``NUMBA_CACHE_DIR``) imports pycel, compiles one query of that family and runs it on a
small stream: that is the *cold* first query (Numba compiles the family's loop and writes
it to the cache). A second fresh process with the same cache directory does the same: the
*warm* first query (the loop is loaded from the cache). Times are CPU seconds of the
child process (``time.process_time``) and wall seconds; the import of pycel is listed
apart. ``--profile`` lists, for the cold run, where Numba's compile time goes per
function (Numba's ``numba:compile`` events, stamped with CPU time: inclusive time, self
time without the functions it compiled in turn, and how many type signatures were
compiled). Usage::

    python benchmarks/coldstart.py
    python benchmarks/coldstart.py --families sequential --profile
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

FAMILIES = ("sequential", "ranked", "maximal", "windowed", "windowed-next", "parallel", "ordered")


def _query(family: str) -> Any:
    """One query of ``family`` over the event types T0, T1, T2 (attributes v, k, time)."""
    import pycel

    class T(pycel.Event):
        v: pycel.Field[int]
        k: pycel.Field[int]
        time: pycel.Field[int]

    types = {name: type(name, (T,), {}) for name in ("T0", "T1", "T2")}
    a, b, c = (pycel.alias(types[f"T{i}"], v) for i, v in enumerate("abc"))
    seq3 = pycel.seq(a.where(a.v < 50), b.where(b.v < 50), c.where(c.v < 50))
    if family == "sequential":
        pattern = seq3.within(events=100)
    elif family == "ranked":
        pattern = seq3.strategy("last")
    elif family == "maximal":
        pattern = seq3.strategy("max")
    elif family == "windowed":
        pattern = seq3.within(events=100).strategy("last")
    elif family == "windowed-next":  # NEXT compiles its own chooser (pycel/jit/choose.py)
        pattern = seq3.within(events=100).strategy("next")
    elif family == "ordered":  # an order comparison between occurrences: the ordered loop
        pattern = pycel.seq(a, b, c).where(b.v > a.v).within(events=100)
    else:  # parallel: nested join classes, no single run key
        pattern = (a & b & c).where((b.k == c.k) & (b.v == c.v)).within(events=100)
    query = pycel.compile(pattern)
    if family == "ordered":  # the sequential runner's ordered loop (pycel/jit/ordered.py)
        assert query.family == "sequential" and query.nfa.conditions, (query.family, query.nfa.conditions)
    else:
        assert query.family == family.split("-")[0], (family, query.family)
    return query


def _events(n: int) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(42)
    return pd.DataFrame(
        {
            "event_type": rng.choice(["T0", "T1", "T2"], size=n),
            "v": rng.integers(0, 100, size=n),
            "k": rng.integers(0, 3, size=n),
            "time": np.arange(n, dtype=np.int64),
        }
    )


def _cpu_recorder() -> Any:
    """A ``numba:compile`` listener that stamps events with the process's CPU time (Numba's
    own recorder stamps wall time, which counts the other processes of a shared machine)."""
    from numba.core import event

    class CpuRecorder(event.Listener):
        def __init__(self) -> None:
            self.buffer: list[tuple[float, Any]] = []

        def on_start(self, ev: Any) -> None:
            self.buffer.append((time.process_time(), ev))

        def on_end(self, ev: Any) -> None:
            self.buffer.append((time.process_time(), ev))

    return CpuRecorder()


def _compile_profile(buffer: list[Any]) -> list[dict[str, Any]]:
    """Per function: inclusive and self compile seconds and the signatures compiled, from
    Numba's nested ``numba:compile`` start/end events."""
    rows: dict[str, dict[str, Any]] = {}
    stack: list[list[Any]] = []  # [name, start, child seconds]
    for stamp, event in buffer:
        name = getattr(event.data["dispatcher"], "__qualname__", "?")
        module = getattr(event.data["dispatcher"].py_func, "__module__", "")
        name = f"{module.rsplit('.', 1)[-1]}.{name}"
        if event.is_start:
            stack.append([name, stamp, 0.0])
            continue
        _, start, children = stack.pop()
        total = stamp - start
        if stack:
            stack[-1][2] += total
        row = rows.setdefault(name, {"function": name, "signatures": 0, "inclusive": 0.0, "self": 0.0})
        row["signatures"] += 1
        row["self"] += total - children
        if not stack or all(frame[0] != name for frame in stack):
            row["inclusive"] += total
    return sorted(rows.values(), key=lambda r: -r["self"])


def child(family: str, events: int, profile: bool) -> None:
    """Time import, compile and first run of one family's query; print JSON."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    import pycel  # noqa: F401

    cpu1, wall1 = time.process_time(), time.perf_counter()
    data = _events(events)
    result: dict[str, Any] = {}
    if profile:
        from numba.core import event

        recorder = _cpu_recorder()
        event.register("numba:compile", recorder)  # type: ignore[no-untyped-call]
        try:
            matches = _query(family).run(data)
        finally:
            event.unregister("numba:compile", recorder)  # type: ignore[no-untyped-call]
        result["profile"] = _compile_profile(recorder.buffer)
    else:
        matches = _query(family).run(data)
    cpu2, wall2 = time.process_time(), time.perf_counter()
    if family == "ordered":  # the run went through the ordered loop, not the ALL loop
        from pycel.jit import ordered, runtime

        assert ordered.loop_variants() and not runtime.loop_variants()
    result.update(
        family=family,
        matches=len(matches),
        import_cpu=cpu1 - cpu0,
        import_wall=wall1 - wall0,
        query_cpu=cpu2 - cpu1,
        query_wall=wall2 - wall1,
    )
    print(json.dumps(result))


def _run_child(family: str, cache_dir: str, events: int, profile: bool) -> dict[str, Any]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    cmd = [sys.executable, __file__, "--child", family, "--events", str(events)]
    if profile:
        cmd.append("--profile")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--profile", action="store_true", help="per-function compile times of the cold run")
    parser.add_argument("--top", type=int, default=25, help="profile rows shown per family")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.events, args.profile)
        return
    print("| family | import (CPU s) | cold first query CPU s (wall) | warm first query CPU s (wall) |")
    print("|---|---:|---:|---:|")
    profiles = []
    for family in args.families.split(","):
        with tempfile.TemporaryDirectory(prefix="pycel-coldstart-") as cache_dir:
            cold = _run_child(family, cache_dir, args.events, args.profile)
            warm = _run_child(family, cache_dir, args.events, False)
        if cold["matches"] != warm["matches"]:
            raise SystemExit(f"{family}: cold and warm runs disagree")
        print(
            f"| {family} | {cold['import_cpu']:.2f} | {cold['query_cpu']:.1f} ({cold['query_wall']:.1f}) "
            f"| {warm['query_cpu']:.2f} ({warm['query_wall']:.2f}) |",
            flush=True,
        )
        if args.profile:
            profiles.append((family, cold["profile"]))
    for family, rows in profiles:
        total = sum(r["self"] for r in rows)
        print(f"\n{family}: {total:.1f} s compiling, {len(rows)} functions (self time, top {args.top})")
        print("| function | signatures | self s | inclusive s |")
        print("|---|---:|---:|---:|")
        for r in rows[: args.top]:
            print(f"| {r['function']} | {r['signatures']} | {r['self']:.2f} | {r['inclusive']:.2f} |")


if __name__ == "__main__":
    main()
