"""Static checks run on every pattern before evaluation (docs/semantics.md, "Static rules").

Each check raises :class:`~pycel.errors.PatternError` with a message that says what is
wrong and how to fix it; unsafe-but-meaningful patterns get a :class:`PatternWarning`.

Example::

    check(split_query(seq(A, B).where(C.x > 1)))
    # PatternError: where() reads variable 'C', which (A ; B) does not bind ...
"""

from __future__ import annotations

import warnings

from pycel.dsl import Absent, And, As, Atom, Filter, NotAtom, Pattern, Plus, Seq
from pycel.errors import PatternError

from .absence import check_absences, seq_chain, window_absences
from .clauses import QuerySpec
from .comparisons import is_order_comparison
from .events import Event, event_name
from .expr import Compare, Expr, attributes_in, conjuncts, reads_prev


class PatternWarning(UserWarning):
    """A pattern is allowed but probably not what was meant."""


ANY_TYPE = None  # what a negated atom may bind: any event type


def event_types(node: Pattern) -> set[type[Event]]:
    """The event types the atoms (and absences) of ``node`` mention."""
    if isinstance(node, (Atom, NotAtom, Absent)):
        return {node.event}
    return set().union(*(event_types(c) for c in node.children()))


def bound_variables(node: Pattern) -> dict[str, set[type[Event] | None]]:
    """Each variable ``node`` binds, with the event types it may be bound to
    (``None`` in the set: any type, from a negated atom)."""
    if isinstance(node, Atom):
        return {node.var: {node.event}}
    if isinstance(node, NotAtom):
        return {node.var: {ANY_TYPE}}
    out: dict[str, set[type[Event] | None]] = {}
    for child in node.children():
        for var, types in bound_variables(child).items():
            out.setdefault(var, set()).update(types)
    if isinstance(node, As):
        out[node.var] = set().union(*out.values()) if out else set()
    return out


def _declares(types: set[type[Event] | None], attr: str) -> bool:
    return ANY_TYPE in types or any(attr in t.__fields__ for t in types if t is not None)


def is_equality_join(pred: Expr[bool]) -> bool:
    """Whether ``pred`` is ``x.a == y.b`` between two different occurrences (of the same
    match: a trend condition, which reads a previous iteration, is not a join)."""
    if not (isinstance(pred, Compare) and pred.op == "==") or reads_prev(pred):
        return False
    left, right = pred.left.variables(), pred.right.variables()
    return len(left) == 1 and len(right) == 1 and left != right


def _check_filter(node: Filter, outer: dict[str, set[type[Event] | None]] | None = None) -> None:
    """Check the variables and attributes ``node``'s predicate reads (``outer``: variables
    bound around it that it may also read: an absence's neighbours)."""
    bound = {**(outer or {}), **bound_variables(node.inner)}
    for attr in attributes_in(node.predicate):
        if attr.var not in bound:
            raise PatternError(
                f"where() reads variable {attr.var!r}, which {node.inner!r} does not bind; "
                f"it binds {sorted(bound)}"
            )
        if not _declares(bound[attr.var], attr.name):
            names = sorted(event_name(t) for t in bound[attr.var] if t is not None)
            raise PatternError(f"unknown attribute {attr.name!r} of {attr.var!r} (event types {names})")
    if node.post_filter:
        return
    for part in conjuncts(node.predicate):
        if len(part.variables()) <= 1 or is_equality_join(part) or reads_prev(part):
            continue  # a trend condition (prev) is checked by _check_trend
        if is_order_comparison(part):
            continue  # the planner puts it on the automaton's edges, or says why not
        raise PatternError(
            f"{part!r} relates several occurrences but is neither an equality nor an order "
            "comparison between two of them (each side reading one occurrence); pycel "
            "evaluates those with its delay guarantee. Split it into such conditions, or "
            "pass where(..., post_filter=True) "
            "to check it on complete matches (exact, but without the delay guarantee)"
        )


def named_variables(node: Pattern) -> set[str]:
    """Variables the user named (aliases, ``as_``), not the implicit ones: an event type's
    name, and ``not_T``, the name ``not_(T)`` and CEQL's ``NOT(T)`` give a negated atom."""
    if isinstance(node, Atom):
        return set() if node.var == event_name(node.event) else {node.var}
    if isinstance(node, NotAtom):
        return set() if node.var == f"not_{event_name(node.event)}" else {node.var}
    out = set().union(*(named_variables(c) for c in node.children()))
    return out | {node.var} if isinstance(node, As) else out


