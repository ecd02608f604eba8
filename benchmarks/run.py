"""Benchmark pycel against the CORE engine (pycer) on identical seeded streams.

For each workload (see workloads.py) the stream is generated once with numpy, written to
a CSV for CORE and handed to pycel as a pandas DataFrame. CORE runs in a Python 3.13 venv
(benchmarks/.venv-core, created on first use) through core_worker.py; pycel runs in a
fresh child process of this interpreter, so each engine's peak RSS is its own. Each
engine runs every workload --repeat times; the report uses medians.

    python benchmarks/run.py                       # all workloads, 300k events, 3 repeats
    python benchmarks/run.py --workloads seq3,kleene --events 100000
    python benchmarks/run.py --skip-pycel --tag core_baseline
    python benchmarks/run.py --large               # pycel only, 10M events, memory flatness

Results: benchmarks/results/<tag>.md, <tag>.json and <tag>.png.
"""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import json
import os
import platform
import resource
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
WORKER = HERE / "core_worker.py"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from canon import MatchSet, compare, summary  # noqa: E402
from workloads import (  # noqa: E402
    LARGE_WORKLOADS,
    WORKLOADS,
    Events,
    StreamSpec,
    Workload,
    declaration,
    event_types,
    generate,
)

WARMUP_EVENTS = 2000
UNAVAILABLE = "pycel engine not available"


#: CPU seconds of the last run_pycel's query.run (a load-insensitive companion to elapsed).
LAST_RUN: dict[str, float] = {"cpu_s": 0.0}


class PycelUnavailable(RuntimeError):
    """``pycel.compile`` does not exist (the engine is not there yet)."""


# -- pycel side -------------------------------------------------------------------------
def pycel_status() -> str | None:
    """None when pycel's engine can be benchmarked, else the reason it cannot."""
    try:
        import pycel
    except Exception as exc:  # broken checkout: report, keep CORE's numbers
        return f"{UNAVAILABLE} (import failed: {type(exc).__name__}: {exc})"
    if not callable(getattr(pycel, "compile", None)):
        return UNAVAILABLE
    return None


def _peak_rss_kb() -> int:
    """This process's peak RSS in KiB: VmHWM, which (unlike ru_maxrss) does not inherit
    the parent's RSS across fork + exec."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_pycel(workload: Workload, events: Any) -> tuple[float, Any, float, int]:
    """Run ``workload`` on ``events`` (a DataFrame: ``event_type`` + attribute columns)
    with pycel's engine. Returns (elapsed seconds, matches, compile seconds, peak RSS KiB).

    compile = ``pycel.compile(pattern)`` plus a first ``run`` on the first
    WARMUP_EVENTS rows (Numba compiles or loads its cache on first call); elapsed =
    ``query.run(events)`` on the whole frame, matches materialized. Peak RSS is the
    process's high-water mark (VmHWM), data included. Raises PycelUnavailable when the
    engine is missing.
    """
    import pycel

    compile_fn = getattr(pycel, "compile", None)
    if not callable(compile_fn):
        raise PycelUnavailable(UNAVAILABLE)
    types = event_types()
    pattern = workload.pattern(types)
    # Tell the engine about every type in the data (T0..T10), not only the pattern's.
    takes_types = "types" in inspect.signature(compile_fn).parameters
    t0 = time.perf_counter()
    query = compile_fn(pattern, types=list(types.values())) if takes_types else compile_fn(pattern)
    query.run(events.iloc[:WARMUP_EVENTS])
    compile_time = time.perf_counter() - t0
    c1, t1 = _cpu_seconds(), time.perf_counter()
    matches = query.run(events)
    elapsed = time.perf_counter() - t1
    LAST_RUN["cpu_s"] = _cpu_seconds() - c1
    return elapsed, matches, compile_time, _peak_rss_kb()


def to_matchset(matches: Any) -> MatchSet:
    """Canonical form of pycel's result (flat arrays, or any iterable of Match)."""
    if all(hasattr(matches, a) for a in ("starts", "ends", "offsets", "positions")):
        return MatchSet.from_flat(matches.starts, matches.ends, matches.offsets, matches.positions)
    starts: list[int] = []
    ends: list[int] = []
    offsets = [0]
    positions: list[int] = []
    for m in matches:
        starts.append(m.start)
        ends.append(m.end)
        positions.extend(m.positions())
        offsets.append(len(positions))
    return MatchSet.from_flat(starts, ends, offsets, positions)


