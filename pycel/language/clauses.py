"""Split a pattern into its CEL body and its query-level clauses.

``within``, ``partition_by``, ``select``, ``strategy``, ``consume`` and ``limit`` are
clauses of the whole query (as in CEQL); :func:`split_query` peels them off the top of the
pattern and rejects them anywhere else with a clear error.

Example::

    spec = split_query(seq(A, B).within(events=5).limit(3))
    spec.body, spec.window.size, spec.limit     # (A ; B), 5.0, 3
"""

from __future__ import annotations

import attrs

from pycel.dsl import (
    Consume,
    Limit,
    PartitionBy,
    Pattern,
    Select,
    Strategy_,
    Within,
    as_pattern,
)
from pycel.errors import PatternError

_CLAUSES = (Within, PartitionBy, Select, Strategy_, Consume, Limit)
_NAMES = {
    Within: "within()",
    PartitionBy: "partition_by()",
    Select: "select()",
    Strategy_: "strategy()",
    Consume: "consume()",
    Limit: "limit()",
}


@attrs.frozen
class QuerySpec:
    """A pattern's CEL ``body`` plus its query clauses (absent ones at their defaults)."""

    body: Pattern
    window: Within | None = None
    partition: tuple[str, ...] = ()
    select: tuple[str, ...] | None = None
    strategy: str = "all"
    consume: str = "none"
    limit: int | None = None


def split_query(pattern: object) -> QuerySpec:
    """Peel the query clauses off the top of ``pattern``; see the module docstring."""
    node = as_pattern(pattern)
    found: dict[type, Pattern] = {}
    while isinstance(node, _CLAUSES):
        kind = type(node)
        if kind in found:
            raise PatternError(f"{_NAMES[kind]} is given twice in {pattern!r}")
        found[kind] = node
        node = node.inner
    _reject_nested_clauses(node)
    window = found.get(Within)
    part = found.get(PartitionBy)
    sel = found.get(Select)
    strat = found.get(Strategy_)
    cons = found.get(Consume)
    lim = found.get(Limit)
    return QuerySpec(
        body=node,
        window=window if isinstance(window, Within) else None,
        partition=part.keys if isinstance(part, PartitionBy) else (),
        select=sel.variables if isinstance(sel, Select) else None,
        strategy=strat.name if isinstance(strat, Strategy_) else "all",
        consume=cons.policy if isinstance(cons, Consume) else "none",
        limit=lim.n if isinstance(lim, Limit) else None,
    )


def _reject_nested_clauses(node: Pattern) -> None:
    for child in node.children():
        if isinstance(child, _CLAUSES):
            raise PatternError(
                f"{_NAMES[type(child)]} applies to a whole query, but it is used inside "
                f"{node!r}; apply it to the outermost pattern"
            )
        _reject_nested_clauses(child)
