"""CEQL's FILTER clauses: ``x[P] AND y[Q] OR …`` parsed into a tree and applied to a pattern.

``p FILTER a AND b`` means ``(p FILTER a) FILTER b`` and ``p FILTER a OR b`` means
``(p FILTER a) OR (p FILTER b)``, as in CORE; :meth:`FilterTree.apply` builds that, as
one :class:`pycel.dsl.Filter` where there is no OR. The predicates inside the brackets are
parsed by :mod:`._predicate`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pycel.dsl import Filter, Or, Pattern
from pycel.errors import PatternError, UnsupportedError
from pycel.language.events import Event
from pycel.language.expr import BoolOp, Expr

from ._lexer import Cursor, Token
from ._predicate import PredicateParser, located
from ._scope import bound_variables, type_name_conflict

#: ``p FILTER (a OR b) AND (c OR d) …`` becomes a union of filtered copies of p; at most this many.
MAX_FILTER_COPIES = 256


@attrs.define
class FilterTree:
    """A parsed FILTER clause: an atom ``x[P]`` (``pred``) or ``left AND/OR right``."""

    op: str  # "atom", "and", "or"
    pred: Expr[bool] | None = None
    left: FilterTree | None = None
    right: FilterTree | None = None

    def conjunction(self) -> Expr[bool] | None:
        """The tree as one predicate when it has no OR (CORE: AND is nested FILTERs)."""
        if self.op == "atom":
            return self.pred
        if self.op == "or":
            return None
        assert self.left is not None and self.right is not None
        left, right = self.left.conjunction(), self.right.conjunction()
        if left is None or right is None:
            return None
        result: Expr[bool] = BoolOp.build("and", left, right)
        return result

    def predicate(self) -> Expr[bool]:
        """The tree as one predicate (valid for one event, where OR of filters is OR)."""
        if self.op == "atom":
            assert self.pred is not None
            return self.pred
        assert self.left is not None and self.right is not None
        result: Expr[bool] = BoolOp.build(self.op, self.left.predicate(), self.right.predicate())
        return result

    def copies(self) -> int:
        """How many copies of the filtered pattern :meth:`apply` makes."""
        if self.op == "atom" or self.conjunction() is not None:
            return 1
        assert self.left is not None and self.right is not None
        if self.op == "and":
            return self.left.copies() * self.right.copies()
        return self.left.copies() + self.right.copies()

    def apply(self, node: Pattern) -> Pattern:
        """``node FILTER tree`` with CORE's meaning: ``p FILTER a AND b`` is
        ``(p FILTER a) FILTER b`` and ``p FILTER a OR b`` is ``(p FILTER a) OR (p FILTER b)``."""
        if self.copies() > MAX_FILTER_COPIES:
            raise UnsupportedError(
                f"this FILTER has {self.copies()} alternatives (ORs of filters inside ANDs multiply); "
                f"pycel expands them into copies of the pattern and stops at {MAX_FILTER_COPIES}: "
                "move the ORs inside one variable's brackets, x[a OR b], where possible"
            )
        pred = self.conjunction()
        if pred is not None:
            return Filter(node, pred)
        assert self.left is not None and self.right is not None
        if self.op == "and":
            return self.right.apply(self.left.apply(node))
        return Or(self.left.apply(node), self.right.apply(node))


class FilterParser:
    """Parses the clause after ``FILTER`` over the event types ``types``.

    ``check_qualifier(stream_tok, event_tok)`` accepts or rejects a ``stream>T`` qualifier
    written in the clause (it depends on the query's FROM streams).
    """

    def __init__(
        self,
        cur: Cursor,
        types: Mapping[str, type[Event]],
        check_qualifier: Callable[[Token, Token], None],
    ) -> None:
        self.cur = cur
        self.types = types
        self.check_qualifier = check_qualifier

    def filter_tree(self, node: Pattern, *, negated: bool = False) -> FilterTree:
        """The clause after ``FILTER`` over the variables ``node`` binds (``negated``:
        inside ``NOT(…)``, where it may name only the negated event type)."""
        left = self.filter_and(node, negated)
        while self.cur.at_keyword("OR") and self._filter_atom_ahead(1):
            tok = self.cur.next()
            left = self.cur.built(FilterTree("or", left=left, right=self.filter_and(node, negated)), tok)
        return left

    def filter_and(self, node: Pattern, negated: bool) -> FilterTree:
        left = self.filter_primary(node, negated)
        while self.cur.at_keyword("AND") and self._filter_atom_ahead(1):
            tok = self.cur.next()
            left = self.cur.built(FilterTree("and", left=left, right=self.filter_primary(node, negated)), tok)
        return left

    def _filter_atom_ahead(self, k: int) -> bool:
        """Whether the tokens from ``k`` on start a filter (``(``* name [``>`` name] ``[``),
        as opposed to a CEL formula after a CEL-level AND/OR."""
        cur = self.cur
        while cur.at_op("(", k=k):
            k += 1
        if cur.peek(k).kind != "ident":
            return False
        if cur.at_op(">", k=k + 1) and cur.peek(k + 2).kind == "ident":
            k += 2
        return cur.at_op("[", k=k + 1)

    def filter_primary(self, node: Pattern, negated: bool) -> FilterTree:
        cur = self.cur
        if (paren := cur.accept_op("(")) is not None:
            with cur.nested(paren):
                tree = self.filter_tree(node, negated=negated)
            cur.expect_op(")", "')', AND or OR")
            return tree
        tok = cur.expect_ident("a variable name (FILTER x[predicate])")
        if cur.at_op(">") and cur.peek(1).kind == "ident":  # stream>event
            cur.next()
            stream_tok, tok = tok, cur.next()
            self.check_qualifier(stream_tok, tok)
        var: str = tok.value
        scope = bound_variables(node)
        if negated and var not in scope:
            raise PatternError(
                located(f"inside NOT(…), FILTER must name the negated event type {next(iter(scope))!r}", tok)
            )
        conflict = type_name_conflict(node, var, self.types)
        if conflict is not None:
            raise PatternError(located(f"FILTER {var}[…]: {conflict}", tok))
        if var not in scope:
            raise PatternError(
                located(f"FILTER reads variable {var!r}, which {node!r} does not bind", tok)
                + f"; it binds {sorted(scope)}"
            )
        cur.expect_op("[", "'[' (FILTER x[predicate])")
        pred = PredicateParser(self.cur, self.types.values(), var, scope, negated).predicate()
        cur.expect_op("]", "']' or an operator")
        return FilterTree("atom", pred=pred)
