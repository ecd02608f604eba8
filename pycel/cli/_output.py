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

from pycel.data.matches import Matches

FORMATS = ("text", "jsonl", "csv")


def _key(var: str) -> str:
    return f"var.{var}" if var in ("start", "end") else var


#: 10, 100, …, 10**18: the number of decimal digits of v >= 0 is 1 + (how many are <= v).
_POWERS = 10 ** np.arange(1, 19, dtype=np.int64)


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
    """The lines of ``matches`` in format ``fmt``, built with array operations: no Python
    step per match (the output of a dense query has millions of them).

    Each match's entries are sorted by output variable and position (the engine stores
    them in enumeration order) and repeats are dropped. Then the text is laid out as a
    sequence of pieces — fixed texts and non-negative integers — whose lengths give every
    piece's byte offset in one buffer; fixed texts are copied byte by byte and integers
    digit by digit, each as one vectorized step over all the pieces of that kind.
    """
    m, c = len(matches), len(variables)
    if not m:
        return ""
    slot, pos = _entries(matches, variables)
    spell = _spelling(fmt, variables)
    # Fixed texts by id: 0 is empty; ids 6 + col and 6 + c + col open a variable column.
    texts = ["", *spell.head, spell.sep, spell.tail, *spell.bound, *spell.unbound]
    per_slot = np.bincount(slot, minlength=m * c)
    before = np.cumsum(per_slot) - per_slot  # entries before each slot
    # Pieces per match: 5 for the head, one opener per column, 2 per entry (position and
    # separator), the tail.
    per_match = per_slot.reshape(m, c).sum(axis=1) if c else np.zeros(m, dtype=np.int64)
    length = 6 + c + 2 * per_match
    at = np.cumsum(length) - length
    kind = np.zeros(int(length.sum()), dtype=np.int64)  # >= 0: a fixed text; -1: a number
    value = np.zeros(len(kind), dtype=np.int64)
    kind[at], kind[at + 2], kind[at + 4], kind[at + length - 1] = 1, 2, 3, 5
    kind[at + 1] = kind[at + 3] = -1
    value[at + 1], value[at + 3] = matches.starts, matches.ends
    if c:
        col = np.arange(m * c, dtype=np.int64) % c
        opener = np.repeat(at, c) + 5 + col + 2 * (before - np.repeat(before[::c], c))
        kind[opener] = np.where(per_slot > 0, 6 + col, 6 + c + col)
        number = opener[slot] + 1 + 2 * (np.arange(len(slot)) - before[slot])
        kind[number], value[number] = -1, pos
        last = np.ones(len(slot), dtype=np.bool_)
        last[:-1] = slot[1:] != slot[:-1]
        kind[number + 1] = np.where(last, 0, 4)
    return _lay_out(kind, value, [t.encode() for t in texts]).decode()


def _entries(
    matches: Matches, variables: Sequence[str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(slot, position) of every entry written, sorted, without repeats; an entry's slot
    is ``match * len(variables) + column``. Variables not written are dropped."""
    c = len(variables)
    column = {v: k for k, v in enumerate(variables)}
    col_of = np.array([column.get(v, -1) for v in matches.variables] + [-1], dtype=np.int64)
    owner = np.repeat(np.arange(len(matches), dtype=np.int64), np.diff(matches.offsets))
    cols = col_of[matches.var_ids]
    kept = cols >= 0
    slot, pos = owner[kept] * c + cols[kept], matches.positions[kept]
    if len(pos):
        low = int(pos.min())
        span = int(pos.max()) - low + 1
        if len(matches) * max(c, 1) * span < 2**62:  # one int64 key: a faster sort
            order = np.argsort(slot * span + (pos - low), kind="stable")
        else:
            order = np.lexsort((pos, slot))
        slot, pos = slot[order], pos[order]
    fresh = np.ones(len(slot), dtype=np.bool_)
    fresh[1:] = (slot[1:] != slot[:-1]) | (pos[1:] != pos[:-1])
    return slot[fresh], pos[fresh]


def _lay_out(kind: npt.NDArray[np.int64], value: npt.NDArray[np.int64], texts: list[bytes]) -> bytes:
    """The bytes of the pieces in order: ``texts[kind]``, or ``value`` in decimal where
    ``kind`` is -1 (values are non-negative)."""
    numbers = kind < 0
    width = np.zeros(len(kind), dtype=np.int64)
    width[numbers] = 1 + np.searchsorted(_POWERS, value[numbers], side="right")
    sizes = np.array([len(t) for t in texts], dtype=np.int64)
    width[~numbers] = sizes[kind[~numbers]]
    start = np.cumsum(width) - width
    out = np.empty(int(width.sum()), dtype=np.uint8)
    for k, text in enumerate(texts):
        if not text:
            continue
        where = start[kind == k]
        for j, byte in enumerate(text):
            out[where + j] = byte
    digits, ends, numbers_left = value[numbers], (start + width)[numbers] - 1, width[numbers]
    while len(digits):  # the last digit of every number, then the one before, …
        out[ends] = 48 + digits % 10
        more = numbers_left > 1
        digits, ends, numbers_left = digits[more] // 10, ends[more] - 1, numbers_left[more] - 1
    return out.tobytes()


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
