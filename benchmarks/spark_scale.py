"""Range-parallel Spark evaluation at scale: one group vs ranges, local[1] vs local[2].

    python benchmarks/spark_scale.py --help
    python benchmarks/spark_scale.py --events 200000 --repeat 1     # a quick check
    python benchmarks/spark_scale.py --events 5000000 --repeat 3    # the published run

Two windowed patterns over generated stock ticks (examples/stock_data.py, ``--names``
stocks with Zipf-like weights: at 100 names the busiest holds about 19 % of the ticks):

* **unpartitioned**: a very large SELL, then a very large BUY of any stock within 30
  seconds (no ``partition_by``): one group unless the stream is cut into ranges;
* **skewed**: a large SELL, then a large BUY of the same stock within 30 seconds,
  ``partition_by(name)``: one group per stock, the busiest setting the stage time unless
  its events (the hot keys') are cut into ranges;
* **unsold**: a very large SELL with no very large BUY of any stock in the next 30
  seconds (an absence at the end: each range also reads a halo after it).

Each is run by ``pycel.spark.detect`` with ``ranges=1`` (no cut) and with the default
(``ranges=None``: as many ranges as the data and the cores call for; for the skewed
pattern only hot keys are cut), on ``local[1]`` and ``local[2]`` (``--ranges`` adds
explicit counts). On one core the default is one range, the same run as ``ranges=1``,
so it is not run again. Every configuration
runs in its own process with a fresh Spark session: the ticks are read from Parquet and
cached with their positions (``position_column``, so no sort is timed), a warm-up on a
small slice starts the JVM's Python workers and loads the Numba cache, then ``--repeat``
timed runs. Each timed run collects every match's positions to the driver (Arrow); its
match count and a SHA-256 digest of the sorted (start, end, positions) rows are checked
equal to the in-process engine's (``query.run``, timed in a process of its own).

Beside each detect run, interleaved with it, Spark's floor: the same grouping (one
group, the ranges with their halo copies, or the stocks with the hot ones cut) through
``applyInPandas`` with a function that does nothing but count its rows.

Recorded per configuration: median seconds and events/s, CPU seconds of the whole
process tree (driver, JVM, Python workers) per run, peak RSS of the Python driver, the
JVM (driver and executor threads in local mode) and the largest Python worker, and the
machine's load average before and after. Results go to ``--out``
(default benchmarks/results/spark_scale.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import pycel  # noqa: E402
from examples.stock_data import Buy, Sell, Stock, stock_events  # noqa: E402

WINDOW_SECONDS = 30
#: Columns the runs read (the ticks' ``id`` is their stream position).
COLUMNS = ["id", "event_type", "name", "volume", "time"]
#: Events of the warm-up slice.
WARM_EVENTS = 20_000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def unpartitioned() -> pycel.Pattern:
    """A very large sell, then a very large buy of any stock, within 30 seconds."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    return (s.where(s.volume > 980) >> b.where(b.volume > 980)).within(seconds=WINDOW_SECONDS, on=Stock.time)


def skewed() -> pycel.Pattern:
    """A large sell, then a large buy of the same stock, within 30 seconds."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    return (
        (s.where(s.volume > 950) >> b.where(b.volume > 950))
        .within(seconds=WINDOW_SECONDS, on=Stock.time)
        .partition_by(Stock.name)
    )


def unsold() -> pycel.Pattern:
    """A very large sell with no very large buy of any stock in the next 30 seconds (an
    absence at the end: each range also reads the 30 seconds after it)."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    return pycel.seq(s.where(s.volume > 980), pycel.absent(b.where(b.volume > 980))).within(
        seconds=WINDOW_SECONDS, on=Stock.time
    )


PATTERNS: dict[str, Callable[[], pycel.Pattern]] = {
    "unpartitioned": unpartitioned,
    "skewed": skewed,
    "unsold": unsold,
}
VARIABLES = ("s", "b")
MASTERS = ["local[1]", "local[2]"]


# --- checks -------------------------------------------------------------------------


