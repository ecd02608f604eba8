"""The snapshot format of a :class:`~pycel.runtime.stream.Stream`: data only, versioned,
checksummed.

Layout (all integers little-endian; the full description is docs/snapshots.md)::

    magic    8 bytes   b"\\x89pycel\\r\\n"
    format   u32       FORMAT (2)
    length   u64       number of stored body bytes
    inflated u64       number of body bytes once decompressed
    sha256   32 bytes  of the stored body
    body               zlib of: u64 header length, UTF-8 JSON header, the arrays' raw bytes

The JSON header holds the plan as data (:mod:`pycel.runtime.snapshot.plan`), the
stream's own scalars and tables, its runner's state (each runner writes and checks its
own, with the helpers of :mod:`pycel.runtime.snapshot.tables`), and a table of the arrays
(dtype, shape, offset). Arrays are written whole and read with
``np.frombuffer`` (numeric and bool dtypes only), so snapshot and restore cost no Python
step per node. :func:`decode` checks the prefix, lengths and checksum before it
decompresses or parses anything, then the type, shape and range of every value the
runtime indexes with; whatever does not fit raises :class:`~pycel.DataError`.

Example::

    data = encode(plan, fields, runner)        # bytes
    plan, fields, runner = decode(data)        # what Stream.restore continues from
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from typing import Any

import numpy as np

from pycel.errors import DataError
from pycel.plan.planner import Plan
from pycel.runtime.horizon import Horizon, Lookback
from pycel.runtime.runners import Runner, load_runner
from pycel.runtime.windows import window_reach

from .plan import (
    Json,
    as_bool,
    as_dict,
    as_float,
    as_int,
    as_list,
    as_number,
    bad,
    plan_from_json,
    plan_to_json,
    schema_from_json,
    schema_to_json,
)
from .tables import (
    DTYPES,
    Reader,
    Writer,
    horizon_in,
    horizon_out,
    lookback_in,
    lookback_out,
    tail_in,
    tail_out,
    tuples_in,
    tuples_out,
)

MAGIC = b"\x89pycel\r\n"
FORMAT = 2
_PREFIX = struct.Struct("<8sIQQ32s")  # magic, format, body length, inflated length, sha256
#: A stream's own attributes besides its plan and runner, all written by :func:`encode`
#: (a new one must be added here).
STREAM_FIELDS = frozenset(
    "schema offset last_time tail_pos tail_time key_tuples seconds global_map global_base post_tail "
    "horizon lookback closed".split()
)


# -- container --------------------------------------------------------------------------------
def pack(state: Json, arrays: list[np.ndarray[Any, Any]]) -> bytes:
    """The snapshot bytes of a JSON ``state`` and the ``arrays`` it refers to by index."""
    table, blobs, offset = [], [], 0
    for a in arrays:
        if a.dtype.str not in DTYPES:
            raise TypeError(f"snapshot: arrays of dtype {a.dtype} have no encoding")
        raw = a.tobytes()
        table.append([a.dtype.str, list(a.shape), offset])
        blobs.append(raw + b"\0" * (-len(raw) % 8))
        offset += len(blobs[-1])
    header = json.dumps({"state": state, "arrays": table}, separators=(",", ":")).encode()
    raw_body = b"".join([struct.pack("<Q", len(header)), header, *blobs])
    body = zlib.compress(raw_body, 1)
    return _PREFIX.pack(MAGIC, FORMAT, len(body), len(raw_body), hashlib.sha256(body).digest()) + body


def unpack(data: object) -> tuple[dict[str, Any], list[np.ndarray[Any, Any]]]:
    """(JSON state, arrays) of a snapshot; DataError unless prefix, lengths and checksum
    are right (nothing is decompressed or parsed before the checksum matched)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DataError(f"a snapshot is bytes, got {type(data).__name__}")
    view = memoryview(data).cast("B")
    if len(view) < _PREFIX.size or bytes(view[:8]) != MAGIC:
        if len(view) and bytes(view[: len(MAGIC)]) == MAGIC[: len(view)]:
            raise DataError(f"truncated pycel snapshot: {len(view)} bytes")
        hint = (
            " (a pickle: snapshots of pycel before format 1 cannot be restored)"
            if bytes(view[:1]) == b"\x80"
            else ""
        )
        raise DataError(f"not a pycel snapshot of format {FORMAT}: wrong magic bytes{hint}")
    _, version, length, raw_length, digest = _PREFIX.unpack_from(view)
    if version != FORMAT:
        raise DataError(f"pycel snapshot of format {version}; this pycel reads format {FORMAT}")
    body = view[_PREFIX.size :]
    if len(body) != length:
        raise DataError(f"truncated or extended pycel snapshot: {len(body)} body bytes, expected {length}")
    if hashlib.sha256(body).digest() != digest:
        raise DataError("corrupted pycel snapshot: the checksum does not match the content")
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(body, raw_length)
        if len(raw) != raw_length or not inflate.eof or inflate.unused_data:
            raise bad("the compressed body does not have its recorded length")
        (size,) = struct.unpack_from("<Q", raw)
        header = as_dict(json.loads(raw[8 : 8 + size].decode("utf-8")), "header")
        arrays, offset = [], 8 + size
        for item in as_list(header.get("arrays"), "array table"):
            dtype, shape, at = as_list(item, "array entry", 3)
            dims = [as_int(n, "array shape", 0) for n in as_list(shape, "array shape")]
            if type(dtype) is not str or dtype not in DTYPES or at != offset - 8 - size:
                raise bad(f"array of dtype {dtype!r} at {at!r}")
            count = math.prod(dims)
            nbytes = count * np.dtype(dtype).itemsize
            if offset + nbytes > len(raw):
                raise bad("an array ends after the snapshot")
            arrays.append(np.frombuffer(raw, dtype, count, offset).reshape(dims).copy())
            offset += nbytes + (-nbytes % 8)
        if offset != len(raw):
            raise bad("bytes after the last array")
    except DataError:  # (a ValueError too) already says what is wrong
        raise
    except (ValueError, RecursionError, OverflowError, struct.error, zlib.error) as e:  # JSON, UTF-8
        raise bad(str(e)) from None
    return as_dict(header.get("state"), "state"), arrays


