"""Run one workload on the CORE engine (pycer) and report times, memory and matches.

Runs under the Python 3.13 venv (``benchmarks/.venv-core``), started by ``run.py``::

    .venv-core/bin/python core_worker.py SPEC.json

SPEC.json holds ``declaration`` (CREATE STREAM text), ``query`` (CEQL), ``events_csv``
(header row ``event_type,<attributes...>``, one event per row), ``repeat``,
``result_out`` (JSON written here), and optionally ``matches_out`` (an .npz of the
canonical matches, see canon.py) with ``match_cap`` (skip the file above that many).

Per repeat a fresh ``PyOfflineServer`` is built (declare_stream + add_query: "compile"),
then the timed part is ``send_events(all events)`` + ``get_output()``: CORE processes on
its own worker threads and ``get_output`` joins them, so the timed span covers ingestion,
evaluation and writing every match into the output string. Building the ``PyEvent``
objects from the CSV happens once, before any timing.

Matches are identified through the ``pos`` attribute (the event's 0-based position),
which every benchmark event carries: CORE prints each match as
``[start,end], ((id: T attributes: [a1 a2 ... ]) ...)`` with no variable names.
"""

from __future__ import annotations

import csv
import json
import resource
import sys
import time
import traceback
from array import array
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from canon import MatchSet, summary

_FAILED = "Failed to process client request"


def _rusage() -> tuple[float, int]:
    """(CPU seconds of this process and its threads, peak RSS in KiB).

    The peak is VmHWM from /proc (this program's own high-water mark): ru_maxrss would
    also count the parent's RSS at fork time, which Linux carries across exec.
    """
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, peak_rss_kb()


def peak_rss_kb() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _value_makers(pycer: Any, info: Any) -> dict[str, tuple[int, list[str], list[Any]]]:
    """event name -> (type id, attribute names, PyValue constructors) from the catalog."""
    by_type = {
        "INT64": pycer.PyIntValue,
        "PRIMARY_TIME": pycer.PyIntValue,
        "DATE": pycer.PyDateValue,
        "DOUBLE": pycer.PyDoubleValue,
        "BOOL": pycer.PyBoolValue,
        "STRING_VIEW": pycer.PyStringValue,
    }
    conv: dict[str, Any] = {
        "INT64": int,
        "PRIMARY_TIME": int,
        "DATE": int,
        "DOUBLE": float,
        "BOOL": lambda s: s.strip().lower() in ("1", "true", "t", "yes"),
        "STRING_VIEW": str,
    }
    out: dict[str, tuple[int, list[str], list[Any]]] = {}
    for ev in info.events_info:
        names = [a.name for a in ev.attributes_info]
        makers = []
        for a in ev.attributes_info:
            cls, fn = by_type[a.value_type.name], conv[a.value_type.name]
            makers.append(lambda s, cls=cls, fn=fn: cls(fn(s)))
        out[ev.name] = (ev.id, names, makers)
    return out


def load_events(pycer: Any, declaration: str, path: str) -> tuple[list[Any], dict[int, int]]:
    """PyEvents from the CSV, and the index of ``pos`` in each event type's attributes."""
    probe = pycer.PyOfflineServer()
    info = probe.declare_stream(declaration)
    probe.get_output()
    makers = _value_makers(pycer, info)
    pos_index = {tid: names.index("pos") for tid, names, _ in makers.values() if "pos" in names}
    events: list[Any] = []
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        col = {name: k for k, name in enumerate(header)}
        plans: dict[str, tuple[int, list[tuple[int, Any]]]] = {}
        for name, (tid, names, mk) in makers.items():
            missing = [a for a in names if a not in col]
            if missing:
                raise ValueError(f"CSV has no column for {name}.{missing[0]}")
            plans[name] = (tid, [(col[a], m) for a, m in zip(names, mk, strict=True)])
        for row in reader:
            tid, plan = plans[row[0]]
            events.append(pycer.PyEvent(tid, [m(row[c]) for c, m in plan]))
    return events, pos_index


