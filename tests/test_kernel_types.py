"""The Numba loops' argument types: fixed, so each loop compiles once per process, and
checked by mypy through the stubs in typings/numba.

* Every loop takes named tuples (pycel/jit/structs.py) whose fields have one type each;
  after queries of every family and clause mix (partition, contiguity, LIMIT, consume,
  projection, post-filter, batches of several sizes and sources) each loop has exactly
  one compiled signature. A field whose type varied (an int32 or non-contiguous array, a
  Python int) would add a signature, and a compilation, per variant.
* ``njit`` keeps the decorated function's signature for mypy: a wrong call to a loop is
  a mypy error (the stubs hide nothing), a right one passes.
"""

from __future__ import annotations

import gc
import json
import math
import os
import random
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numba import njit
from numba.core.event import Event, Listener, register, unregister

import pycel
from pycel.dsl import Limit
from pycel.jit import choose, last, maximal, ordered, pcea, residual, runtime, store, treap
from pycel.jit import enumerate as enumerate_module
from pycel.reference import evaluate

ROOT = Path(__file__).resolve().parent.parent


class K(pycel.Event):
    x: pycel.Field[int]
    y: pycel.Field[int]
    time: pycel.Field[int]


class KA(K): ...


class KB(K): ...


class KC(K): ...


def _events(n: int, seed: int) -> list[Any]:
    rnd = random.Random(seed)
    return [rnd.choice([KA, KB, KC])(x=rnd.randrange(3), y=rnd.randrange(2), time=i) for i in range(n)]


def _patterns() -> list[Any]:
    a, b, c = pycel.alias(KA, "a"), pycel.alias(KB, "b"), pycel.alias(KC, "c")
    ab = pycel.seq(a, pycel.plus(b))
    out: list[Any] = []
    for strategy in ("all", "any", "strict", "last", "next", "max"):
        out += [
            ab.strategy(strategy),  # type: ignore[arg-type]
            pycel.seq(a, b, c).strategy(strategy).limit(1),  # type: ignore[arg-type]
        ]
        if strategy != "strict":  # contiguity with a join is refused
            out.append(ab.where(a.x == b.x).strategy(strategy))  # type: ignore[arg-type]
    out += [
        ab.within(events=5),
        ab.where(a.y < b.y, post_filter=True),
        # LAST/NEXT chosen on the run DAG (pycel/jit/choose.py), post-filters that prune.
        ab.within(events=5).strategy("last"),
        pycel.seq(a, b, c).within(events=6).strategy("next").limit(1),
        pycel.seq(a, pycel.plus(b), c).where(b.y > c.y, post_filter=True).within(events=6),
        # Order comparisons: the ordered loop (pycel/jit/ordered.py), with a limit and a
        # projection too, and a trend.
        pycel.seq(a, b, c).where(b.x > a.x).within(events=8),
        pycel.seq(a, b, c).where((b.x > a.x) & (c.y <= b.y)).limit(1),
        pycel.seq(a, pycel.plus(b.where(b.x >= pycel.prev(b).x))).within(events=6),
        (a & b & c).where((a.x == b.x) & (b.x == c.x) & (b.y == c.y)).within(events=20),
        (a & b & c).where((a.x == b.x) & (b.x == c.x) & (b.y == c.y)).within(events=20).limit(1),
    ]
    return out


def _same(pattern: Any, got: set[Any], events: list[Any]) -> None:
    """``got`` equals the reference's matches; under LIMIT n (which n matches of an end
    it keeps is not specified), as many per end, all of them matches."""
    expected = evaluate(pattern, events).keys()
    if not isinstance(pattern, Limit):
        assert got == expected
        return
    assert got <= evaluate(pattern.inner, events).keys()
    assert Counter(m[1] for m in got) == Counter(m[1] for m in expected)


