"""Throughput of pycel.spark.detect against the in-process engine.

    python benchmarks/spark_bench.py                   # 1M ticks
    python benchmarks/spark_bench.py --events 10000000 # 10M ticks

Generates stock ticks (examples/stock_data.py), writes them to Parquet, and times:

* the in-process engine, ``query.run`` on a pandas DataFrame (one core);
* Spark alone: the same ``groupBy(name).applyInPandas`` with a function that does
  nothing (the floor any pandas-UDF integration pays on this machine);
* ``detect`` on Spark ``local[1]`` and ``local[2]``, numbering positions from
  ``order_by`` (a distributed sort and zipWithIndex) and from a ready ``position_column``;
* ``detect`` on ``local[2]`` with 1, 2, 10 and 100 stock names (partition keys).

Every Spark configuration runs in its own process (a fresh session), warms up on a small
input first (JVM, Python workers, Numba cache), then runs ``--repeat`` times counting the
match rows (every group runs to its end and converts its matches to Arrow); the median is
reported. Every run's match count is checked against the engine's. Results go to
``benchmarks/results/spark.md``.

Windowed patterns cut into ranges (unpartitioned, and a skewed partitioned one with its
hot keys cut), local[1] against local[2], with digests of the matches, CPU time and
memory: ``benchmarks/spark_scale.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pycel  # noqa: E402
from examples.stock_data import Buy, Sell, Stock, stock_events  # noqa: E402

WINDOW_SECONDS = 30


def pattern() -> pycel.Pattern:
    """A large sell, then a large buy of the same stock, within 30 seconds."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    return (
        (s.where(s.volume > 950) >> b.where(b.volume > 950))
        .within(seconds=WINDOW_SECONDS, on=Stock.time)
        .partition_by(Stock.name)
    )


def write_ticks(n: int, names: int, directory: Path) -> tuple[Path, int, float]:
    """Ticks as Parquet (8 files); (path, engine match count, engine seconds)."""
    ticks = stock_events(n, names=names, seed=1)
    path = directory / f"ticks-{n}-{names}"
    path.mkdir(parents=True, exist_ok=True)
    step = -(-n // 8)
    for k in range(0, n, step):
        ticks.iloc[k : k + step].to_parquet(path / f"part-{k // step:03d}.parquet", index=False)
    query = pycel.compile(pattern())
    events = ticks.drop(columns=["id"])
    query.run(events.iloc[:1000])  # Numba compile / cache load
    began = time.perf_counter()
    found = len(query.run(events))
    return path, found, time.perf_counter() - began


def spark_worker(master: str, path: str, mode: str, repeat: int) -> dict[str, Any]:
    """Run in a child process: time detect on one Spark master; a JSON-able result."""
    from pyspark.sql import SparkSession

    import pycel.spark

    spark = (
        SparkSession.builder.master(master)
        .appName("pycel spark_bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(2 * int(master[6:-1])))
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(path)
    n = df.count()

    def run(data: Any) -> tuple[float, int]:
        if mode == "noop":  # Spark's own cost: ship every group to Python and back, no work
            began = time.perf_counter()
            data.groupBy("name").applyInPandas(_group_size, "n long").count()
            return time.perf_counter() - began, -1
        kwargs: dict[str, Any] = (
            {"position_column": "id"} if mode == "position_column" else {"order_by": "time"}
        )
        if mode == "order_by":
            kwargs["id_column"] = "id"
        began = time.perf_counter()
        found = pycel.spark.detect(data, pattern(), **kwargs).count()  # runs every group to the end
        return time.perf_counter() - began, found

    run(df.limit(20_000))  # warm-up
    runs = [run(df) for _ in range(repeat)]
    spark.stop()
    seconds = statistics.median(r[0] for r in runs)
    return {"events": n, "seconds": seconds, "matches": runs[0][1], "runs": [r[0] for r in runs]}


def _group_size(frame: Any) -> Any:
    import pandas as pd

    return pd.DataFrame({"n": [len(frame)]})


def in_child(master: str, path: Path, mode: str, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", master, str(path), mode, str(repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000, help="ticks (default 1000000)")
    parser.add_argument("--names", type=int, default=20, help="stock names in the main runs (default 20)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per configuration (median)")
    parser.add_argument(
        "--keys-events", type=int, default=None, help="ticks for the key scaling (default --events)"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "spark.md"))
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        master, path, mode, repeat = args.worker
        print(json.dumps(spark_worker(master, path, mode, int(repeat))))
        return

    import pyspark

    rows: list[tuple[str, str, int, int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="pycel-spark-bench-") as tmp:
        path, engine_matches, engine_seconds = write_ticks(args.events, args.names, Path(tmp))
        print(
            f"engine: {args.events:,} ticks, {engine_matches:,} matches, {engine_seconds:.2f} s", flush=True
        )
        rows.append(("in-process engine", "1 core", args.names, engine_matches, engine_seconds, 0.0))
        for master in ("local[1]", "local[2]"):
            for mode in ("noop", "order_by", "position_column"):
                r = in_child(master, path, mode, args.repeat)
                print(f"{master} {mode}: {r['seconds']:.1f} s {r['runs']}", flush=True)
                if mode == "noop":
                    name = "Spark alone: groupBy(name).applyInPandas doing nothing"
                    rows.append((name, master, args.names, 0, r["seconds"], 0.0))
                    continue
                assert r["matches"] == engine_matches, (master, mode, r["matches"], engine_matches)
                rows.append((f"spark detect, {mode}", master, args.names, r["matches"], r["seconds"], 0.0))
        n_keys = args.keys_events or args.events
        key_rows: list[tuple[int, int, float, float]] = []
        for names in (1, 2, 10, 100):
            kpath, kmatches, kengine = write_ticks(n_keys, names, Path(tmp))
            r = in_child("local[2]", kpath, "position_column", args.repeat)
            assert r["matches"] == kmatches, (names, r["matches"], kmatches)
            print(f"keys {names}: spark {r['seconds']:.1f} s, engine {kengine:.2f} s", flush=True)
            key_rows.append((names, kmatches, r["seconds"], kengine))

    lines = [
        "# pycel.spark benchmark",
        "",
        f"`python benchmarks/spark_bench.py --events {args.events}` — "
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, Spark {pyspark.__version__}.",
        "",
        f"Pattern: `{pattern()!r}` over generated stock ticks (examples/stock_data.py). "
        "Spark times are the median of the timed runs after a warm-up, counting the match rows "
        "(each group's matches are built and converted to Arrow); they include reading Parquet, "
        "numbering positions (order_by: sort + "
        "zipWithIndex) and the shuffle by key. Every run found the engine's matches.",
        "",
        "| configuration | cores | keys | matches | seconds | events/s |",
        "|---|---|---|---|---|---|",
    ]
    for name, cores, keys, matches, seconds, _ in rows:
        shown = f"{matches:,}" if matches else "-"
        rate = args.events / seconds
        lines.append(f"| {name} | {cores} | {keys} | {shown} | {seconds:.1f} | {rate:,.0f} |")
    lines += [
        "",
        f"Scaling with the number of partition keys (`local[2]`, position_column, {n_keys:,} ticks):",
        "",
        "| keys | matches | spark seconds | spark events/s | engine events/s |",
        "|---|---|---|---|---|",
    ]
    for names, kmatches, seconds, kengine in key_rows:
        lines.append(
            f"| {names} | {kmatches:,} | {seconds:.1f} | {n_keys / seconds:,.0f} | {n_keys / kengine:,.0f} |"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
