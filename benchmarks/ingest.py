"""Ingestion speed per input kind, on the taxis schema of the CORE paper (17 attributes,
the query T3 reads 3 of them: 14 unread columns), and the list-of-dicts scaling.

For each input kind (pandas DataFrame, Arrow table, list of dicts, Event instances) it
times ``to_batch`` (with the query's read columns when ``to_batch`` takes ``columns=``)
and the matching of the ready batch (``stream.push(batch)``), and prints events/s and the
share of the run spent in ingestion. Then ``pycel run`` on the same events as CSV and as
Parquet (in process, output to /dev/null), then the ingestion of lists of dicts and of
Event instances at 10k…1M rows beside the same rows as a DataFrame.
Times are CPU seconds of this process, best of ``--repeats``.

``--steps ROWS`` instead shows where the time of a list of ROWS dicts goes: the cost of
each step of gathering the rows (every key, the event type, each column the query reads)
as what it adds to one gathering pass, and the checks and encoding after it; then the
floor of any gathering built from Python's C-level calls (every key collected, the read
values fetched, nothing converted or copied) plus that encoding, as a multiple of the
DataFrame's ingestion.

Run::

    python benchmarks/ingest.py                 # 20k events, dicts up to 1M rows
    python benchmarks/ingest.py --events 20000 --max-rows 100000
    python benchmarks/ingest.py --steps 100000  # where a list of dicts' time goes
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import io
import itertools
import operator
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pycel
from pycel import ceql
from pycel.data.ingest import Schema, to_batch
from pycel.runtime.predicates import columns_read_by

DECLARATION = """
CREATE STREAM S {
    EVENT TRIP {
        medallion: string, hack_license: string, vendor_id: string,
        pickup_datetime: int, dropoff_datetime: int, passenger_count: int,
        trip_time_in_secs: int, trip_distance: double,
        pickup_longitude: double, pickup_latitude: double,
        dropoff_longitude: double, dropoff_latitude: double,
        pickup_loc: string, dropoff_loc: string,
        payment_type: string, fare_amount: double, total_amount: double
    }
}
"""
ZONES = ["East Harlem North", "Midwood", "Gravesend", "West Brighton", "Lincoln Square West"]
QUERY = """SELECT * FROM S
WHERE (TRIP as loc1; TRIP as loc2; TRIP as loc3)
FILTER loc1[pickup_loc = 'East Harlem North' AND dropoff_loc = 'Midwood']
       AND loc2[pickup_loc = 'Midwood' AND dropoff_loc = 'Gravesend']
       AND loc3[pickup_loc = 'Gravesend' AND dropoff_loc = 'West Brighton']
