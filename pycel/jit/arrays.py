"""The array and scalar types the Numba loops are annotated with (for mypy; Numba
infers its own types from the values, see :mod:`pycel.jit.structs`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: int64 arrays: every arena, table and per-event column.
Ints = npt.NDArray[np.int64]
#: int32 arrays: the variable ids of the output.
Int32s = npt.NDArray[np.int32]
#: bool arrays: per-state and per-event flags.
Flags = npt.NDArray[np.bool_]
#: An integer scalar inside a loop (positions, ids, counts): Python ints and the int64s
#: read from arrays mix freely there.
Int = int | np.int64
#: A truth value inside a loop (comparisons of int64s give numpy bools).
Truth = bool | np.bool_
