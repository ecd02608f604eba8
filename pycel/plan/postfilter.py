"""Post-filters: ``where(predicate, post_filter=True)`` checked on complete matches.

A post-filter is how a user runs a predicate the automaton cannot (``a.price < b.price``,
a non-hierarchical equality join). The engine compiles the pattern *without* it,
enumerates every match of the stripped pattern, and keeps those where the predicate holds.
That is exact — the same matches as the reference evaluator — but the enumeration delay is
linear in the *unfiltered* output, not in the output: the output-linear delay guarantee is
lost (docs/postfilter.md).

Semantics, as in CEL's FILTER and :func:`pycel.reference._holds`: each conjunct of the
predicate must be True for every combination of events bound to the variables it reads
(a null makes a comparison unknown, so the match is dropped; a variable the match does
not bind makes the conjunct hold vacuously). The filter is evaluated column-wise: one row
per (match, combination), the conjunct evaluated by :func:`pycel.runtime.predicates.truth` on a
synthetic batch whose columns are named ``var.attr``, then reduced per match.

Example::

    body, post = split_post_filters(seq(a, b).where(a.price < b.price, post_filter=True))
    body, post        # (A AS a ; B AS b), (a.price < b.price,)
"""

from __future__ import annotations

from collections import Counter

import attrs

from pycel.dsl import As, Atom, Filter, NotAtom, Pattern, Plus
from pycel.errors import UnsupportedError
from pycel.language.expr import Expr, attributes_in, conjuncts


# -- normalize: strip the post-filters off the body ------------------------------------------
def _bindings(node: Pattern) -> Counter[str]:
    """How many binding occurrences (atoms, negated atoms, ``as_``) of each variable."""
    if isinstance(node, (Atom, NotAtom)):
        return Counter([node.var])
    out: Counter[str] = Counter()
    for child in node.children():
        out.update(_bindings(child))
    if isinstance(node, As):
        out[node.var] += 1
    return out


def _rebuild(node: Pattern, children: list[Pattern]) -> Pattern:
    """``node`` with new children (every body node has ``inner`` or ``left``/``right``)."""
    if hasattr(node, "inner"):
        return attrs.evolve(node, inner=children[0])  # type: ignore[misc]
    return attrs.evolve(node, left=children[0], right=children[1])  # type: ignore[misc]


def split_post_filters(body: Pattern) -> tuple[Pattern, tuple[Expr[bool], ...]]:
    """``body`` without its post-filter nodes (their inner patterns kept), and the
    conjuncts of their predicates, to check on complete matches.

    Raises :class:`UnsupportedError` where checking on the complete match would differ
    from the per-subpattern semantics: a post-filter under ``plus()`` (the reference
    checks it on each repetition), or one reading a variable that the pattern also binds
    outside the filtered part (the complete match would add those positions).
    """
    total = _bindings(body)
    found: list[Expr[bool]] = []

    def strip(node: Pattern, under_plus: bool) -> Pattern:
        if isinstance(node, Filter) and node.post_filter:
            if under_plus:
                raise UnsupportedError(
                    f"where(..., post_filter=True) inside plus() is not supported by the engine: "
                    f"{node!r} must hold on each repetition separately, but the engine checks "
                    "post-filters once, on complete matches. Move the condition out of plus() "
                    "(it then holds for all repetitions together), or make it a unary filter "
                    "without post_filter=True"
                )
            inner = _bindings(node.inner)
            for var in sorted(v for v in node.predicate.variables() if v is not None):
                if total[var] > inner[var]:
                    raise UnsupportedError(
                        f"where(..., post_filter=True) reads variable {var!r}, which the "
                        f"pattern also binds outside the filtered part {node.inner!r}; the "
                        "engine checks post-filters on complete matches, where "
                        f"{var!r} would also hold those other positions. Give the other "
                        "occurrence a different name (pycel.alias or .as_())"
                    )
            found.extend(conjuncts(node.predicate))
            return strip(node.inner, under_plus)
        children = node.children()
        if not children:
            return node
        below = under_plus or isinstance(node, Plus)
        new = [strip(c, below) for c in children]
        if all(n is c for n, c in zip(new, children, strict=True)):
            return node
        return _rebuild(node, new)

    stripped = strip(body, False)
    return stripped, tuple(found)


def check_clauses(strategy: str, consume: str, windowed: bool = False, pruned: bool = True) -> None:
    """Reject the query clauses that would act on matches the post-filter removes
    (``windowed``: a window bounds the outputs of an end, so LAST/NEXT/MAX can choose among
    the filtered ones; ``pruned``: the query's loop checks the post-filters while it
    enumerates, so it can consume on the matches that pass them)."""
    if consume != "none" and not pruned:
        raise UnsupportedError(
            f"consume({consume!r}) with where(..., post_filter=True) is supported where the "
            "engine checks post-filters while it enumerates (ALL, ANY, STRICT, and LAST, "
            "NEXT and MAX with a window), not on the parallel automaton of an AND with "
            "nested joins: it would consume on matches that the post-filter then removes. "
            "Drop one of them"
        )
    if strategy in ("last", "next", "max") and not windowed:
        raise UnsupportedError(
            f"strategy({strategy!r}) with where(..., post_filter=True) is supported with a "
            f"window only: the engine selects the {strategy.upper()} matches among the "
            "unfiltered runs, before the post-filter could remove them; with within(...) it "
            "chooses among the filtered outputs that fit the window. Add a window, or use "
            "strategy 'all' or 'strict'"
        )


# -- the plan's part -----------------------------------------------------------------------------
def column_name(var: str, name: str) -> str:
    """The synthetic column of attribute ``name`` of variable ``var``."""
    return f"{var}.{name}"


@attrs.frozen
class PostFilters:
    """The conjuncts of a query's post-filters, ready for column-wise evaluation."""

    conjuncts: tuple[Expr[bool], ...]
    #: Each conjunct with its attributes renamed ``var.attr`` (the synthetic columns).
    renamed: tuple[Expr[bool], ...]
    #: Per conjunct: the variables it reads (sorted), and its (var, attr) columns.
    variables: tuple[tuple[str, ...], ...]
    columns: tuple[tuple[tuple[str, str], ...], ...]
    #: The attributes the tail keeps.
    attributes: tuple[str, ...]

    @classmethod
    def of(cls, parts: tuple[Expr[bool], ...]) -> PostFilters:
        renamed = tuple(
            p._map(lambda a: attrs.evolve(a, name=column_name(a.var, a.name))) for p in parts
        )
        variables = tuple(tuple(sorted(v for v in p.variables() if v is not None)) for p in parts)
        columns = tuple(
            tuple(sorted({(a.var, a.name) for a in attributes_in(p) if a.var is not None})) for p in parts
        )
        names = tuple(sorted({name for cols in columns for _, name in cols}))
        return cls(parts, renamed, variables, columns, names)
