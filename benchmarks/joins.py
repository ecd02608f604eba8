"""Benchmark pycel's equality joins (run keys): window scaling, and PARTITION BY as joins vs CORE.

A correlation such as ``seq(T0, T1, T2).where((T0.k == T1.k) & (T1.k == T2.k))``, where one
class of equal attributes constrains every event of a match, runs in the engine as a run
key, like PARTITION BY (pycel/plan/joins.py). This script measures:

a. **Window scaling** (pycel only): a seeded stream of ``--events`` events (default 1M) whose
   key ``k`` is uniform over ``--keys`` values (default 1,000); types T0 and T1 at 45 % each,
   T2 rare (0.1 %), T3 as noise. For each window w of ``--windows`` it runs
   ``seq(T0, T1, X).where((T0.k == T1.k) & (T1.k == X.k)).within(events=w)`` with
   X = T10, a declared type that never occurs (no output: the pure per-event update cost),
   and with X = T2 (with output: every match materialized), each also as the same pattern
   with ``partition_by("k")`` instead of the joins. Reports events/s, matches, peak RSS and
   ``stream.stats()`` (live nodes, capacities, max heap depth) per window.
b. **PARTITION BY workloads as joins vs CORE**: the PARTITION BY workloads of workloads.py
   (and the same query on a 1,000-key stream) run by CORE (pycer) on their CEQL and by
   pycel both as the equivalent join pattern and as ``partition_by``, on identical events
   (``--core-events``, default 300k); the match sets are compared exactly (canon.py).

Every measurement runs in a fresh child process (so peak RSS is its own); the first call of
a query pays Numba's compile (or cache load), which is timed separately on a 2,000-event
warm-up and excluded from the throughput. Timings are medians of ``--repeat`` runs.

    python benchmarks/joins.py                      # everything, full sizes
    python benchmarks/joins.py --events 200000 --windows 100,10000 --repeat 1 --skip-core
    python benchmarks/joins.py --report-only        # re-render joins.md/.png from joins.json

Results: benchmarks/results/joins.md, joins.json and joins.png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import run as bench  # noqa: E402  (run.py: pycel/CORE runners, comparison, RSS helpers)
from canon import summary  # noqa: E402
from workloads import ABSENT, WORKLOADS, Events, StreamSpec, Workload, event_types, generate  # noqa: E402

# -- a. window scaling ----------------------------------------------------------------------
#: Type mix of the scaling stream: T0, T1 frequent, T2 rare (bounds the output), T3 noise.
SCALE_MIX = (0.45, 0.45, 0.001, 0.099)
FORMS = ("join", "partition")
VARIANTS = ("noout", "out")


def scale_stream(n: int, n_keys: int, seed: int) -> Events:
    """The seeded scaling stream (types T0..T3 with SCALE_MIX, ``k`` uniform in [0, n_keys))."""
    rng = np.random.default_rng([seed, n_keys, 2])
    return Events(
        rng.choice(len(SCALE_MIX), size=n, p=SCALE_MIX).astype(np.int8),
        rng.integers(0, n_keys, n).astype(np.int64),
        rng.integers(0, 100, n).astype(np.int64),
    )


def scale_pattern(T: dict[str, Any], form: str, variant: str, window: int) -> Any:
    """``seq(T0, T1, X)`` correlated on ``k``: by equality joins or by ``partition_by``;
    X = T2 (with output) or the absent T10 (no output)."""
    import pycel

    a, b = T["T0"], T["T1"]
    c = T["T2"] if variant == "out" else T[ABSENT]
    p = pycel.seq(a, b, c)
    if form == "join":
        return p.where((a.k == b.k) & (b.k == c.k)).within(events=window)
    return p.within(events=window).partition_by("k")


def scale_text(form: str, variant: str, window: int) -> str:
    last = "T2" if variant == "out" else ABSENT
    if form == "join":
        return f"seq(T0, T1, {last}).where((T0.k == T1.k) & (T1.k == {last}.k)).within(events={window})"
    return f'seq(T0, T1, {last}).within(events={window}).partition_by("k")'


def scale_child(spec_path: str) -> int:
    """Child-process entry: one (form, variant, window) on the scaling stream."""
    spec = json.loads(Path(spec_path).read_text())
    out: dict[str, Any] = {k: spec[k] for k in ("form", "variant", "window")}
    try:
        import pycel

        frame = Events.load(Path(spec["events_npz"])).to_pandas()
        out["events"] = len(frame)
        out["rss_data_kb"] = bench._current_rss_kb()
        types = event_types()
        t0 = time.perf_counter()
        query = pycel.compile(
            scale_pattern(types, spec["form"], spec["variant"], int(spec["window"])),
            types=list(types.values()),
        )
        query.run(frame.iloc[: bench.WARMUP_EVENTS])
        out["compile_s"] = time.perf_counter() - t0
        out["rss_warm_kb"] = bench._current_rss_kb()
        times: list[float] = []
        cpu: list[float] = []
        counts: list[int] = []
        got: Any = None
        stats: dict[str, int] = {}
        for _ in range(int(spec["repeat"])):
            got = None
            stream = query.stream()
            c0, t1 = bench._cpu_seconds(), time.perf_counter()
            got = stream.push(frame)
            times.append(time.perf_counter() - t1)
            cpu.append(bench._cpu_seconds() - c0)
            counts.append(len(got))
            stats = stream.stats()
            del stream
        out.update(times_s=times, cpu_s=cpu, stats=stats, peak_rss_kb=bench._peak_rss_kb())
        out.update(summary(bench.to_matchset(got)))
        if len(set(counts)) > 1:
            out["warning"] = f"match counts differ between repeats: {counts}"
        out["status"] = "ok"
    except Exception as exc:
        out.update(status="error", error=f"{type(exc).__name__}: {exc}")
    Path(spec["result_out"]).write_text(json.dumps(out, indent=1))
    return 0


def run_scaling(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    ev = scale_stream(args.events, args.keys, args.seed)
    npz = tmp / "scale.npz"
    ev.save(npz)
    rows: list[dict[str, Any]] = []
    for window in args.windows:
        for variant in VARIANTS:
            for form in FORMS:
                tag = f"scale-{form}-{variant}-{window}"
                spec = {
                    "form": form,
                    "variant": variant,
                    "window": window,
                    "events_npz": str(npz),
                    "repeat": args.repeat,
                    "result_out": str(tmp / f"{tag}.json"),
                }
                res = bench._run_child(
                    [sys.executable, __file__, "--scale-child"], spec, tmp, tag, args.timeout
                )
                res.update(form=form, variant=variant, window=window)
                res.pop("worker_stdout_tail", None)
                rows.append(res)
                depth = res.get("stats", {}).get("max_heap_depth", "-")
                print(
                    f"  w={window:>7,} {variant:5} {form:9} {_rate_text(res)} ev/s, "
                    f"{res.get('matches', '-')} matches, depth {depth}",
                    flush=True,
                )
    return rows


# -- b. PARTITION BY workloads as joins, vs CORE ----------------------------------------------
def _join_seq3(T: dict[str, Any]) -> Any:
    import pycel

    a, b, c = T["T0"], T["T1"], T["T2"]
    return pycel.seq(a, b, c).where((a.k == b.k) & (b.k == c.k)).within(events=100)


def _join_seq3_consume(T: dict[str, Any]) -> Any:
    return _join_seq3(T).consume("partition")


def _partition_seq3(T: dict[str, Any]) -> Any:
    import pycel

    return pycel.seq(T["T0"], T["T1"], T["T2"]).within(events=100).partition_by("k")


K1000 = StreamSpec(n_keys=1000)
_P = WORKLOADS["partition"]
#: (CORE's workload, pycel's join twin, pycel's partition_by reference); the twins carry the
#: CORE query text so run.py's helpers can run and compare them.
PAIRS: list[tuple[Workload, Workload, Workload]] = [
    (
        _P,
        Workload("partition-join", "joins", _P.query, _join_seq3, note="k over 10 values"),
        _P,
    ),
    (
        WORKLOADS["partition-consume"],
        Workload(
            "partition-consume-join",
            "joins",
            WORKLOADS["partition-consume"].query,
            _join_seq3_consume,
            note='consume("partition") with joins and no partition_by acts as consume("any")',
        ),
        WORKLOADS["partition-consume"],
    ),
    (
        Workload(
            "partition-k1000", "joins", _P.query, _partition_seq3, stream=K1000, note="k over 1,000 values"
        ),
        Workload("partition-k1000-join", "joins", _P.query, _join_seq3, stream=K1000),
        Workload("partition-k1000-pb", "joins", _P.query, _partition_seq3, stream=K1000),
    ),
]


def register_workloads() -> None:
    """Make the twins known to run.py's pycel_child (it looks workloads up by name)."""
    for trio in PAIRS:
        for w in trio:
            WORKLOADS.setdefault(w.name, w)


