"""The planner: a checked query → an immutable :class:`Plan` that says how it runs.

Which automaton *family* runs a query follows from its features, decided here in one
place (:func:`choose_family`):

=============  ===============================================  =============================
family         queries                                          runner (pycel/runtime/runners)
=============  ===============================================  =============================
``sequential`` ALL, ANY, STRICT: the determinized Glushkov       ``sequential.py``
               automaton, joins as run keys
``ranked``     LAST, NEXT: one ranked best set per (state, key)  ``ranked.py``
``maximal``    MAX: the CEL paper's pair automaton               ``maximal.py``
``windowed``   LAST, NEXT, MAX with a window: the sequential     ``windowed.py``
               automaton's outputs that fit the window, then
               the strategy's choice among them (also without
               a window, with comparisons or post-filters)
``parallel``   an AND of single events whose equality joins      ``parallel.py``
               nest (no single run key): the PCEA paper's
               parallelized automaton
=============  ===============================================  =============================

Everything else the runtime needs is in the plan too: the labeled automaton (``nfa``), the
run keys (partition and ``join_keys``), the post-filters, the window and the clauses as
the loops read them (projection mask, limit, consumption code). A query no family runs
exactly raises one :class:`~pycel.errors.UnsupportedError` saying why and what to write.

Example::

    plan = plan_query(split_query(seq(Sell, Buy).strategy("max")))
    plan.family         # 'maximal'
"""

from __future__ import annotations

import functools
import operator
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar, cast

import attrs

from pycel.data.ingest import Schema
from pycel.dsl import Absent, And, As, Filter, Or, Pattern, Plus, Seq
from pycel.errors import UnsupportedError
from pycel.language.absence import has_absence, window_absences, without_absences
from pycel.language.checks import check, event_types, is_equality_join
from pycel.language.clauses import QuerySpec
from pycel.language.events import Event, event_name
from pycel.language.expr import Attr, Compare, Expr, conjuncts, expr_key
from pycel.limits import MAX_VARIABLES

from .automaton import AtomState, Nfa, build_nfa
from .conditions import Unindexable, edge_conditions, has_order_comparisons, run_orders, shared_types
from .conjunction import expand_conjunctions, interleavings_fit
from .hcq import HcqPlan, plan_hcq
from .joins import JoinKey, joins_form_run_keys, plan_joins
from .postfilter import PostFilters, check_clauses, split_post_filters

Family = Literal["sequential", "ranked", "maximal", "parallel", "windowed"]
#: The selection strategies the engine runs.
STRATEGIES = ("all", "any", "strict", "last", "next", "max")
#: CONSUME BY as the loops read it.
CONSUME_CODES = {"none": 0, "any": 1, "partition": 2}

T = TypeVar("T")


class SharedTables:
    """The tables every stream of one plan shares in this process (the determinized
    automaton, the MAX pair automaton, the parallelized transitions), each built by the
    first runner that asks for it. Not part of the plan's data: a pickled plan (Spark)
    or one decoded from a snapshot gets a holder of its own, empty until used.

    Example::

        dfa = plan.shared_tables().get("dfa", lambda: Dfa(plan.nfa))
    """

    def __init__(self) -> None:
        #: Held while a table is built here (a table that grows has a lock of its own).
        self.lock = threading.Lock()
        self._built: dict[str, object] = {}

    def get(self, name: str, build: Callable[[], T]) -> T:
        """The table ``name``, built by ``build`` on the first call (one build per plan,
        also when streams in several threads ask at once)."""
        with self.lock:
            if name not in self._built:
                self._built[name] = build()
            return cast(T, self._built[name])


