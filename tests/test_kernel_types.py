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
from pycel.jit import enumerate as enumerate_module
from pycel.jit import last, maximal, pcea, runtime, store
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
    }
    # The patterns above use contiguity (strict), consumption-free and projecting clauses
    # and NEXT as well as LAST: several variants of a loop exist, each compiled once.
    assert (True, False, False, False) in variants["all"] and (False, False, False, False) in variants["all"]
    assert {key[0] for key in variants["ranked"]} == {False, True}
    for family, loops in variants.items():
        for key, loop in loops.items():
            assert len(loop.signatures) == 1, (family, key, loop.signatures)
    # The helpers the families share have at most one signature (none when every loop
    # came from the cache): see also test_a_plain_query_compiles_only_the_paths_it_uses.
    shared = (store.ht_rebuild, store.heap_insert, store.ensure_room, store.ht_get, store.ht_put)
    for helper in (*shared, enumerate_module._enumerate, enumerate_module._enumerate_distinct):
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
    assert result["all"] == [[False, False, False, False]]
    assert result["ranked"] == [[False, False, False, False]]
    # The helpers both loops call were compiled once for both (ht_rebuild had two
    # signatures when LAST passed a literal True and ALL the default).
    assert set(result["shared"].values()) == {1}, result["shared"]
    compiled = set(result["compiled"])
    assert "run_batch_all" in " ".join(compiled)  # the recorder saw the compilation
    unused_paths = ("_seen_before", "_merge", "_insert", "_next_entries", "insert_before", "release")
    unused_paths += ("_retire",)
    for unused in unused_paths:
        assert unused not in compiled, (unused, sorted(compiled))


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
        if line.startswith(str(path)) and ": error: " in line:
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
