"""Canonical match sets shared by both sides of the benchmark.

Imported by ``run.py`` (the project's Python) and by ``core_worker.py`` (the Python 3.13
venv that has ``pycer``), so it depends on numpy only.

A canonical match set is four flat int64 arrays: ``starts``, ``ends``, ``offsets``
(length n + 1) and ``positions``; match k owns ``positions[offsets[k]:offsets[k+1]]``,
sorted and without duplicates. Variables are dropped: CORE prints the events of a match
but not which variable each one is bound to, so both engines are compared on
(start, end, set of positions).

The digest is an order-independent 64-bit hash of the multiset of matches, so two runs
can be compared without shipping millions of matches between processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


def splitmix64(x: U64) -> U64:
    """The splitmix64 finalizer, element-wise (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        result: U64 = z ^ (z >> np.uint64(31))
    return result


@dataclass
class MatchSet:
    """Matches as flat arrays; see the module docstring."""

    starts: I64
    ends: I64
    offsets: I64
    positions: I64

    def __len__(self) -> int:
        return len(self.starts)

    @classmethod
    def empty(cls) -> MatchSet:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z.copy(), np.zeros(1, dtype=np.int64), z.copy())

    @classmethod
    def from_flat(cls, starts: Any, ends: Any, offsets: Any, positions: Any) -> MatchSet:
        """Canonicalize: sort each match's positions and drop repeats (a position bound
        to two variables counts once)."""
        st = np.asarray(starts, dtype=np.int64)
        en = np.asarray(ends, dtype=np.int64)
        off = np.asarray(offsets, dtype=np.int64)
        pos = np.asarray(positions, dtype=np.int64)
        n = len(st)
        if len(off) != n + 1:
            raise ValueError(f"offsets has {len(off)} entries for {n} matches")
        pos = pos[off[0] : off[-1]]
        off = off - off[0]
        mid = np.repeat(np.arange(n, dtype=np.int64), np.diff(off))
        order = np.lexsort((pos, mid))
        pos, mid = pos[order], mid[order]
        keep = np.ones(len(pos), dtype=bool)
        keep[1:] = (pos[1:] != pos[:-1]) | (mid[1:] != mid[:-1])
        pos, mid = pos[keep], mid[keep]
        new_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(mid, minlength=n), out=new_off[1:])
        return cls(st.copy(), en.copy(), new_off, pos)

    def match_hashes(self) -> U64:
        """One 64-bit hash per match, from (start, end, positions)."""
        with np.errstate(over="ignore"):
            h = splitmix64(self.positions.astype(np.uint64))
            cs = np.zeros(len(h) + 1, dtype=np.uint64)
            np.cumsum(h, out=cs[1:])
            per = cs[self.offsets[1:]] - cs[self.offsets[:-1]]
            ends = splitmix64(self.ends.astype(np.uint64) ^ np.uint64(0x5851F42D4C957F2D))
            span = splitmix64(self.starts.astype(np.uint64) + ends)
            result: U64 = splitmix64(per ^ span)
        return result

    def digest(self) -> str:
        """Order-independent hash of the whole multiset of matches, as 16 hex digits."""
        with np.errstate(over="ignore"):
            total = np.add.reduce(self.match_hashes(), dtype=np.uint64) if len(self) else np.uint64(0)
        return f"{int(total):016x}"

    def max_per_end(self) -> int:
        """The largest number of matches sharing one end position (0 when empty)."""
        if not len(self):
            return 0
        return int(np.unique(self.ends, return_counts=True)[1].max())

    def match(self, k: int) -> tuple[int, int, tuple[int, ...]]:
        lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
        return int(self.starts[k]), int(self.ends[k]), tuple(int(p) for p in self.positions[lo:hi])

    def take(self, keep: I64) -> MatchSet:
        """The matches with indices ``keep`` (in that order)."""
        lens = np.diff(self.offsets)[keep]
        new_off = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(lens, out=new_off[1:])
        if len(keep):
            idx = np.repeat(self.offsets[:-1][keep] - new_off[:-1], lens) + np.arange(new_off[-1])
        else:
            idx = np.zeros(0, dtype=np.int64)
        return MatchSet(self.starts[keep], self.ends[keep], new_off, self.positions[idx])

    def save(self, path: str | Path) -> None:
        np.savez(path, starts=self.starts, ends=self.ends, offsets=self.offsets, positions=self.positions)

    @classmethod
    def load(cls, path: str | Path) -> MatchSet:
        with np.load(path) as z:
            return cls(z["starts"], z["ends"], z["offsets"], z["positions"])


def summary(ms: MatchSet) -> dict[str, Any]:
    """Count, digest and largest matches-per-end, for the JSON reports."""
    return {"matches": len(ms), "digest": ms.digest(), "max_per_end": ms.max_per_end()}


def _multiset_diff(a: U64, b: U64) -> tuple[U64, U64]:
    """Hashes in a but not b and in b but not a, counting multiplicity."""
    ua, ca = np.unique(a, return_counts=True)
    ub, cb = np.unique(b, return_counts=True)
    common, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    da, db = ca.copy(), cb.copy()
    m = np.minimum(ca[ia], cb[ib])
    da[ia] -= m
    db[ib] -= m
    return np.repeat(ua, da), np.repeat(ub, db)


def compare(
    core: MatchSet, other: MatchSet, *, limit: int | None = None, examples: int = 3
) -> dict[str, Any]:
    """Compare two match sets exactly.

    With ``limit`` (a query with LIMIT n), end positions where either side reached n
    matches are compared by count only, since the engines may enumerate different subsets
    there; all other end positions are compared exactly.
    """
    a, b = core, other
    note = ""
    if limit is not None:
        ends_a, cnt_a = np.unique(a.ends, return_counts=True)
        ends_b, cnt_b = np.unique(b.ends, return_counts=True)
        capped = np.union1d(ends_a[cnt_a >= limit], ends_b[cnt_b >= limit])
        if len(capped):
            ca = dict(zip(ends_a.tolist(), cnt_a.tolist(), strict=True))
            cb = dict(zip(ends_b.tolist(), cnt_b.tolist(), strict=True))
            bad = [int(e) for e in capped if ca.get(int(e), 0) != cb.get(int(e), 0)]
            note = f"{len(capped)} end positions hit LIMIT {limit}: compared by count"
            if bad:
                return {
                    "equal": False,
                    "only_core": 0,
                    "only_other": 0,
                    "note": note + f"; counts differ at end {bad[0]} (and {len(bad) - 1} more)",
                    "examples": [],
                }
            a = a.take(np.flatnonzero(~np.isin(a.ends, capped)))
            b = b.take(np.flatnonzero(~np.isin(b.ends, capped)))
    ha, hb = a.match_hashes(), b.match_hashes()
    only_a, only_b = _multiset_diff(ha, hb)
    shown: list[str] = []
    for side, hashes, src, own in (("core", only_a, a, ha), ("pycel", only_b, b, hb)):
        for h in hashes[:examples]:
            k = int(np.flatnonzero(own == h)[0])
            shown.append(f"only {side}: {src.match(k)}")
    return {
        "equal": not len(only_a) and not len(only_b),
        "only_core": len(only_a),
        "only_other": len(only_b),
        "note": note,
        "examples": shown,
    }