def digest(rows: np.ndarray) -> str:
    """SHA-256 of the match rows (int64: start, end, then per variable the number of
    positions and the first), sorted, so equal match sets give equal digests."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    order = np.lexsort(rows.T[::-1]) if len(rows) else np.zeros(0, dtype=np.int64)
    return hashlib.sha256(rows[order].tobytes()).hexdigest()[:16]


def engine_rows(matches: pycel.Matches) -> np.ndarray:
    """The digest rows of the engine's matches (array operations, no call per match)."""
    n = len(matches)
    owner = np.repeat(np.arange(n), np.diff(matches.offsets))
    columns = [matches.starts, matches.ends]
    for v in VARIABLES:
        if v not in matches.variables:  # (unsold binds no b)
            columns += [np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)]
            continue
        mask = matches.var_ids == matches.variables.index(v)
        count = np.bincount(owner[mask], minlength=n)
        first = np.full(n, -1, dtype=np.int64)
        first[owner[mask][::-1]] = matches.positions[mask][::-1]  # the first one wins
        columns += [count, first]
    return np.column_stack(columns) if n else np.zeros((0, 2 + 2 * len(VARIABLES)), dtype=np.int64)


def spark_rows(frame: Any) -> Any:
    """The digest rows' columns of ``detect``'s output (positions are ascending)."""
    from pyspark.sql import functions as F

    cols = [F.col("match_start"), F.col("match_end")]
    bound = frame.schema["positions"].dataType.fieldNames()
    for v in VARIABLES:
        if v not in bound:  # (unsold binds no b)
            cols += [F.lit(0).cast("long"), F.lit(-1).cast("long")]
            continue
        arr = F.col(f"positions.{v}")
        cols += [F.size(arr).cast("long"), F.coalesce(F.element_at(arr, 1), F.lit(-1))]
    return frame.select(*[c.alias(f"c{k}") for k, c in enumerate(cols)])


