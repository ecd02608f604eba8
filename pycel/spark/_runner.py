"""The executor side of the Spark integration: one group of events in, its matches out.

Nothing here imports pyspark; the functions work on pandas frames, so the same code runs
inside ``applyInPandas``, ``applyInPandasWithState`` and ``transformWithStateInPandas``,
and can be unit-tested without Spark.

A group's events are sorted by their global position and pushed into an engine
:class:`~pycel.Stream` with ``positions=`` (the stream evaluates the group's sub-stream,
count windows and the returned positions are global), in chunks so that ingestion never
holds more than ``chunk_rows`` events at once. Matches become one output row each.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pandas as pd

from pycel.data.batch import TypeDescription
from pycel.data.match_tables import ListColumn, wide_columns
from pycel.data.matches import Matches, take
from pycel.engine import CompiledQuery, Stream
from pycel.errors import DataError
from pycel.jit.cache import CacheEntry, install_entries, used_entries
from pycel.jit.store import load_growth

#: Output columns after the key columns.
MATCH_START, MATCH_END, POSITIONS, IDS, EVENTS = "match_start", "match_end", "positions", "ids", "events"
_STATE_VERSION = 1


@attrs.frozen
class RunnerSpec:
    """Everything an executor needs to turn a group's events into match rows (picklable).

    ``attributes``: the event attribute columns handed to the engine; ``key_columns``:
    copied into each output row from the group; ``event_columns``: the columns of each
    matched event in the ``events`` output (empty: no such column); ``variables``: the
    output variables, in the order of the ``positions`` struct.
    """

    query: CompiledQuery
    type_column: str
    attributes: tuple[str, ...]
    position_column: str
    key_columns: tuple[str, ...]
    id_column: str | None
    event_columns: tuple[str, ...]
    variables: tuple[str, ...]
    chunk_rows: int = 100_000
    #: Range-parallel groups (pycel.spark._ranges): the column holding the group's range
    #: (-1: a group not cut) and the cut, (first position, range length): an event's own
    #: range is ``(position - first) // length``. Only matches ending at the group's own
    #: events are kept (the others end in the halo, owned by an earlier range). The own
    #: range is computed here rather than shipped as a column: one column less through
    #: the shuffle and Arrow for every event.
    range_column: str | None = None
    range_cut: tuple[int, int] | None = None
    #: The driver's event types as data: an executor resolves the data's other event
    #: types by name as the driver's process would (it has only the query's classes).
    declared_types: tuple[TypeDescription, ...] = ()
    #: The kernels the driver compiled (or loaded) for this query (:func:`warm_kernels`):
    #: an executor adds them to its cache before its first group, so it loads them
    #: instead of compiling (a cold first group costs seconds).
    compiled: tuple[CacheEntry, ...] = ()
    #: The same entries in a file the driver added to the application
    #: (``SparkContext.addFile``; streaming, whose state function must stay small).
    compiled_file: str | None = None
    #: Nullable integer columns sent as their values (0 for null) and a flag column
    #: ``NULL_FLAG + name`` (:func:`pycel.spark._batch.exact_integers`): Spark hands a
    #: group's integer column that holds a null to pandas as float64, which rounds
    #: 2**53 + 1 and makes an epoch-nanosecond time a float.
    null_flagged: tuple[str, ...] = ()

    @property
    def kept_columns(self) -> list[str]:
        """The input columns a stream must remember to describe later matches."""
        cols = [self.position_column]
        for c in (*self.key_columns, self.id_column, *self.event_columns):
            if c is not None and c not in cols:
                cols.append(c)
        return cols

    @property
    def output_columns(self) -> list[str]:
        cols = [*self.key_columns, MATCH_START, MATCH_END, POSITIONS]
        if self.id_column is not None:
            cols.append(IDS)
        if self.event_columns:
            cols.append(EVENTS)
        return cols


def describe_key(spec: RunnerSpec, frame: pd.DataFrame) -> str:
    """``name='INTC'`` for error messages (empty for an unpartitioned group)."""
    if not spec.key_columns or not len(frame):
        return ""
    return ", ".join(f"{k}={_plain(frame[k].iloc[0])!r}" for k in spec.key_columns)


def describe_event(spec: RunnerSpec, frame: pd.DataFrame, row: int) -> str:
    """Where the event in ``frame``'s ``row`` is, for error messages: its position and
    id (rows within a group's frame mean nothing to the user) and the group's key."""
    parts = []
    position = frame[spec.position_column].iloc[row]
    if not pd.isna(position):
        parts.append(f"position {int(position)}")
    if spec.id_column is not None and spec.id_column in frame.columns:
        parts.append(f"{spec.id_column}={_plain(frame[spec.id_column].iloc[row])!r}")
    key = describe_key(spec, frame)
    if key:
        parts.append(f"group {key}")
    return ", ".join(parts)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (``1``, not ``np.int64(1)``)."""
    return value.item() if isinstance(value, np.generic) else value


def sorted_events(spec: RunnerSpec, frame: pd.DataFrame, after: int = -1) -> pd.DataFrame:
    """``frame`` in position order, checked: positions present, integral, distinct and
    greater than ``after`` (the last position this key has already processed)."""
    pos = frame[spec.position_column]
    if pos.isna().any():
        where = describe_event(spec, frame, int(np.flatnonzero(pos.isna().to_numpy())[0]))
        raise located_error("null position", where, spec.position_column)
    if not pd.api.types.is_integer_dtype(pos.dtype):
        key = describe_key(spec, frame)
        where = f" in the group {key}" if key else ""
        raise DataError(f"positions must be integers, got {pos.dtype}{where}", column=spec.position_column)
    order = np.argsort(pos.to_numpy(), kind="stable")
    frame = frame.iloc[order].reset_index(drop=True)
    values = frame[spec.position_column].to_numpy(dtype=np.int64)
    if len(values) and values[0] < 0:  # (sorted: the first is the least)
        where = describe_event(spec, frame, 0)
        message = f"position {values[0]} is negative; positions start at 0"
        raise located_error(message, where, spec.position_column)
    if len(values):
        dup = np.flatnonzero(values[1:] == values[:-1])
        if len(dup):
            first, second = describe_event(spec, frame, dup[0]), describe_event(spec, frame, dup[0] + 1)
            raise located_error(
                f"position {values[dup[0]]} occurs twice; positions must be unique",
                f"{first}; {second}",
                spec.position_column,
            )
        if values[0] <= after:
            raise located_error(
                f"late event: this key has already processed position {after}; events of a key "
                "must arrive in position order",
                describe_event(spec, frame, 0),
                spec.position_column,
            )
    return frame


#: The shipped kernels this process has added to its cache (their file, or data files).
_INSTALLED: set[str | tuple[str, ...]] = set()


def _install_compiled(spec: RunnerSpec) -> None:
    """Add the driver's kernels to this executor's cache, once per process."""
    shipped = spec.compiled_file or tuple(e.data_name for e in spec.compiled)
    if not shipped or shipped in _INSTALLED:
        return
    _INSTALLED.add(shipped)
    try:
        entries = spec.compiled
        if spec.compiled_file is not None:
            from pyspark import SparkFiles

            with open(SparkFiles.get(spec.compiled_file), "rb") as f:
                entries = pickle.load(f)
        install_entries(entries)
    except (OSError, pickle.UnpicklingError, EOFError):  # this executor compiles, as without them
        pass


def ship_as_file(spec: RunnerSpec, session: Any) -> RunnerSpec:
    """``spec`` with the query's kernels (:func:`warm_kernels`) in a file added to the
    Spark application rather than in the spec itself; ``spec`` unchanged where the session
    has no SparkContext (Spark Connect) or nothing was compiled."""
    entries = warm_kernels(spec)
    if not entries:
        return spec
    data = pickle.dumps(entries, protocol=4)
    name = f"pycel-kernels-{hashlib.sha256(data).hexdigest()[:20]}.pickle"
    # One path per content: Spark refuses a file name added again from another path.
    folder = os.path.join(tempfile.gettempdir(), f"pycel-kernels-{getattr(os, 'getuid', lambda: 0)()}")
    path = os.path.join(folder, name)
    try:
        context = session.sparkContext
        os.makedirs(folder, exist_ok=True)
        if not os.path.exists(path):  # written whole, then renamed: never read half-written
            part = f"{path}.{os.getpid()}.part"
            with open(part, "wb") as f:
                f.write(data)
            os.replace(part, path)
        context.addFile(path)
    except Exception:  # noqa: BLE001 (Spark Connect has no SparkContext: workers compile)
        return spec
    return attrs.evolve(spec, compiled_file=name)


def warm_kernels(spec: RunnerSpec) -> tuple[CacheEntry, ...]:
    """Run ``spec``'s query on the driver over two events of each type (zeros and empty
    strings), so that its kernels are compiled or loaded here, and return the cache
    entries this process has used: the executors load them instead of compiling. With an
    absence, the types other than the absent ones come first in a push of their own: a
    loop blocks runs only once an absent event has arrived, so a group with none runs the
    variant without blocking, and both are shipped. Kernels of paths the few events do
    not take are compiled where needed, as without this; the store's growth
    (:func:`pycel.jit.store.load_growth`) is loaded too. Nothing is shipped if the run
    fails.

    Example: ``spec = attrs.evolve(spec, compiled=warm_kernels(spec))``"""
    nfa, schema = spec.query.nfa, spec.query.schema
    absent = {nfa.atoms[a].event for a in nfa.guard_atoms}
    types = list(schema.type_names)
    present = [name for name, isa in zip(types, schema.supertypes, strict=True) if not isa & absent]
    pushes = [present, types] if absent and present else [types]
    stream = spec.query.stream()
    start = 0
    try:
        for names in pushes:
            frame = _sample_frame(spec, names, start)
            evaluate(spec, stream, frame)
            start += len(frame)
        load_growth()  # a few events never grow the store; the executors' groups will
    except Exception:  # noqa: BLE001 (an optimization only: the executors compile then)
        return ()
    return used_entries()


def _sample_frame(spec: RunnerSpec, types: list[str], start: int) -> pd.DataFrame:
    """Two events of each of ``types`` (zeros and empty strings), positions from ``start``."""
    schema = spec.query.schema
    names = [name for name in types for _ in range(2)]
    zero: dict[str, Any] = {"int": 0, "float": 0.0, "bool": False, "str": "", "time": 0}
    columns: dict[str, Any] = {spec.type_column: names}
    for attr in spec.attributes:
        columns[attr] = [zero.get(schema.fields.get(attr, "int"), 0)] * len(names)
    frame = pd.DataFrame(columns)
    frame[spec.position_column] = np.arange(start, start + len(frame), dtype=np.int64)
    return frame


def evaluate(spec: RunnerSpec, stream: Stream, frame: pd.DataFrame) -> Matches:
    """Push a position-sorted frame into ``stream`` in chunks; the matches found.

    An engine error names a row of the chunk; it is raised again naming the event's
    position, id and group instead."""
    _install_compiled(spec)
    stream.schema.declared = spec.declared_types
    positions = frame[spec.position_column].to_numpy(dtype=np.int64)
    engine_cols = [spec.type_column, *spec.attributes]
    parts = []
    for lo in range(0, len(frame), spec.chunk_rows):
        chunk = frame.iloc[lo : lo + spec.chunk_rows]
        try:
            parts.append(
                stream.push(
                    chunk[engine_cols],
                    type_column=spec.type_column,
                    positions=positions[lo : lo + len(chunk)],
                )
            )
        except DataError as err:
            raise _located(spec, err, frame, lo) from err
    if not parts:
        return Matches.empty(spec.query.variables)
    return Matches.concat(parts)


def _located(spec: RunnerSpec, err: DataError, frame: pd.DataFrame, offset: int) -> DataError:
    """``err`` (raised for a chunk starting at ``frame`` row ``offset``) with the chunk's
    row replaced by the event's position, id and group."""
    message = err.message
    if err.row is not None and 0 <= offset + err.row < len(frame):
        where = describe_event(spec, frame, offset + err.row)
    else:
        key = describe_key(spec, frame)
        where = f"group {key}" if key else ""
    return located_error(message, where, err.column)


def located_error(message: str, where: str, column: str | None) -> DataError:
    """``message (where, column 'c')``: a DataError placed by position, id and group."""
    inside = ", ".join(part for part in (where, f"column {column!r}" if column else "") if part)
    err = DataError(f"{message} ({inside})" if inside else message)
    err.column = column
    return err


def match_rows(spec: RunnerSpec, matches: Matches, known: pd.DataFrame) -> pd.DataFrame:
    """One row per match: the key columns (those of the match's last event), start, end,
    the positions per variable and, as asked, the ids and columns of the matched events.

    The cells come from the wide form of the matches
    (:func:`pycel.data.match_tables.wide_columns`, the arrays behind
    ``Matches.to_pandas("wide")``): each variable is one column of positions with
    per-match offsets, so only the Python lists and dicts of the cells are built per match.
    ``known``: the events the matches may refer to, sorted by position (with at least
    the columns of :attr:`RunnerSpec.kept_columns`).
    """
    with _collector_paused():
        return _match_rows(spec, matches, known)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while the cells are built: they are millions of
    new lists and dicts (none in a cycle), and each few hundred of them would otherwise
    start a collection that walks the young ones again (half of the time of building)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _match_rows(spec: RunnerSpec, matches: Matches, known: pd.DataFrame) -> pd.DataFrame:
    """:func:`match_rows` with the collector paused."""
    out: dict[str, Any] = {}
    known_pos = known[spec.position_column].to_numpy(dtype=np.int64)
    if spec.key_columns:
        last = _rows_of(known_pos, matches.ends)
        for k in spec.key_columns:
            out[k] = known[k].iloc[last].reset_index(drop=True)
    out[MATCH_START] = matches.starts.astype(np.int64)
    out[MATCH_END] = matches.ends.astype(np.int64)
    per_var = _variable_lists(spec, matches)
    out[POSITIONS] = _structs(spec.variables, [_cells(c.values, c.offsets) for c in per_var], len(matches))
    if spec.id_column is not None or spec.event_columns:
        rows = [_rows_of(known_pos, c.values) for c in per_var]
        if spec.id_column is not None:
            col = known[spec.id_column]
            ids = col.astype(object).where(col.notna(), None).to_numpy()
            cells = [_cells(ids[r], c.offsets) for r, c in zip(rows, per_var, strict=True)]
            out[IDS] = _structs(spec.variables, cells, len(matches))
        if spec.event_columns:
            records = _records(known[list(spec.event_columns)], rows)
            cells = [_cells(records[r], c.offsets) for r, c in zip(rows, per_var, strict=True)]
            out[EVENTS] = _structs(spec.variables, cells, len(matches))
    return pd.DataFrame(out, columns=spec.output_columns)


def _variable_lists(spec: RunnerSpec, m: Matches) -> list[ListColumn]:
    """Each output variable's positions, sorted within each match, as one list column of
    the wide form (a variable bound to one event per match arrives as a scalar column;
    one the matches do not have is empty in every match)."""
    n = len(m)
    present = [v for v in spec.variables if v in m.variables]
    wide = wide_columns(m, present, (), reserved=())
    columns = []
    for var in spec.variables:
        if var in wide.lists:
            columns.append(wide.lists[var])
        elif var in wide.scalars:
            positions, bound = wide.scalars[var]
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(bound, out=offsets[1:])
            columns.append(ListColumn(offsets, positions[bound]))
        else:
            columns.append(ListColumn(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)))
    return columns