# -- the stream ----------------------------------------------------------------------------
def encode(plan: Plan, fields: dict[str, Any], runner: Runner) -> bytes:
    """The snapshot of a stream: its ``plan``, its own ``fields`` (see STREAM_FIELDS) and
    its ``runner``'s state (see the module docstring for the layout)."""
    unknown = set(fields) - STREAM_FIELDS
    if unknown:
        raise TypeError(
            f"snapshot: Stream attributes {sorted(unknown)} have no encoding in "
            "pycel/runtime/snapshot/state.py"
        )
    w, s = Writer(), fields
    post_tail = s.get("post_tail")
    state = {
        "plan": plan_to_json(plan),
        "schema": schema_to_json(s["schema"]),
        "runner": runner.save(w),
        "key_tuples": tuples_out(w, s["key_tuples"]),
        "offset": s["offset"],
        "last_time": s["last_time"],
        "tail": [w.add(s["tail_pos"], np.int64), w.add(s["tail_time"])],  # int64 or float64 times
        "seconds": s["seconds"],
        "global_map": None if s["global_map"] is None else w.add(s["global_map"], np.int64),
        "global_base": s["global_base"],
        "post_tail": None if post_tail is None else tail_out(w, post_tail),
        "horizon": None if s["horizon"] is None else horizon_out(w, s["horizon"]),
        "lookback": None if s["lookback"] is None else lookback_out(w, s["lookback"]),
        "closed": s["closed"],
    }
    return pack(state, w.arrays)


def decode(data: object) -> tuple[Plan, dict[str, Any], Runner]:
    """The plan, stream fields and runner a snapshot holds; DataError for anything that
    is not one."""
    state, arrays = unpack(data)
    try:
        return _decode(state, Reader(arrays))
    except DataError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, RecursionError) as e:
        raise bad(f"{type(e).__name__}: {e}") from None


def _decode(x: dict[str, Any], r: Reader) -> tuple[Plan, dict[str, Any], Runner]:
    plan = plan_from_json(x.get("plan"))
    runner = load_runner(plan, r, x.get("runner"))
    last_time = x.get("last_time")
    last = None if last_time is None else as_number(last_time, "last time")
    tail = as_list(x.get("tail"), "time tail", 2)
    time_dtype = "<f8" if isinstance(last, float) else "<i8"
    gmap = x.get("global_map")
    fields: dict[str, Any] = {
        "schema": schema_from_json(x.get("schema")),
        "key_tuples": tuples_in(r, x.get("key_tuples")),
        "offset": as_int(x.get("offset"), "offset", 0),
        "last_time": last,
        "tail_pos": r.get(tail[0], "time tail"),
        "tail_time": r.get(tail[1], "time tail", time_dtype),
        "seconds": as_float(x.get("seconds"), "seconds"),
        "global_map": None if gmap is None else r.get(gmap, "positions"),
        "global_base": as_int(x.get("global_base"), "global base", 0),
    }
    post = x.get("post_tail")
    if post is not None:
        fields["post_tail"] = tail_in(r, post)
    horizon = x.get("horizon")
    if (horizon is None) != (not plan.nfa.end_atoms):
        raise bad("the pending matches of an absence that ends the pattern")
    reach = window_reach(plan, plan.schema)
    fields["horizon"] = horizon_in(r, horizon, Horizon.of(plan, reach)) if plan.nfa.end_atoms else None
    lookback = x.get("lookback")
    if (lookback is None) != (not plan.nfa.start_atoms):
        raise bad("the recent events of an absence that starts the pattern")
    fields["lookback"] = lookback_in(r, lookback, Lookback.of(plan, reach)) if plan.nfa.start_atoms else None
    fields["closed"] = as_bool(x.get("closed", False), "closed")  # (absent before window absences)
    if fields["tail_pos"].shape != fields["tail_time"].shape:
        raise bad("time tail")
    return plan, fields, runner