def test_each_loop_compiles_once_whatever_the_query() -> None:
    events = _events(24, 1)
    frame = pd.DataFrame(
        {
            "event_type": [type(e).__name__ for e in events],
            "x": [e.x for e in events],
            "y": [e.y for e in events],
            "time": [e.time for e in events],
        }
    )
    families = set()
    for pattern in _patterns():
        query = pycel.compile(pattern)
        families.add(query.family)
        _same(pattern, query.run(events).keys(), events)
        _same(pattern, query.run(frame.iloc[::-1].iloc[::-1]).keys(), events)  # a view of a frame
        stream = query.stream()
        got = set()
        for lo, hi in ((0, 1), (1, 10), (10, 24)):
            got |= stream.push(events[lo:hi]).keys()
            stream = pycel.Stream.restore(stream.snapshot())  # restored arrays: the same types
        _same(pattern, got, events)
    assert {"sequential", "ranked", "maximal", "parallel"} <= families
    variants = {
        "all": runtime.loop_variants(),
        "ranked": last.loop_variants(),
        "max": maximal.loop_variants(),
        "parallel": pcea.loop_variants(),
        "ordered": ordered.loop_variants(),
    }
    # The patterns above use contiguity (strict), consumption-free and projecting clauses
    # and NEXT as well as LAST: several variants of a loop exist, each compiled once.
    all_paths = {key[:4] for key in variants["all"]}  # (contiguous, consuming, distinct, blocking, ...)
    assert (True, False, False, False) in all_paths and (False, False, False, False) in all_paths
    assert {key[0] for key in variants["ranked"]} == {False, True}
    for family, loops in variants.items():
        for key, loop in loops.items():
            assert len(loop.signatures) == 1, (family, key, loop.signatures)
    # The helpers the families share have at most one signature (none when every loop
    # came from the cache): see also test_a_plain_query_compiles_only_the_paths_it_uses.
    shared = (store.ht_rebuild, store.heap_insert, store.ensure_room, store.ht_get, store.ht_put)
    enumerators = (enumerate_module._enumerate, enumerate_module._enumerate_distinct)
    ordered_helpers = (treap.treap_split, treap.treap_insert, treap._own, ordered._pieces)
    ordered_helpers += (enumerate_module._enumerate_ordered,)
    chosen = (choose.choose_last, choose.choose_next)  # (their helpers are inlined into them)
    pruning = (enumerate_module._enumerate_residual, residual.residual_holds, residual._evaluate)
    for helper in (*shared, *ordered_helpers, *enumerators, *chosen, *pruning):
        assert len(helper.signatures) <= 1, (helper.py_func.__qualname__, helper.signatures)


PLAIN_QUERIES = textwrap.dedent(
    """\
    import json, random
    from numba.core.event import install_recorder
    import pycel
    from pycel.jit import last, runtime, store
    from pycel.jit.enumerate import _enumerate
    from pycel.reference import evaluate

    class K(pycel.Event):
        x: pycel.Field[int]

    class KA(K): ...
    class KB(K): ...

    rnd = random.Random(3)
    events = [rnd.choice([KA, KB])(x=rnd.randrange(3)) for _ in range(30)]
    a, b = pycel.alias(KA, "a"), pycel.alias(KB, "b")
    patterns = [pycel.seq(a, pycel.plus(b)).within(events=6), pycel.seq(a, b).strategy("last")]
    with install_recorder("numba:compile") as recorder:
        equal = [pycel.compile(p).run(events).keys() == evaluate(p, events).keys() for p in patterns]
    compiled = sorted({e.data["dispatcher"].py_func.__qualname__ for _, e in recorder.buffer})
    helpers = (store.ht_rebuild, store.heap_insert, _enumerate)
    shared = {f.py_func.__qualname__: len(f.signatures) for f in helpers}
    print(json.dumps({"equal": equal, "compiled": compiled, "shared": shared,
                      "all": sorted(runtime.loop_variants()), "ranked": sorted(last.loop_variants())}))
    """
)


def test_a_plain_query_compiles_only_the_paths_it_uses(tmp_path: Path) -> None:
    """With an empty cache, an ALL query without contiguity, consumption or projection,
    and a LAST query, compile neither contiguity's heaps, the projection's duplicate
    check nor NEXT's order list (each loop variant has only the paths its queries use),
    and the helpers they share once."""
    env = {**os.environ, "PYCEL_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-c", PLAIN_QUERIES], env=env, check=True, capture_output=True, text=True
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["equal"] == [True, True]
    assert [key[:4] for key in result["all"]] == [[False, False, False, False]]
    assert result["ranked"] == [[False, False, False, False, False]]
    # The helpers both loops call were compiled once for both (ht_rebuild had two
    # signatures when LAST passed a literal True and ALL the default).
    assert set(result["shared"].values()) == {1}, result["shared"]
    compiled = set(result["compiled"])
    assert "run_batch_all" in " ".join(compiled)  # the recorder saw the compilation
    unused_paths = ("_seen_before", "_merge", "_insert", "_next_entries", "insert_before", "release")
    unused_paths += ("_retire",)
    for unused in unused_paths:
        assert unused not in compiled, (unused, sorted(compiled))