#: Longest pattern text quoted in a warning (a 300-atom pattern must not flood the output).
_QUOTE_MAX = 80


def _repeated_aliases(node: Pattern, found: list[tuple[set[str], Pattern]]) -> None:
    """Collect the sequences and ANDs that bind a user-named variable on both sides."""
    # seq(Buy, Buy) is normal; seq(Buy.as_("x"), Sell.as_("x")) is probably a slip.
    if isinstance(node, (Seq, And)):
        shared = named_variables(node.left) & named_variables(node.right)
        if shared:
            found.append((shared, node))
    for child in node.children():
        _repeated_aliases(child, found)


def _warn_repeated_aliases(body: Pattern) -> None:
    """One short PatternWarning for every repeated alias of the pattern together."""
    found: list[tuple[set[str], Pattern]] = []
    _repeated_aliases(body, found)
    if not found:
        return
    shared = sorted(set().union(*(names for names, _ in found)))
    text = repr(found[0][1])
    if len(text) > _QUOTE_MAX:
        text = text[: _QUOTE_MAX - 1] + "…"
    more = f" (and {len(found) - 1} more places)" if len(found) > 1 else ""
    warnings.warn(
        f"variables {shared} are bound on both sides of {text}{more}; each collects the "
        "positions of both (is a repeated alias intended?)",
        PatternWarning,
        stacklevel=4,  # the caller of compile() or evaluate()
    )


def _typed_atoms(node: Pattern) -> set[type[Event]]:
    """The event types of the atoms and absences of ``node`` (not of negated atoms, which
    match events of every other type)."""
    if isinstance(node, (Atom, Absent)):
        return {node.event}
    return set().union(*(_typed_atoms(c) for c in node.children()))


def _may_have(event: type[Event], attr: str) -> bool:
    """Whether events an atom of type ``event`` matches may carry ``attr``: the type or a
    subclass declares it."""
    return attr in event.__fields__ or any(_may_have(sub, attr) for sub in event.__subclasses__())


def _warn_keyless_atoms(spec: QuerySpec) -> None:
    """A PatternWarning when a partition key is an attribute some atom's event type lacks:
    its events are in no partition, so that atom never matches (an absence of it never
    interrupts) — legal, but almost surely a slip."""
    types = _typed_atoms(spec.body)
    absent = _absent_types(spec.body)
    for key in spec.partition:
        lacking = sorted(event_name(t) for t in types if not _may_have(t, key))
        if lacking:
            only_absent = all(t in absent for t in types if not _may_have(t, key))
            effect = (
                "absences of those types never block a match: an absence of any key is not "
                "expressible under partition_by"
                if only_absent
                else "the pattern's atoms of those types never match (and absences of them never block)"
            )
            warnings.warn(
                f"partition_by({key!r}): event types {lacking} have no attribute {key!r}, so their "
                f"events are in no partition and {effect}",
                PatternWarning,
                stacklevel=4,  # the caller of compile() or evaluate()
            )


def _absent_types(node: Pattern) -> set[type[Event]]:
    """The event types of the absences below ``node``."""
    if isinstance(node, Absent):
        return {node.event}
    return set().union(*(_absent_types(c) for c in node.children()))


def _walk(node: Pattern, everything: dict[str, set[type[Event] | None]], plus: Plus | None = None) -> None:
    """Check the filters below ``node`` (``plus``: the innermost ``plus`` around it)."""
    if isinstance(node, Filter):
        _check_filter(node)
        _check_trend(node, plus)
    if isinstance(node, NotAtom) and node.predicate is not None:
        _refuse_prev(node.predicate, node)
        _check_filter(Filter(Atom(node.event, node.var), node.predicate))
    if isinstance(node, Plus):
        plus = node
    if isinstance(node, Seq):
        # A sequence's absences may correlate with the variables its parts bind.
        parts = [part for part, _ in seq_chain(node)]
        scope: dict[str, set[type[Event] | None]] = {}
        for part in parts:
            for var, types in bound_variables(part).items():
                scope.setdefault(var, set()).update(types)
        for part in parts:
            if isinstance(part, Absent):
                _check_absence(part, scope, everything)
            else:
                _walk(part, everything, plus)
        return
    for child in node.children():
        _walk(child, everything, plus)


def _check_absence(
    node: Absent, scope: dict[str, set[type[Event] | None]], everything: dict[str, set[type[Event] | None]]
) -> None:
    if node.predicate is None:
        return
    _refuse_prev(node.predicate, node)
    if node.var in everything:
        raise PatternError(
            f"in {node!r}, {node.var!r} is also a variable of the pattern, so its filter would "
            "be ambiguous: name the absent event with an alias (pycel.alias(...))"
        )
    _check_filter(Filter(Atom(node.event, node.var), node.predicate), scope)


