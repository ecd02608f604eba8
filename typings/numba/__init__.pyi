"""Stubs for the part of Numba that pycel uses (found through ``mypy_path = "typings"``).

Numba's own annotations leave ``njit`` untyped, so every decorated function became
``Any`` for mypy: its calls went unchecked, and ``--strict`` wanted a
``# type: ignore[no-untyped-def]`` on each. Here ``njit`` returns the function it is
given, with its signature, both bare (``@njit``) and configured
(``@njit(cache=True, inline="always")``); mypy then checks the kernels' annotations and
every call to them.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Literal, ParamSpec, TypeVar, overload

_P = ParamSpec("_P")
_R = TypeVar("_R")

@overload
def njit(function: Callable[_P, _R], /) -> Callable[_P, _R]: ...
@overload
def njit(
    *,
    cache: bool = ...,
    inline: Literal["never", "always"] = ...,
    nogil: bool = ...,
    fastmath: bool = ...,
    parallel: bool = ...,
    boundscheck: bool | None = ...,
    error_model: Literal["python", "numpy"] = ...,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...
def objmode(**types: str) -> AbstractContextManager[None]:
    """Run the ``with`` block in the interpreter; ``types`` names each variable the block
    assigns and the code after it reads, with its Numba type (``"int64[::1]"``)."""
    ...