ORDERED_QUERY = textwrap.dedent(
    """\
    import json, random
    from numba.core.event import install_recorder
    import pycel
    from pycel.jit import ordered, runtime
    from pycel.reference import evaluate

    class K(pycel.Event):
        x: pycel.Field[int]

    class KA(K): ...
    class KB(K): ...

    rnd = random.Random(5)
    events = [rnd.choice([KA, KB])(x=rnd.randrange(6)) for _ in range(40)]
    a, b, c = pycel.alias(KA, "a"), pycel.alias(KB, "b"), pycel.alias(KA, "c")
    pattern = pycel.seq(a, b, c).where(b.x > a.x).within(events=12)
    with install_recorder("numba:compile") as recorder:
        equal = pycel.compile(pattern).run(events).keys() == evaluate(pattern, events).keys()
    compiled = [e.data["dispatcher"].py_func.__qualname__ for _, e in recorder.buffer if not e.is_start]
    print(json.dumps({"equal": equal, "compiled": compiled, "ordered": sorted(ordered.loop_variants()),
                      "all": sorted(runtime.loop_variants())}))
    """
)


def test_an_ordered_query_compiles_no_heap_insertion(tmp_path: Path) -> None:
    """With an empty cache, a query with an order comparison compiles the ordered loop
    only: its states without conditions keep their runs in treaps too, so neither the
    heap insertion (``heap_insert``, ``_insert``) nor the ALL loop is compiled, nor the
    projection's duplicate check."""
    env = {**os.environ, "PYCEL_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-c", ORDERED_QUERY], env=env, check=True, capture_output=True, text=True
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["equal"] is True
    assert result["ordered"] == [[False] * 7] and result["all"] == []
    compiled = set(result["compiled"])
    assert any("run_batch_ordered" in name for name in compiled), sorted(compiled)
    for unused in ("heap_insert", "_insert", "_merge", "_seen_before", "run_batch_all"):
        assert not any(name.split(".")[-1] == unused for name in compiled), (unused, sorted(compiled))
    # The insertion and the node copy are compiled apart, once each (inlined, Numba copied
    # their IR into every caller and ran its passes over it again); the piece cut is
    # inlined into the loop (a call per state and event slowed the warm loop).
    counts = Counter(result["compiled"])
    for apart in ("treap_insert", "treap_split", "_own"):
        assert counts[apart] == 1, (apart, counts)
    assert counts["_pieces"] == 0, counts


CHOOSER_QUERIES = textwrap.dedent(
    """\
    import json, random
    from numba.core.event import install_recorder
    import pycel
    from pycel.reference import evaluate

    class K(pycel.Event):
        x: pycel.Field[int]

    class KA(K): ...
    class KB(K): ...
    class KC(K): ...

    rnd = random.Random(7)
    events = [rnd.choice([KA, KB, KC])(x=rnd.randrange(3)) for _ in range(16)]
    a, b, c = pycel.alias(KA, "a"), pycel.alias(KB, "b"), pycel.alias(KC, "c")
    body = pycel.seq(a, pycel.plus(b | c), c)
    patterns = [body.within(events=8).strategy("last"), body.within(events=8).strategy("next")]
    with install_recorder("numba:compile") as recorder:
        equal = [pycel.compile(patterns[0]).run(events).keys() == evaluate(patterns[0], events).keys()]
        first = len(recorder.buffer)  # (NEXT's query compiles what LAST's did not)
        equal.append(pycel.compile(patterns[1]).run(events).keys() == evaluate(patterns[1], events).keys())
    compiled = [e.data["dispatcher"].py_func for _, e in recorder.buffer if not e.is_start]
    names = [f"{f.__module__}.{f.__qualname__}" for f in compiled]
    after = [e.data["dispatcher"].py_func for _, e in recorder.buffer[first:] if not e.is_start]
    after_last = [f"{f.__module__}.{f.__qualname__}" for f in after]
    print(json.dumps({"equal": equal, "compiled": names, "after_last": after_last}))
    """
)


