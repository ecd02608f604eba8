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

Example::

    PYCEL_CACHE_DIR=/var/tmp/pycel-cache python job.py
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import itertools
import os
import secrets
import tempfile
from typing import Any

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
        return self._path  # the directory name already holds the sources' digest

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


def install() -> None:
    """Put :class:`PycelCacheLocator` first among Numba's cache locators (it answers only
    for ``pycel.jit``), and number compiled functions with :class:`ProcessUniqueIds`; must
    run before the kernels are decorated. A locator list given through
    ``NUMBA_CACHE_LOCATOR_CLASSES`` is left alone."""
    if not isinstance(bytecode.FunctionIdentity._unique_ids, ProcessUniqueIds):
        bytecode.FunctionIdentity._unique_ids = ProcessUniqueIds()  # type: ignore[assignment]
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if classes is None:  # another Numba: its own locators apply
        return
    if PycelCacheLocator not in classes:
        classes.insert(0, PycelCacheLocator)
