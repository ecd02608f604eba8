"""Rewrite conjunction (``p & q``, CEQL ``AND``) into an OR of interleavings.

The engine's automaton has no parallel transitions, so it cannot run AND directly.
When both sides of an AND are sequences of single events, AND is a disjunction: the
union of a match of ``p`` (positions p1 < … < pm) and a match of ``q`` (q1 < … < qn) is
a match of one *interleaving* of the two sequences, where an event of ``p`` and an event
of ``q`` may also be the same event (a *merged* step: the event is of both types,
satisfies both filters and is bound to the variables of both). So

    (A ; B) & C  ==  (A ; B ; C) | (A ; C ; B) | (C ; A ; B) | (A·C ; B) | (A ; B·C)

where ``A·C`` is one event that is an A and a C (only possible when one type is a subclass
of the other, or, with multiple inheritance, for their common subclasses). The result is
exact under the reference's set semantics (docs/semantics.md); interleavings that yield the
same valuation are one run of the determinized automaton, so no match is duplicated.

The operands are brought to a disjunctive normal form first: a list of *chains*, each a
sequence of single-event *items* (event type, variables, unary filters). ``;``, ``OR``,
``AS``, unary ``FILTER`` and nested ``AND`` all map chains to chains; ``+``, ``:``,
negated atoms and correlations inside an operand are rejected with
:class:`~pycel.errors.UnsupportedError`. The OR of the interleavings is then written with
few atoms (the engine has at most ``MAX_ATOMS``): common prefixes are shared, and groups
of interleavings that are all combinations of some first halves with some second halves
become ``(first halves) ; (second halves)``. Sides of m and n events have up to D(m, n)
interleavings (Delannoy numbers: 3, 13, 63 for m = n = 1, 2, 3), C(m + n, m) when no
event can match both sides.

Example::

    expand_conjunctions(seq(A, B) & C)
    # ((A ; ((B ; C) OR (C ; B))) OR (C ; (A ; B)))   with A, B, C unrelated types
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs

from pycel.dsl import And, As, Atom, Filter, NotAtom, Or, Pattern, Plus, Seq
from pycel.errors import UnsupportedError
from pycel.language.events import Event, event_name
from pycel.language.expr import Expr, conjuncts, expr_key
from pycel.limits import MAX_ATOMS

#: Stop enumerating interleavings (before deduplication) beyond this many.
MAX_RAW_INTERLEAVINGS = 20_000
#: At most this many distinct interleavings (their OR must also fit in ``MAX_ATOMS`` atoms).
MAX_INTERLEAVINGS = 200

_WHAT = (
    "the engine evaluates AND between sequences of single events (event types, aliases, "
    "unary filters, AS, ';', OR, nested AND)"
)
_RUNS_IN_REFERENCE = "pycel.reference.evaluate runs this pattern"


@attrs.frozen
class Item:
    """One event of a chain: its type, the variables bound to it (``var`` is the atom's
    own), and the unary filters it must satisfy (each reads only these variables)."""

    event: type[Event]
    var: str
    labels: frozenset[str]
    filters: tuple[Expr[bool], ...] = attrs.field(eq=expr_key)

    def pattern(self) -> Pattern:
        """This item as a pattern: ``Atom``, then ``As`` per extra variable, then ``Filter``."""
        node: Pattern = Atom(self.event, self.var)
        for label in sorted(self.labels - {self.var}):
            node = As(node, label)
        for pred in self.filters:
            node = Filter(node, pred)
        return node


Chain = tuple[Item, ...]


def expand_conjunctions(body: Pattern) -> Pattern:
    """``body`` with every ``And`` replaced by an OR of interleavings (same matches).

    Raises :class:`UnsupportedError` when an operand is not a sequence of single events
    (see the module docstring) or when the expansion exceeds the engine's atom limit.
    A body without ``And`` is returned unchanged.
    """
    if not _has_and(body):
        return body
    expanded = _expand(body)
    atoms = _count_atoms(expanded)
    if atoms > MAX_ATOMS:
        raise UnsupportedError(
            f"AND is evaluated as an OR of interleavings of its sides; here they need {atoms} "
            f"automaton atoms, above the engine's limit of {MAX_ATOMS}. Shorten the sides of "
            "the AND (sides of 1 and 1 events have 3 interleavings, 2 and 2 have 13, 3 and 3 "
            f"have 63); {_RUNS_IN_REFERENCE}"
        )
    return expanded


def _has_and(node: Pattern) -> bool:
    return isinstance(node, And) or any(_has_and(c) for c in node.children())


def interleavings_fit(body: Pattern) -> bool:
    """Whether the OR of interleavings of ``body`` stays within the engine's atom limit
    (``body``'s ANDs must be of sequences of single events, as :func:`expand_conjunctions`
    requires).

    Example: ``interleavings_fit(a & b & c)`` is True; an AND of four events is not.
    """
    return not _has_and(body) or _count_atoms(_expand(body)) <= MAX_ATOMS


def _count_atoms(node: Pattern) -> int:
    own = 1 if isinstance(node, (Atom, NotAtom)) else 0
    return own + sum(_count_atoms(c) for c in node.children())


def _expand(node: Pattern) -> Pattern:
    """Replace each outermost ``And`` of ``node`` by its prefix tree of interleavings."""
    if isinstance(node, And):
        return _or_of(_chains(node))
    if not _has_and(node):
        return node
    if isinstance(node, Seq):
        return Seq(_expand(node.left), _expand(node.right), node.contiguous)
    if isinstance(node, Or):
        return Or(_expand(node.left), _expand(node.right))
    if isinstance(node, Plus):
        return Plus(_expand(node.inner), node.contiguous)
    if isinstance(node, As):
        return As(_expand(node.inner), node.var)
    if isinstance(node, Filter):
        return Filter(_expand(node.inner), node.predicate, node.post_filter)
    raise UnsupportedError(f"{type(node).__name__} is not supported by the engine yet")


# -- operands in disjunctive normal form: lists of chains ------------------------------------
def _reject(what: str, node: Pattern) -> UnsupportedError:
    return UnsupportedError(f"{_WHAT}; {what} in {node!r} is not supported yet ({_RUNS_IN_REFERENCE})")


def _chains(node: Pattern) -> list[Chain]:
    """The chains whose union of matches is ``node``'s (deduplicated, in a fixed order)."""
    if isinstance(node, Atom):
        return [(Item(node.event, node.var, frozenset([node.var]), ()),)]
    if isinstance(node, Seq):
        if node.contiguous:
            raise _reject("contiguous sequencing (':')", node)
        right = _chains(node.right)
        return _unique(a + b for a in _chains(node.left) for b in right)
    if isinstance(node, Or):
        return _unique([*_chains(node.left), *_chains(node.right)])
    if isinstance(node, As):
        return [tuple(attrs.evolve(i, labels=i.labels | {node.var}) for i in c) for c in _chains(node.inner)]
    if isinstance(node, Filter):
        return [_push_filter(node, c) for c in _chains(node.inner)]
    if isinstance(node, And):
        right = _chains(node.right)
        return _unique(m for a in _chains(node.left) for b in right for m in _merges(a, b))
    if isinstance(node, Plus):
        raise _reject("a Kleene plus ('+')", node)
    if isinstance(node, NotAtom):
        raise _reject("a negated atom NOT(...)", node)
    raise _reject(type(node).__name__, node)