def _cells(values: npt.NDArray[Any], offsets: npt.NDArray[np.int64]) -> list[list[Any]]:
    """``values`` cut into one Python list per match at ``offsets`` (match k holds
    ``values[offsets[k]:offsets[k + 1]]``)."""
    if len(values) == len(offsets) - 1 and bool(np.all(offsets[1:] - offsets[:-1] == 1)):
        return values.reshape(-1, 1).tolist()  # one value per match: built in C
    items, bounds = values.tolist(), offsets.tolist()
    return [items[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def _records(cells: pd.DataFrame, rows: list[npt.NDArray[np.int64]]) -> npt.NDArray[Any]:
    """One dict per row of ``cells`` (None for a null), as an object array indexed by row;
    built only for the rows some match refers to (``rows``)."""
    records = np.empty(len(cells), dtype=object)
    used = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *rows]))
    if len(used):
        picked = cells.iloc[used].astype(object)
        values = [col.tolist() for _, col in picked.where(picked.notna(), None).items()]
        records[used] = list(map(dict, map(zip, repeat(cells.columns.tolist()), zip(*values, strict=True))))
    return records


def _rows_of(known_pos: npt.NDArray[np.int64], positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    rows = np.searchsorted(known_pos, positions)
    if len(rows) and (rows.max() >= len(known_pos) or not np.array_equal(known_pos[rows], positions)):
        raise DataError("internal: a match refers to an event the group no longer holds")
    return rows


def _structs(variables: Sequence[str], values: list[list[Any]], n: int) -> pd.Series:
    """Per match, a dict ``variable -> values`` (the Spark struct of one output cell).

    Always an object column, also when empty: Spark converts it to a struct either way.
    """
    if not variables:
        return pd.Series([{} for _ in range(n)], dtype=object)
    cells = list(map(dict, map(zip, repeat(variables), zip(*values, strict=True))))
    return pd.Series(cells, dtype=object)


#: The prefix of the flag column of a nullable integer column (RunnerSpec.null_flagged).
NULL_FLAG = "_pycel_null_"


def exact_integer_columns(spec: RunnerSpec, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its flagged integer columns rebuilt exactly (nullable Int64)."""
    for name in spec.null_flagged:
        null = frame.pop(NULL_FLAG + name).to_numpy(dtype=np.bool_)
        frame[name] = pd.arrays.IntegerArray(frame[name].to_numpy(dtype=np.int64), null)
    return frame


def run_group(spec: RunnerSpec, frame: pd.DataFrame) -> pd.DataFrame:
    """All matches of one group's events (a whole batch group: a fresh stream)."""
    events = sorted_events(spec, exact_integer_columns(spec, frame))
    stream = spec.query.stream()
    matches = evaluate(spec, stream, events)
    if stream.horizon is not None:  # the group's events end: the waiting matches hold
        matches = Matches.concat([matches, stream.close()])
    if spec.range_column is not None and spec.range_cut is not None:
        matches = ending_at_home(spec, matches, events)
    return match_rows(spec, matches, events)


def ending_at_home(spec: RunnerSpec, matches: Matches, events: pd.DataFrame) -> Matches:
    """The matches that end at one of the group's own events, not at a halo copy (a
    halo event's matches belong to the range the event is at home in). A group whose
    range is -1 (a key that is not cut) owns all of its events."""
    assert spec.range_column is not None and spec.range_cut is not None
    if not len(events) or not len(matches):
        return matches
    group_range = int(events[spec.range_column].iloc[0])
    if group_range < 0:
        return matches
    first, length = spec.range_cut
    # The own events are those in the range's positions; the halo copies come from the
    # ranges before it (and, for an absence at the end, after it).
    lo = first + group_range * length
    return take(matches, (matches.ends >= lo) & (matches.ends < lo + length))


# -- streaming state ------------------------------------------------------------------------
@attrs.define
class KeyState:
    """What a streaming query keeps per key between micro-batches: the engine stream, the
    last position processed, and the events later matches may still refer to."""

    stream: Stream
    last_position: int = -1
    known: pd.DataFrame | None = None

    def dumps(self) -> bytes:
        payload = (_STATE_VERSION, self.stream.snapshot(), self.last_position, self.known)
        return zlib.compress(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL), 1)

    @classmethod
    def loads(cls, data: bytes) -> KeyState:
        version, snapshot, last, known = pickle.loads(zlib.decompress(data))
        if version != _STATE_VERSION:
            raise DataError(f"pycel streaming state version {version} is not supported")
        return cls(Stream.restore(snapshot), last, known)


def expire(spec: RunnerSpec, state: KeyState) -> pd.DataFrame:
    """The match rows of a key whose state expires (its windows passed the watermark):
    the matches that waited for their window to pass (an absence that ends the pattern)."""
    if state.stream.horizon is None:
        return pd.DataFrame()
    known = state.known if state.known is not None else pd.DataFrame(columns=spec.kept_columns)
    return match_rows(spec, state.stream.close(), known)


def advance(spec: RunnerSpec, state: KeyState, frame: pd.DataFrame, *, late: str) -> pd.DataFrame:
    """Feed a key's new events (one micro-batch) into its state; the new match rows.

    Events at or before the key's last processed position are late: an error, or with
    ``late="drop"`` they are left out.
    """
    if late == "drop" and len(frame):
        pos = frame[spec.position_column]
        frame = frame[pos.isna() | (pos > state.last_position)]
    events = sorted_events(spec, frame, after=state.last_position)
    matches = evaluate(spec, state.stream, events)
    known = events[spec.kept_columns]
    if state.known is not None and len(state.known):
        known = pd.concat([state.known, known], ignore_index=True)
    rows = match_rows(spec, matches, known)
    if len(events):
        state.last_position = int(events[spec.position_column].iloc[-1])
    # Keep only the events a future match can still include.
    oldest = state.stream.global_map
    if oldest is not None and len(oldest):
        known = known[known[spec.position_column] >= oldest[0]].reset_index(drop=True)
    state.known = known if spec.id_column is not None or spec.event_columns else None
    return rows
