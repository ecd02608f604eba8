"""Synthetic stock ticks shared by the examples, tests and benchmarks.

Two event types, ``Buy`` and ``Sell``, both ``Stock`` events with a stock ``name``, a
``price`` (a random walk per stock), a ``volume`` and an integer ``time`` in seconds that
never decreases. Stock names are skewed (a few busy stocks, a long tail), so partitioned
patterns see groups of very different sizes, as real market data has.

Example::

    from examples.stock_data import Buy, Sell, Stock, stock_events

    df = stock_events(10_000, names=20, seed=1)   # pandas: id, event_type, name, price, volume, time
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

import pycel

TICKERS = ("INTC", "RIMM", "AAPL", "MSFT", "AMZN", "GOOG", "ORCL", "IBM", "CSCO", "NVDA")
COLUMNS = ("id", "event_type", "name", "price", "volume", "time")


class Stock(pycel.Event):
    """A stock tick; ``time`` is in seconds since the epoch."""

    name: pycel.Field[str]
    price: pycel.Field[float]
    volume: pycel.Field[int]
    time: pycel.Field[int]


class Buy(Stock):
    """A buy order."""


class Sell(Stock):
    """A sell order."""


def stock_names(n: int) -> list[str]:
    """``n`` distinct stock names: the familiar tickers first, then ``S0010``, ``S0011``, ..."""
    return [TICKERS[k] if k < len(TICKERS) else f"S{k:04d}" for k in range(n)]


def stock_events(
    n: int,
    *,
    names: int = 10,
    seed: int = 0,
    events_per_second: int = 20,
    start_time: int = 1_700_000_000,
) -> pd.DataFrame:
    """``n`` ticks in stream order as a pandas DataFrame with columns :data:`COLUMNS`.

    ``id`` is the 0-based position of the tick in the stream; ``time`` grows by one second
    every ``events_per_second`` ticks. The same arguments always give the same data.
    """
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, names + 1)
    name_idx = rng.choice(names, size=n, p=weights / weights.sum())
    steps = rng.normal(0.0, 0.01, size=n)
    walk = pd.Series(steps).groupby(name_idx).cumsum().to_numpy()
    base = 20.0 + 180.0 * rng.random(names)
    price = np.round(base[name_idx] * np.exp(walk), 2)
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "event_type": np.where(rng.random(n) < 0.5, "Buy", "Sell"),
            "name": np.array(stock_names(names), dtype=object)[name_idx],
            "price": price,
            "volume": rng.integers(1, 1001, size=n, dtype=np.int64),
            "time": start_time + np.arange(n, dtype=np.int64) // events_per_second,
        }
    )


def write_parquet_parts(df: pd.DataFrame, directory: str | Path, parts: int) -> list[Path]:
    """Write ``df`` as ``parts`` Parquet files of consecutive rows, named in stream order
    (``part-00000.parquet``, ...), as a file-based stream source would receive them: each
    file a second newer than the one before (Spark's file source takes files in order of
    modification time; files written within one clock tick came in either order)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, len(df), parts + 1).astype(int)
    paths = []
    first = time.time()
    for k in range(parts):
        path = out / f"part-{k:05d}.parquet"
        df.iloc[bounds[k] : bounds[k + 1]].to_parquet(path, index=False)
        os.utime(path, (first + k, first + k))
        paths.append(path)
    return paths