def test_a_chooser_compiles_as_one_function(tmp_path: Path) -> None:
    """With an empty cache, LAST and NEXT with a window compile their chooser
    (pycel/jit/choose.py) once each, with its helpers inlined into it: none of them is
    compiled apart (each was a function of its own, compiled and optimized again in
    every caller, about a second more of a cold first query), and NEXT compiles no sort
    and no comparison of runs. After LAST's, NEXT's query compiles only its chooser and
    its loop variant: every other function and signature it uses is LAST's (a helper of
    its own, or an ``np.full``/``np.empty`` with other argument types, would be compiled
    here). Both equal the reference."""
    env = {**os.environ, "PYCEL_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [sys.executable, "-c", CHOOSER_QUERIES], env=env, check=True, capture_output=True, text=True
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["equal"] == [True, True]
    compiled = Counter(result["compiled"])
    assert compiled["pycel.jit.choose.choose_last"] == 1 and compiled["pycel.jit.choose.choose_next"] == 1
    choosers = {"pycel.jit.choose.choose_last", "pycel.jit.choose.choose_next"}
    apart = [name for name in compiled if name.startswith("pycel.jit.choose.") and name not in choosers]
    assert apart == [], apart
    for unused in ("mergesort", "argsort", "quicksort", "windowed._compare"):
        assert not any(unused in name for name in compiled), (unused, sorted(compiled))
    own = {"pycel.jit.choose.choose_next", "pycel.jit.runtime._all_loop.<locals>.run_batch_all"}
    assert sorted(result["after_last"]) == sorted(own), result["after_last"]


def _treap_heights(U: Any, root: int, lo: int, unext: int) -> tuple[int, int]:
    """(the longest path of live nodes inside the window below ``root``, its stored
    height), as the treap operations walk it."""
    mask = U.shape[1] - 1

    def alive(node: int) -> bool:
        return node >= 0 and node >= unext - U.shape[1] and U[store.U_MS, node & mask] >= lo

    def walk(node: int) -> int:
        if not alive(node):
            return 0
        s = node & mask
        return 1 + max(walk(int(U[store.U_LEFT, s])), walk(int(U[store.U_RIGHT, s])))

    return walk(root), int(U[store.U_BIT, root & mask]) >> treap.HEIGHT_SHIFT


def test_treap_heights_bound_every_path_and_the_room_made_per_event() -> None:
    """The ordered loop makes room once per event from ``ctr[C_MAX_DEPTH]`` (treap
    operations never grow an array): every treap in H has a stored height at least as
    long as any path an operation can walk, and at most ``C_MAX_DEPTH``. Many runs per
    state and a growing arena (batches of 400 events into one stream, NaN and null
    registers too), checked against the reference."""

    class Q(pycel.Event):
        f: pycel.Field[float]
        time: pycel.Field[int]

    class QA(Q): ...

    class QB(Q): ...

    rnd = random.Random(11)
    values = [None, math.nan, *range(40)]
    events = [rnd.choice([QA, QB])(f=rnd.choice(values), time=i) for i in range(1200)]
    a, b = pycel.alias(QA, "a"), pycel.alias(QB, "b")
    pattern = pycel.seq(a, b).where(b.f > a.f).within(events=300)
    stream = pycel.compile(pattern).stream()
    got: set[Any] = set()
    checked = 0
    for lo in range(0, len(events), 400):
        got |= stream.push(events[lo : lo + 400]).keys()
        state = stream.runner.store
        U, HT, ctr = state.U, state.HT, state.ctr
        window_lo = max(0, lo + 400 - 300)
        for slot in np.flatnonzero(HT[store.H_STATE] >= 0):
            root = int(HT[store.H_VAL, slot])
            if root < 0 or root < int(ctr[store.C_U_NEXT]) - U.shape[1]:
                continue
            if U[store.U_MS, root & (U.shape[1] - 1)] < window_lo:
                continue
            walked, stored = _treap_heights(U, root, window_lo, int(ctr[store.C_U_NEXT]))
            assert walked <= stored <= ctr[store.C_MAX_DEPTH], (walked, stored, int(ctr[store.C_MAX_DEPTH]))
            checked += 1
    assert checked > 0
    assert got == evaluate(pattern, events).keys()


SNIPPET = textwrap.dedent(
    """\
    import numpy as np

    from pycel.jit.runtime import run_batch
    from pycel.jit.structs import BatchInput, new_node_store

    store = new_node_store()
    run_batch(store, store, store)
    run_batch(store)
    step = run_batch(store, batch=None, tables=None)
    step.store.nope
    BatchInput(store.E, store.E, store.E, store.E, 0, 0, 0, 0)
    """
)
RIGHT = textwrap.dedent(
    """\
    import numpy as np

    from pycel.jit.runtime import run_batch
    from pycel.jit.structs import DfaArrays, NodeStore, RawOutput, Step, batch_input, new_node_store

    def advance(tables: DfaArrays) -> tuple[NodeStore, RawOutput]:
        empty = np.zeros(0, dtype=np.int64)
        batch = batch_input(empty, empty, empty, empty, 0, -1, -1, 0)
        step: Step = run_batch(new_node_store(), batch, tables)
        return step.store, step.out
    """
)


@pytest.fixture(scope="module")
def mypy_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("kernel_mypy")
    config = base / "mypy.ini"
    config.write_text(
        textwrap.dedent(
            f"""\
            [mypy]
            strict = True
            mypy_path = {ROOT}:{ROOT / "typings"}
            show_error_codes = True
            no_error_summary = True

            [mypy-pandas.*,pyarrow.*,pyspark.*,llvmlite.*,pycel,pycel.*]
            follow_imports = skip

            [mypy-pycel.jit.*]
            follow_imports = normal
            """
        )
    )
    return config, base / "cache"


def _mypy(setup: tuple[Path, Path], code: str, tmp_path: Path) -> list[tuple[int, str]]:
    mypy_api = pytest.importorskip("mypy.api")
    config, cache = setup
    path = tmp_path / "snippet.py"
    path.write_text(code)
    out, err, status = mypy_api.run(["--config-file", str(config), "--cache-dir", str(cache), str(path)])
    assert status in (0, 1), f"mypy crashed:\n{out}\n{err}"
    errors = []
    for line in out.splitlines():
        # mypy names the file relative to the working directory when it lies below it
        if ": error: " in line and Path(line.split(":", 1)[0]).resolve() == path.resolve():
            errors.append((int(line.split(":")[1]), line.split(": error: ", 1)[1]))
    return errors


def test_mypy_flags_wrong_calls_to_a_loop(mypy_config: tuple[Path, Path], tmp_path: Path) -> None:
    errors = _mypy(mypy_config, SNIPPET, tmp_path)
    lines = {line for line, _ in errors}
    assert lines == {7, 8, 9, 10, 11}, errors
    text = "\n".join(message for _, message in errors)
    assert 'Argument 2 to "run_batch" has incompatible type "NodeStore"; expected "BatchInput"' in text
    assert 'Missing positional arguments "batch", "tables"' in text
    assert '"NodeStore" has no attribute "nope"' in text
    assert 'expected "signedinteger' in text  # a Python int where the loop takes an int64


def test_mypy_accepts_a_right_call(mypy_config: tuple[Path, Path], tmp_path: Path) -> None:
    assert _mypy(mypy_config, RIGHT, tmp_path) == []


def test_batch_input_fixes_every_field_type() -> None:
    """Whatever it is given (int32 class ids, a strided view, Python ints), the batch has
    the one type the loops were compiled for."""
    from pycel.jit.structs import batch_input

    strided = np.arange(10, dtype=np.int64)[::2]
    batch = batch_input(
        np.zeros(5, dtype=np.int32), strided, np.ones(5, dtype=np.int8), strided, 3, -1, -1, 0
    )  # fmt: skip
    for field in (batch.classes, batch.keys, batch.window_starts):
        assert field.dtype == np.int64 and field.flags.c_contiguous
    assert batch.key_valid.dtype == np.bool_ and batch.key_valid.flags.c_contiguous
    for scalar in (batch.offset, batch.projection_mask, batch.limit, batch.consume):
        assert type(scalar) is np.int64


class _CollectorWatch(Listener):
    """Records, at the start of each Numba compilation, whether the collector is on."""

    def __init__(self) -> None:
        self.seen: dict[str, bool] = {}

    def on_start(self, event: Event) -> None:
        self.seen[event.data["dispatcher"].py_func.__qualname__] = gc.isenabled()

    def on_end(self, event: Event) -> None:
        pass


def _fresh_kernel(module: str) -> Any:
    """A new function (so Numba compiles it, no cache) that claims to live in ``module``."""

    def probe(x: int) -> int:
        return x + 1

    probe.__module__ = module
    probe.__qualname__ = f"probe_{module.replace('.', '_')}"
    return njit(probe)


def test_no_garbage_collection_while_a_pycel_kernel_compiles() -> None:
    """The cyclic collector is off from the start to the end of the compilation of a
    pycel.jit kernel (pycel/jit/compiling.py: each full collection walks the whole process
    while Numba makes garbage), on again afterwards; other compilations are left alone,
    and a collector the program turned off stays off."""
    watch = _CollectorWatch()
    register("numba:compile", watch)  # after pycel's listener: sees the state it set
    was_enabled = gc.isenabled()
    try:
        gc.enable()
        assert _fresh_kernel("pycel.jit._probe")(1) == 2
        assert watch.seen["probe_pycel_jit__probe"] is False
        assert gc.isenabled()
        assert _fresh_kernel("someone.else")(1) == 2
        assert watch.seen["probe_someone_else"] is True
        assert gc.isenabled()
        gc.disable()
        assert _fresh_kernel("pycel.jit._probe_off")(1) == 2
        assert watch.seen["probe_pycel_jit__probe_off"] is False
        assert not gc.isenabled()  # the program's choice
    finally:
        unregister("numba:compile", watch)
        if was_enabled:
            gc.enable()
        else:
            gc.disable()