WITHIN 10000 [dropoff_datetime]"""


def taxi_frame(n: int, seed: int = 7) -> pd.DataFrame:
    """``n`` seeded TRIP events with every attribute filled, in drop-off time order."""
    rng = np.random.default_rng(seed)
    pickup = np.cumsum(rng.integers(0, 30, n)) + 1_356_998_400
    trip_time = rng.integers(60, 3600, n)
    return pd.DataFrame(
        {
            "event_type": "TRIP",
            "medallion": [f"M{k:05d}" for k in rng.integers(0, 20_000, n)],
            "hack_license": [f"H{k:05d}" for k in rng.integers(0, 30_000, n)],
            "vendor_id": rng.choice(["CMT", "VTS"], n).astype(object),
            "pickup_datetime": pickup,
            "dropoff_datetime": np.maximum.accumulate(pickup + trip_time),
            "passenger_count": rng.integers(1, 7, n),
            "trip_time_in_secs": trip_time,
            "trip_distance": rng.gamma(2.0, 1.5, n).round(2),
            "pickup_longitude": rng.uniform(-74.1, -73.7, n),
            "pickup_latitude": rng.uniform(40.6, 40.9, n),
            "dropoff_longitude": rng.uniform(-74.1, -73.7, n),
            "dropoff_latitude": rng.uniform(40.6, 40.9, n),
            "pickup_loc": rng.choice(ZONES, n).astype(object),
            "dropoff_loc": rng.choice(ZONES, n).astype(object),
            "payment_type": rng.choice(["CSH", "CRD"], n).astype(object),
            "fare_amount": rng.uniform(3, 60, n).round(2),
            "total_amount": rng.uniform(3, 80, n).round(2),
        }
    )


def best_of(repeats: int, work: Callable[[], Any]) -> float:
    """The fastest of ``repeats`` runs of ``work``, in seconds of this process's CPU time
    (the machine is shared: wall time counts the other processes too), with the garbage
    collector paused as ``timeit`` does."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            began = time.process_time()
            work()
            best = min(best, time.process_time() - began)
    finally:
        gc.enable()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--max-rows", type=int, default=1_000_000, help="largest list of dicts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, metavar="ROWS", help="only the steps of a list of ROWS dicts")
    args = parser.parse_args()

    decl = ceql.parse_declaration(DECLARATION)
    trip = decl["TRIP"]
    query = pycel.compile(ceql.parse_query(QUERY, decl), types=decl.values())
    reads = columns_read_by(query)
    if args.steps:
        _steps(args.steps, max(3, args.repeats), trip, set(reads))
        return
    selective = "columns" in inspect.signature(to_batch).parameters
    extra: dict[str, Any] = {"columns": reads} if selective else {}
    frame = taxi_frame(args.events)
    import pyarrow as pa  # type: ignore[import-untyped]

    records = frame.to_dict("records")
    inputs: dict[str, Any] = {
        "pandas DataFrame": frame,
        "Arrow table": pa.Table.from_pandas(frame, preserve_index=False),
        "list of dicts": records,
        "Event instances": [trip(**{k: v for k, v in r.items() if k != "event_type"}) for r in records],
    }
    print(f"taxis schema: {args.events:,} events, {len(frame.columns) - 1} attributes, the query reads "
          f"{sorted(reads)}; to_batch {'with' if selective else 'without'} columns=")
    print("(all): every column encoded, as without columns=")
    print(f"{'input':<24} {'ingest ms':>10} {'events/s':>12} {'match ms':>9} {'ingestion share':>16}")
    variants = [("", extra), (" (all)", {})] if selective else [("", extra)]
    for kind, data in inputs.items():
        for suffix, given in variants:
            ingest = best_of(args.repeats, lambda data=data, given=given: to_batch(
                data, Schema.for_types([trip]), **given
            ))
            batch = to_batch(data, Schema.for_types([trip]), **given)
            match = best_of(args.repeats, lambda batch=batch: query.stream().push(batch))
            print(f"{kind + suffix:<24} {ingest * 1e3:>10.1f} {args.events / ingest:>12,.0f} "
                  f"{match * 1e3:>9.1f} {ingest / (ingest + match):>15.0%}")
    _cli(frame, args.repeats)
    print("\nlists of dicts and of Event instances vs the DataFrame (taxis schema), ingestion (CPU s):")
    print(f"{'rows':>9} {'DataFrame s':>12} {'dicts s':>8} {'dicts rows/s':>13} {'ratio':>6} "
          f"{'Events s':>9} {'Events rows/s':>14} {'ratio':>6}")
    for rows in (n for n in (10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000) if n <= args.max_rows):
        table = taxi_frame(rows, seed=rows)
        many = table.to_dict("records")
        events = [trip(**{k: v for k, v in r.items() if k != "event_type"}) for r in many]
        repeats = max(1, args.repeats // 2)
        columnar = best_of(repeats, lambda table=table: to_batch(table, Schema.for_types([trip]), **extra))
        line = f"{rows:>9,} {columnar:>12.4f}"
        for listed in (many, events):
            seconds = best_of(repeats, lambda x=listed: to_batch(x, Schema.for_types([trip]), **extra))
            line += f" {seconds:>8.3f} {rows / seconds:>13,.0f} {seconds / columnar:>5.1f}x"
        print(line)
        del many, events, table


def _steps(n: int, repeats: int, trip: Any, reads: set[str]) -> None:
    """Where the ingestion of ``n`` taxis rows as a list of dicts spends its time: each step
    of the gathering (``pycel.data.rows._gather``: every key, the event type, each read
    column, done chunk by chunk in one pass over the rows) as the time it adds to that pass,
    and what comes after it (the event types, the checks and encoding of the columns)."""
    from pycel.data import rows

    table = taxi_frame(n, seed=n)
    many = table.to_dict("records")
    fields = Schema.for_types([trip]).fields
    tc = "event_type"

    def gather(attrs: set[str], keys: bool = True, types: bool = True) -> Callable[[], Any]:
        def run() -> Any:
            return rows._gather(many, "dicts", attrs, fields, set() if keys else None, tc if types else None)

        return run

    work = {
        "DataFrame": lambda: to_batch(table, Schema.for_types([trip]), columns=reads),
        "dicts": lambda: to_batch(many, Schema.for_types([trip]), columns=reads),
        "gathering": gather(reads),
        "every key (set.update, to find unknown ones)": gather(reads, keys=False),
        "the event type (a count of the one name)": gather(reads, types=False),
    }
    work.update({f"column {attr} ({fields[attr]})": gather(reads - {attr}) for attr in sorted(reads)})

    def floor(values: bool) -> Callable[[], Any]:
        """Every key of every dict collected chunk by chunk (reaching each dict once), and
        with ``values`` the event type counted and each read column fetched into objects:
        the least a gathering with C-level calls does (no conversion, no copy, no check)."""

        def run() -> None:
            keys: set[str] = set()
            for start in range(0, n, rows.CHUNK):
                part = many[start : start + rows.CHUNK]
                keys.update(*part)
                if values:
                    operator.countOf(map(dict.get, part, itertools.repeat(tc)), "TRIP")
                    for attr in reads:
                        np.fromiter(map(dict.get, part, itertools.repeat(attr)), object, len(part))

        return run

    floors = {"keys": floor(False), "keys and values": floor(True)}
    work.update(floors)
    best = dict.fromkeys(work, float("inf"))
    for _ in range(repeats):  # (round after round, so that the machine's load falls alike on all)
        for name, run in work.items():
            best[name] = min(best[name], best_of(1, run))
    whole, full = best.pop("dicts"), best.pop("gathering")
    frame = best.pop("DataFrame")
    keys_alone, fetched = (best.pop(name) for name in floors)
    added = {step: full - without for step, without in best.items()}
    print(f"\nwhere {n:,} rows as a list of dicts spend their ingestion (CPU ms, best of {repeats}):")
    print(f"{'DataFrame, to_batch':<52} {frame * 1e3:>8.2f}")
    print(f"{'list of dicts, to_batch':<52} {whole * 1e3:>8.2f} ({whole / frame:.1f}x)")
    print(f"{'  gathering the rows, one pass':<52} {full * 1e3:>8.2f}")
    for step, seconds in added.items():
        print(f"{'    ' + step:<52} {seconds * 1e3:>8.2f}")
    print(f"{'    the rest: reaching each dict, the chunks':<52} {(full - sum(added.values())) * 1e3:>8.2f}")
    print(f"{'  types, checks and encoding (to_batch - gathering)':<52} {(whole - full) * 1e3:>8.2f}")
    print("floor of a gathering from C-level calls, each pass alone (x the DataFrame):")
    print(f"{'  every key (set.update, chunk by chunk)':<52} {keys_alone * 1e3:>8.2f} "
          f"({keys_alone / frame:.1f}x)")
    print(f"{'  and the event type counted, the read columns fetched':<52} {fetched * 1e3:>8.2f} "
          f"({fetched / frame:.1f}x)")
    print(f"{'  plus the types, checks and encoding above':<52} {(fetched + whole - full) * 1e3:>8.2f} "
          f"({(fetched + whole - full) / frame:.1f}x)")


def _cli(frame: pd.DataFrame, repeats: int) -> None:
    """``pycel run`` of the query over the events as CSV and as Parquet, in process."""
    from pycel.cli import main as cli_main

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "decl.ceql").write_text(DECLARATION)
        (folder / "query.ceql").write_text(QUERY)
        frame.to_csv(folder / "events.csv", index=False)
        frame.to_parquet(folder / "events.parquet", index=False)
        for name in ("events.csv", "events.parquet"):
            argv = ["run", "-d", str(folder / "decl.ceql"), "--query", str(folder / "query.ceql"),
                    str(folder / name), "-o", "/dev/null", "--quiet"]
            sink = io.StringIO()

            def run(argv: list[str] = argv, sink: io.StringIO = sink) -> None:
                with contextlib.redirect_stderr(sink):
                    status = cli_main(argv)
                if status != 0:
                    raise SystemExit(f"pycel run failed ({status}): {sink.getvalue()}")

            seconds = best_of(repeats, run)
            print(f"pycel run {name:<15} {seconds * 1e3:>7.1f} ms {len(frame) / seconds:>12,.0f} events/s")


if __name__ == "__main__":
    main()