def _push_filter(node: Filter, chain: Chain) -> Chain:
    """Attach ``node``'s unary conjuncts to the items binding the variable they read.

    Exact: a FILTER must hold for every event its variable is bound to, and in a chain
    those are exactly the items carrying that variable (none: the filter holds vacuously).
    A conjunct reading no variable is attached to every item.
    """
    if node.post_filter:
        raise _reject("a post-filter (where(..., post_filter=True))", node)
    parts = conjuncts(node.predicate)
    for part in parts:
        if len(part.variables()) > 1:
            raise _reject(
                f"the correlation {part!r} inside a side of the AND (correlate outside it, "
                "around the whole AND)",
                node,
            )
    out = []
    for item in chain:
        mine = tuple(p for p in parts if p.variables() <= item.labels)
        out.append(attrs.evolve(item, filters=_unique_filters(item.filters + mine)) if mine else item)
    return tuple(out)


def _unique(chains: Iterator[Chain] | Sequence[Chain]) -> list[Chain]:
    seen: dict[Chain, None] = {}
    for raw, chain in enumerate(chains):
        if raw >= MAX_RAW_INTERLEAVINGS:
            raise UnsupportedError(
                f"AND is evaluated as an OR of interleavings of its sides; here there are more "
                f"than {MAX_RAW_INTERLEAVINGS}. Shorten the sides of the AND; {_RUNS_IN_REFERENCE}"
            )
        seen.setdefault(chain, None)
        if len(seen) > MAX_INTERLEAVINGS:
            raise UnsupportedError(
                f"AND is evaluated as an OR of interleavings of its sides; here there are more "
                f"than {MAX_INTERLEAVINGS} distinct ones. Shorten the sides of the AND; "
                f"{_RUNS_IN_REFERENCE}"
            )
    return list(seen)


def _unique_filters(filters: tuple[Expr[bool], ...]) -> tuple[Expr[bool], ...]:
    seen: dict[object, Expr[bool]] = {}
    for f in filters:
        seen.setdefault(expr_key(f), f)
    return tuple(seen.values())


# -- interleavings ---------------------------------------------------------------------------
def _merges(a: Chain, b: Chain) -> Iterator[Chain]:
    """Every interleaving of chains ``a`` and ``b`` keeping each one's order, where an item of
    ``a`` and one of ``b`` may also fall on the same event (a merged item)."""
    if not a or not b:
        yield a + b
        return
    for rest in _merges(a[1:], b):
        yield (a[0], *rest)
    for rest in _merges(a, b[1:]):
        yield (b[0], *rest)
    for both in _merged_items(a[0], b[0]):
        for rest in _merges(a[1:], b[1:]):
            yield (both, *rest)


