"""Range-parallel evaluation on Spark: events/s of an unpartitioned windowed pattern run
as one group and cut into ranges, beside the in-process engine and Spark's floor.

    python benchmarks/spark_scale.py                      # 1M ticks on local[2]
    python benchmarks/spark_scale.py --events 5000000 --master "local[2]" --ranges 1 2 8

One Spark session; the ticks are cached in Spark with their positions (``position_column``,
so no sort is timed). After a warm-up on a small input (JVM, Python workers, Numba cache)
each configuration runs ``--repeat`` times, writing the match rows to Spark's ``noop``
sink, and the median is printed. Every configuration's matches are checked against the
in-process engine's (count and sums of start and end positions). A skewed partitioned
pattern (the busiest stock holds about a fifth of the ticks) shows what one hot key
costs, whole (``ranges=1``) and with its hot keys cut into ranges. Figures are printed,
not stored: they depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

import pycel  # noqa: E402
from examples.stock_data import Buy, Sell, Stock, stock_events  # noqa: E402

S, B = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
#: A large sell then a large buy of any stock within 3 seconds (about 60 ticks).
UNPARTITIONED = (S.where(S.volume > 900) >> B.where(B.volume > 900)).within(3, on=Stock.time)
#: The same per stock.
PARTITIONED = UNPARTITIONED.partition_by(Stock.name)


def fingerprint(frame: Any) -> tuple[int, int, int]:
    """(matches, sum of starts, sum of ends): equal runs give equal fingerprints."""
    from pyspark.sql import functions as F

    row = frame.agg(F.count(F.lit(1)), F.sum("match_start"), F.sum("match_end")).collect()[0]
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def engine_fingerprint(pattern: pycel.Pattern, ticks: pd.DataFrame) -> tuple[tuple[int, int, int], float]:
    began = time.perf_counter()
    matches = pycel.compile(pattern).run(ticks.drop(columns=["id"]))
    seconds = time.perf_counter() - began
    return (len(matches), int(matches.starts.sum()), int(matches.ends.sum())), seconds


def no_op(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"n": [len(frame)]})


def no_op_floor(grouped: Any) -> None:
    """What any pandas-UDF integration pays: the groups shipped to Python and back."""
    grouped.applyInPandas(no_op, "n long").write.format("noop").mode("overwrite").save()


def timed(action: Any, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        runs.append(time.perf_counter() - began)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--ranges", type=int, nargs="+", default=[1, 2, 8])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import pycel.spark

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "3g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ticks = stock_events(args.events, names=20, seed=1)
    share = ticks["name"].value_counts(normalize=True).iloc[0]
    df = spark.createDataFrame(ticks).repartition(8).cache()
    df.count()

    def detect(pattern: pycel.Pattern, ranges: int | None, data: Any = df) -> Any:
        return pycel.spark.detect(data, pattern, position_column="id", id_column="id", ranges=ranges)

    warm = spark.createDataFrame(ticks.head(5000))
    for pattern in (UNPARTITIONED, PARTITIONED):
        detect(pattern, 2, warm).write.format("noop").mode("overwrite").save()

    print(f"{args.events} ticks, {args.master}, busiest stock {share:.0%} of the ticks")
    for name, pattern in (("unpartitioned", UNPARTITIONED), ("partitioned (skewed)", PARTITIONED)):
        want, seconds = engine_fingerprint(pattern, ticks)
        print(f"\n{name}: {want[0]} matches; in-process engine {args.events / seconds:,.0f} events/s")
        grouped = df.groupBy("name") if pattern is PARTITIONED else df.groupBy()
        floor = timed(lambda g=grouped: no_op_floor(g), args.repeat)
        print(f"  Spark's no-op applyInPandas floor: {args.events / floor:,.0f} events/s ({floor:.1f} s)")
        for ranges in args.ranges:
            got = fingerprint(detect(pattern, ranges))
            assert got == want, (name, ranges, got, want)
            # Timed from the call: cutting into ranges runs its own small jobs there.
            seconds = timed(
                lambda p=pattern, r=ranges: detect(p, r).write.format("noop").mode("overwrite").save(),
                args.repeat,
            )
            label = f"ranges={ranges}" + (" (one group)" if ranges == 1 and pattern is UNPARTITIONED else "")
            if pattern is PARTITIONED:
                label += " (one group per stock)" if ranges == 1 else " (hot stocks cut)"
            print(f"  detect, {label}: {args.events / seconds:,.0f} events/s ({seconds:.1f} s), same matches")
    spark.stop()


if __name__ == "__main__":
    main()
