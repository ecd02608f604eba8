"""No cyclic garbage collection while Numba compiles pycel's kernels.

Compiling a loop makes hundreds of thousands of short-lived Python objects (Numba's IR,
type-inference constraints, llvmlite's IR), many of them in reference cycles. Python's
collector runs a full collection whenever enough objects have survived, and each full
collection walks every object the process holds (numpy, pandas, numba and pycel
loaded): about six of them during a cold first query, 0.4-0.5 s of its CPU time. This module
pauses the collector from the start to the end of the outermost Numba compilation of a
``pycel.jit`` function (Numba's ``numba:compile`` event) and turns it back on afterwards,
so the compiler's garbage is collected once, later, by the ordinary collections.

Only compilations that start at a pycel kernel pause it (the functions Numba compiles for
it, numpy's implementations, are nested inside); a collector the program had turned off
stays off. Compilations run under Numba's global lock, one at a time, so the events nest.
Loading a compiled loop from the cache is not a compilation and does not pause anything.

Example::

    import gc, pycel            # pycel.jit installs the listener (once)
    gc.isenabled()              # True, before and after every kernel compiles
"""

from __future__ import annotations

import gc

from numba.core import event

_PACKAGE = __name__.rsplit(".", 1)[0]  # "pycel.jit"


def _is_pycel_kernel(ev: event.Event) -> bool:
    dispatcher = (ev.data or {}).get("dispatcher")
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", None) or ""
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


class GcPause(event.Listener):
    """Listener of ``numba:compile``: the collector is off inside the outermost
    compilation of a pycel kernel (see the module docstring)."""

    def __init__(self) -> None:
        self.depth = 0  # compilations open since the outermost pycel one started
        self.paused = False  # whether we turned the collector off (and must turn it on)

    def on_start(self, ev: event.Event) -> None:
        if self.depth == 0:
            if not _is_pycel_kernel(ev):
                return
            self.paused = gc.isenabled()
            if self.paused:
                gc.disable()
        self.depth += 1

    def on_end(self, ev: event.Event) -> None:
        if self.depth == 0:
            return
        self.depth -= 1
        if self.depth == 0 and self.paused:
            self.paused = False
            gc.enable()


_LISTENER = GcPause()
_INSTALLED: list[GcPause] = []


def install() -> None:
    """Register the listener with Numba (once per process)."""
    if not _INSTALLED:
        event.register("numba:compile", _LISTENER)  # type: ignore[no-untyped-call]
        _INSTALLED.append(_LISTENER)
