"""Comparisons between two occurrences (``b.price > a.price``) and with a previous
iteration (``b.price > prev(b).price``): which conjuncts they are.

The planner evaluates them on the automaton's edges (:mod:`pycel.plan.conditions`); the
atoms' unary filters leave them out.

Example::

    is_order_comparison(b.price > a.price * 1.05)   # True
    is_order_comparison(b.price > 3)                # False: one occurrence
"""

from __future__ import annotations

from typing import Any

from .expr import Compare, Expr, attributes_in

#: The comparisons between occurrences that order runs (``==`` makes run keys instead).
ORDER_OPS = ("<", "<=", ">", ">=", "!=")


def occurrence_read(e: Expr[Any]) -> tuple[str | None, bool] | None:
    """(variable, whether of the previous iteration) of an expression that reads exactly
    one occurrence, else None."""
    found = {(a.var, a.prev) for a in attributes_in(e)}
    return next(iter(found)) if len(found) == 1 else None


def is_order_comparison(part: Expr[bool]) -> bool:
    """Whether ``part`` compares two occurrences by order or ``!=``, or an occurrence with
    its previous iteration by order, ``!=`` or ``==``, each side reading one of them."""
    if not isinstance(part, Compare):
        return False
    left, right = occurrence_read(part.left), occurrence_read(part.right)
    if left is None or right is None or left == right:
        return False
    return part.op in ORDER_OPS or (part.op == "==" and left[0] == right[0])