def parse_output(text: str, pos_index: dict[int, int]) -> tuple[MatchSet, int, list[str]]:
    """Canonical matches from CORE's output text, the number of lines whose interval is
    not [min position, max position], and lines that are not matches."""
    starts, ends, offsets, positions = array("q"), array("q"), array("q", [0]), array("q")
    other: list[str] = []
    fast = bool(pos_index) and set(pos_index.values()) == {0}
    for line in text.splitlines():
        if not line.startswith("["):
            if line.strip():
                other.append(line)
            continue
        head, _, rest = line.partition("], (")
        s, e = head[1:].split(",")
        starts.append(int(s))
        ends.append(int(e))
        for piece in rest.split("(id: ")[1:]:
            tid, _, attrs = piece.partition(" attributes: [")
            if fast:
                positions.append(int(attrs.split(" ", 1)[0]))
            else:
                k = pos_index.get(int(tid))
                if k is not None:
                    positions.append(int(attrs.split(" ")[k]))
        offsets.append(len(positions))
    raw = MatchSet.from_flat(
        np.frombuffer(starts, dtype=np.int64),
        np.frombuffer(ends, dtype=np.int64),
        np.frombuffer(offsets, dtype=np.int64),
        np.frombuffer(positions, dtype=np.int64),
    )
    if not pos_index:
        return raw, 0, other
    # Canonical interval = [min, max] of the positions (CORE's interval is in time units,
    # which are positions only under a count window). Matches without events keep CORE's.
    lens = np.diff(raw.offsets)
    has = lens > 0
    lo = raw.positions[raw.offsets[:-1][has]]
    hi = raw.positions[raw.offsets[1:][has] - 1]
    bad = int(np.count_nonzero(raw.starts[has] != lo) + np.count_nonzero(raw.ends[has] != hi))
    raw.starts[has], raw.ends[has] = lo, hi
    return raw, bad, other


def fixed_overhead(pycer: Any, declaration: str, query: str, runs: int = 3) -> float:
    """Median seconds of the timed span with no events: the server's thread start-up and
    teardown in get_output (~0.05-0.15 s), which every timed run includes."""
    spans = []
    for _ in range(runs):
        server = pycer.PyOfflineServer()
        server.declare_stream(declaration)
        server.add_query(query)
        t0 = time.perf_counter()
        server.send_events([])
        server.get_output()
        spans.append(time.perf_counter() - t0)
    return sorted(spans)[len(spans) // 2]


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import pycer  # only in the 3.13 venv

    result: dict[str, Any] = {"engine": "core", "pycer": version("pycer"), "status": "ok"}
    t0 = time.perf_counter()
    events, pos_index = load_events(pycer, spec["declaration"], spec["events_csv"])
    result["prepare_s"] = time.perf_counter() - t0
    result["events"] = len(events)
    result["rss_before_kb"] = _rusage()[1]
    times: list[float] = []
    cpu: list[float] = []
    compile_s: list[float] = []
    lines: list[int] = []
    first_text = ""
    for r in range(int(spec.get("repeat", 1))):
        t0 = time.perf_counter()
        server = pycer.PyOfflineServer()
        server.declare_stream(spec["declaration"])
        try:
            server.add_query(spec["query"])
        except Exception as exc:  # pycer's parse/catalog errors
            server.get_output()
            return {**result, "status": "error", "error": f"{type(exc).__name__}: {exc}"}
        t1 = time.perf_counter()
        c0, _ = _rusage()
        server.send_events(events)
        text = server.get_output()
        t2 = time.perf_counter()
        c1, _ = _rusage()
        if _FAILED in text:
            return {**result, "status": "error", "error": f"CORE rejected the query: {text.strip()[:300]}"}
        compile_s.append(t1 - t0)
        times.append(t2 - t1)
        cpu.append(c1 - c0)
        lines.append(text.count("\n"))
        if r == 0:
            first_text = text
        del text
    result.update(times_s=times, cpu_s=cpu, compile_s=compile_s, output_lines=lines)
    result["overhead_s"] = fixed_overhead(pycer, spec["declaration"], spec["query"])
    result["output_bytes"] = len(first_text)
    result["peak_rss_kb"] = _rusage()[1]
    t0 = time.perf_counter()
    matches, bad_interval, other = parse_output(first_text, pos_index)
    result["parse_s"] = time.perf_counter() - t0
    result.update(summary(matches))
    result["interval_mismatch"] = bad_interval
    result["unparsed_lines"] = other[:5]
    if len(set(lines)) > 1:
        result["warning"] = f"output line counts differ between repeats: {lines}"
    out = spec.get("matches_out")
    if out and len(matches) <= int(spec.get("match_cap", 5_000_000)):
        matches.save(out)
        result["matches_file"] = out
    return result


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    try:
        result = run(spec)
    except Exception as exc:
        result = {
            "engine": "core",
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-2000:],
        }
    Path(spec["result_out"]).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
