"""Detect a pattern in a stream of stock ticks with Spark Structured Streaming:
``python examples/spark_streaming.py``.

Ticks (examples/stock_data.py) arrive as Parquet files in a directory, one file per
micro-batch. The query keeps each stock's engine state in Spark's state store, so it is
stopped after the first files and restarted from its checkpoint when the rest arrive,
and still finds exactly the matches of the in-process engine over all the ticks.

    python examples/spark_streaming.py --events 50000 --files 6
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from stock_data import Buy, Sell, Stock, stock_events, write_parquet_parts

import pycel
import pycel.spark


def pattern() -> pycel.Pattern:
    """A large sell, then one or more large buys of the same stock, within 20 seconds."""
    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    return (
        (s.where(s.volume > 900) >> pycel.plus(b.where(b.volume > 950)))
        .within(seconds=20, on=Stock.time)
        .partition_by(Stock.name)
    )


def run_until_caught_up(
    spark: SparkSession, source: Path, checkpoint: Path, found: list[pd.DataFrame]
) -> None:
    """Process every file in ``source`` (one per micro-batch), continuing from ``checkpoint``."""
    schema = spark.read.parquet(str(source)).schema
    ticks = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    # position_column: a streaming DataFrame has no global order to number, so the ticks
    # carry their stream position (a sequence number); the watermark lets stocks whose
    # 20-second window has passed drop their state.
    matches = pycel.spark.detect(ticks, pattern(), position_column="id", id_column="id", watermark="1 minute")

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        rows = batch.toPandas()
        found.append(rows)
        names = (
            ", ".join(f"{k} {v}" for k, v in rows["name"].value_counts().head(3).items())
            if len(rows)
            else "-"
        )
        print(f"  micro-batch {batch_id}: {len(rows):,} new matches ({names})")

    query: Any = (
        matches.writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=50_000, help="number of ticks (default 50000)")
    parser.add_argument("--names", type=int, default=10, help="number of stock names (default 10)")
    parser.add_argument("--files", type=int, default=6, help="files, one per micro-batch (default 6)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    spark = (
        SparkSession.builder.master(args.master)
        .appName("pycel spark_streaming example")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    ticks = stock_events(args.events, names=args.names, seed=7)
    found: list[pd.DataFrame] = []
    with tempfile.TemporaryDirectory(prefix="pycel-stream-") as tmp:
        staging, source, checkpoint = Path(tmp, "staging"), Path(tmp, "in"), Path(tmp, "checkpoint")
        files = write_parquet_parts(ticks, staging, args.files)
        source.mkdir()
        half = max(1, len(files) // 2)
        print(f"{len(ticks):,} ticks in {len(files)} files; first {half} files arrive")
        for f in files[:half]:
            f.rename(source / f.name)
        run_until_caught_up(spark, source, checkpoint, found)
        print("query stopped; the remaining files arrive; restarting from the checkpoint")
        for f in files[half:]:
            f.rename(source / f.name)
        run_until_caught_up(spark, source, checkpoint, found)
    spark.stop()

    matches = pd.concat(found, ignore_index=True)
    engine = pycel.compile(pattern()).run(ticks.drop(columns=["id"]))
    streamed = set(zip(matches["match_start"], matches["match_end"], strict=True))
    same = len(engine) == len(matches) and {(m.start, m.end) for m in engine} == streamed
    print(f"\n{len(matches):,} matches streamed; in-process engine on all ticks: {len(engine):,}", end=" ")
    print("(same)" if same else "(DIFFERENT)")
    print(f"done in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