def pycel_child(spec_path: str) -> int:
    """Child-process entry: run one workload with pycel and write a JSON result."""
    spec = json.loads(Path(spec_path).read_text())
    w = WORKLOADS[spec["workload"]]
    result: dict[str, Any] = {"engine": "pycel", "status": "ok"}
    try:
        frame = Events.load(Path(spec["events_npz"])).to_pandas()
        result["events"] = len(frame)
        result["rss_before_kb"] = _peak_rss_kb()
        times: list[float] = []
        cpu: list[float] = []
        compile_s: list[float] = []
        counts: list[int] = []
        ms = MatchSet.empty()
        for _ in range(int(spec["repeat"])):
            elapsed, matches, compile_time, peak = run_pycel(w, frame)
            cpu.append(LAST_RUN["cpu_s"])
            times.append(elapsed)
            compile_s.append(compile_time)
            counts.append(len(matches))
            ms = to_matchset(matches)
            del matches
        result.update(
            times_s=times, cpu_s=cpu, compile_s=compile_s, peak_rss_kb=_peak_rss_kb(), **summary(ms)
        )
        if len(set(counts)) > 1:
            result["warning"] = f"match counts differ between repeats: {counts}"
        if spec.get("matches_out") and len(ms) <= int(spec["match_cap"]):
            ms.save(spec["matches_out"])
            result["matches_file"] = spec["matches_out"]
    except PycelUnavailable as exc:
        result = {"engine": "pycel", "status": "unavailable", "error": str(exc)}
    except Exception as exc:
        kind = type(exc).__name__
        status = "unsupported" if kind == "UnsupportedError" else "error"
        result = {"engine": "pycel", "status": status, "error": f"{kind}: {exc}"}
    Path(spec["result_out"]).write_text(json.dumps(result, indent=1))
    return 0


def _current_rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def pycel_large_child(spec_path: str) -> int:
    """Child-process entry of --large: push a long stream in chunks, record RSS."""
    import numpy as np
    import pandas as pd

    import pycel

    spec = json.loads(Path(spec_path).read_text())
    w = WORKLOADS[spec["workload"]]
    n, chunk = int(spec["events"]), int(spec["chunk"])
    ev = generate(w.stream, n, int(spec["seed"]))
    names = ev.type_names()
    types = event_types()
    out: dict[str, Any] = {"engine": "pycel", "workload": w.name, "events": n, "chunks": []}
    try:
        query = pycel.compile(w.pattern(types), types=list(types.values()))
        stream = query.stream() if hasattr(query, "stream") else None
        if stream is None:
            raise PycelUnavailable("the engine has no stream(); the large run needs push()")
        t0 = time.perf_counter()
        total = 0
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            frame = pd.DataFrame(
                {
                    "event_type": names[lo:hi],
                    "pos": np.arange(lo, hi, dtype=np.int64),
                    "k": ev.k[lo:hi],
                    "v": ev.v[lo:hi],
                }
            )
            got = stream.push(frame)
            total += len(got)
            del got, frame
            out["chunks"].append(
                {
                    "events": hi,
                    "seconds": time.perf_counter() - t0,
                    "rss_kb": _current_rss_kb(),
                    "matches": total,
                }
            )
        out["status"] = "ok"
        out["peak_rss_kb"] = _peak_rss_kb()
    except Exception as exc:
        out["status"] = "error"
        out["error"] = f"{type(exc).__name__}: {exc}"
    Path(spec["result_out"]).write_text(json.dumps(out, indent=1))
    return 0