@attrs.frozen(eq=False)
class Plan:
    """How a query runs: plain data, picklable, never changed after planning.

    ``window_unit`` is None (no window), ``"events"``, ``"seconds"`` or ``"units"``;
    ``limit`` is -1 without LIMIT; ``projection_mask`` has bit k set when variable k is
    reported.
    """

    text: str
    family: Family
    strategy: str
    nfa: Nfa
    schema: Schema
    partition: tuple[str, ...] = ()
    join_keys: tuple[JoinKey, ...] = ()
    hcq: HcqPlan | None = None
    post_filters: PostFilters | None = None
    window_unit: str | None = None
    window_size: float = 0.0
    time_attribute: str | None = None
    projection_mask: int = 0
    projected: bool = False
    limit: int = -1
    consume: int = 0

    @property
    def variables(self) -> tuple[str, ...]:
        """The pattern's variables, in the order the matches number them."""
        return self.nfa.variables

    @property
    def outputs_filtered(self) -> bool:
        """Whether the runner's outputs are filtered before they are final (post-filters, an
        absence that starts or ends the pattern): the runner then returns every output
        that fits the window, whole, and the stream chooses, projects and limits after."""
        return self.post_filters is not None or bool(self.nfa.end_atoms or self.nfa.start_atoms)

    def shared_tables(self) -> SharedTables:
        """The tables all streams of this plan share in this process, created on first use
        (kept beside the plan, not in it: the plan stays plain data).

        Example: ``query.stream().runner.dfa is query.stream().runner.dfa``
        """
        with _SHARED_LOCK:
            tables = _SHARED.get(self)
            if tables is None:
                tables = _SHARED[self] = SharedTables()
            return tables


#: Each live plan's shared tables (dropped with the plan; plans compare by identity).
_SHARED: weakref.WeakKeyDictionary[Plan, SharedTables] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def plan_query(spec: QuerySpec, types: Iterable[type[Event]] = (), text: str = "") -> Plan:
    """Check ``spec`` and plan it (``types``: event types the data may carry besides the
    pattern's). Raises PatternError/UnsupportedError for a query that cannot run.

    A comparison between occurrences that the automaton cannot evaluate on its edges (its
    occurrences do not follow each other directly, strings, a second register) is checked
    during enumeration instead, as a post-filter (*residual*; ``pycel explain`` lists it),
    unless that is refused too: then the comparison's own reason is raised.

    Example: ``plan_query(split_query(seq(A, B).within(events=5))).window_unit == "events"``
    """
    try:
        return _plan_query(spec, types, text)
    except Unindexable as err:
        residual = _as_post_filter(spec.body, err.part)
        if residual is None:
            raise
        try:
            return plan_query(attrs.evolve(spec, body=residual), types, text)
        except Unindexable:
            raise
        except UnsupportedError as again:
            raise UnsupportedError(f"{err} (as a post-filter it is refused too: {again})") from None


def _absence_keys(node: Pattern) -> list[Expr[Any]]:
    """The other sides of the equality joins of ``node``'s absences (``a.k`` in
    ``absent(c.where(c.k == a.k))``): where one is null the match has no key, and so none
    of it (docs/semantics.md, Absence)."""
    found: list[Expr[Any]] = []
    if isinstance(node, Absent) and node.predicate is not None:
        for part in conjuncts(node.predicate):
            if is_equality_join(part):
                assert isinstance(part, Compare)
                found += [side for side in (part.left, part.right) if side.variables() != {node.var}]
    for child in node.children():
        found += _absence_keys(child)
    return found


def _keyed(body: Pattern, keys: list[Expr[Any]]) -> Pattern:
    """``body`` keeping only the matches where every one of ``keys`` is not null: ``k == k
    or k != k`` is false for a null only (a comparison with null is false)."""
    for key in keys:
        body = Filter(body, (key == key) | (key != key))
    return body


def _as_post_filter(node: Pattern, part: Expr[bool]) -> Pattern | None:
    """``node`` with the conjunct ``part`` of its (non-post) filters moved into a
    post-filter at the same place; None if no filter holds it."""
    if isinstance(node, Filter) and not node.post_filter:
        parts = conjuncts(node.predicate)
        if any(expr_key(p) == expr_key(part) for p in parts):
            rest = [p for p in parts if expr_key(p) != expr_key(part)]
            moved = _as_post_filter(node.inner, part)  # (the same conjunct may stand twice)
            inner = node.inner if moved is None else moved
            kept = Filter(inner, functools.reduce(operator.and_, rest)) if rest else inner
            return Filter(kept, part, post_filter=True)
    changed = False
    children = []
    for child in node.children():
        new = _as_post_filter(child, part)
        changed |= new is not None
        children.append(new if new is not None else child)
    if not changed:
        return None
    if isinstance(node, Seq | Or | And):
        return attrs.evolve(node, left=children[0], right=children[1])
    assert isinstance(node, Plus | As | Filter)  # the nodes with one child
    return attrs.evolve(node, inner=children[0])


