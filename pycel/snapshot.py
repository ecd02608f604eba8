"""The snapshot format of a :class:`~pycel.engine.Stream`: data only, versioned, checksummed.

Layout (all integers little-endian; the full description is docs/snapshots.md)::

    magic    8 bytes   b"\\x89pycel\\r\\n"
    format   u32       FORMAT (1)
    length   u64       number of stored body bytes
    inflated u64       number of body bytes once decompressed
    sha256   32 bytes  of the stored body
    body               zlib of: u64 header length, UTF-8 JSON header, the arrays' raw bytes

The JSON header holds the compiled query as data (:mod:`pycel.snapshot_plan`), every
scalar, list and dictionary of the stream's state (tables: :mod:`pycel.snapshot_tables`),
and a table of the arrays (dtype, shape, offset). Arrays are written whole and read with
``np.frombuffer`` (numeric and bool dtypes only), so snapshot and restore cost no Python
step per node. :func:`decode` checks the prefix, lengths and checksum before it
decompresses or parses anything, then the type, shape and range of every value the
runtime indexes with; whatever does not fit raises :class:`~pycel.DataError`.

Example::

    data = encode(stream)        # bytes
    again = decode(data)         # a Stream that continues exactly
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from typing import Any

import numpy as np

from pycel.engine import Stream
from pycel.errors import DataError
from pycel.jit.maximal import ACTIVE
from pycel.jit.order import O_NEXT, O_PREV
from pycel.jit.pcea import E_NCH, E_ROWS
from pycel.jit.store import (
    C_E_NEXT,
    C_MAX_DEPTH,
    C_U_NEXT,
    E_LABEL,
    EMPTY,
    H_RANK,
    H_ROWS,
    H_STATE,
    H_VAL,
    N_COUNTERS,
)
from pycel.runtime.predicates import ClassTable
from pycel.snapshot_plan import (
    Json,
    as_dict,
    as_float,
    as_int,
    as_list,
    as_number,
    bad,
    query_from_json,
    query_to_json,
    schema_from_json,
    schema_to_json,
)
from pycel.snapshot_tables import (
    DTYPES,
    Reader,
    Writer,
    dfa_in,
    dfa_out,
    in_range,
    max_in,
    max_out,
    tail_in,
    tail_out,
    tuples_in,
    tuples_out,
)

MAGIC = b"\x89pycel\r\n"
FORMAT = 1
_PREFIX = struct.Struct("<8sIQQ32s")  # magic, format, body length, inflated length, sha256
#: Stream attributes, all written by :func:`encode` (a new one must be added here).
STREAM_FIELDS = frozenset(
    "query schema classes dfa E U HT ctr shape_tuples offset last_time tail_pos tail_time "
    "key_tuples order max_dfa pairs seconds global_map global_base post_tail".split()
)
_MAX_DEPTH = 4096  # far above any heap depth (logarithmic in the live runs)


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
            if dtype not in DTYPES or at != offset - 8 - size:
                raise bad(f"array of dtype {dtype!r} at {at!r}")
            count = math.prod(dims)
            nbytes = count * np.dtype(dtype).itemsize
            if offset + nbytes > len(raw):
                raise bad("an array ends after the snapshot")
            arrays.append(np.frombuffer(raw, dtype, count, offset).reshape(dims).copy())
            offset += nbytes + (-nbytes % 8)
        if offset != len(raw):
            raise bad("bytes after the last array")
    except (ValueError, RecursionError, OverflowError, struct.error, zlib.error) as e:  # JSON, UTF-8
        raise bad(str(e)) from None
    return as_dict(header.get("state"), "state"), arrays


# -- the stream ---------------------------------------------------------------------------------
def encode(stream: Stream) -> bytes:
    """The snapshot of ``stream`` (see the module docstring for the layout)."""
    unknown = set(stream.__dict__) - STREAM_FIELDS
    if unknown:
        raise TypeError(
            f"snapshot: Stream attributes {sorted(unknown)} have no encoding in pycel/snapshot.py"
        )
    w, s = Writer(), stream
    state = {
        "query": query_to_json(s.query),
        "schema": schema_to_json(s.schema),
        "classes": w.add(s.classes.bits, np.int64),
        "dfa": dfa_out(w, s.dfa),
        "max_dfa": None if s.max_dfa is None else max_out(w, s.max_dfa),
        "store": [w.add(a, np.int64) for a in (s.E, s.U, s.HT, s.ctr, s.order, s.pairs)],
        "shape_tuples": [[k, tuples_out(w, t)] for k, t in sorted(s.shape_tuples.items())],
        "key_tuples": tuples_out(w, s.key_tuples),
        "offset": s.offset,
        "last_time": s.last_time,
        "tail": [w.add(s.tail_pos, np.int64), w.add(s.tail_time)],  # int64 or float64 times
        "seconds": s.seconds,
        "global_map": None if s.global_map is None else w.add(s.global_map, np.int64),
        "global_base": s.global_base,
        "post_tail": None if s.post_tail is None else tail_out(w, s.post_tail),
    }
    return pack(state, w.arrays)


def decode(data: object) -> Stream:
    """The stream a snapshot holds; DataError for anything that is not one."""
    state, arrays = unpack(data)
    try:
        return _decode(state, Reader(arrays))
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, RecursionError) as e:
        raise bad(f"{type(e).__name__}: {e}") from None


def _decode(x: dict[str, Any], r: Reader) -> Stream:
    q = query_from_json(x.get("query"))
    s = Stream.__new__(Stream)
    s.query, s.schema = q, schema_from_json(x.get("schema"))
    s.classes = ClassTable()
    s.classes.bits = r.get(x.get("classes"), "classes").tolist()
    s.classes.ids = {b: k for k, b in enumerate(s.classes.bits)}
    s.dfa = dfa_in(r, x.get("dfa"), q.nfa)
    max_dfa = x.get("max_dfa")
    s.max_dfa = None if max_dfa is None else max_in(r, max_dfa, q.nfa)
    if len(s.classes.ids) != len(s.classes.bits) or (s.max_dfa is None) != (q.spec_strategy != "max"):
        raise bad("class table or pair automaton")
    for d in (s.dfa, s.max_dfa):
        if d is not None and d.class_bits != s.classes.bits[: len(d.class_bits)]:
            raise bad("the automaton's classes are not the stream's")
    refs = as_list(x.get("store"), "store", 6)
    s.E, s.U, s.HT, s.order, s.pairs = (r.get(refs[k], "store", ndim=2) for k in (0, 1, 2, 4, 5))
    s.ctr = r.get(refs[3], "counters")
    s.shape_tuples = {
        as_int(k, "tuple node", 0): tuples_in(r, t)
        for k, t in (as_list(p, "tuples", 2) for p in as_list(x.get("shape_tuples"), "tuples"))
    }
    s.key_tuples = tuples_in(r, x.get("key_tuples"))
    s.offset = as_int(x.get("offset"), "offset", 0)
    last_time = x.get("last_time")
    s.last_time = None if last_time is None else as_number(last_time, "last time")
    tail = as_list(x.get("tail"), "time tail", 2)
    time_dtype = "<f8" if isinstance(s.last_time, float) else "<i8"
    s.tail_pos, s.tail_time = r.get(tail[0], "time tail"), r.get(tail[1], "time tail", time_dtype)
    s.seconds = as_float(x.get("seconds"), "seconds")
    gmap = x.get("global_map")
    s.global_map = None if gmap is None else r.get(gmap, "positions")
    s.global_base = as_int(x.get("global_base"), "global base", 0)
    post = x.get("post_tail")
    if post is not None:
        s.post_tail = tail_in(r, post)
    if s.tail_pos.shape != s.tail_time.shape:
        raise bad("time tail")
    _check_store(s)
    return s


def _power_of_two(a: np.ndarray[Any, Any], rows: int, what: str) -> int:
    cap = a.shape[1]
    if a.shape[0] != rows or cap < 1 or cap & (cap - 1):
        raise bad(f"{what} has shape {a.shape}")
    return int(cap)


def _check_store(s: Stream) -> None:
    """Every value the Numba loops index with is inside its table (no read out of bounds)."""
    q = s.query
    _power_of_two(s.E, E_ROWS if q.hcq is not None else 4, "the extend arena")
    _power_of_two(s.U, 6, "the heap arena")
    _power_of_two(s.HT, H_ROWS, "the index H")
    if s.ctr.shape != (N_COUNTERS,) or min(s.ctr[C_E_NEXT], s.ctr[C_U_NEXT]) < 0:
        raise bad("counters")
    in_range(s.ctr[C_MAX_DEPTH : C_MAX_DEPTH + 1], 0, _MAX_DEPTH, "heap depth")
    if q.hcq is not None:
        labels = len(q.hcq.transitions)
        in_range(s.E[E_NCH], -1, 5, "child counts")
    elif s.max_dfa is not None:
        labels = len(s.max_dfa.labels.sets)
    else:
        labels = len(s.dfa.labels.sets)
    in_range(s.E[E_LABEL], -1, labels, "label ids")
    used = s.HT[H_STATE] != EMPTY
    if used.all():
        raise bad("the index H has no free slot")
    ocap = _power_of_two(s.order, 4, "the order list")
    in_range(s.order[O_NEXT], 0, ocap, "order links")
    in_range(s.order[O_PREV], 0, ocap, "order links")
    if q.spec_strategy == "next":
        in_range(s.HT[H_RANK][used & (s.HT[H_STATE] >= 0)], -1, ocap, "order entries")
    pcap = _power_of_two(s.pairs, 2, "the pair arena")
    free = int(s.pairs[0, 0])
    if not 1 <= free <= pcap:
        raise bad("pair arena")
    n_pairs = len(s.max_dfa.pairs) if s.max_dfa is not None else 0
    in_range(s.pairs[0, 1:free], -1, n_pairs, "pair ids")
    blocks = used & (s.HT[H_STATE] == ACTIVE)
    start, length = s.HT[H_VAL][blocks], s.HT[H_RANK][blocks]
    if len(start) and (start.min() < 1 or length.min() < 0 or (start + length).max() > free):
        raise bad("pair blocks")
