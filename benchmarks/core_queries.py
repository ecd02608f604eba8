"""The CORE paper's benchmark query files (stocks, smart homes, taxis) against CORE.

Every query of the paper's appendices D–G, as ``tests/ceql_paper_queries.py`` writes them
(S/H/T of sizes 3, 6, 9, 12, 24, their no-output variants ``'``, the no-output variants of
size 3 with 2×, 3× and 4× the window, and Q1–Q7 on stocks), runs on one seeded stream per
schema (20k events by default) in pycel, in this process, and in CORE (pycer, Python 3.13,
``benchmarks/core_worker.py`` in a subprocess), on identical events. Both sides' matches
are compared exactly, as (start, end, set of positions): every event carries a ``pos``
attribute (its 0-based position), CORE prints it, canon.py canonicalizes both sides.

Timing: CPU seconds of the timed region (the machine is shared, wall time would count
other processes): pycel ``query.run(frame)`` on a pandas DataFrame (ingestion, matching
and the match arrays), warm (after one untimed run of the same call); CORE
``send_events`` + ``get_output`` over PyEvents built beforehand (its worker threads
included, as in ``run.py``). Each side runs ``--repeat`` times; the median is reported.

    python benchmarks/core_queries.py                       # every query, 20k events
    python benchmarks/core_queries.py --events 50000 --only "S*,Q*"

Writes benchmarks/results/core_queries.md (``--out`` to change).

The generators shape each stream after the paper's description of its dataset (appendix
D–F): ten stocks traded in one day with a window of a few hundred events, 17 households
whose plugs report every second with the loads around a 76 W average, taxi trips between
a dozen zones ordered by drop-off time, with the paper's time units.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (HERE, ROOT / "tests", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from canon import MatchSet, compare  # noqa: E402
from ceql_paper_queries import (  # noqa: E402
    OTHER_OPERATORS,
    SMART_HOME_DECLARATION,
    STOCK_DECLARATION,
    STOCK_NAMES,
    TAXI_DECLARATION,
    TAXI_LEGS,
    workloads,
)

import pycel  # noqa: E402
from pycel import ceql  # noqa: E402

WORKER = HERE / "core_worker.py"
RESULTS = HERE / "results"


# -- streams ----------------------------------------------------------------------------------
def with_pos(declaration: str) -> str:
    """The declaration with ``pos: int`` first in every event: CORE prints it, so its
    matches can be told apart (and core_worker reads it at index 0, its fast path)."""
    return declaration.replace("EVENT BUY  {", "EVENT BUY { pos: int,").replace(
        "EVENT SELL {", "EVENT SELL { pos: int,"
    ).replace("EVENT LOAD {", "EVENT LOAD { pos: int,").replace("EVENT TRIP {", "EVENT TRIP { pos: int,")


def stocks(n: int, seed: int) -> pd.DataFrame:
    """Ten stocks' BUY and SELL events; ``stock_time`` grows by 0..332 per event (mean 166:
    the 10000 window of S_n holds about 60 events, Q1–Q7's 30000 about 180); ten volumes
    (500..5000: Q3 and Q6 partition by it, Q7 asks for 4000)."""
    rng = np.random.default_rng(seed)
    names = np.array(sorted(set(STOCK_NAMES)), dtype=object)
    base = {"INTC": 21.0, "RIMM": 64.0, "QQQ": 40.0, "IPIX": 4.0, "AMAT": 19.0, "CSCO": 19.5,
            "YHOO": 25.0, "DELL": 13.0, "ORCL": 11.2, "MSFT": 26.1}  # fmt: skip
    name = names[rng.integers(0, len(names), n)]
    level = np.array([base[x] for x in name])
    return pd.DataFrame(
        {
            "event_type": np.where(rng.random(n) < 0.5, "BUY", "SELL").astype(object),
            "pos": np.arange(n, dtype=np.int64),
            "name": name,
            "volume": rng.integers(1, 11, n) * 500,
            "price": (level * (1 + rng.normal(0, 0.02, n))).round(2),
            "stock_time": np.cumsum(rng.integers(0, 333, n)),
        }
    )


def smart_homes(n: int, seed: int) -> pd.DataFrame:
    """LOAD events of 85 plugs in 17 households (ids 0..16), 34 readings per second of
    ``plug_timestamp`` (the 10 s window of H_n holds about 340 events), loads gamma
    distributed with a 76 W mean (about a third above 76)."""
    rng = np.random.default_rng(seed)
    plug = rng.integers(0, 85, n)
    return pd.DataFrame(
        {
            "event_type": "LOAD",
            "pos": np.arange(n, dtype=np.int64),
            "id": np.arange(n, dtype=np.int64) + 1_000_000,
            "plug_timestamp": 1_377_986_401 + np.arange(n, dtype=np.int64) // 34,
            "value": rng.gamma(1.2, 76 / 1.2, n).round(3),
            "plug_id": plug,
            "household_id": plug % 17,
        }
    )


def taxis(n: int, seed: int) -> pd.DataFrame:
    """TRIP events between twelve zones (the seven of T_n and five others), in drop-off
    order, 0..28 s apart (the 10000 s window of T_n holds about 700 trips)."""
    rng = np.random.default_rng(seed)
    zones = sorted({z for leg in TAXI_LEGS for z in leg})
    zones += ["Astoria", "Chinatown", "Flatbush", "Harlem", "Jamaica"]
    dropoff = 1_356_998_400 + np.cumsum(rng.integers(0, 29, n))
    trip_time = rng.integers(60, 3600, n)
    distance = rng.gamma(2.0, 1.5, n).round(2)
    fare = (2.5 + distance * 2.5).round(2)
    return pd.DataFrame(
        {
            "event_type": "TRIP",
            "pos": np.arange(n, dtype=np.int64),
            "medallion": np.array([f"M{k:05d}" for k in rng.integers(0, 20_000, n)], dtype=object),
            "hack_license": np.array([f"H{k:05d}" for k in rng.integers(0, 30_000, n)], dtype=object),
            "pickup_datetime": dropoff - trip_time,
            "dropoff_datetime": dropoff,
            "trip_time_in_secs": trip_time,
            "trip_distance": distance,
            "pickup_loc": np.array(zones, dtype=object)[rng.integers(0, len(zones), n)],
            "dropoff_loc": np.array(zones, dtype=object)[rng.integers(0, len(zones), n)],
            "payment_type": np.where(rng.random(n) < 0.6, "CRD", "CSH").astype(object),
            "fare_amount": fare,
            "total_amount": (fare * 1.15).round(2),
        }
    )


@dataclass(frozen=True)
class Schema:
    letter: str
    name: str
    declaration: str
    generate: Callable[[int, int], pd.DataFrame]


SCHEMAS = {
    "S": Schema("S", "stocks", with_pos(STOCK_DECLARATION), stocks),
    "H": Schema("H", "smart homes", with_pos(SMART_HOME_DECLARATION), smart_homes),
    "T": Schema("T", "taxis", with_pos(TAXI_DECLARATION), taxis),
}


def queries() -> dict[str, tuple[Schema, str]]:
    """Every appendix query by its paper name → (schema, CEQL text CORE accepts: the
    paper's typographic quotes made plain)."""
    out = {name: (SCHEMAS[name[0]], query) for name, (_, query) in workloads().items()}
    for name, text in OTHER_OPERATORS.items():
        out[name] = (SCHEMAS["S"], text.replace("\u2019", "'").strip())
    return out


# -- the two engines ----------------------------------------------------------------------------
def cpu_seconds() -> float:
    return time.process_time()


def pycel_text(text: str) -> str:
    """The query for pycel: CORE's ``WITHIN n [attr]`` is strict (span < n), pycel's
    inclusive (span <= n, docs/ceql.md); on the integer attributes of these schemas
    strict ``n`` is inclusive ``n - 1``."""
    return re.sub(r"WITHIN (\d+) \[", lambda m: f"WITHIN {int(m[1]) - 1} [", text)


def run_pycel(schema: Schema, text: str, frame: pd.DataFrame, repeat: int) -> tuple[list[float], MatchSet]:
    """CPU seconds of ``repeat`` warm ``query.run(frame)`` calls, and the matches."""
    decl = ceql.parse_declaration(schema.declaration)
    query = pycel.compile(ceql.parse_query(pycel_text(text), decl), types=decl.values())
    query.run(frame)  # untimed: loads the compiled loops, builds the query's tables
    cpu: list[float] = []
    matches: Any = None
    for _ in range(repeat):
        began = cpu_seconds()
        matches = query.run(frame)
        cpu.append(cpu_seconds() - began)
    ms = MatchSet.from_flat(matches.starts, matches.ends, matches.offsets, matches.positions)
    return cpu, ms


def run_core(python: Path, schema: Schema, text: str, csv_path: Path, tmp: Path, tag: str,
             repeat: int, timeout: float) -> dict[str, Any]:
    """core_worker.py on one query (one subprocess: a CEQL query can crash pycer)."""
    spec = {
        "declaration": schema.declaration,
        "query": text,
        "events_csv": str(csv_path),
        "repeat": repeat,
        "result_out": str(tmp / f"core-{tag}.json"),
        "matches_out": str(tmp / f"core-{tag}.npz"),
        "match_cap": 50_000_000,
    }
    spec_path = tmp / f"core-{tag}-spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    try:
        proc = subprocess.run([str(python), str(WORKER), str(spec_path)], cwd=tmp,
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"no result within {timeout:.0f} s"}
    out = Path(spec["result_out"])
    if proc.returncode != 0 or not out.exists():
        return {"status": "error", "error": f"worker exit {proc.returncode}: {proc.stderr[-400:]}"}
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# -- report -------------------------------------------------------------------------------------
def _git_commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or "unknown"


def write_report(path: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> tuple[float, str]:
    overheads = [r["core_overhead"] for r in rows if r.get("core_overhead") is not None]
    overhead = f"{min(overheads) * 1e3:.0f}–{max(overheads) * 1e3:.0f} ms" if overheads else "-"
    idle = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in meta["core_idle"].items()) or "-"
    ok = [r for r in rows if r.get("ratio")]
    ratios = [r["ratio"] for r in ok]
    geo = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
    nets = [r["net_ratio"] for r in ok if r.get("net_ratio")]
    net_text = (f"; net of CORE's fixed cost: geometric mean {float(np.exp(np.mean(np.log(nets)))):.1f}×, "
                f"worst {min(nets):.1f}×") if nets else ""
    worst = min(ok, key=lambda r: r["ratio"]) if ok else None
    worst_text = f"{worst['ratio']:.1f}× ({worst['name']})" if worst else "-"
    lines = [
        "# CORE's benchmark query files: pycel vs CORE",
        "",
        f"- date: {meta['date']}; {meta['machine']}; commit {meta['commit']}; pycer {meta['pycer']}",
        f"- {meta['events']:,} seeded events per schema (seed {meta['seed']}); "
        f"{meta['repeat']} timed runs per engine and query, medians",
        "- times are **CPU seconds of the timed region** (the machine is shared by other "
        "processes): pycel `query.run(DataFrame)` in process, warm (after one untimed run); "
        "CORE `send_events` + `get_output` on PyEvents built beforehand, all its threads "
        f"(including its fixed cost per run: a run with no events took {overhead} of wall time, "
        f"core_worker's `overhead_s`, and {idle} of CPU time)",
        "- net: the ratio with CORE's CPU time for no events taken off CORE's side (pycel's own "
        "fixed cost, about 0.6 ms per `run`, stays in)",
        "- equal: both engines' matches compared exactly as (start, end, set of positions)",
        "- CORE's `WITHIN n [attr]` is strict (span < n), pycel's inclusive (docs/ceql.md): pycel "
        "runs each query with `WITHIN n - 1 [attr]`, the same window on these integer attributes",
        "- generated by `python benchmarks/core_queries.py`; the streams are described in its "
        "docstring, the queries are those of `tests/ceql_paper_queries.py` (appendices D–G)",
        "",
        f"**Geometric mean {geo:.1f}×, worst {worst_text}** over {len(ok)} queries{net_text}.",
        "",
        "| query | matches | CORE CPU ms | pycel CPU ms | pycel/CORE speed | net | equal? |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        core_ms = f"{r['core_cpu'] * 1e3:,.1f}" if r.get("core_cpu") else "-"
        pycel_ms = f"{r['pycel_cpu'] * 1e3:,.1f}" if r.get("pycel_cpu") is not None else "-"
        ratio = f"{r['ratio']:.1f}×" if r.get("ratio") else "-"
        net = f"{r['net_ratio']:.1f}×" if r.get("ratio") and r.get("net_ratio") is not None else "-"
        lines.append(f"| {r['name']} | {r.get('matches', '-'):,} | {core_ms} | {pycel_ms} | {ratio} "
                     f"| {net} | {r['equal']} |")
    lines += ["", "## Queries (as sent to CORE and to `pycel.ceql.parse_query`)", ""]
    for r in rows:
        lines += [f"`{r['name']}`:", "", "```text", r["query"], "```", ""]
    path.write_text("\n".join(lines))
    return geo, worst_text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--only", default="*", help="comma-separated name patterns, e.g. 'S3*,Q*'")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", type=Path, default=RESULTS / "core_queries.md")
    args = ap.parse_args(argv)

    from core_env import ensure_core_venv, pycer_version

    python = ensure_core_venv()
    patterns = args.only.split(",")
    chosen = {k: v for k, v in queries().items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    meta: dict[str, Any] = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load avg {', '.join(f'{x:.1f}' for x in os.getloadavg())}",
        "commit": _git_commit(),
        "pycer": pycer_version(python),
        "events": args.events,
        "seed": args.seed,
        "repeat": args.repeat,
        "core_idle": {},
    }
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pycel-core-queries-") as tmp_name:
        tmp = Path(tmp_name)
        frames: dict[str, tuple[pd.DataFrame, Path]] = {}
        for name, (schema, text) in chosen.items():
            if schema.letter not in frames:
                frame = schema.generate(args.events, args.seed)
                csv_path = tmp / f"{schema.letter}.csv"
                frame.to_csv(csv_path, index=False)
                frames[schema.letter] = (frame, csv_path)
                # CORE's fixed CPU cost per run: the same timed region with no events.
                empty = tmp / f"{schema.letter}-empty.csv"
                frame.iloc[:0].to_csv(empty, index=False)
                idle = run_core(python, schema, text, empty, tmp, f"{schema.letter}-empty", args.repeat,
                                args.timeout)
                if idle.get("status") == "ok":
                    meta["core_idle"][schema.name] = statistics.median(idle["cpu_s"])
            frame, csv_path = frames[schema.letter]
            tag = name.replace("'", "p")
            core = run_core(python, schema, text, csv_path, tmp, tag, args.repeat, args.timeout)
            row: dict[str, Any] = {"name": name, "query": text, "equal": "n/a"}
            try:
                pycel_cpu, ours = run_pycel(schema, text, frame, args.repeat)
            except Exception as exc:  # reported in the table, the other queries still run
                row["equal"] = f"pycel: {type(exc).__name__}: {exc}"[:120]
                rows.append(row)
                print(name, row["equal"], flush=True)
                continue
            row["pycel_cpu"] = statistics.median(pycel_cpu)
            row["matches"] = len(ours)
            if core.get("status") != "ok":
                row["equal"] = f"CORE {core.get('status')}: {core.get('error', '')}"[:120]
            else:
                row["core_cpu"] = statistics.median(core["cpu_s"])
                row["core_overhead"] = core.get("overhead_s")
                idle_cpu = meta["core_idle"].get(schema.name)
                if idle_cpu is not None:
                    row["net_ratio"] = max(row["core_cpu"] - idle_cpu, 0.0) / max(row["pycel_cpu"], 1e-9)
                row["ratio"] = row["core_cpu"] / max(row["pycel_cpu"], 1e-9)
                theirs = MatchSet.load(core["matches_file"])
                res = compare(theirs, ours)
                row["equal"] = "yes" if res["equal"] else (
                    f"NO (CORE only {res['only_core']}, pycel only {res['only_other']})")
                if not res["equal"]:
                    row["ratio"] = None  # a speed-up on different matches means nothing
            core_ms = row.get("core_cpu", 0) * 1e3
            print(f"{name:8} {row.get('matches', 0):>9,} matches  CORE {core_ms:8.1f} ms  "
                  f"pycel {row['pycel_cpu'] * 1e3:7.1f} ms  "
                  f"{(row.get('ratio') or 0):6.1f}x  equal: {row['equal']}", flush=True)
            rows.append(row)
    args.out.parent.mkdir(exist_ok=True)
    geo, worst = write_report(args.out, rows, meta)
    print(f"geometric mean {geo:.1f}x, worst {worst}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
