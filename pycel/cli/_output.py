"""Match writers (text, JSON lines, CSV), the progress line and the summary of ``pycel run``.

Every format writes one match per line, in the order the engine reports them (by end
position). A match lists, for each variable of the query (the ``SELECT``ed ones, in
``SELECT`` order, else every variable in pattern order), the 0-based stream positions
bound to it. Variables named ``start`` or ``end`` are written as ``var.start`` and
``var.end`` in JSON lines and CSV, so they do not clash with the match's own fields.

Example::

    writer = Writer("jsonl", sys.stdout, ("s", "b"))
    writer.write(matches)       # {"start": 0, "end": 3, "s": [0], "b": [2, 3]}
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from typing import IO

from ..matches import Matches

FORMATS = ("text", "jsonl", "csv")


def _key(var: str) -> str:
    return f"var.{var}" if var in ("start", "end") else var


def _valuations(matches: Matches, variables: Sequence[str]) -> list[tuple[int, int, dict[str, list[int]]]]:
    """(start, end, variable → sorted positions) per match, read from the flat arrays."""
    starts, ends = matches.starts.tolist(), matches.ends.tolist()
    offsets = matches.offsets.tolist()
    var_ids, positions = matches.var_ids.tolist(), matches.positions.tolist()
    names = matches.variables
    out = []
    for k in range(len(starts)):
        bound: dict[str, list[int]] = {}
        for j in range(offsets[k], offsets[k + 1]):
            bound.setdefault(names[var_ids[j]], []).append(positions[j])
        valuation = {v: sorted(set(bound[v])) if v in bound else [] for v in variables}
        out.append((starts[k], ends[k], valuation))
    return out


class Writer:
    """Writes matches to ``out`` in one of :data:`FORMATS`."""

    def __init__(self, fmt: str, out: IO[str], variables: Sequence[str]) -> None:
        self.fmt = fmt
        self.out = out
        self.variables = tuple(variables)
        self.csv = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
        if self.csv is not None:
            self.csv.writerow(["start", "end", *(_key(v) for v in self.variables)])

    def write(self, matches: Matches) -> None:
        if not len(matches):
            return
        rows = _valuations(matches, self.variables)
        if self.csv is not None:
            self.csv.writerows(
                [s, e, *(" ".join(map(str, val[v])) for v in self.variables)] for s, e, val in rows
            )
        elif self.fmt == "jsonl":
            self.out.write(
                "".join(
                    json.dumps({"start": s, "end": e, **{_key(v): val[v] for v in self.variables}}) + "\n"
                    for s, e, val in rows
                )
            )
        else:
            self.out.write("".join(_text_line(s, e, val) + "\n" for s, e, val in rows))


def _text_line(start: int, end: int, valuation: dict[str, list[int]]) -> str:
    bound = "  ".join(f"{v}={','.join(map(str, ps))}" for v, ps in valuation.items() if ps)
    return f"[{start}, {end}]  {bound}".rstrip()


def _count(n: float) -> str:
    return f"{n:,.0f}"


class Progress:
    """A one-line progress report on ``err``, rewritten in place with a carriage return
    (at most ten times a second), cleared by :meth:`done`."""

    def __init__(self, err: IO[str], enabled: bool) -> None:
        self.err = err
        self.enabled = enabled
        self.began = time.perf_counter()
        self.shown_at = 0.0
        self.width = 0

    def update(self, events: int, matches: int, fraction: float | None, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.shown_at < 0.1:
            return
        self.shown_at = now
        elapsed = max(now - self.began, 1e-9)
        share = f"{100 * fraction:5.1f}%  " if fraction is not None else ""
        line = (
            f"{share}{_count(events)} events  {_count(matches)} matches  {_count(events / elapsed)} events/s"
        )
        self.err.write("\r" + line.ljust(self.width))
        self.err.flush()
        self.width = len(line)

    def done(self) -> None:
        if self.enabled and self.width:
            self.err.write("\r" + " " * self.width + "\r")
            self.err.flush()
            self.width = 0


def summary(events: int, matches: int, seconds: float) -> str:
    """``12,000 events, 37 matches in 0.41 s (29,268 events/s)``."""
    rate = events / seconds if seconds > 0 else 0.0
    noun = "match" if matches == 1 else "matches"
    return f"{_count(events)} events, {_count(matches)} {noun} in {seconds:.2f} s ({_count(rate)} events/s)"
