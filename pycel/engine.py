"""The engine facade: ``pycel.compile(pattern)`` → a reusable, picklable query.

A :class:`CompiledQuery` is the query's :class:`~pycel.plan.planner.Plan` (plain data:
the labeled automaton, the schema, the keys, the clauses, and which automaton family runs
it) that you can run; each :class:`~pycel.runtime.stream.Stream` owns the runtime state
and can be snapshot to bytes and restored.

Example::

    query = pycel.compile(pycel.seq(Sell, Buy).within(events=100))
    matches = query.run(events)                  # Matches: iterable of Match
    stream = query.stream()
    stream.push(batch1); stream.push(batch2)     # new matches per batch
    saved = stream.snapshot(); stream = pycel.Stream.restore(saved)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from pycel.data.ingest import DEFAULT_TYPE_COLUMN
from pycel.data.matches import Matches, by_end
from pycel.errors import UnsupportedError
from pycel.language.clauses import split_query
from pycel.language.events import Event
from pycel.language.patternlike import PatternLike
from pycel.limits import MAX_ATOMS
from pycel.plan.planner import Plan, plan_query
from pycel.runtime.residual import check_consumable
from pycel.runtime.stream import Stream


@attrs.frozen(eq=False)
class CompiledQuery(Plan):
    """A compiled pattern: run it on data, or open an incremental :meth:`stream`.

    Picklable (it holds plain data only), so it can be shipped to Spark executors. Its
    fields are the plan's: e.g. ``query.family`` says which runner evaluates it.
    """

    def __repr__(self) -> str:
        return f"CompiledQuery({self.text})"

    @property
    def plan(self) -> Plan:
        """The query's plan (the query itself: a compiled query is a plan you can run)."""
        return self

    def stream(self) -> Stream:
        """A new incremental evaluator at position 0.

        Example: ``stream = query.stream(); stream.push(batch)``
        """
        return Stream(self)

    def run(self, data: Any, *, type_column: str = DEFAULT_TYPE_COLUMN) -> Matches:
        """All matches of the query over ``data`` (events, dicts, pandas or Arrow).

        Example: ``pycel.compile(seq(A, B)).run(df).to_pandas()``
        """
        stream = self.stream()
        found = stream.push(data, type_column=type_column)
        if stream.horizon is None:
            return found
        # The data ends here: the matches still waiting for their window hold too.
        return attrs.evolve(by_end(Matches.concat([found, stream.close()])), source=found.source)


def compile(pattern: PatternLike, *, types: Iterable[type[Event]] = ()) -> CompiledQuery:
    """Check and compile ``pattern`` for the engine; raise a clear error if it cannot run.

    ``types``: extra event types the data may carry besides those of the pattern.

    Example::

        query = pycel.compile(pycel.seq(Sell, Buy).within(events=100))
    """
    try:
        plan = plan_query(split_query(pattern), types, repr(pattern))
    except RecursionError:  # the passes over the pattern recurse once per nesting level
        raise UnsupportedError(
            f"the pattern is nested too deeply to compile (the engine supports at most {MAX_ATOMS} "
            "atoms per pattern; a long seq(...) nests one level per part)"
        ) from None
    if plan.post_filters is not None and plan.consume != 0:
        check_consumable(plan.post_filters, plan.schema, plan.variables)
    return CompiledQuery(**attrs.asdict(plan, recurse=False))


__all__ = ["CompiledQuery", "Stream", "compile"]
