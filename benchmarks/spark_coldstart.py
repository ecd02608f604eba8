"""The first group of a Spark Python worker, cold and warm (issue #13, "Cold start").

For each automaton family (the queries of ``coldstart.py``) a fresh driver process starts
a Spark application on ``local[1]`` with ``PYCEL_CACHE_DIR`` set to a new, empty
directory, and runs ``pycel.spark.detect`` once on a small stream: the Python worker that
runs the group compiles the family's loops and writes them to the cache (*cold*). A
second application (a new driver, a new worker) with the same directory does the same
and loads them (*warm*: what every later application on that machine pays).

The worker's CPU time for the group is read around the ``detect`` action by a probe task
that reports its worker's process id and CPU seconds (Spark reuses the idle worker, and
the figures are used only when both probes came from the same worker as the group). Also
listed: the driver's CPU seconds for ``detect`` (planning, no Numba) and the action's wall
time.

``--fresh-executors`` gives the Python workers of each application a new, empty cache
directory of their own (``spark.executorEnv.PYCEL_CACHE_DIR``), as executors in fresh
containers on a cluster have, while the driver keeps its cache: the driver compiles (cold)
or loads (warm) the query's kernels and ships them with the query
(``RunnerSpec.compiled``), so a worker loads them instead of compiling. Usage::

    python benchmarks/spark_coldstart.py
    python benchmarks/spark_coldstart.py --families sequential,windowed --events 2000
    python benchmarks/spark_coldstart.py --fresh-executors
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

FAMILIES = ("sequential", "ranked", "maximal", "windowed", "windowed-next", "parallel", "ordered")


def _probe(batches: Iterator[Any]) -> Iterator[Any]:
    """Runs in a Python worker: its process id and CPU seconds so far."""
    import pandas as pd

    for _ in batches:
        pass
    yield pd.DataFrame({"pid": [os.getpid()], "cpu": [time.process_time()]})


def child(family: str, events: int) -> None:
    """One Spark application: detect once, print the worker's and driver's figures as JSON."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from coldstart import _events, _query  # the same queries and stream as in process
    from pyspark.sql import SparkSession

    import pycel.spark

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("pycel spark_coldstart")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    executor_cache = os.environ.get("SPARK_COLDSTART_EXECUTOR_CACHE")
    if executor_cache:  # the workers' own cache, not the driver's
        builder = builder.config("spark.executorEnv.PYCEL_CACHE_DIR", executor_cache)
    spark = builder.getOrCreate()
    try:
        df = spark.createDataFrame(_events(events))
        probe = spark.range(1).mapInPandas(_probe, "pid long, cpu double")
        before = probe.collect()[0]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rows = pycel.spark.detect(df, _query(family), order_by="time").collect()
        cpu1, wall1 = time.process_time(), time.perf_counter()
        after = probe.collect()[0]
        same_worker = before["pid"] == after["pid"]
        print(
            json.dumps(
                {
                    "family": family,
                    "matches": len(rows),
                    "worker_cpu": after["cpu"] - before["cpu"] if same_worker else None,
                    "driver_cpu": cpu1 - cpu0,
                    "wall": wall1 - wall0,
                }
            )
        )
    finally:
        spark.stop()


def _run_child(family: str, cache_dir: str, events: int, fresh_executors: bool) -> dict[str, Any]:
    env = {**os.environ, "PYCEL_CACHE_DIR": cache_dir}
    if fresh_executors:
        env["SPARK_COLDSTART_EXECUTOR_CACHE"] = tempfile.mkdtemp(prefix="pycel-spark-executor-")
    cmd = [sys.executable, __file__, "--child", family, "--events", str(events)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def _seconds(value: float | None) -> str:
    return "n/a (another worker)" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--fresh-executors", action="store_true", help="empty worker cache per application")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.events)
        return
    print(
        "| family | cold: worker CPU s | cold: detect wall s | warm: worker CPU s "
        "| warm: detect wall s | driver CPU s (cold, warm) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for family in args.families.split(","):
        with tempfile.TemporaryDirectory(prefix="pycel-spark-coldstart-") as cache_dir:
            cold = _run_child(family, cache_dir, args.events, args.fresh_executors)
            warm = _run_child(family, cache_dir, args.events, args.fresh_executors)
        if cold["matches"] != warm["matches"]:
            raise SystemExit(f"{family}: cold and warm applications disagree")
        print(
            f"| {family} | {_seconds(cold['worker_cpu'])} | {cold['wall']:.1f} "
            f"| {_seconds(warm['worker_cpu'])} | {warm['wall']:.2f} "
            f"| {cold['driver_cpu']:.2f}, {warm['driver_cpu']:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