def _plan_query(spec: QuerySpec, types: Iterable[type[Event]], text: str) -> Plan:
    """:func:`plan_query` without moving unindexable comparisons to post-filters."""
    check(spec)
    if spec.strategy not in STRATEGIES:
        raise UnsupportedError(f"selection strategy {spec.strategy!r} is not supported by the engine yet")
    body, post = split_post_filters(spec.body)
    family = choose_family(spec, body, bool(post))
    if post:
        pruned = family in ("sequential", "windowed")
        check_clauses(spec.strategy, spec.consume, windowed=family == "windowed", pruned=pruned)
    if has_absence(body):
        _check_absence(body, family)
    body, start_absences, end_absences = window_absences(body)
    if (start_absences or end_absences) and spec.consume != "none":
        raise UnsupportedError(
            "CONSUME BY together with an absence that starts or ends the pattern is not "
            "supported: the absence decides a match after the automaton found it (at the end "
            "only once its window has passed), after later matches may have used its events"
        )
    if has_order_comparisons(body) and family not in ("sequential", "windowed"):
        raise UnsupportedError(
            "comparisons between occurrences together with an AND whose joins nest (the "
            "parallelized automaton) are not supported by the engine yet; write them with "
            "where(..., post_filter=True)"
        )
    schema = Schema.for_types([*event_types(spec.body), *types])
    post_filters = PostFilters.of(post) if post else None
    if family == "parallel":
        hcq = plan_hcq(body, spec.partition)
        assert hcq is not None  # choose_family checked it
        return _plan(spec, family, _hcq_nfa(hcq), schema, (), hcq, post_filters, text)
    if spec.strategy == "strict":  # an interval has no gap: every absence inside holds
        body = _keyed(without_absences(body), _absence_keys(body))
    # Their events get atom bits; the stream checks them (pycel.runtime.horizon).
    for absence in end_absences:
        body = Seq(body, absence)
    for absence in reversed(start_absences):
        body = Seq(absence, body)
    # AND runs as an OR of interleavings; the checks saw the original.
    planned, join_keys = plan_joins(expand_conjunctions(body), spec.partition)
    # STRICT keeps the matches whose positions form an interval of the (partition's)
    # stream: exactly the matches of the pattern with every ; and + made contiguous.
    nfa = build_nfa(planned, strict=spec.strategy == "strict")
    if len(nfa.variables) > MAX_VARIABLES:
        raise UnsupportedError(f"the engine supports at most {MAX_VARIABLES} variables per pattern")
    if join_keys:
        _check_join_clauses(spec, nfa)
    conditions = edge_conditions(planned, nfa, shared_types(schema.supertypes))
    if conditions:
        if nfa.contiguous:
            raise UnsupportedError(
                "comparisons between occurrences together with contiguity (:, :+, STRICT) are "
                "not supported by the engine yet; write them with where(..., post_filter=True)"
            )
        nfa = attrs.evolve(nfa, conditions=conditions)
    if post_filters is not None and family in ("sequential", "windowed") and not nfa.contiguous:
        # Residual comparisons the enumerator decides by the order of a's runs (a windowed
        # strategy with post-filters enumerates, then chooses among the outputs that pass).
        nfa = attrs.evolve(nfa, orderings=run_orders(post_filters.conjuncts, nfa))
    return _plan(spec, family, nfa, schema, join_keys, None, post_filters, text)


def choose_family(spec: QuerySpec, body: Pattern, post_filters: bool = False) -> Family:
    """The automaton family that runs ``spec`` (``body``: its pattern without post-filters,
    ``post_filters``: whether it had some)."""
    if spec.strategy in ("last", "next", "max") and spec.window is not None:
        return "windowed"  # the strategy chooses among the outputs that fit the window
    if spec.strategy in ("last", "next", "max") and (post_filters or has_order_comparisons(body)):
        # The ranked runner keeps one best run per state and the pair automaton one
        # dominator, which a comparison or a post-filter may reject: the loop chooses among
        # all the outputs of an end that pass (as with a window reaching the first event).
        return "windowed"
    if spec.strategy == "max":
        return "maximal"
    if spec.strategy in ("last", "next"):
        return "ranked"
    # An AND of single events (possibly then one event) that the sequential automaton
    # cannot run: its joins nest (no single run key), or its interleavings are too many.
    if _parallel_clauses(spec) and plan_hcq(body, spec.partition) is not None:
        if not joins_form_run_keys(body, spec.partition) or not interleavings_fit(body):
            return "parallel"
    return "sequential"  # which refuses, with the way out, what it cannot run


