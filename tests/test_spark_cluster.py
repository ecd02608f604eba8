"""pycel.spark.detect on a real cluster: ``local-cluster[2,1,1024]`` starts two executor
processes (separate JVMs with their own Python workers, as on a standalone cluster), so
the pattern, the runner and pycel's errors cross process boundaries the way they do in
production. A partitioned, a joined and an unpartitioned windowed pattern (the last cut
into ranges) must give the in-process engine's matches.

One process holds one SparkContext and the other Spark tests share a ``local[2]`` one,
so the cluster runs in a child process: this file run as a script prints the matches as
JSON, and the test compares them with ``query.run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pycel
from examples.stock_data import Buy, Sell, Stock, stock_events

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parent.parent
s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")

PATTERNS = {
    "partitioned": (s.where(s.volume > 600) >> b.where(b.volume > 600))
    .within(events=40)
    .partition_by(Stock.name),
    "joined": (s.where(s.volume > 800) >> pycel.plus(b.where(b.volume > 900)))
    .where(s.name == b.name)
    .within(3, on=Stock.time),
    "unpartitioned, in ranges": (s.where(s.volume > 900) >> b.where(b.volume > 900)).within(2, on=Stock.time),
}
EVENTS = 3000


def ticks() -> pd.DataFrame:
    return stock_events(EVENTS, names=6, seed=5)


def cluster_matches() -> dict[str, list[Any]]:
    """Run every pattern on local-cluster[2,1,1024]; the match keys per pattern."""
    from pyspark.sql import SparkSession

    import pycel.spark

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("pycel-cluster-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = spark.createDataFrame(ticks().sample(frac=1, random_state=2), schema=None).repartition(4)
        found: dict[str, list[Any]] = {}
        for name, pattern in PATTERNS.items():
            ranges = 4 if "ranges" in name else None
            rows = pycel.spark.detect(df, pattern, order_by="time", id_column="id", ranges=ranges).collect()
            found[name] = [
                [
                    r["match_start"],
                    r["match_end"],
                    sorted((v, p) for v, p in r["positions"].asDict().items() if p),
                ]
                for r in rows
            ]
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        found["executors"] = [executors]
        return found
    finally:
        spark.stop()


def as_keys(rows: list[Any]) -> set[Any]:
    return {(start, end, tuple((v, tuple(p)) for v, p in valuation)) for start, end, valuation in rows}


@pytest.mark.spark
@pytest.mark.slow
def test_detect_on_a_local_cluster_equals_the_engine() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["PYSPARK_PYTHON"] = sys.executable
    out = subprocess.run(
        [sys.executable, __file__], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found.pop("executors") == [2]
    events = ticks()
    for name, pattern in PATTERNS.items():
        want = pycel.compile(pattern).run(events.drop(columns=["id"])).keys()
        assert len(want) > 0, name
        assert len(found[name]) == len(want), name  # no duplicates
        assert as_keys(found[name]) == want, name


if __name__ == "__main__":
    print(json.dumps(cluster_matches()))