def _refuse_prev(predicate: Expr[bool], node: Pattern) -> None:
    """A negated atom's or an absence's filter is about one event: no previous iteration."""
    if reads_prev(predicate):
        raise PatternError(
            f"{node!r} reads prev(): a trend condition compares iterations of pycel.plus(...) "
            "and belongs in a where() inside it, not in the filter of a negated or absent event"
        )


def _bound_outside(node: Pattern, target: Pattern) -> set[str]:
    """The variables that ``node`` binds other than inside its subpattern ``target``."""
    if node is target:
        return set()
    if isinstance(node, (Atom, NotAtom)):
        return {node.var}
    out = set().union(*(_bound_outside(c, target) for c in node.children()))
    return out | {node.var} if isinstance(node, As) else out


def _check_trend(node: Filter, plus: Plus | None) -> None:
    """The trend conditions of ``node`` (conjuncts reading ``prev(x)``) must stand inside
    ``plus`` (the innermost plus around ``node``), read the current iteration too, and read
    variables that the repeated pattern binds only inside ``node``: then "the previous
    iteration's x" is the previous iteration's match of ``node``'s pattern."""
    for part in (c for c in conjuncts(node.predicate) if reads_prev(c)):
        if node.post_filter:
            raise PatternError(
                f"{part!r} reads prev(), which a post-filter (post_filter=True) cannot: write "
                "the trend condition in a plain where() inside pycel.plus(...)"
            )
        if plus is None:
            hint = (
                " (write the condition inside the plus: plus(b.where(b.x > prev(b).x)), "
                "not plus(b).where(...))"
                if isinstance(node.inner, Plus)
                else ", e.g. plus(b.where(b.x > prev(b).x))"
            )
            raise PatternError(
                f"{part!r} compares with the previous iteration (prev), so it must be a "
                f"condition on the repeated pattern inside pycel.plus(...){hint}; "
                f"{node.inner!r} is not inside a plus"
            )
        if all(a.prev for a in attributes_in(part)):
            raise PatternError(
                f"{part!r} reads only the previous iteration; a trend condition compares it "
                "with the current one (e.g. b.x > prev(b).x)"
            )
        shared = sorted({str(a.var) for a in attributes_in(part)} & _bound_outside(plus.inner, node))
        if shared:
            raise PatternError(
                f"{part!r} compares iterations of {plus!r}, but {shared} is also bound elsewhere "
                "in the repeated pattern, so its previous occurrence would be ambiguous; give "
                "the occurrence the condition is about an alias of its own"
            )


def trend_conditions(node: Plus) -> list[Expr[bool]]:
    """The trend conditions ``node`` checks between consecutive iterations: the conjuncts
    reading ``prev(x)`` of the filters inside it, but not inside a nested plus (those
    compare that plus's iterations).

    Example: ``trend_conditions(plus(b.where((b.x > prev(b).x) & (b.y > 0))))`` is
    ``[b.x > prev(b).x]``.
    """
    found: list[Expr[bool]] = []
    todo: list[Pattern] = [node.inner]
    while todo:
        part = todo.pop()
        if isinstance(part, Plus):
            continue
        if isinstance(part, Filter):
            found.extend(c for c in conjuncts(part.predicate) if reads_prev(c))
        todo.extend(part.children())
    return found


def _types_in_order(node: Pattern) -> list[type[Event]]:
    """The event types of the atoms of ``node``, in pattern order (with repeats)."""
    if isinstance(node, (Atom, NotAtom, Absent)):
        return [node.event]
    return [t for child in node.children() for t in _types_in_order(child)]


def check_type_names(body: Pattern) -> None:
    """Reject two different event classes with the same name in one pattern: the data
    names event types, so pycel could not tell their events apart."""
    by_name: dict[str, list[type[Event]]] = {}
    for cls in _types_in_order(body):
        same = by_name.setdefault(event_name(cls), [])
        if cls not in same:
            same.append(cls)
    for name, classes in sorted(by_name.items()):
        if len(classes) > 1:
            shown = " and ".join(
                f"{c.__module__}.{c.__qualname__} (attributes {sorted(c.__fields__)})" for c in classes
            )
            raise PatternError(
                f"two different event classes are named {name!r} in this pattern: {shown}; events "
                "name their type, so pycel cannot tell them apart. Use one class, or give one a "
                "different name (rename it or set __event_name__)"
            )


