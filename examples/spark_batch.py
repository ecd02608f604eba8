"""Find patterns in stock ticks with Spark (batch): ``python examples/spark_batch.py``.

Generates ``--events`` ticks (examples/stock_data.py), loads them into a local Spark
session, runs two partitioned patterns with :func:`pycel.spark.detect`, prints a few
matches and a summary, and checks the match counts against the in-process engine.

    python examples/spark_batch.py --events 500000 --master "local[2]"
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from stock_data import Buy, Sell, Stock, stock_events

import pycel
import pycel.spark


def patterns() -> dict[str, pycel.Pattern]:
    s, b, s2 = pycel.alias(Sell, "s"), pycel.alias(Buy, "b"), pycel.alias(Sell, "s2")
    return {
        # a large sell, then a large buy of the same stock within 30 seconds
        "sell then buy": (s.where(s.volume > 950) >> b.where(b.volume > 950))
        .within(seconds=30, on=Stock.time)
        .partition_by(Stock.name),
        # a cheap sell, one or more large buys, a large sell: all within 100 ticks of the
        # whole market (count windows are global, also under partition_by)
        "cheap sell, buys, sell": (
            s.where(s.price < 60) >> pycel.plus(b.where(b.volume > 900)) >> s2.where(s2.volume > 900)
        )
        .within(events=100)
        .partition_by(Stock.name),
    }


def keys_of(matches: pd.DataFrame) -> set[tuple[int, int, tuple[tuple[str, tuple[int, ...]], ...]]]:
    """The matches of a detect() result as :meth:`pycel.Match.key` tuples."""
    return {
        (int(start), int(end), tuple(sorted((v, tuple(p)) for v, p in positions.items() if len(p))))
        for start, end, positions in zip(
            matches["match_start"], matches["match_end"], matches["positions"], strict=True
        )
    }


def spark_session(master: str) -> SparkSession:
    return (
        SparkSession.builder.master(master)
        .appName("pycel spark_batch example")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")  # fast createDataFrame/toPandas
        .getOrCreate()
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000, help="number of ticks (default 100000)")
    parser.add_argument("--names", type=int, default=20, help="number of stock names (default 20)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--show", type=int, default=5, help="matches to print per pattern")
    parser.add_argument("--no-check", action="store_true", help="skip the in-process engine check")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    spark = spark_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    ticks = stock_events(args.events, names=args.names, seed=42)
    df: DataFrame = spark.createDataFrame(ticks)
    print(f"{len(ticks):,} ticks of {args.names} stocks, Spark {spark.version} on {args.master}")

    for name, pattern in patterns().items():
        t0 = time.perf_counter()
        # One Spark job per pattern: the matches come back to the driver as pandas.
        matches = pycel.spark.detect(df, pattern, order_by="time", id_column="id").toPandas()
        seconds = time.perf_counter() - t0
        print(f"\n== {name}: {pattern!r}")
        first = matches.sort_values(["match_end", "match_start"]).head(args.show)
        print(first[["name", "match_start", "match_end", "positions"]].to_string(index=False))
        busiest = ", ".join(f"{k} {v:,}" for k, v in matches["name"].value_counts().head(3).items())
        rate = len(ticks) / seconds
        print(f"{len(matches):,} matches in {seconds:.1f} s ({rate:,.0f} ticks/s); busiest: {busiest}")
        if not args.no_check:
            engine = pycel.compile(pattern).run(ticks.drop(columns=["id"]))
            verdict = "same" if engine.keys() == keys_of(matches) else "DIFFERENT"
            print(f"in-process engine: {len(engine):,} matches ({verdict})")
    spark.stop()
    print(f"\ndone in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    pd.set_option("display.width", 160)
    main()
