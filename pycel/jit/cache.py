"""Where Numba caches pycel's compiled loops: one directory keyed by pycel's kernel sources.

Numba files its on-disk cache by the source file's *path* (next to it in ``__pycache__``,
or under ``NUMBA_CACHE_DIR`` in a subdirectory named after the path). Where the path
changes from run to run — Spark ``--py-files`` (each application unpacks the archive
elsewhere), a fresh virtual environment per job — every run would compile again. This
locator files the kernels of ``pycel.jit`` under::

    <cache root>/pycel-<version>-<digest of the pycel/jit sources>/

so any copy of the same pycel finds the same compiled loops, and a changed kernel source
(any file of ``pycel.jit``: callers embed their callees) never loads stale code. The cache
root is, in this order: ``PYCEL_CACHE_DIR``, ``NUMBA_CACHE_DIR``, the user cache directory
(``$XDG_CACHE_HOME/pycel`` or ``~/.cache/pycel``; Numba's own choice on macOS/Windows),
the system temporary directory: the first that can be written. It is read when ``pycel``
is imported (setting a variable later changes nothing in that process).

The entries a process loaded or compiled can be exported (:func:`used_entries`) and added
to another process's cache (:func:`install_entries`): a Spark driver ships a query's
kernels to its executors that way (``pycel.spark._runner.warm_kernels``).

Example::

    PYCEL_CACHE_DIR=/var/tmp/pycel-cache python job.py
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.resources
import itertools
import os
import pickle
import secrets
import tempfile
from collections.abc import Iterator
from typing import Any, NamedTuple

from numba.core import bytecode, caching

_PACKAGE = __name__.rsplit(".", 1)[0]  # "pycel.jit"


def _version() -> str:
    try:
        return importlib.metadata.version("pycel")
    except importlib.metadata.PackageNotFoundError:  # a source tree or a --py-files zip
        return "src"


def _sources_digest() -> str:
    """A digest of every ``pycel.jit`` source file, read through the package loader (so a
    zip on ``sys.path`` works too)."""
    h = hashlib.sha256()
    files = importlib.resources.files(_PACKAGE)
    for entry in sorted(files.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            h.update(entry.name.encode())
            h.update(entry.read_bytes())
    return h.hexdigest()[:16]


def _user_cache_root() -> str:
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "pycel")
    if os.name == "posix" and not os.uname().sysname == "Darwin":
        return os.path.join(os.path.expanduser("~"), ".cache", "pycel")
    from numba.misc.appdirs import AppDirs

    return str(AppDirs(appname="pycel", appauthor=False).user_cache_dir)  # type: ignore[no-untyped-call]


def cache_roots() -> list[str]:
    """The directories pycel's compiled loops may go to, first choice first (see the
    module docstring); the system temporary directory comes last, so that an unwritable
    home never stops ``import pycel``."""
    roots = [os.environ[var] for var in ("PYCEL_CACHE_DIR", "NUMBA_CACHE_DIR") if os.environ.get(var)]
    user = getattr(os, "getuid", lambda: 0)()
    return [*roots, _user_cache_root(), os.path.join(tempfile.gettempdir(), f"pycel-cache-{user}")]


_DIGEST: list[str] = []  # computed once, at the first kernel


def versioned_name() -> str:
    """The directory name, under a cache root, of this pycel's kernels."""
    if not _DIGEST:
        _DIGEST.append(f"pycel-{_version()}-{_sources_digest()}")
    return _DIGEST[0]


