"""One runner per automaton family; :func:`new_runner` picks the plan's.

Adding a family is adding a runner module here and a case in
:func:`pycel.plan.planner.choose_family`.

Example::

    runner = new_runner(plan)      # e.g. a MaximalRunner for strategy("max")
"""

from __future__ import annotations

from pycel.plan.planner import Family, Plan
from pycel.runtime.snapshot.plan import Json
from pycel.runtime.snapshot.tables import Reader

from .base import PreparedBatch, RawMatches, Runner
from .maximal import MaximalRunner
from .parallel import ParallelRunner
from .ranked import RankedRunner
from .sequential import SequentialRunner
from .windowed import WindowedRunner

RUNNERS: dict[
    Family, type[SequentialRunner] | type[MaximalRunner] | type[ParallelRunner] | type[WindowedRunner]
] = {
    "sequential": SequentialRunner,
    "ranked": RankedRunner,
    "maximal": MaximalRunner,
    "parallel": ParallelRunner,
    "windowed": WindowedRunner,
}


def new_runner(plan: Plan) -> Runner:
    """A fresh runner of the plan's family, at position 0."""
    return RUNNERS[plan.family](plan)


def load_runner(plan: Plan, r: Reader, x: Json) -> Runner:
    """The runner of a snapshot (DataError if its state is not intact)."""
    return RUNNERS[plan.family].load(plan, r, x)


__all__ = ["PreparedBatch", "RawMatches", "Runner", "new_runner", "load_runner", "RUNNERS"]