# --- what a process used --------------------------------------------------------------


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root``'s process tree, including its reaped children."""
    ticks = 0
    for pid in descendants(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / CLOCK_TICKS


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used since boot (/proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """A live process's peak resident set (VmHWM), in MB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_split(root: int) -> dict[str, float]:
    """CPU seconds so far of the Python driver, the JVM and the Python workers below
    ``root`` (live processes; Spark reuses its Python workers, so they stay alive)."""
    split = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
    for pid in descendants(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        seconds = sum(int(f) for f in fields[11:13]) / CLOCK_TICKS  # its own utime + stime
        kind = "driver" if pid == root else "jvm" if b"java" in command.split(b"\0", 1)[0] else "workers"
        split[kind] += seconds
    return split


def tree_memory(root: int) -> dict[str, float]:
    """Peak RSS of the Python driver, the JVM and the largest Python worker (MB)."""
    jvm, workers = 0.0, [0.0]
    for pid in descendants(root)[1:]:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"java" in command.split(b"\0", 1)[0]:
            jvm = max(jvm, peak_rss_mb(pid))
        elif b"python" in command:
            workers.append(peak_rss_mb(pid))
    # Not getrusage's ru_maxrss: Linux carries it across exec, from the parent's peak.
    return {"driver_mb": peak_rss_mb(root), "jvm_mb": jvm, "worker_mb": max(workers)}


# --- the child processes -------------------------------------------------------------


def engine_worker(job: dict[str, Any]) -> dict[str, Any]:
    """The in-process engine on the whole input: match count, digest, seconds."""
    ticks = pd.read_parquet(job["data"], columns=COLUMNS).sort_values("id")
    events = ticks.drop(columns=["id"]).reset_index(drop=True)
    query = pycel.compile(PATTERNS[job["pattern"]]())
    query.run(events.iloc[:WARM_EVENTS])  # Numba compile / cache load
    runs, cpu, matches = [], [], None
    for _ in range(job["repeat"]):
        cpu0, began = time.process_time(), time.perf_counter()
        matches = query.run(events)
        runs.append(time.perf_counter() - began)
        cpu.append(time.process_time() - cpu0)
    assert matches is not None
    return {
        "events": len(events),
        "matches": len(matches),
        "digest": digest(engine_rows(matches)),
        "runs": runs,
        "cpu": cpu,
        "cpu_total": tree_cpu_seconds(os.getpid()),
        **tree_memory(os.getpid()),
    }


def spark_worker(job: dict[str, Any]) -> dict[str, Any]:
    """``detect`` and its no-op floor on one master, one ``ranges`` setting."""
    from pyspark.sql import SparkSession

    import pycel.spark
    from pycel.spark._batch import check_distinct_positions, grouping

    cores = int(job["master"][len("local[") : -1])
    spark = (
        SparkSession.builder.master(job["master"])
        .appName("pycel spark_scale")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", job["driver_memory"])
        .config("spark.sql.shuffle.partitions", str(4 * cores))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(job["data"]).select(*COLUMNS).cache()
    n = df.count()
    pattern = PATTERNS[job["pattern"]]()
    ranges = job["ranges"]

    def detect_rows(data: Any, r: int | None) -> tuple[int, str]:
        out = spark_rows(pycel.spark.detect(data, pattern, position_column="id", ranges=r)).toPandas()
        return len(out), digest(out.to_numpy(dtype=np.int64))

    def floor(data: Any, r: int | None) -> tuple[int, int, float]:
        began = time.perf_counter()
        grouped = floor_groups(data, pattern, r)  # runs the range planning's jobs
        planning = time.perf_counter() - began
        counts = [row[0] for row in grouped.collect()]
        return len(counts), sum(counts), planning  # groups, rows (with the halo copies)

    warm = df.where(df["id"] < WARM_EVENTS)
    detect_rows(warm, 1 if ranges == 1 else 2)  # Python workers, Numba cache, range code
    floor(warm, 1 if ranges == 1 else 2)
    result: dict[str, Any] = {"events": n, "detect": [], "floor": [], "checks": [], "planning": []}
    me = os.getpid()
    for _ in range(job["repeat"]):
        for kind in ("floor", "detect"):  # interleaved: load drift hits both alike
            split0, cpu0, began = cpu_split(me), tree_cpu_seconds(me), time.perf_counter()
            if kind == "floor":
                rows = floor(df, ranges)
            else:
                found, dig = detect_rows(df, ranges)
            seconds, cpu = time.perf_counter() - began, tree_cpu_seconds(me) - cpu0
            split = {k: v - split0[k] for k, v in cpu_split(me).items()}
            result[kind].append({"seconds": seconds, "cpu": cpu, **{f"cpu_{k}": v for k, v in split.items()}})
            if kind == "detect":
                result["checks"].append([found, dig])
            else:
                result["floor_groups"], result["floor_rows"], planning = rows
                result["planning"].append(planning)
    # What detect adds before any group runs: the check that positions are unique, a job
    # of its own for patterns grouped by key (else each group checks its own positions).
    result["position_check"] = None
    if grouping(pycel.compile(pattern)):
        began = time.perf_counter()
        check_distinct_positions(df, "id", None)
        result["position_check"] = time.perf_counter() - began
    result.update(tree_memory(me))
    result["cpu_total"] = tree_cpu_seconds(me)
    spark.stop()
    return result


def floor_groups(df: Any, pattern: pycel.Pattern, ranges: int | None) -> Any:
    """Spark alone: ``df`` grouped as ``detect`` groups it (with the same range cut and
    halo copies, from pycel's own planner), each group's rows counted in pandas."""
    from pyspark.sql import functions as F

    from pycel.spark._batch import GROUP, range_groups

    query = pycel.compile(pattern)
    keys = list(query.partition)
    events = df if keys else df.withColumn(GROUP, F.lit(0))
    events, group_by, _ = range_groups(events, query, "id", ranges, keys or [GROUP], single=not keys)
    return events.groupBy(*group_by).applyInPandas(_count_rows, "n long")


def _count_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"n": [len(frame)]})


def in_child(job: dict[str, Any]) -> dict[str, Any]:
    """Run ``job`` in a fresh Python process; its result, with the load average before
    and after."""
    before, busy, began = os.getloadavg(), machine_busy_seconds(), time.perf_counter()
    cmd = [sys.executable, __file__, "--worker", json.dumps(job)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{job} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    result["load_before"], result["load_after"] = before, os.getloadavg()
    # What the rest of the machine used meanwhile, in cores: its CPU minus this job's.
    others = machine_busy_seconds() - busy - result["cpu_total"]
    result["others_cores"] = max(others, 0.0) / (time.perf_counter() - began)
    return result


# --- the report -------------------------------------------------------------------------


def write_ticks(n: int, names: int, directory: Path) -> tuple[Path, float]:
    """The ticks as 8 Parquet files; (directory, share of the busiest stock)."""
    ticks = stock_events(n, names=names, seed=1)
    share = float(ticks["name"].value_counts(normalize=True).iloc[0])
    step = -(-n // 8)
    for k in range(0, n, step):
        ticks.iloc[k : k + step].to_parquet(directory / f"part-{k // step:03d}.parquet", index=False)
    return directory, share


def commit() -> str:
    """The pycel commit measured: $PYCEL_COMMIT (for a snapshot), else git's HEAD."""
    found = os.environ.get("PYCEL_COMMIT")
    if found:
        return found
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def command(args: argparse.Namespace) -> str:
    """The command line that reproduces the run."""
    words = ["python benchmarks/spark_scale.py", f"--events {args.events}", f"--names {args.names}"]
    words.append(f"--repeat {args.repeat}")
    if args.masters != MASTERS:
        words.append("--masters " + " ".join(f'"{m}"' for m in args.masters))
    if args.patterns != list(PATTERNS):
        words.append("--patterns " + " ".join(args.patterns))
    if args.ranges != ["1", "default"]:
        words.append("--ranges " + " ".join(args.ranges))
    if args.driver_memory != "3g":
        words.append(f"--driver-memory {args.driver_memory}")
    return " ".join(words)


#: A configuration is marked load-distorted when the rest of the machine used at least
#: this many cores on average while it ran (of 2: local[2] could not have had both).
DISTORTED_CORES = 0.5


def report(args: argparse.Namespace, share: float, results: dict[str, Any], elapsed: float) -> str:
    import pyspark

    n = args.events
    lines = [
        "# pycel.spark at scale: ranges and hot keys",
        "",
        f"`{command(args)}` — "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
        f"{os.cpu_count()} cores (shared), Python {platform.python_version()}, Spark {pyspark.__version__}, "
        f"driver memory {args.driver_memory}, pycel at commit {commit()}; "
        f"the whole run took {elapsed / 60:.0f} min.",
        "",
        f"{n:,} ticks, {args.names} stocks; the busiest holds {share:.1%} of them. Seconds are the "
        f"median of {args.repeat} timed run(s) after a warm-up, each configuration in a fresh "
        "process; a detect run includes cutting into ranges (its planning jobs), the "
        "position check, the shuffle, the engine, and collecting every match's positions to the "
        "driver. Groups (rows): the groups `applyInPandas` ran and the rows shipped to them "
        "(halo copies included). Floor: the same grouping through `applyInPandas` with a "
        "function that only counts its rows, including the planning jobs that decide the cut "
        "(timed apart in brackets; detect runs the same jobs). Position check: the one job "
        "`detect` runs with `position_column` to check that positions are unique, for patterns "
        "grouped by key (timed once; — where each group checks its own positions instead). "
        "CPU: seconds of our whole process tree per detect run "
        "(driver, JVM, Python workers), and of the JVM and the Python workers apart; CPU/wall "
        "is how many cores it kept busy. Others: the "
        "cores the rest of the machine used on average meanwhile (/proc/stat minus our CPU); "
        f"rows where it is {DISTORTED_CORES} or more are marked *distorted* (2 cores, shared "
        "with other engineers' work). Load: the 1-minute load average before → after. "
        "Memory: peak RSS of the Python driver / the JVM (driver and executor in local mode) / "
        "the largest Python worker. On `local[1]` the default is one range (no cut on one core), "
        "the `ranges=1` run, so it is not run twice.",
    ]
    for name in results:
        engine = results[name]["engine"]
        seconds = statistics.median(engine["runs"])
        lines += [
            "",
            f"## {name}: `{PATTERNS[name]()!r}`",
            "",
            f"In-process engine (one core): {engine['matches']:,} matches (digest `{engine['digest']}`), "
            f"{seconds:.2f} s, {n / seconds:,.0f} events/s, peak RSS {engine['driver_mb']:.0f} MB, "
            f"others {engine['others_cores']:.2f} cores.",
            "",
            "| master | ranges | groups (rows) | detect s | events/s | CPU s (JVM/workers) | CPU/wall "
            "| floor s (planning) | floor events/s | detect − floor s | position check s "
            "| matches = engine "
            "| peak RSS MB (driver/JVM/worker) | others (cores) | load |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|",
        ]
        for label, r in results[name]["spark"]:
            det, flo = median(r["detect"], "seconds"), median(r["floor"], "seconds")
            cpu = median(r["detect"], "cpu")
            same = all(c == [engine["matches"], engine["digest"]] for c in r["checks"])
            others = f"{r['others_cores']:.2f}" + (" *distorted*" if distorted(r) else "")
            check = "—" if r["position_check"] is None else f"{r['position_check']:.1f}"
            lines.append(
                f"| {label[0]} | {label[1]} | {r['floor_groups']:,} ({r['floor_rows']:,}) "
                f"| {det:.1f} | {n / det:,.0f} | {cpu:.1f} ({jvm_workers(r['detect'])}) | {cpu / det:.2f} "
                f"| {flo:.1f} ({statistics.median(r['planning']):.1f}) | {n / flo:,.0f} "
                f"| {det - flo:.1f} | {check} "
                f"| {'yes' if same else 'NO'} ({len(r['checks'])} runs) "
                f"| {r['driver_mb']:.0f}/{r['jvm_mb']:.0f}/{r['worker_mb']:.0f} "
                f"| {others} | {r['load_before'][0]:.1f} → {r['load_after'][0]:.1f} |"
            )
        lines += ["", speedups(results[name]["spark"])]
    return "\n".join(lines) + "\n"


def distorted(result: dict[str, Any]) -> bool:
    return bool(result["others_cores"] >= DISTORTED_CORES)


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def jvm_workers(runs: list[dict[str, float]]) -> str:
    """The median CPU seconds of the JVM and of the Python workers, as ``JVM/workers``."""
    if not all("cpu_jvm" in r for r in runs):
        return "?"
    return f"{median(runs, 'cpu_jvm'):.1f}/{median(runs, 'cpu_workers'):.1f}"


def speedups(rows: list[tuple[tuple[str, str], dict[str, Any]]]) -> str:
    """The speed-up ratios (detect seconds of one configuration over another's): each
    cut over one group on the same master, local[2] over local[1] with one group, and
    every cut on local[2] over one group on local[1] (all that two cores gain)."""
    by_label = dict(rows)
    settings = list(dict.fromkeys(label[1] for label, _ in rows if label[1] != "1"))
    pairs = [(("local[1]", "1"), ("local[2]", "1"), "local[2] over local[1], ranges=1")]
    for master in MASTERS:
        pairs += [((master, "1"), (master, r), f"ranges={r} over ranges=1, {master}") for r in settings]
    for r in settings:
        pairs.append((("local[1]", "1"), ("local[2]", r), f"local[2] ranges={r} over local[1] ranges=1"))
    parts = []
    for slow, fast, text in pairs:
        if slow in by_label and fast in by_label:
            a, b = by_label[slow], by_label[fast]
            ratio = median(a["detect"], "seconds") / median(b["detect"], "seconds")
            mark = " (load-distorted)" if distorted(a) or distorted(b) else ""
            parts.append(f"{text}: {ratio:.2f}×{mark}")
    return "Speed-ups (detect): " + "; ".join(parts) + "." if parts else ""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000, help="ticks (default 200000)")
    parser.add_argument("--names", type=int, default=100, help="stocks (default 100: the busiest ~19%%)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per configuration (median)")
    parser.add_argument("--masters", nargs="+", default=MASTERS, help="default: local[1] local[2]")
    parser.add_argument(
        "--patterns", nargs="+", default=list(PATTERNS), choices=list(PATTERNS), help="default: all"
    )
    parser.add_argument(
        "--ranges",
        nargs="+",
        default=["1", "default"],
        help="ranges= settings per master: counts or 'default' (default: 1 default)",
    )
    parser.add_argument("--driver-memory", default="3g", help="spark.driver.memory (default 3g)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "spark_scale.md"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        job = json.loads(args.worker)
        work = engine_worker if job["kind"] == "engine" else spark_worker
        print(json.dumps(work(job)))
        return

    results: dict[str, Any] = {}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pycel-spark-scale-") as tmp:
        data, share = write_ticks(args.events, args.names, Path(tmp))
        print(f"{args.events:,} ticks, busiest stock {share:.1%}", flush=True)
        for name in args.patterns:
            base = {"data": str(data), "pattern": name, "repeat": args.repeat}
            engine = in_child({**base, "kind": "engine"})
            print(f"{name}: engine {engine['matches']:,} matches {engine['runs']}", flush=True)
            rows = []
            for master in args.masters:
                for setting in args.ranges:
                    if setting == "default" and master == "local[1]" and "1" in args.ranges:
                        continue  # one core: the default is one range, the ranges=1 run
                    ranges = None if setting == "default" else int(setting)
                    job = {**base, "kind": "spark", "master": master, "ranges": ranges}
                    r = in_child({**job, "driver_memory": args.driver_memory})
                    bad = [c for c in r["checks"] if c != [engine["matches"], engine["digest"]]]
                    assert not bad, (name, master, ranges, bad, engine["matches"], engine["digest"])
                    label = (master, setting)
                    print(
                        f"  {label}: detect {r['detect']} floor {r['floor']} load {r['load_before'][0]:.1f}"
                        f" -> {r['load_after'][0]:.1f}",
                        flush=True,
                    )
                    rows.append((label, r))
                    results[name] = {"engine": engine, "spark": rows}
                    # Written after every configuration: a stopped run keeps what it measured.
                    text = report(args, share, results, time.perf_counter() - began)
                    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