def _merged_items(x: Item, y: Item) -> list[Item]:
    """Items for one event that is both ``x`` and ``y``: one per type such an event may have."""
    labels = x.labels | y.labels
    filters = _unique_filters(x.filters + y.filters)
    return [Item(t, x.var, labels, filters) for t in _common_types(x.event, y.event)]


def _common_types(t1: type[Event], t2: type[Event]) -> list[type[Event]]:
    """The most general event types whose events are both a ``t1`` and a ``t2``.

    The more specific of the two when one subclasses the other; otherwise the common
    subclasses defined so far (multiple inheritance), usually none.
    """
    if issubclass(t1, t2):
        return [t1]
    if issubclass(t2, t1):
        return [t2]
    common: list[type[Event]] = []
    todo = list(t1.__subclasses__())
    while todo:
        cls = todo.pop()
        if issubclass(cls, t2):
            common.append(cls)
        else:
            todo.extend(cls.__subclasses__())
    top = {c for c in common if not any(o is not c and issubclass(c, o) for o in common)}
    return sorted(top, key=event_name)


# -- a small OR of the chains ----------------------------------------------------------------
def _or_of(chains: list[Chain]) -> Pattern:
    """An AND-free pattern whose matches are the union of ``chains``' (each sequenced with
    ``;``), with few atoms: the smallest of a prefix tree and of splits into products."""
    return _factor(chains, {})[0]


def _factor(chains: list[Chain], memo: dict[frozenset[Chain], tuple[Pattern, int]]) -> tuple[Pattern, int]:
    """(pattern, its atom count) for the union of ``chains``.

    Candidates: the prefix tree (chains grouped by their first item, the rests factored
    recursively), and for each cut position t, the chains grouped by the multiset of their
    first t items where each group that is a full product ``P ; S`` of its prefixes and
    suffixes (every combination a chain) becomes ``factor(P) ; factor(S)`` (for
    interleavings these are the chains through one point of the interleaving grid, so
    ``a ; (b|c) ; d`` is shared instead of repeated). Each candidate denotes exactly the union.
    """
    key = frozenset(chains)
    if key in memo:
        return memo[key]
    if len(chains) == 1:
        memo[key] = result = _chain_pattern(chains[0]), len(chains[0])
        return result
    best = _prefix_candidate(chains, memo)
    members = set(chains)
    for t in range(1, max(len(c) for c in chains)):
        groups: dict[frozenset[tuple[Item, int]], list[Chain]] = {}
        rest: list[Chain] = []
        for chain in chains:
            if len(chain) > t:
                groups.setdefault(_multiset(chain[:t]), []).append(chain)
            else:
                rest.append(chain)
        parts: list[tuple[Pattern, int]] = []
        for group in groups.values():
            prefixes = _unique_list(c[:t] for c in group)
            suffixes = _unique_list(c[t:] for c in group)
            if len(group) > 1 and all(p + q in members for p in prefixes for q in suffixes):
                (head, n1), (tail, n2) = _factor(prefixes, memo), _factor(suffixes, memo)
                parts.append((Seq(head, tail), n1 + n2))
            else:
                rest.extend(group)
        if len(rest) == len(chains):
            continue
        if rest:
            parts.append(_factor(rest, memo))
        cost = sum(n for _, n in parts)
        if cost < best[1]:
            best = _or_all([p for p, _ in parts]), cost
    memo[key] = best
    return best


def _prefix_candidate(
    chains: list[Chain], memo: dict[frozenset[Chain], tuple[Pattern, int]]
) -> tuple[Pattern, int]:
    groups: dict[Item, list[Chain]] = {}
    for chain in chains:
        groups.setdefault(chain[0], []).append(chain[1:])
    alternatives: list[Pattern] = []
    cost = 0
    for head, rests in groups.items():
        if any(not r for r in rests):
            alternatives.append(head.pattern())
            cost += 1
        longer = [r for r in rests if r]
        if longer:
            tail, n = _factor(longer, memo)
            alternatives.append(Seq(head.pattern(), tail))
            cost += 1 + n
    return _or_all(alternatives), cost


def _chain_pattern(chain: Chain) -> Pattern:
    node = chain[0].pattern()
    for item in chain[1:]:
        node = Seq(node, item.pattern())
    return node


def _multiset(items: Chain) -> frozenset[tuple[Item, int]]:
    counts: dict[Item, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return frozenset(counts.items())


def _unique_list(chains: Iterator[Chain]) -> list[Chain]:
    return list(dict.fromkeys(chains))


def _or_all(alternatives: list[Pattern]) -> Pattern:
    result = alternatives[0]
    for alt in alternatives[1:]:
        result = Or(result, alt)
    return result