def _check_absence(body: Pattern, family: Family) -> None:
    """Refuse the absences the automata cannot run: next to an AND that runs on the
    parallelized automaton, or correlated other than by equalities that form run keys (an
    absent event blocks the runs of its own key; :func:`~pycel.plan.joins.plan_joins`
    checks those). An absence inside an AND's operand is refused where the AND is
    expanded (:mod:`~pycel.plan.conjunction`)."""
    if family == "parallel":
        raise UnsupportedError(
            "absence together with an AND whose joins nest (the parallelized automaton) is not "
            "supported by the engine yet"
        )
    todo = [body]
    while todo:
        node = todo.pop()
        todo.extend(node.children())
        if not isinstance(node, Absent) or node.predicate is None:
            continue
        for part in conjuncts(node.predicate):
            if part.variables() <= {node.var}:
                continue
            if not (
                isinstance(part, Compare)
                and part.op == "=="
                and isinstance(part.left, Attr)
                and isinstance(part.right, Attr)
            ):
                raise UnsupportedError(
                    f"the engine correlates an absence by equalities of attributes (run keys) or "
                    f"PARTITION BY; {part!r} in {node!r} is not supported yet"
                )


def _parallel_clauses(spec: QuerySpec) -> bool:
    """The clauses the parallelized automaton supports: windows, PARTITION BY (as a join
    class over every atom), SELECT and LIMIT."""
    return spec.strategy in ("all", "any") and spec.consume == "none"


def _hcq_nfa(hcq: HcqPlan) -> Nfa:
    """The atoms of a parallelized automaton as the shared runtime reads them (predicate
    bits per atom, variables); its transitions are in the plan's ``hcq``."""
    variables = tuple(sorted(a.var for a in hcq.atoms))
    atoms = tuple(
        AtomState(k, event_name(a.event), False, None, a.filters, frozenset([a.var]))
        for k, a in enumerate(hcq.atoms)
    )
    everything = frozenset(range(len(atoms)))
    return Nfa(atoms, everything, everything, {k: frozenset() for k in everything}, variables)


def _check_join_clauses(spec: QuerySpec, nfa: Nfa) -> None:
    """Reject the clauses whose meaning depends on the partition when joins are run keys
    (a run key is finer than the partition: adjacency and consumption are per partition)."""
    if nfa.contiguous or spec.strategy == "strict":
        raise UnsupportedError(
            "contiguity (:, :+, STRICT) together with an equality join is not supported by the "
            "engine; use PARTITION BY for the correlation, or where(..., post_filter=True)"
        )
    if spec.consume == "partition" and spec.partition:
        raise UnsupportedError(
            "CONSUME BY PARTITION together with an equality join is not supported by the engine"
        )


def _plan(
    spec: QuerySpec,
    family: Family,
    nfa: Nfa,
    schema: Schema,
    join_keys: tuple[JoinKey, ...],
    hcq: HcqPlan | None,
    post_filters: PostFilters | None,
    text: str,
) -> Plan:
    window = spec.window
    kept = spec.select if spec.select is not None else nfa.variables
    consume = CONSUME_CODES[spec.consume]
    if join_keys and spec.consume == "partition" and not spec.partition:
        consume = CONSUME_CODES["any"]  # one partition: the stream (the keys are joins)
    return Plan(
        text=text,
        family=family,
        strategy=spec.strategy,
        nfa=nfa,
        schema=schema,
        partition=spec.partition,
        join_keys=join_keys,
        hcq=hcq,
        post_filters=post_filters,
        window_unit=window.unit if window is not None else None,
        window_size=window.size if window is not None else 0.0,
        time_attribute=window.on if window is not None else None,
        projection_mask=sum(1 << k for k, v in enumerate(nfa.variables) if v in kept),
        projected=spec.select is not None,
        limit=spec.limit if spec.limit is not None else -1,
        consume=consume,
    )
