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
from collections.abc import Callable, Sequence
from typing import IO

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pycel.data.matches import Matches

FORMATS = ("text", "jsonl", "csv")


def _key(var: str) -> str:
    return f"var.{var}" if var in ("start", "end") else var


@attrs.frozen
class _Spelling:
    """How a format spells one match: ``head`` = three texts around start and end; per
    output variable the text before its positions (``bound``, or ``unbound`` when the match
    binds none); ``sep`` between positions; ``tail`` ends the line."""

    head: tuple[str, str, str]
    bound: tuple[str, ...]
    unbound: tuple[str, ...]
    sep: str
    tail: str


def _spelling(fmt: str, variables: Sequence[str]) -> _Spelling:
    if fmt == "jsonl":
        keys = [json.dumps(_key(v)) for v in variables]
        opens = tuple(("], " if c else ", ") + f"{k}: [" for c, k in enumerate(keys))
        return _Spelling(('{"start": ', ', "end": ', ""), opens, opens, ", ", "]}\n" if keys else "}\n")
    if fmt == "csv":
        commas = tuple("," for _ in variables)
        return _Spelling(("", ",", ""), commas, commas, " ", "\n")
    return _Spelling(("[", ", ", "]"), tuple(f"  {v}=" for v in variables), ("",) * len(variables), ",", "\n")


def render(matches: Matches, fmt: str, variables: Sequence[str]) -> str:
    """The lines of ``matches`` in format ``fmt``, built with column operations (numpy and
    pyarrow compute): no Python step per match or per position (the output of a dense
    query has millions of them).

    Each output variable's positions per match are sorted, without repeats (the engine
    stores them in enumeration order), cast to decimal text and joined into one cell per
    match; each line is then the element-wise concatenation of the format's fixed texts,
    the start, the end and the cells.

    Example::

        render(matches, "csv", ["s", "b"])   # "0,3,0,2 3\n…"
    """
    if not len(matches):
        return ""
    spell = _spelling(fmt, variables)
    names = list(dict.fromkeys(variables))  # a variable SELECTed twice is written twice
    cells = _cells(matches, names, spell.sep)
    parts: list[pa.Scalar | pa.Array] = [
        _text(spell.head[0]), _decimal(matches.starts), _text(spell.head[1]), _decimal(matches.ends),
        _text(spell.head[2]),
    ]  # fmt: skip
    for var, bound, unbound in zip(variables, spell.bound, spell.unbound, strict=True):
        joined, is_bound = cells[names.index(var)]
        opener = _text(bound) if bound == unbound else pc.if_else(is_bound, _text(bound), _text(unbound))
        parts += [opener, joined]
    parts.append(_text(spell.tail))
    # An unbound variable's cell is null: written as an empty text.
    lines = pc.binary_join_element_wise(
        *_merge_texts(parts), _text(""), null_handling="replace", null_replacement=""
    )
    # The lines are stored back to back in one buffer: that buffer is the output.
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64, count=len(lines) + 1, offset=8 * lines.offset)
    data = lines.buffers()[2]
    return str(memoryview(data)[int(offsets[0]) : int(offsets[-1])], "utf-8")


def _text(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _decimal(values: npt.NDArray[np.int64]) -> pa.Array:
    return pc.cast(pa.array(values), pa.large_string())


def _merge_texts(parts: list[pa.Scalar | pa.Array]) -> list[pa.Scalar | pa.Array]:
    """``parts`` with each run of adjacent fixed texts made one (fewer pieces per line)."""
    merged: list[pa.Scalar | pa.Array] = []
    for part in parts:
        if merged and isinstance(part, pa.Scalar) and isinstance(merged[-1], pa.Scalar):
            merged[-1] = _text(merged[-1].as_py() + part.as_py())
        else:
            merged.append(part)
    return merged


def _cells(matches: Matches, names: Sequence[str], sep: str) -> list[tuple[pa.Array, pa.Array]]:
    """Per variable of ``names``: its positions in each match, sorted, without repeats, in
    decimal and joined by ``sep`` (empty or null when unbound), and whether it is bound.

    The entries are grouped by (variable, match): each variable's cells are then one
    contiguous slice of a single array over all (variable, match) cells."""
    m, c = len(matches), len(names)
    column = {v: k for k, v in enumerate(names)}
    col_of = np.array([column.get(v, -1) for v in matches.variables] + [-1], dtype=np.int64)
    owner = np.repeat(np.arange(m, dtype=np.int64), np.diff(matches.offsets))
    cols = col_of[matches.var_ids]
    kept = cols >= 0
    group, pos = cols[kept] * m + owner[kept], matches.positions[kept]
    counts = np.bincount(group, minlength=m * c)
    if len(group) and int(counts.max()) > 1:  # a variable bound to several events: sort
        group, pos = _sorted_without_repeats(group, pos)
        counts = np.bincount(group, minlength=m * c)
        bounds = np.zeros(m * c + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        lists = pa.LargeListArray.from_arrays(pa.array(bounds), _decimal(pos))
        joined = pc.binary_join(lists, _text(sep))
    else:  # at most one position per cell: the cell's text is that position
        grid = np.zeros(m * c, dtype=np.int64)
        grid[group] = pos
        joined = pc.cast(pa.array(grid, mask=counts == 0), pa.large_string())
    bound = pa.array(counts > 0)
    return [(joined.slice(k * m, m), bound.slice(k * m, m)) for k in range(c)]


def _sorted_without_repeats(
    group: npt.NDArray[np.int64], pos: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The entries (group, position) sorted by group, then position, without repeats."""
    low = int(pos.min())
    span = int(pos.max()) - low + 1
    if (int(group.max()) + 1) * span < 2**62:  # one int64 key: a faster sort
        order = np.argsort(group * span + (pos - low), kind="stable")
    else:
        order = np.lexsort((pos, group))
    group, pos = group[order], pos[order]
    fresh = np.ones(len(group), dtype=np.bool_)
    fresh[1:] = (group[1:] != group[:-1]) | (pos[1:] != pos[:-1])
    return group[fresh], pos[fresh]


class OutputError(Exception):
    """Writing the matches failed (a full disk, a closed file), except a broken pipe."""


class Writer:
    """Writes matches to ``out`` in one of :data:`FORMATS`; counts them in ``written``."""

    def __init__(self, fmt: str, out: IO[str], variables: Sequence[str]) -> None:
        self.fmt = fmt
        self.out = out
        self.variables = tuple(variables)
        self.written = 0  # matches written so far
        if fmt == "csv":
            header = ["start", "end", *(_key(v) for v in self.variables)]
            csv.writer(out, lineterminator="\n").writerow(header)

    def write(self, matches: Matches) -> None:
        """Write ``matches`` (one batch: memory holds its text once)."""
        if not len(matches):
            return
        self._do(self.out.write, render(matches, self.fmt, self.variables))
        self.written += len(matches)

    def flush(self) -> None:
        self._do(self.out.flush)

    @staticmethod
    def _do(action: Callable[..., object], *args: str) -> None:
        """``action(*args)``, its OSError (but a broken pipe) as an :class:`OutputError`."""
        try:
            action(*args)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputError(err.strerror or str(err)) from None


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