def _equality_joins(node: Pattern) -> list[Expr[bool]]:
    """The equality joins ``x.a == y.b`` of the pattern's filters (post-filters excluded)."""
    found = (
        [c for c in conjuncts(node.predicate) if is_equality_join(c)]
        if (isinstance(node, Filter) and not node.post_filter)
        else []
    )
    return found + [j for child in node.children() for j in _equality_joins(child)]


def _join_classes(joins: list[Expr[bool]]) -> list[set[tuple[str, str]]]:
    """Classes of (variable, attribute) pairs made equal by ``joins`` (union-find)."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(k: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    for join in joins:
        assert isinstance(join, Compare)
        sides = [(a.var, a.name) for a in attributes_in(join) if a.var is not None]
        for side in sides[1:]:
            parent[root(side)] = root(sides[0])
    classes: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for k in list(parent):
        classes.setdefault(root(k), set()).add(k)
    return list(classes.values())


def check_hierarchical(body: Pattern) -> None:
    """Reject correlations that are not hierarchical (PCEA paper Thm 4.1/4.2).

    Each class of attributes made equal is a join variable; the occurrences it relates
    must, for any two classes, be nested or disjoint — otherwise no unambiguous PCEA
    evaluates the query with the delay guarantee.
    """
    classes = _join_classes(_equality_joins(body))
    scopes = [(c, {var for var, _ in c}) for c in classes]
    for k, (c1, s1) in enumerate(scopes):
        for c2, s2 in scopes[k + 1 :]:
            if s1 & s2 and not (s1 <= s2 or s2 <= s1):
                show = [" = ".join(sorted(f"{v}.{a}" for v, a in c)) for c in (c1, c2)]
                raise PatternError(
                    f"the correlation is not hierarchical: {show[0]} relates {sorted(s1)} and "
                    f"{show[1]} relates {sorted(s2)}; they share {sorted(s1 & s2)} but neither "
                    "group contains the other, so no unambiguous automaton evaluates it with "
                    "pycel's delay guarantee (PCEA paper, Theorem 4.1). Correlate all of "
                    f"{sorted(s1 | s2)} on one attribute, or pass where(..., post_filter=True) "
                    "to check the condition on complete matches (exact, without the guarantee)"
                )


def check(spec: QuerySpec) -> None:
    """Run every static check on a split query; raise PatternError on the first problem."""
    check_type_names(spec.body)
    check_absences(spec.body)
    _, starts, ends = window_absences(spec.body)
    if ends and spec.window is None:
        raise PatternError(
            f"{ends[-1]!r} ends the pattern, so it needs a window as its horizon: the match "
            "is reported once its window has passed with no such event, e.g. "
            "seq(order, absent(payment)).within(minutes=30, on=Order.time), in CEQL "
            "'Order AS o ; ABSENT(Payment) WITHIN 30 MINUTES [time]'"
        )
    if starts and spec.window is None:
        raise PatternError(
            f"{starts[0]!r} starts the pattern, so it needs a window as its horizon: no such "
            "event before the match inside its window, e.g. "
            "seq(absent(login), purchase).within(minutes=5, on=Purchase.time), in CEQL "
            "'ABSENT(Login) ; Purchase AS p WITHIN 5 MINUTES [time]'"
        )
    _walk(spec.body, bound_variables(spec.body))
    check_hierarchical(spec.body)
    bound = bound_variables(spec.body)
    types = event_types(spec.body)
    if spec.select is not None:
        for var in spec.select:
            if var not in bound:
                raise PatternError(
                    f"select() names {var!r}, which the pattern does not bind; it binds {sorted(bound)}"
                )
    for key in spec.partition:
        if not any(key in t.__fields__ for t in types):
            raise PatternError(f"partition_by({key!r}): no event type of the pattern has that attribute")
    window = spec.window
    if window is not None and window.on is not None:
        lacking = sorted(event_name(t) for t in types if window.on not in t.__fields__)
        if lacking:
            raise PatternError(
                f"the window is on attribute {window.on!r}, which event types {lacking} do not have"
            )
        not_times = sorted({t.__fields__[window.on] for t in types} - {"int", "float", "time"})
        if not_times:  # a window measured on strings' codes would be silently wrong
            raise PatternError(
                f"the window is on attribute {window.on!r}, a {not_times[0]}: a time window "
                "measures a number or timestamp attribute"
            )
    _warn_keyless_atoms(spec)  # last: a pattern that is refused gets no warning
    _warn_repeated_aliases(spec.body)