def run_pycel_workload(w: Workload, npz: Path, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    """run.py's pycel child (run_pycel on ``w``) started through this script, which knows the twins."""
    spec = {
        "workload": w.name,
        "events_npz": str(npz),
        "repeat": args.repeat,
        "result_out": str(tmp / f"pycel-{w.name}.json"),
        "matches_out": str(tmp / f"pycel-{w.name}.npz"),
        "match_cap": args.match_cap,
    }
    res = bench._run_child(
        [sys.executable, __file__, "--pycel-child"], spec, tmp, f"pycel-{w.name}", args.timeout
    )
    res.pop("worker_stdout_tail", None)
    return res


def run_versus_core(args: argparse.Namespace, tmp: Path, core_python: Path | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    streams: dict[StreamSpec, tuple[Path, Path]] = {}
    for core_w, join_w, pb_w in PAIRS:
        if core_w.stream not in streams:
            ev = generate(core_w.stream, args.core_events, args.seed)
            csv_path, npz = tmp / f"events-{core_w.stream.key}.csv", tmp / f"events-{core_w.stream.key}.npz"
            ev.write_csv(csv_path)
            ev.save(npz)
            streams[core_w.stream] = (csv_path, npz)
        csv_path, npz = streams[core_w.stream]
        print(f"  {core_w.name}: {core_w.query}", flush=True)
        core: dict[str, Any] | None = None
        if core_python is not None and not args.skip_core:
            core = bench.run_core(core_python, core_w, csv_path, tmp, args)
            core.pop("worker_stdout_tail", None)
        join = run_pycel_workload(join_w, npz, tmp, args)
        pb = run_pycel_workload(pb_w, npz, tmp, args)
        cmp_join = bench.compare_results(join_w, core or {}, join)
        cmp_pb = bench.compare_results(pb_w, core or {}, pb)
        # Without CORE: still check the join against pycel's own partition_by.
        cmp_self = bench.compare_results(join_w, {**pb, "matches_file": pb.get("matches_file")}, join)
        row = {
            "name": core_w.name,
            "query": core_w.query,
            "events": args.core_events,
            "keys": core_w.stream.n_keys,
            "join_pattern": "seq(T0, T1, T2).where((T0.k == T1.k) & (T1.k == T2.k)).within(events=100)"
            + ('.consume("partition")' if "consume" in core_w.name else ""),
            "note": join_w.note,
            "core": core,
            "join": join,
            "partition_by": pb,
            "equal_join": {k: v for k, v in cmp_join.items() if k != "examples"},
            "equal_pb": {k: v for k, v in cmp_pb.items() if k != "examples"},
            "equal_join_pb": {k: v for k, v in cmp_self.items() if k != "examples"},
            "examples": cmp_join.get("examples", [])[:4],
        }
        rows.append(row)
        print(
            f"    CORE {bench._fmt_rate(core)} ev/s | join {bench._fmt_rate(join)} ev/s | "
            f"partition_by {bench._fmt_rate(pb)} ev/s | join = CORE: {cmp_join['text']} | "
            f"join = partition_by: {cmp_self['text']}",
            flush=True,
        )
        for path in tmp.glob("*.npz"):
            if path.name.startswith(("core-", "pycel-")):
                path.unlink()
    return rows


# -- reports --------------------------------------------------------------------------------
def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _rate(res: dict[str, Any] | None) -> float | None:
    return bench._rate(res) if res else None


def _rate_text(res: dict[str, Any] | None) -> str:
    r = _rate(res)
    if r is not None:
        return f"{r:,.0f}"
    if not res:
        return "skipped"
    return f"{res.get('status', '?')}: {str(res.get('error', ''))[:80]}".replace("|", "/")


def _find(rows: list[dict[str, Any]], form: str, variant: str, window: int) -> dict[str, Any] | None:
    for r in rows:
        if r["form"] == form and r["variant"] == variant and r["window"] == window:
            return r
    return None


def slowdowns(rows: list[dict[str, Any]]) -> list[tuple[str, str, float, float]]:
    """(form, variant, observed slowdown smallest→largest window, log2 ratio)."""
    windows = sorted({r["window"] for r in rows})
    out = []
    if len(windows) < 2:
        return out
    lo, hi = windows[0], windows[-1]
    for variant in VARIANTS:
        for form in FORMS:
            a, b = _rate(_find(rows, form, variant, lo)), _rate(_find(rows, form, variant, hi))
            if a and b:
                out.append((form, variant, a / b, math.log2(hi) / math.log2(lo)))
    return out


def _num(x: Any) -> str:
    return f"{x:,}" if isinstance(x, int) else "-"


def _mb(kb: Any) -> str:
    return f"{kb / 1024:,.0f}" if isinstance(kb, int | float) else "-"


def scaling_tables(rows: list[dict[str, Any]]) -> list[str]:
    windows = sorted({r["window"] for r in rows})
    lines = [
        "| window | log2(w) | join, no output | partition_by, no output | join/partition_by"
        " | join, with output | partition_by, with output | matches (with output) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in windows:
        jn, pn = _find(rows, "join", "noout", w), _find(rows, "partition", "noout", w)
        jo, po = _find(rows, "join", "out", w), _find(rows, "partition", "out", w)
        rj, rp = _rate(jn), _rate(pn)
        ratio = f"{rj / rp:.2f}" if rj and rp else "-"
        same = ""
        if jo and po and jo.get("digest") and jo.get("digest") != po.get("digest"):
            same = " (join ≠ partition_by!)"
        lines.append(
            f"| {w:,} | {math.log2(w):.1f} | {_rate_text(jn)} | {_rate_text(pn)} | {ratio} "
            f"| {_rate_text(jo)} | {_rate_text(po)} | {_num(jo.get('matches') if jo else None)}{same} |"
        )
    lines += [
        "",
        "Store and memory per run (`stream.stats()` after the whole stream; peak RSS is the child"
        " process's high-water mark, the 1M-event DataFrame and Numba included; 'added' = peak"
        " minus the RSS after compile and warm-up):",
        "",
        "| window | variant | form | live extend nodes | live heap nodes | H entries | capacity E / U / H"
        " | max heap depth | peak RSS MB | added MB | compile s | ev/CPU-s |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in windows:
        for variant in VARIANTS:
            for form in FORMS:
                r = _find(rows, form, variant, w)
                if not r or r.get("status") != "ok":
                    continue
                s = r["stats"]
                added = r["peak_rss_kb"] - r["rss_warm_kb"]
                lines.append(
                    f"| {w:,} | {variant} | {form} | {s['live_extend_nodes']:,} | {s['live_heap_nodes']:,} "
                    f"| {s['h_entries']:,} | {s['extend_capacity']:,} / {s['heap_capacity']:,} / "
                    f"{s['h_capacity']:,} | {s['max_heap_depth']} | {_mb(r['peak_rss_kb'])} "
                    f"| {_mb(max(added, 0))} | {r['compile_s']:.2f} | {bench._cpu_rate(r)} |"
                )
    return lines


def versus_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| workload (CORE query) | keys | CORE ev/s | pycel join ev/s | join/CORE | pycel partition_by ev/s"
        " | partition_by/CORE | matches CORE | matches join | join = CORE? | partition_by = CORE?"
        " | join = partition_by? | peak RSS MB CORE / join |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|",
    ]
    for r in rows:
        core, join, pb = r["core"], r["join"], r["partition_by"]
        rc, rj, rp = _rate(core), _rate(join), _rate(pb)
        lines.append(
            f"| {r['name']} | {r['keys']:,} | {_rate_text(core)} | {_rate_text(join)} "
            f"| {f'{rj / rc:.1f}' if rc and rj else '-'} | {_rate_text(pb)} "
            f"| {f'{rp / rc:.1f}' if rc and rp else '-'} "
            f"| {_num(core.get('matches') if core else None)} | {_num(join.get('matches'))} "
            f"| {r['equal_join']['text']} | {r['equal_pb']['text']} | {r['equal_join_pb']['text']} "
            f"| {_mb(core.get('peak_rss_kb') if core else None)} / {_mb(join.get('peak_rss_kb'))} |"
        )
    return lines


def write_markdown(path: Path, data: dict[str, Any]) -> None:
    meta, scale, versus = data["meta"], data["scale"], data["versus"]
    lines = [
        "# Equality joins: window scaling, and PARTITION BY as joins vs CORE",
        "",
        f"- date: {meta['date']}; machine: {meta['machine']} (shared: other people's tests were"
        " running; numbers are medians of repeated runs, compare ratios rather than absolute figures)",
        f"- pycel commit {meta['commit']}; repeats: {meta['repeat']}; seed {meta['seed']};"
        f" script `benchmarks/joins.py` (whole run {meta.get('total_s', 0):.0f} s)",
        "- each measurement in a fresh process: `pycel.compile` + a 2,000-event warm-up run (compile s:"
        " Numba compile or cache load), then `query.stream().push(df)` on the whole DataFrame, timed;"
        " every match materialized",
        "",
        "## a. Window scaling",
        "",
        f"{meta['events']:,} events, key `k` uniform over {meta['keys']:,} values; types T0 45 %, T1 45 %,"
        " T2 0.1 %, T3 (noise) 9.9 %. Join pattern"
        " `seq(T0, T1, X).where((T0.k == T1.k) & (T1.k == X.k)).within(events=w)`; partition_by"
        ' pattern `seq(T0, T1, X).within(events=w).partition_by("k")`. No output: X = T10, which'
        " never occurs (every T0 and T1 still updates the store). With output: X = T2.",
        "",
        "events/s (median):",
        "",
    ]
    lines += scaling_tables(scale)
    sl = slowdowns(scale)
    if sl:
        ws = sorted({r["window"] for r in scale})
        lines += [
            "",
            f"Slowdown from w = {ws[0]:,} to w = {ws[-1]:,} (events/s ratio) against"
            f" log2({ws[-1]:,}) / log2({ws[0]:,}) = {sl[0][3]:.2f}:",
            "",
            "| series | slowdown | log2 ratio |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {'join' if f == 'join' else 'partition_by'}, {'no output' if v == 'noout' else 'with output'}"
            f" | {s:.2f} | {lg:.2f} |"
            for f, v, s, lg in sl
        ]
    lines += [
        "",
        "![events/s vs window](joins.png)",
        "",
        "## b. PARTITION BY workloads as equality joins vs CORE",
        "",
    ]
    if versus:
        lines += [
            f"{versus[0]['events']:,} events per stream (workloads.py streams: T0..T9 uniform,"
            " k uniform over the given number of keys), the same events for both engines. CORE"
            " runs the CEQL query; pycel runs the join pattern"
            " `seq(T0, T1, T2).where((T0.k == T1.k) & (T1.k == T2.k)).within(events=100)` and, for"
            ' reference, `seq(T0, T1, T2).within(events=100).partition_by("k")`. Matches compared'
            " exactly as (start, end, set of positions).",
            "",
        ]
        lines += versus_table(versus)
        lines += ["", "| workload | CORE query | pycel join pattern | note |", "|---|---|---|---|"]
        lines += [f"| {r['name']} | `{r['query']}` | `{r['join_pattern']}` | {r['note']} |" for r in versus]
        bad = [r for r in versus if r["examples"]]
        if bad:
            lines += ["", "Examples of differing matches (join vs CORE):", ""]
            lines += [f"- {r['name']}: " + "; ".join(r["examples"]) for r in bad]
    else:
        lines.append("(not run)")
    lines.append("")
    path.write_text("\n".join(lines))


def write_chart(path: Path, scale: list[dict[str, Any]], keys: int) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart"
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    styles = {
        ("join", "noout"): ("tab:orange", "s", "-"),
        ("partition", "noout"): ("tab:blue", "o", "--"),
        ("join", "out"): ("tab:red", "^", "-"),
        ("partition", "out"): ("tab:purple", "v", "--"),
    }
    windows = sorted({r["window"] for r in scale})
    for (form, variant), (color, marker, ls) in styles.items():
        pts = [(w, rate) for w in windows if (rate := _rate(_find(scale, form, variant, w))) is not None]
        if pts:
            what = "no output" if variant == "noout" else "with output"
            label = f"{'join' if form == 'join' else 'partition_by'}, {what}"
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker=marker,
                color=color,
                linestyle=ls,
                label=label,
            )
        if form == "join" and variant == "noout" and pts:
            w0, r0 = pts[0]
            xs = np.geomspace(windows[0], windows[-1], 50)
            ax.plot(
                xs,
                r0 * math.log2(w0) / np.log2(xs),
                color="gray",
                linestyle=":",
                label=f"∝ 1/log2(w) from join no-output at w={w0:,}",
            )
        depth = [
            (w, r["stats"]["max_heap_depth"])
            for w in windows
            if (r := _find(scale, form, variant, w)) and r.get("status") == "ok"
        ]
        if depth:
            ax2.plot(
                [d[0] for d in depth],
                [d[1] for d in depth],
                marker=marker,
                color=color,
                linestyle=ls,
                label=f"{form}, {variant}",
            )
    if windows:
        ax2.plot(windows, [math.log2(w) for w in windows], color="gray", linestyle=":", label="log2(w)")
        # Runs of one key inside the window: about 0.9 w / keys (T0 and T1 start or extend runs).
        per_key = [max(1.0, 0.9 * w / keys) for w in windows]
        ax2.plot(
            windows,
            [math.log2(n) for n in per_key],
            color="black",
            linestyle="-.",
            label="log2(0.9 w / keys): runs of one key",
        )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("window (events)")
    ax.set_ylabel("events / second (median)")
    ax.set_title("seq(T0, T1, X) correlated on k (1,000 keys), 1M events", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax2.set_xscale("log")
    ax2.set_xlabel("window (events)")
    ax2.set_ylabel("max heap depth (stream.stats())")
    ax2.set_title("store: max heap depth vs log2(window)", fontsize=10)
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# -- main -----------------------------------------------------------------------------------
def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Benchmark pycel's equality joins: window scaling (pycel) and PARTITION BY"
        " workloads written as joins (pycel vs CORE).",
        epilog="Results: benchmarks/results/<tag>.md/.json/.png (default tag: joins).",
    )
    ap.add_argument("--events", type=int, default=1_000_000, help="events of the scaling stream (default 1M)")
    ap.add_argument("--keys", type=int, default=1000, help="distinct key values of the scaling stream (1000)")
    ap.add_argument(
        "--windows",
        type=_ints,
        default=[100, 1_000, 10_000, 100_000],
        help="comma-separated count windows (default 100,1000,10000,100000)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per measurement; medians (default 3)")
    ap.add_argument("--core-events", type=int, default=300_000, help="events of the CORE comparison (300k)")
    ap.add_argument(
        "--skip-core", action="store_true", help="do not run CORE (pycel join vs partition_by only)"
    )
    ap.add_argument("--skip-scaling", action="store_true", help="skip part a (window scaling)")
    ap.add_argument("--skip-versus", action="store_true", help="skip part b (PARTITION BY workloads)")
    ap.add_argument("--seed", type=int, default=42, help="stream seed (default 42)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per child process (default 900)")
    ap.add_argument(
        "--match-cap", type=int, default=5_000_000, help="exact comparison up to this many matches"
    )
    ap.add_argument("--tag", default="joins", help="name of the result files (default joins)")
    ap.add_argument("--report-only", action="store_true", help="re-render <tag>.md/.png from <tag>.json")
    ap.add_argument("--scale-child", help=argparse.SUPPRESS)
    ap.add_argument("--pycel-child", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip() or os.environ.get("PYCEL_COMMIT", "unknown")
    except OSError:
        return os.environ.get("PYCEL_COMMIT", "unknown")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scale_child:
        return scale_child(args.scale_child)
    register_workloads()
    if args.pycel_child:
        return bench.pycel_child(args.pycel_child)
    RESULTS.mkdir(exist_ok=True)
    md, js, png = (RESULTS / f"{args.tag}{ext}" for ext in (".md", ".json", ".png"))
    if args.report_only:
        data = json.loads(js.read_text())
        write_markdown(md, data)
        print(write_chart(png, data["scale"], int(data["meta"]["keys"])) or f"re-rendered {md} and {png}")
        return 0
    reason = bench.pycel_status()
    if reason:
        raise SystemExit(reason)
    meta: dict[str, Any] = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": bench._machine(),
        "commit": os.environ.get("PYCEL_COMMIT") or _git_commit(),
        "events": args.events,
        "keys": args.keys,
        "core_events": args.core_events,
        "windows": args.windows,
        "repeat": args.repeat,
        "seed": args.seed,
    }
    core_python: Path | None = None
    if not args.skip_core and not args.skip_versus:
        from core_env import CoreUnavailable, ensure_core_venv, pycer_version

        try:
            core_python = ensure_core_venv()
            meta["pycer"] = pycer_version(core_python)
        except CoreUnavailable as exc:
            print(f"CORE unavailable: {exc}", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="pycel-joins-"))
    began = time.perf_counter()
    data: dict[str, Any] = {"meta": meta, "scale": [], "versus": []}
    try:
        if not args.skip_scaling:
            print(f"a. window scaling: {args.events:,} events, {args.keys:,} keys", flush=True)
            data["scale"] = run_scaling(args, tmp)
        if not args.skip_versus:
            print(f"b. PARTITION BY as joins vs CORE: {args.core_events:,} events", flush=True)
            data["versus"] = run_versus_core(args, tmp, core_python)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta["total_s"] = time.perf_counter() - began
    meta["load_after"] = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    js.write_text(json.dumps(data, indent=1, default=str))
    write_markdown(md, data)
    problem = write_chart(png, data["scale"], int(data["meta"]["keys"]))
    for form, variant, s, lg in slowdowns(data["scale"]):
        print(f"slowdown {form} {variant}: {s:.2f} (log2 ratio {lg:.2f})")
    print(f"wrote {md}, {js}" + (f" ({problem})" if problem else f", {png}"))
    print(f"total {meta['total_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
