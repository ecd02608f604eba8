"""Where pycel's compiled loops are cached (pycel/jit/cache.py): the configured directory
is honoured, a copy of pycel at another path (a Spark ``--py-files`` zip unpacked per
application) loads what an earlier copy compiled, and a read-only copy caches in the
user cache directory. Each check runs a small kernel in a fresh interpreter."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pycel

SOURCE = Path(pycel.__file__).parent

CHILD = """
import json, numpy as np
import pycel
from pycel.jit.store import grown_arena
grown = grown_arena(np.zeros((2, 8), dtype=np.int64), 8, 4, 0, 1)  # ids 0..7 made at 0 < 1: room
s = grown_arena.stats
print(json.dumps({"found": grown.shape[1], "path": s.cache_path, "pycel": pycel.__file__,
                  "hits": sum(s.cache_hits.values()), "misses": sum(s.cache_misses.values())}))
"""


def _run(pythonpath: Path, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYCEL_CACHE_DIR", "NUMBA_CACHE_DIR")}
    clean.update(env, PYTHONPATH=str(pythonpath))
    cmd = [sys.executable, "-c", CHILD]
    run = subprocess.run(cmd, env=clean, check=True, capture_output=True, text=True, cwd=pythonpath.parent)
    out = run.stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    assert result["found"] == 8  # the arena had room: not grown
    return result


def _copy(dst: Path) -> Path:
    shutil.copytree(SOURCE, dst / "pycel", ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _zip(src: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted((src / "pycel").rglob("*.py")):
            z.write(f, f.relative_to(src))
    return archive


def test_configured_directory_and_a_zip_at_another_path_share_the_cache(tmp_path: Path) -> None:
    """PYCEL_CACHE_DIR takes the loops; the same pycel zipped at two paths (two Spark
    applications) compiles once: the second loads from the cache."""
    cache = tmp_path / "cache"
    src = _copy(tmp_path / "src")
    first = _run(_zip(src, tmp_path / "app1.zip"), PYCEL_CACHE_DIR=str(cache))
    assert str(first["pycel"]).startswith(str(tmp_path / "app1.zip"))
    assert str(first["path"]).startswith(str(cache)) and first["misses"] == 1
    second = _run(_zip(src, tmp_path / "app2.zip"), PYCEL_CACHE_DIR=str(cache))
    assert second["path"] == first["path"]
    assert (second["hits"], second["misses"]) == (1, 0)
    # NUMBA_CACHE_DIR is the fallback name for the same root
    third = _run(_zip(src, tmp_path / "app3.zip"), NUMBA_CACHE_DIR=str(cache))
    assert (third["path"], third["hits"]) == (first["path"], 1)


def test_a_changed_kernel_source_is_compiled_again(tmp_path: Path) -> None:
    """The directory is keyed by the kernel sources: an edited copy never loads old code."""
    cache = tmp_path / "cache"
    first = _run(_copy(tmp_path / "a"), PYCEL_CACHE_DIR=str(cache))
    edited = _copy(tmp_path / "b")
    (edited / "pycel" / "jit" / "store.py").open("a").write("\n# edited\n")
    second = _run(edited, PYCEL_CACHE_DIR=str(cache))
    assert second["path"] != first["path"] and second["misses"] == 1


def test_read_only_install_caches_in_the_user_cache_directory(tmp_path: Path) -> None:
    """A read-only site-packages: nothing is written next to the sources; the loops go to
    the user cache directory, and a second process loads them. (Run as root, the
    permissions do not bind, but the sources' directory is still never chosen.)"""
    site = _copy(tmp_path / "site")
    for p in sorted(site.rglob("*"), reverse=True):
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    user_cache = tmp_path / "xdg"
    try:
        first = _run(site, XDG_CACHE_HOME=str(user_cache))
        second = _run(site, XDG_CACHE_HOME=str(user_cache))
    finally:
        for p in site.rglob("*"):
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    assert str(first["path"]).startswith(str(user_cache / "pycel"))
    assert (second["hits"], second["misses"]) == (1, 0)
    assert not list(site.rglob("*.nbi"))


def test_unwritable_cache_directories_fall_back_to_the_temporary_directory(tmp_path: Path) -> None:
    """Neither the configured nor the user cache directory can be created (their parent is
    a file, which stops root too): pycel still imports and caches in the system
    temporary directory."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"PYCEL_CACHE_DIR": str(blocker / "a"), "XDG_CACHE_HOME": str(blocker / "b"), "TMPDIR": str(temp)}
    got = _run(_copy(tmp_path / "src"), **env)
    assert str(got["path"]).startswith(str(temp / "pycel-cache-"))


VARIANT_CHILD = """
import json, sys
import pycel
from pycel.jit import runtime
class T(pycel.Event):
    v: pycel.Field[int]
A = type("A", (T,), {}); B = type("B", (T,), {})
a, b = pycel.alias(A, "a"), pycel.alias(B, "b")
events = [A(v=1), B(v=2), A(v=3), B(v=4), B(v=5)]
patterns = {"plain": pycel.seq(a, b), "consume": pycel.seq(a, b).consume("any"),
            "post": pycel.seq(a, b).where(a.v * a.v < b.v, post_filter=True)}  # (no run order)
def same(p):
    return pycel.compile(p).run(events).keys() == pycel.reference.evaluate(p, events).keys()
same = all(same(patterns[n]) for n in sys.argv[1:])
hits = sum(sum(v.stats.cache_hits.values()) for v in runtime.loop_variants().values())
print(json.dumps({"same": same, "hits": hits}))
"""


def _variants(cache: Path, *names: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYCEL_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env["PYCEL_CACHE_DIR"] = str(cache)
    run = subprocess.run(
        [sys.executable, "-c", VARIANT_CHILD, *names], env=env, check=True, capture_output=True, text=True
    )
    result: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def test_variants_compiled_in_two_processes_keep_their_own_symbols(tmp_path: Path) -> None:
    """Two variants of the ALL loop, each compiled first thing in its own process, are
    cached under different symbol names (Numba numbers functions per process from 1, so
    both were ``run_batch_all$1``: a process loading both could run one variant's body
    for the other), and a third process loads both and finds the reference's matches."""
    cache = tmp_path / "cache"
    assert _variants(cache, "plain") == {"same": True, "hits": 0}
    assert _variants(cache, "consume") == {"same": True, "hits": 0}
    assert _variants(cache, "post") == {"same": True, "hits": 0}
    names = set()
    for data in cache.rglob("runtime._all_loop.locals.run_batch_all-*.nbc"):
        names |= set(re.findall(rb"run_batch_all\$(\d+)", data.read_bytes()))
    assert len(names) == 3, names
    assert _variants(cache, "consume", "post", "plain") == {"same": True, "hits": 3}


SAVER = """
import sys
from pycel.jit.cache import KeyedCacheFile
from numba.core import caching
path, writer = sys.argv[1], int(sys.argv[2])
assert caching.IndexDataCacheFile is KeyedCacheFile  # what numba's Cache builds for pycel
cache = caching.IndexDataCacheFile(cache_path=path, filename_base="kernel-1.py311", source_stamp="s")
for i in range(40):
    cache.save(("sig", writer, i), ("code of", writer, i))
"""


def test_processes_saving_at_once_keep_each_entrys_own_code(tmp_path: Path) -> None:
    """Four processes add 40 entries each to one function's cache at the same time:
    every entry is kept and loads its own data (Numba numbers data files from the index
    each process read, so two processes could write the same file for different entries,
    and the index could name the other's code)."""
    from pycel.jit.cache import KeyedCacheFile, versioned_name

    path = tmp_path / versioned_name()  # a pycel cache directory: the keyed behaviour applies
    path.mkdir()
    savers = [
        subprocess.Popen([sys.executable, "-c", SAVER, str(path), str(w)], cwd=SOURCE.parent)
        for w in range(4)
    ]
    assert [p.wait(timeout=300) for p in savers] == [0, 0, 0, 0]
    cache = KeyedCacheFile(cache_path=str(path), filename_base="kernel-1.py311", source_stamp="s")
    for w in range(4):
        for i in range(40):
            assert cache.load(("sig", w, i)) == ("code of", w, i)
    assert len(list(path.glob("kernel-1.py311.*.nbc"))) == 160


SHIPPED = """
import json, pickle, sys
from numba.core.event import install_recorder
import pycel
from pycel.jit.cache import install_entries, used_entries

class T(pycel.Event):
    v: pycel.Field[int]

class T0(T): ...
class T1(T): ...

a, b = pycel.alias(T0, "a"), pycel.alias(T1, "b")
query = pycel.compile(pycel.seq(a, b.where(b.v > 1)).within(events=4))
events = [(T0 if k % 3 else T1)(v=k % 5) for k in range(60)]
added = 0
if sys.argv[1] == "install":
    with open(sys.argv[2], "rb") as f:
        added = install_entries(pickle.load(f))
with install_recorder("numba:compile") as recorder:
    keys = sorted(map(repr, query.run(events).keys()))
funcs = [e.data["dispatcher"].py_func for _, e in recorder.buffer if not e.is_start]
compiled = [f"{f.__module__}.{f.__qualname__}" for f in funcs]
if sys.argv[1] == "export":
    with open(sys.argv[2], "wb") as f:
        pickle.dump(used_entries(), f)
print(json.dumps({"keys": keys, "added": added, "compiled": [m for m in compiled if m.startswith("pycel")]}))
"""


def test_entries_shipped_to_another_cache_are_loaded_not_compiled(tmp_path: Path) -> None:
    """What a Spark driver does for its executors (pycel/spark/_runner.py, warm_kernels):
    a process compiles a query into one cache directory and exports the entries it used;
    a process with another, empty cache directory installs them and runs the query
    compiling only what a warm process compiles too (the object-mode block of
    ``_reserve``, which Numba does not cache), with the same matches."""
    shipped = tmp_path / "entries.pickle"

    def run(mode: str, cache: Path) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYCEL_CACHE_DIR", "NUMBA_CACHE_DIR")}
        env["PYCEL_CACHE_DIR"] = str(cache)
        cmd = [sys.executable, "-c", SHIPPED, mode, str(shipped)]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    first = run("export", tmp_path / "driver")
    warm = run("export", tmp_path / "driver")  # what a process compiles with a warm cache
    assert len(first["compiled"]) > len(warm["compiled"]) and first["keys"]
    second = run("install", tmp_path / "executor")
    assert second["added"] > 0 and second["compiled"] == warm["compiled"]
    assert second["keys"] == first["keys"]
    again = run("install", tmp_path / "executor")  # already there: nothing added
    assert again["added"] == 0 and again["compiled"] == warm["compiled"] and again["keys"] == first["keys"]
