"""The Numba kernels over flat arrays (imports only numpy and numba).

``store`` (node arenas, heap union, index H), ``enumerate`` (matches below a node),
the per-event loops ``runtime`` (ALL/ANY/STRICT), ``last`` (LAST/NEXT, with ``order``),
``maximal`` (MAX) and ``pcea`` (parallelized conjunctions), ``windowed`` and ``dedupe``
(choices and repeats over a batch's matches). The loops take and return the named tuples
of ``structs``, annotated with the types of ``arrays``; ``typings/numba`` lets mypy check
them. Helpers only kernels call are declared ``@inner`` (``inner``: no CPython wrapper to
compile). ``cache`` files their Numba cache by pycel's version and kernel sources, not by
their path (installed before any kernel is decorated, so here); ``compiling`` pauses the
garbage collector while a kernel compiles.
"""

from .cache import install as _install_cache_locator
from .compiling import install as _install_gc_pause

_install_cache_locator()
_install_gc_pause()