def run_pycel_child(w: Workload, events_npz: Path, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    spec = {
        "workload": w.name,
        "events_npz": str(events_npz),
        "repeat": args.repeat,
        "result_out": str(tmp / f"pycel-{w.name}.json"),
        "matches_out": str(tmp / f"pycel-{w.name}.npz"),
        "match_cap": args.match_cap,
    }
    return _run_child([sys.executable, __file__, "--pycel-child"], spec, tmp, f"pycel-{w.name}", args.timeout)


def _run_child(cmd: list[str], spec: dict[str, Any], tmp: Path, tag: str, timeout: float) -> dict[str, Any]:
    spec_path = tmp / f"{tag}-spec.json"
    spec_path.write_text(json.dumps(spec))
    out = Path(spec["result_out"])
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(
            [*cmd, str(spec_path)], cwd=tmp, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"no result within {timeout:.0f} s"}
    if proc.returncode != 0 or not out.exists():
        code = proc.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        return {"status": "error", "error": f"worker {how}: {tail}"}
    result: dict[str, Any] = json.loads(out.read_text())
    result["worker_stdout_tail"] = proc.stdout[-400:]
    return result


# -- CORE side --------------------------------------------------------------------------
def run_core(
    python: Path, w: Workload, csv_path: Path, tmp: Path, args: argparse.Namespace
) -> dict[str, Any]:
    spec = {
        "declaration": declaration(),
        "query": w.query,
        "events_csv": str(csv_path),
        "repeat": args.repeat,
        "result_out": str(tmp / f"core-{w.name}.json"),
        "matches_out": str(tmp / f"core-{w.name}.npz"),
        "match_cap": args.match_cap,
    }
    result = _run_child([str(python), str(WORKER)], spec, tmp, f"core-{w.name}", args.timeout)
    if result.get("status") == "ok" and "Failed to process client request" in result.get(
        "worker_stdout_tail", ""
    ):
        result = {**result, "status": "error", "error": "CORE rejected the query (see worker output)"}
    return result


# -- comparison and reports ---------------------------------------------------------------
def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def compare_results(w: Workload, core: dict[str, Any], pyc: dict[str, Any]) -> dict[str, Any]:
    if core.get("status") != "ok" or pyc.get("status") != "ok":
        return {"equal": None, "text": "n/a"}
    if w.compare == "none":
        return {"equal": None, "text": "not compared"}
    cf, pf = core.get("matches_file"), pyc.get("matches_file")
    if cf and pf and os.path.exists(cf) and os.path.exists(pf):
        res = compare(MatchSet.load(cf), MatchSet.load(pf), limit=w.limit if w.compare == "limit" else None)
        text = "yes" if res["equal"] else f"NO (core-only {res['only_core']}, pycel-only {res['only_other']})"
        if res["note"]:
            text += f" [{res['note']}]"
        return {**res, "text": text}
    # Too many matches to ship: fall back to the digests.
    same = core["digest"] == pyc["digest"] and core["matches"] == pyc["matches"]
    if w.compare == "limit" and not same:
        return {"equal": None, "text": "digests differ (LIMIT subsets may differ; raise --match-cap)"}
    return {"equal": same, "text": ("yes" if same else "NO") + " (by digest)"}


def _rate(res: dict[str, Any]) -> float | None:
    if res.get("status") != "ok" or not res.get("times_s"):
        return None
    return float(res["events"]) / _median(res["times_s"])


def _cpu_rate(res: dict[str, Any] | None) -> str:
    """events per CPU second (median): less sensitive to other load on the machine."""
    if not res or res.get("status") != "ok" or not res.get("cpu_s"):
        return "-"
    cpu = _median(res["cpu_s"])
    return f"{float(res['events']) / cpu:,.0f}" if cpu > 0 else "-"


def _fmt_rate(res: dict[str, Any] | None) -> str:
    if res is None:
        return "skipped"
    r = _rate(res)
    if r is not None:
        return f"{r:,.0f}"
    status = res.get("status", "?")
    if status == "unavailable":
        return UNAVAILABLE
    error = str(res.get("error", "")).removeprefix("UnsupportedError: ")
    return f"{status}: {error[:70]}".replace("|", "/")


def _mb(kb: Any) -> str:
    return f"{kb / 1024:,.0f}" if isinstance(kb, int | float) else "-"


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _core_table(rows: list[dict[str, Any]]) -> list[str]:
    """CORE-only table rows (for --skip-pycel runs)."""
    out = [
        "| workload | events | CORE ev/s | CORE ev/CPU-s | matches | max matches per end | output MB "
        "| peak RSS MB | RSS before run MB | compile s | fixed overhead s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        c = row["core"] or {}
        if c.get("status") != "ok":
            out.append(
                f"| {row['name']} | {row['events']:,} | {_fmt_rate(c)} | - | - | - | - | - | - | - | - |"
            )
            continue
        out.append(
            f"| {row['name']} | {row['events']:,} | {_fmt_rate(c)} | {_cpu_rate(c)} | {c['matches']:,} "
            f"| {c['max_per_end']:,} | {c['output_bytes'] / 2**20:,.1f} | {_mb(c['peak_rss_kb'])} "
            f"| {_mb(c['rss_before_kb'])} | {_median(c['compile_s']):.3f} | {c['overhead_s']:.2f} |"
        )
    return out


def _comparison_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| workload | events | CORE ev/s | pycel ev/s | pycel/CORE | matches CORE | matches pycel | equal? "
        "| peak RSS CORE MB | peak RSS pycel MB | pycel compile s | CORE ev/CPU-s | pycel ev/CPU-s |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        core, pyc = row["core"], row["pycel"]
        rc, rp = (_rate(core) if core else None), (_rate(pyc) if pyc else None)
        ratio = f"{rp / rc:.2f}" if rc and rp else "-"
        mc = f"{core['matches']:,}" if core and core.get("status") == "ok" else "-"
        mp = f"{pyc['matches']:,}" if pyc and pyc.get("status") == "ok" else "-"
        comp = "-"
        if pyc and pyc.get("status") == "ok" and pyc.get("compile_s"):
            cold, warm = pyc["compile_s"][0], pyc["compile_s"][1:]
            comp = f"{cold:.2f}" + (f" ({_median(warm):.2f})" if warm else "")
        lines.append(
            f"| {row['name']} | {row['events']:,} | {_fmt_rate(core)} | {_fmt_rate(pyc)} | {ratio} "
            f"| {mc} | {mp} "
            f"| {row['compare']['text']} | {_mb(core.get('peak_rss_kb') if core else None)} "
            f"| {_mb(pyc.get('peak_rss_kb') if pyc else None)} | {comp} "
            f"| {_cpu_rate(core)} | {_cpu_rate(pyc)} |"
        )
    return lines


def write_markdown(path: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    core_only = all(row["pycel"] is None for row in rows)  # a --skip-pycel run
    title = "CORE (pycer) on the benchmark workloads" if core_only else "Benchmark: pycel vs CORE"
    lines = [
        f"# {title} ({meta['tag']})",
        "",
        f"- date: {meta['date']}; machine: {meta['machine']}",
        f"- events per workload: {meta['events']:,}; repeats: {meta['repeat']} (medians);"
        f" seed: {meta['seed']}",
        f"- CORE: pycer {meta.get('pycer', '-')} under Python 3.13 (wall time of send_events + get_output,"
        " all matches written to CORE's output string)",
    ]
    if not core_only:
        lines += [
            f"- pycel: commit {meta['commit']}; wall time of `query.run(df)` after `pycel.compile` and a"
            f" {WARMUP_EVENTS}-event warm-up (reported as compile)",
            "- pycel compile s: first run in a fresh process (Numba cache load), then warm in parentheses",
        ]
    lines += [
        "- peak RSS: each engine's own process high-water mark (VmHWM), its copy of the events included",
        "- ev/CPU-s: events per CPU second of the timed part (CORE: all its threads), less"
        " sensitive to other load than the wall-clock ev/s",
        "",
    ]
    lines += _core_table(rows) if core_only else _comparison_table(rows)
    lines += ["", "## Queries", "", "| workload | CEQL (CORE) | notes |", "|---|---|---|"]
    for row in rows:
        w = WORKLOADS[row["name"]]
        lines.append(f"| {w.name} | `{w.query}` | {w.note} |")
    details = [r for r in rows if r["compare"].get("examples")]
    if details:
        lines += ["", "## Mismatches", ""]
        for r in details:
            lines.append(f"- {r['name']}: " + "; ".join(r["compare"]["examples"]))
    overheads = [r["core"]["overhead_s"] for r in rows if r["core"] and "overhead_s" in r["core"]]
    lines += [
        "",
        "Matches are compared as (start, end, set of positions): CORE does not print which",
        "variable an event is bound to. CPU seconds per run (CORE: all its threads) are in the JSON.",
    ]
    if overheads:
        lines.append(
            f"Every CORE run includes a fixed cost of about {statistics.median(overheads):.2f} s "
            "(server threads starting and joining; measured with no events)."
        )
    lines.append("")
    path.write_text("\n".join(lines))


def write_chart(path: Path, rows: list[dict[str, Any]]) -> str | None:
    """events/s vs sequence length (with and without output) and vs window multiple."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib): no chart"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    panels = [
        (
            axes[0],
            ("seq-output", "seq-nooutput"),
            "sequence length n",
            "seq-n: T0;T1;...;Tn-1 (v<50), window 100",
        ),
        (axes[1], ("window", "last"), "window size (x 100 events)", "seq3 no output: ALL and LAST"),
    ]
    styles = {"core": ("tab:blue", "o"), "pycel": ("tab:orange", "s")}
    for ax, groups, xlabel, title in panels:
        for group in groups:
            for engine in ("core", "pycel"):
                pts = sorted(
                    (WORKLOADS[r["name"]].x, rate)
                    for r in rows
                    if WORKLOADS[r["name"]].group == group
                    and r[engine]
                    and (rate := _rate(r[engine])) is not None
                )
                if not pts:
                    continue
                color, marker = styles[engine]
                dashed = group in ("seq-nooutput", "last")
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    marker=marker,
                    color=color,
                    linestyle="--" if dashed else "-",
                    label=f"{'CORE' if engine == 'core' else 'pycel'} {group}",
                )
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("events / second")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# -- main ---------------------------------------------------------------------------------
def select_workloads(spec: str | None) -> list[Workload]:
    if not spec:
        return list(WORKLOADS.values())
    chosen: list[Workload] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        hits = [w for w in WORKLOADS.values() if fnmatch.fnmatch(w.name, part) or w.group == part]
        if not hits:
            raise SystemExit(f"unknown workload {part!r}; see --list")
        chosen.extend(w for w in hits if w not in chosen)
    return chosen


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Benchmark pycel against the CORE engine (pycer) on identical seeded synthetic streams.",
        epilog="CORE runs in benchmarks/.venv-core (Python 3.13, created on first use; set PYCEL_PY313 to "
        "choose the interpreter). Results go to benchmarks/results/<tag>.md/.json/.png.",
    )
    ap.add_argument("--events", type=int, default=300_000, help="events per stream (default 300000)")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per engine and workload; medians reported (default 3)"
    )
    ap.add_argument(
        "--workloads", help="comma-separated names, glob patterns or groups (default: all; see --list)"
    )
    ap.add_argument("--skip-core", action="store_true", help="do not run CORE")
    ap.add_argument("--skip-pycel", action="store_true", help="do not run pycel")
    ap.add_argument("--seed", type=int, default=42, help="stream seed (default 42)")
    ap.add_argument(
        "--timeout", type=float, default=600, help="seconds per engine and workload (default 600)"
    )
    ap.add_argument(
        "--match-cap",
        type=int,
        default=5_000_000,
        help="ship matches for an exact diff up to this many; above, compare digests (default 5000000)",
    )
    ap.add_argument("--tag", default="latest", help="name of the result files (default latest)")
    ap.add_argument(
        "--large",
        action="store_true",
        help="pycel only: memory flatness on a long stream pushed in chunks (results/large.md)",
    )
    ap.add_argument(
        "--large-events", type=int, default=10_000_000, help="events of the --large run (default 10M)"
    )
    ap.add_argument(
        "--large-chunk", type=int, default=1_000_000, help="events per push in --large (default 1M)"
    )
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument(
        "--keep-data", action="store_true", help="keep the temporary directory with events and matches"
    )
    ap.add_argument(
        "--report-only", action="store_true", help="re-render <tag>.md/.png from <tag>.json and exit"
    )
    ap.add_argument("--pycel-child", help=argparse.SUPPRESS)
    ap.add_argument("--pycel-large-child", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def _machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load avg {load}"


def main_large(args: argparse.Namespace) -> int:
    reason = pycel_status()
    if reason:
        print(reason)
        return 0
    RESULTS.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pycel-bench-"))
    lines = [
        f"# pycel memory on a long stream ({args.large_events:,} events,"
        f" pushed {args.large_chunk:,} at a time)",
        "",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {_machine()}; commit {_git_commit()}",
        "",
    ]
    try:
        for name in LARGE_WORKLOADS:
            w = WORKLOADS[name]
            spec = {
                "workload": name,
                "events": args.large_events,
                "chunk": args.large_chunk,
                "seed": args.seed,
                "result_out": str(tmp / f"large-{name}.json"),
            }
            print(f"[large] {name} ...", flush=True)
            res = _run_child(
                [sys.executable, __file__, "--pycel-large-child"],
                spec,
                tmp,
                f"large-{name}",
                args.timeout * 10,
            )
            lines += [f"## {name}: `{w.query}`", ""]
            if res.get("status") != "ok":
                lines += [f"{res.get('status')}: {res.get('error')}", ""]
                continue
            chunks = res["chunks"]
            rss = [c["rss_kb"] for c in chunks]
            lines += ["| events | seconds | RSS MB | matches |", "|---:|---:|---:|---:|"]
            lines += [
                f"| {c['events']:,} | {c['seconds']:.1f} | {c['rss_kb'] / 1024:,.0f} | {c['matches']:,} |"
                for c in chunks
            ]
            growth = (rss[-1] - rss[min(1, len(rss) - 1)]) / 1024
            # From the second chunk on: the first includes Numba's first-call compile.
            first = chunks[0] if len(chunks) > 1 else {"events": 0, "seconds": 0.0}
            rate = (chunks[-1]["events"] - first["events"]) / (chunks[-1]["seconds"] - first["seconds"])
            lines += [
                "",
                f"RSS growth after the second chunk: {growth:+,.0f} MB; "
                f"{rate:,.0f} events/s after the first chunk; "
                f"peak RSS {res['peak_rss_kb'] / 1024:,.0f} MB",
                "",
            ]
            print(f"  {rate:,.0f} events/s, RSS growth {growth:+,.0f} MB", flush=True)
    finally:
        if not args.keep_data:
            shutil.rmtree(tmp, ignore_errors=True)
    (RESULTS / "large.md").write_text("\n".join(lines))
    print(f"wrote {RESULTS / 'large.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pycel_child:
        return pycel_child(args.pycel_child)
    if args.pycel_large_child:
        return pycel_large_child(args.pycel_large_child)
    if args.list:
        for w in WORKLOADS.values():
            print(f"{w.name:18} {w.group:13} {w.query}")
        return 0
    if args.large:
        return main_large(args)
    if args.report_only:
        saved = json.loads((RESULTS / f"{args.tag}.json").read_text())
        write_markdown(RESULTS / f"{args.tag}.md", saved["rows"], saved["meta"])
        problem = write_chart(RESULTS / f"{args.tag}.png", saved["rows"])
        print(problem or f"re-rendered {RESULTS / args.tag}.md/.png")
        return 0
    workloads = select_workloads(args.workloads)
    meta: dict[str, Any] = {
        "tag": args.tag,
        "events": args.events,
        "repeat": args.repeat,
        "seed": args.seed,
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": _machine(),
        "commit": _git_commit(),
    }
    core_python: Path | None = None
    if not args.skip_core:
        from core_env import CoreUnavailable, ensure_core_venv, pycer_version

        try:
            core_python = ensure_core_venv()
            meta["pycer"] = pycer_version(core_python)
        except CoreUnavailable as exc:
            print(f"CORE unavailable: {exc}", file=sys.stderr)
    pycel_reason = None if args.skip_pycel else pycel_status()
    if pycel_reason:
        print(pycel_reason, file=sys.stderr)
    RESULTS.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pycel-bench-"))
    streams: dict[StreamSpec, tuple[Path, Path]] = {}
    rows: list[dict[str, Any]] = []
    began = time.perf_counter()
    try:
        for w in workloads:
            if w.stream not in streams:
                ev = generate(w.stream, args.events, args.seed)
                csv_path, npz_path = tmp / f"events-{w.stream.key}.csv", tmp / f"events-{w.stream.key}.npz"
                ev.write_csv(csv_path)
                ev.save(npz_path)
                streams[w.stream] = (csv_path, npz_path)
            csv_path, npz_path = streams[w.stream]
            print(f"[{time.perf_counter() - began:6.0f}s] {w.name}: {w.query}", flush=True)
            core: dict[str, Any] | None = None
            if args.skip_core:
                core = None
            elif core_python is None:
                core = {"status": "unavailable", "error": "no Python 3.13 / pycer"}
            else:
                core = run_core(core_python, w, csv_path, tmp, args)
            pyc: dict[str, Any] | None
            if args.skip_pycel:
                pyc = None
            elif pycel_reason:
                pyc = {"status": "unavailable", "error": pycel_reason}
            else:
                pyc = run_pycel_child(w, npz_path, tmp, args)
            cmp = compare_results(w, core or {}, pyc or {})
            rows.append({"name": w.name, "events": args.events, "core": core, "pycel": pyc, "compare": cmp})
            print(
                f"         CORE {_fmt_rate(core)} ev/s, "
                f"{core.get('matches', '-') if core else '-'} matches | "
                f"pycel {_fmt_rate(pyc)} ev/s, {pyc.get('matches', '-') if pyc else '-'} matches | "
                f"equal: {cmp['text']}",
                flush=True,
            )
            for path in tmp.glob(f"*-{w.name}.npz"):
                path.unlink()
    finally:
        if not args.keep_data:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"data kept in {tmp}")
    md, js, png = (RESULTS / f"{args.tag}{ext}" for ext in (".md", ".json", ".png"))
    write_markdown(md, rows, meta)
    slim = [{**r, "compare": {k: v for k, v in r["compare"].items() if k != "examples"}} for r in rows]
    js.write_text(json.dumps({"meta": meta, "rows": slim}, indent=1, default=str))
    problem = write_chart(png, rows)
    print(f"wrote {md}, {js}" + (f", {png}" if not problem else f" ({problem})"))
    print(f"total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