class PycelCacheLocator(caching._CacheLocator):
    """Numba cache locator for the functions of ``pycel.jit`` (see the module docstring)."""

    def __init__(self, py_func: Any, path: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._path = path

    def get_cache_path(self) -> str:
        return self._path

    def get_source_stamp(self) -> str:
        # The directory name holds the sources' digest; the stamp leaves out the root, so
        # an index is valid under any root (entries shipped to Spark executors).
        return versioned_name()

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> PycelCacheLocator | None:
        if not getattr(py_func, "__module__", "").startswith(_PACKAGE + "."):
            return None
        for root in cache_roots():
            self = cls(py_func, os.path.join(root, versioned_name()))
            try:
                self.ensure_cache_path()  # type: ignore[no-untyped-call]
            except OSError:
                continue  # not writable: the next choice
            return self
        return None  # Numba's own locators decide


class ProcessUniqueIds:
    """Numba's numbering of compiled functions, unique across processes.

    Numba names a compiled function's symbols after its qualified name and a number from
    a counter that starts at 1 in every process (``FunctionIdentity._unique_ids``). The
    variants of one closure kernel (the ALL loop with or without consumption, the
    enumerator with or without pruning, …) compiled in two processes can so get the same
    symbol for different code, and a process that loads both from the cache links one
    body under that name for both: it runs the wrong variant (wrong matches, or a crash).
    Counting from a random 64-bit start in each process, drawn again in a forked child
    (which inherits the counter), makes two processes' numbers practically disjoint.
    """

    def __init__(self) -> None:
        self._reseed()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._count = itertools.count(secrets.randbits(64) + 1)

    def __iter__(self) -> ProcessUniqueIds:
        return self

    def __next__(self) -> int:
        return next(self._count)


class CacheEntry(NamedTuple):
    """One compiled kernel as pycel's cache holds it: the kernels' directory name (this
    pycel's sources), the function's index file, the entry's key (pickled) and its data
    file's name and bytes. Shipped to Spark executors, so that they load what the driver
    compiled (:func:`used_entries`, :func:`install_entries`)."""

    directory: str
    index_name: str
    key: bytes
    data_name: str
    data: bytes


#: The entries of pycel's cache this process loaded or saved: (index path, key) → (cache
#: directory, index name, data name).
_USED: dict[tuple[str, bytes], tuple[str, str, str]] = {}


def used_entries(max_bytes: int = 32 << 20) -> tuple[CacheEntry, ...]:
    """The cache entries this process has loaded or compiled so far (those whose data file
    is still there), the latest first, up to ``max_bytes`` of data in all. A Spark driver
    runs the query once on a few events, then ships these: the entries that run loaded
    or compiled are the latest (a kernel already in memory from an earlier query is not
    loaded again, so the earlier ones are shipped too, while they fit).

    Example: ``entries = used_entries()`` after a query ran"""
    out, total = [], 0
    for (_, key), (path, index_name, data_name) in reversed(list(_USED.items())):
        try:
            with open(os.path.join(path, data_name), "rb") as f:
                data = f.read()
        except OSError:
            continue
        total += len(data)
        if total > max_bytes:
            break
        out.append(CacheEntry(os.path.basename(path), index_name, key, data_name, data))
    return tuple(out)


def install_entries(entries: tuple[CacheEntry, ...]) -> int:
    """Add ``entries`` (from :func:`used_entries` in another process, maybe on another
    machine) to this process's cache, where missing; returns how many were added. Entries
    of another pycel (other kernel sources) are skipped; an entry compiled for another CPU
    is never loaded (Numba's key holds the target), so it is compiled here as before.

    Example: ``install_entries(spec.compiled)`` on an executor, before its first query"""
    mine = [e for e in entries if e.directory == versioned_name()]
    if not mine:
        return 0
    path = next(_writable_dirs(), None)
    if path is None:
        return 0
    added = 0
    for e in mine:
        cache = KeyedCacheFile(path, e.index_name[: -len(".nbi")], versioned_name())
        key = pickle.loads(e.key)
        with _locked(cache._index_path + ".lock"):
            overloads = cache._load_index()  # type: ignore[no-untyped-call]
            if key in overloads and os.path.exists(os.path.join(path, overloads[key])):
                continue
            with cache._open_for_write(os.path.join(path, e.data_name)) as f:
                f.write(e.data)
            overloads[key] = e.data_name
            cache._save_index(overloads)  # type: ignore[no-untyped-call]
            added += 1
    return added


def _writable_dirs() -> Iterator[str]:
    """The kernels' directory under each cache root that can be written, first choice first."""
    for root in cache_roots():
        path = os.path.join(root, versioned_name())
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            yield path


class KeyedCacheFile(caching.IndexDataCacheFile):
    """Numba's index and data files of one function, safe for processes that compile at
    once (Spark's Python workers on one machine), for pycel's kernels.

    Numba numbers a function's data files by counting the entries of the index it read:
    two processes adding different entries from the same index read both write file 1,
    and the index one of them writes last can then name the other's code. Here a data file
    is named by a digest of its key, so different entries never share a file, and it is
    written before the index names it; the index is read, extended and written under an
    exclusive lock, so no process drops another's entry. Other functions' caches (not in
    a pycel cache directory) keep Numba's behaviour.
    """

    def __init__(self, cache_path: str, filename_base: str, source_stamp: Any) -> None:
        super().__init__(cache_path, filename_base, source_stamp)  # type: ignore[no-untyped-call]
        self._keyed = os.path.basename(cache_path) == versioned_name()

    def save(self, key: Any, data: Any) -> None:
        if not self._keyed:
            super().save(key, data)  # type: ignore[no-untyped-call]
            return
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:20]
        name = self._data_name_pattern.replace("{number:d}", digest)
        self._save_data(name, data)  # type: ignore[no-untyped-call]
        with _locked(self._index_path + ".lock"):
            overloads = self._load_index()  # type: ignore[no-untyped-call]
            overloads[key] = name
            self._save_index(overloads)  # type: ignore[no-untyped-call]
        self._record(key, name)

    def load(self, key: Any) -> Any:
        if not self._keyed:
            return super().load(key)  # type: ignore[no-untyped-call]
        name = self._load_index().get(key)  # type: ignore[no-untyped-call]
        if name is None:
            return None
        try:
            data = self._load_data(name)  # type: ignore[no-untyped-call]
        except OSError:  # removed while the index still names it (as Numba's load)
            return None
        self._record(key, name)
        return data

    def _record(self, key: Any, data_name: str) -> None:
        """Note an entry this process used (:func:`used_entries`)."""
        pickled = pickle.dumps(key, protocol=4)
        _USED.pop((self._index_path, pickled), None)  # (the latest use last)
        _USED[(self._index_path, pickled)] = (self._cache_path, self._index_name, data_name)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if needed) for the block; none where the
    platform has no ``fcntl`` (then an entry may be lost and compiled again, never mixed
    up)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install() -> None:
    """Put :class:`PycelCacheLocator` first among Numba's cache locators (it answers only
    for ``pycel.jit``), number compiled functions with :class:`ProcessUniqueIds` and keep
    pycel's cache files with :class:`KeyedCacheFile`; must run before the kernels are
    decorated. A locator list given through
    ``NUMBA_CACHE_LOCATOR_CLASSES`` is left alone."""
    if not isinstance(bytecode.FunctionIdentity._unique_ids, ProcessUniqueIds):
        bytecode.FunctionIdentity._unique_ids = ProcessUniqueIds()  # type: ignore[assignment]
    # Numba's Cache builds its file object by this module-level name; the subclass only
    # changes the caches in pycel's directories.
    if not issubclass(caching.IndexDataCacheFile, KeyedCacheFile):
        caching.IndexDataCacheFile = KeyedCacheFile  # type: ignore[misc]
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if classes is None:  # another Numba: its own locators apply
        return
    if PycelCacheLocator not in classes:
        classes.insert(0, PycelCacheLocator)
