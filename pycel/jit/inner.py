"""``@inner``: the decorator of the kernels that only other kernels call.

``@njit`` compiles, besides the machine code, a CPython wrapper for every function (the
code that converts Python arguments when the function is called from Python). The
helpers of the per-event loops (the store's heap and index H operations, the
enumerators, the order list…) are only ever called from compiled code, so their wrappers
were compiled for nothing: 0.3–0.4 s of a cold first query (about twenty helpers). They
are declared with ``@inner`` instead, which is ``@njit(cache=True)`` without the wrapper
(Numba's ``no_cpython_wrapper`` option, left out on a Numba that does not have it).
Calling such a helper from Python raises a ``TypeError``; the functions Python calls stay
``@njit(cache=True)``.

Example::

    @inner
    def _double(x: int) -> int:
        return 2 * x

    @njit(cache=True)
    def quadruple(x: int) -> int:
        return _double(_double(x))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from numba import njit
from numba.core.cpu import CPUTargetOptions

_P = ParamSpec("_P")
_R = TypeVar("_R")

_OPTIONS: dict[str, Any] = {"cache": True}
if hasattr(CPUTargetOptions, "no_cpython_wrapper"):
    _OPTIONS["no_cpython_wrapper"] = True


def inner(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``@njit(cache=True)`` for a kernel that only kernels call (no CPython wrapper)."""
    return njit(**_OPTIONS)(function)
