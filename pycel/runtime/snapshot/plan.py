"""The plan of a snapshot as plain JSON data (see docs/snapshots.md).

A snapshot holds the query as the engine runs it — the automaton's atoms with their
predicates, the schema, the join keys, the post-filters and the clauses — not as code:
every node is written by an explicit encoder and read back by a decoder that accepts only
the expression node classes of :mod:`pycel.language.expr` and checks every index and name, so
decoding builds plain pycel objects and runs nothing. The only classes a restore looks up
are the event classes of a parallelized conjunction (:mod:`pycel.plan.hcq`), by event name in
the process's defined ``Event`` classes, with their fields compared.

Example::

    data = plan_to_json(query.plan)      # JSON-compatible lists and dicts
    again = plan_from_json(data)         # a Plan; DataError if malformed
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pycel.data.ingest import Schema, all_event_types
from pycel.errors import DataError, UnsupportedError
from pycel.language.comparisons import ORDER_OPS
from pycel.language.expr import DTYPES, Arith, Attr, BoolOp, Compare, Const, Expr, IsIn, Like, Not
from pycel.limits import MAX_ATOMS, MAX_VARIABLES
from pycel.plan.automaton import AtomState, Nfa
from pycel.plan.conditions import (
    CONDITION_KINDS,
    EdgeCondition,
    RunOrder,
    check_registers,
    register_kind,
    shared_types,
)
from pycel.plan.hcq import HcqAtom, HcqPlan, HcqTransition
from pycel.plan.joins import JoinKey
from pycel.plan.planner import STRATEGIES, Plan
from pycel.plan.postfilter import PostFilters

Json = Any
I64 = 1 << 63
_ARITH_OPS = ("+", "-", "*", "/", "%")
_CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
_UNITS = (None, "events", "seconds", "units")
#: The strategies each family runs (pycel.plan.planner.choose_family).
_FAMILIES = {
    "sequential": ("all", "any", "strict"),
    "ranked": ("last", "next"),
    "maximal": ("max",),
    "parallel": ("all", "any"),
    "windowed": ("last", "next", "max"),
}


def bad(what: str) -> DataError:
    """The error of a snapshot whose content does not have the expected form."""
    return DataError(f"not a valid pycel snapshot: {what}")


# -- checked access to decoded JSON ---------------------------------------------------------
def as_int(x: Json, what: str, lo: int | None = None, hi: int | None = I64) -> int:
    """``x`` as an int (not a bool) in ``[lo, hi)`` (by default below 2**63: it becomes an
    int64 in the runtime)."""
    if type(x) is not int or (lo is not None and x < lo) or (hi is not None and x >= hi):
        raise bad(f"{what} is {x!r}, expected an integer in [{lo}, {hi})")
    return x


def as_str(x: Json, what: str) -> str:
    """``x`` if it is a str, else DataError naming ``what``."""
    if type(x) is not str:
        raise bad(f"{what} is {type(x).__name__}, expected a string")
    return x


def as_bool(x: Json, what: str) -> bool:
    """``x`` if it is a bool, else DataError naming ``what``."""
    if type(x) is not bool:
        raise bad(f"{what} is {x!r}, expected true or false")
    return x


def as_number(x: Json, what: str) -> int | float:
    """``x`` as an int or a float, whichever it was written as (never NaN: no field the
    snapshot holds is one)."""
    if type(x) not in (int, float) or (type(x) is int and not -I64 <= x < I64) or x != x:
        raise bad(f"{what} is {x!r}, expected a number (an integer within int64)")
    return x  # type: ignore[no-any-return]


def _window_size(x: Json) -> int | float:
    size = as_number(x, "window size")
    if size < 0:
        raise bad(f"window size is {size!r}, expected a non-negative number")
    return size


def as_float(x: Json, what: str) -> float:
    """``x`` as a float (an int or float), else DataError naming ``what``."""
    return float(as_number(x, what))


def as_list(x: Json, what: str, n: int | None = None) -> list[Any]:
    """``x`` if it is a list (of ``n`` items, if given), else DataError naming ``what``."""
    if type(x) is not list or (n is not None and len(x) != n):
        raise bad(f"{what} is not a list" + (f" of {n} items" if n is not None else ""))
    return x


def as_dict(x: Json, what: str) -> dict[str, Any]:
    """``x`` if it is a dict, else DataError naming ``what``."""
    if type(x) is not dict:
        raise bad(f"{what} is not an object")
    return x


def strs(x: Json, what: str) -> tuple[str, ...]:
    """``x`` as a tuple of str, else DataError naming ``what``."""
    items = as_list(x, what)
    if not all(type(v) is str for v in items):
        raise bad(f"{what} holds a value that is not a string")
    return tuple(items)


def ints(x: Json, what: str, lo: int | None = None, hi: int | None = I64) -> tuple[int, ...]:
    """``x`` as a tuple of ints in ``[lo, hi)``, else DataError naming ``what``."""
    return tuple(as_int(v, what, lo, hi) for v in as_list(x, what))


def dtype_name(x: Json, what: str) -> str:
    """``x`` if it is an attribute type pycel knows (int, float, ...), else DataError."""
    if x not in DTYPES:
        raise bad(f"{what} has unknown type {x!r}")
    return str(x)


# -- expressions ----------------------------------------------------------------------------
def _value_to_json(v: Any) -> Json:
    if isinstance(v, datetime):
        return {"datetime": v.isoformat()}
    return v


def _value_from_json(x: Json, what: str) -> Any:
    if type(x) is dict:
        try:
            return datetime.fromisoformat(as_str(x.get("datetime"), what))
        except ValueError as e:
            raise bad(f"{what}: {e}") from None
    if type(x) not in (bool, int, float, str):
        raise bad(f"{what} is {x!r}, expected a constant")
    return x


def expr_to_json(e: Expr[Any]) -> Json:
    """One expression as nested lists ``[kind, ...]``."""
    if isinstance(e, Attr):
        return ["attr", e.var, e.name, e.dtype, e.owner]
    if isinstance(e, Const):
        return ["const", _value_to_json(e.value)]
    if isinstance(e, Arith):
        return ["arith", e.op, expr_to_json(e.left), expr_to_json(e.right), e.dtype]
    if isinstance(e, Compare):
        return ["cmp", e.op, expr_to_json(e.left), expr_to_json(e.right)]
    if isinstance(e, IsIn):
        return ["in", expr_to_json(e.expr), [_value_to_json(v) for v in e.values], e.negated]
    if isinstance(e, Like):
        return ["like", expr_to_json(e.expr), e.pattern, e.regex]
    if isinstance(e, BoolOp):
        return ["bool", e.op, [expr_to_json(a) for a in e.args]]
    if isinstance(e, Not):
        return ["not", expr_to_json(e.arg)]
    raise TypeError(f"snapshot: no encoding for expression node {type(e).__name__}")


def expr_from_json(x: Json) -> Expr[Any]:
    """The expression encoded by :func:`expr_to_json` (only pycel's node classes)."""
    x = as_list(x, "expression")
    kind = x[0] if x else None
    if kind == "attr":
        _, var, name, dtype, owner = as_list(x, "attribute", 5)
        return Attr(
            None if var is None else as_str(var, "variable"),
            as_str(name, "attribute"),
            dtype_name(dtype, "attribute"),
            as_str(owner, "attribute owner"),
        )
    if kind == "const":
        try:
            return Const(_value_from_json(as_list(x, "constant", 2)[1], "constant"))
        except Exception as e:  # an unsupported constant (PatternError)
            raise bad(str(e)) from None
    if kind == "arith":
        _, op, left, right, dtype = as_list(x, "arithmetic", 5)
        if op not in _ARITH_OPS:
            raise bad(f"unknown arithmetic operator {op!r}")
        return Arith(op, expr_from_json(left), expr_from_json(right), dtype_name(dtype, "arithmetic"))
    if kind == "cmp":
        _, op, left, right = as_list(x, "comparison", 4)
        if op not in _CMP_OPS:
            raise bad(f"unknown comparison operator {op!r}")
        return Compare(op, expr_from_json(left), expr_from_json(right))
    if kind == "in":
        _, inner, values, negated = as_list(x, "IN", 4)
        vals = tuple(_value_from_json(v, "IN value") for v in as_list(values, "IN values"))
        return IsIn(expr_from_json(inner), vals, as_bool(negated, "NOT IN"))
    if kind == "like":
        _, inner, pattern, regex = as_list(x, "LIKE", 4)
        like = Like(expr_from_json(inner), as_str(pattern, "LIKE pattern"), as_bool(regex, "MATCHES"))
        try:
            like.compiled()
        except re.error as e:
            raise bad(f"LIKE pattern: {e}") from None
        return like
    if kind == "bool":
        _, op, args = as_list(x, "AND/OR", 3)
        if op not in ("and", "or"):
            raise bad(f"unknown connective {op!r}")
        return BoolOp(op, tuple(expr_from_json(a) for a in as_list(args, "AND/OR operands")))
    if kind == "not":
        return Not(expr_from_json(as_list(x, "NOT", 2)[1]))
    raise bad(f"unknown expression node {kind!r}")


def _exprs(x: Json) -> tuple[Expr[bool], ...]:
    return tuple(expr_from_json(e) for e in as_list(x, "predicates"))


# -- automaton, schema, joins, conjunction plan ---------------------------------------------
def _sets(follow: dict[int, frozenset[int]]) -> Json:
    return [[k, sorted(v)] for k, v in sorted(follow.items())]


def nfa_to_json(nfa: Nfa) -> Json:
    """The automaton's atoms (filters as expressions), first and last atoms and follow sets as JSON."""
    atoms = [
        [
            a.index,
            a.event,
            a.negated,
            None if a.type_predicate is None else expr_to_json(a.type_predicate),
            [expr_to_json(f) for f in a.filters],
            sorted(a.labels),
        ]
        for a in nfa.atoms
    ]
    return {
        "atoms": atoms,
        "first": sorted(nfa.first),
        "last": sorted(nfa.last),
        "follow": _sets(nfa.follow),
        "gap_follow": _sets(nfa.gap_follow),
        "variables": list(nfa.variables),
        # Absence: guarded edges [a, b, mask] and each guard's pseudo-atom.
        "guards": [[a, b, mask] for (a, b), mask in sorted(nfa.guards.items())],
        "guard_atoms": list(nfa.guard_atoms),
        "end_atoms": list(nfa.end_atoms),  # the absences that end the pattern
        "start_atoms": list(nfa.start_atoms),  # and those that start it
        # Comparisons on edges: [source, target, register, op, threshold, kind, text].
        "conditions": [
            [c.source, c.target, expr_to_json(c.register), c.op, expr_to_json(c.threshold), c.kind, c.text]
            for c in nfa.conditions
        ],
        # Run orders for the residual comparisons: [atom, register, kind].
        "orderings": [[o.atom, expr_to_json(o.register), o.register_kind] for o in nfa.orderings],
    }


def nfa_from_json(x: Json, shared: frozenset[frozenset[str]] = frozenset()) -> Nfa:
    """The automaton :func:`nfa_to_json` wrote, with every index checked (``shared``: the
    pairs of event types one event has both of, pycel.plan.conditions.shared_types)."""
    x = as_dict(x, "automaton")
    variables = strs(x.get("variables"), "variables")
    atoms = []
    for k, item in enumerate(as_list(x.get("atoms"), "atoms")):
        index, event, negated, type_pred, filters, labels = as_list(item, "atom", 6)
        label_set = frozenset(strs(labels, "labels"))
        if as_int(index, "atom index") != k or not label_set <= set(variables):
            raise bad(f"atom {k} has index {index} or labels outside the variables")
        atoms.append(
            AtomState(
                k,
                as_str(event, "event type"),
                as_bool(negated, "negated"),
                None if type_pred is None else expr_from_json(type_pred),
                _exprs(filters),
                label_set,
            )
        )
    n = len(atoms)

    def follow(key: str) -> dict[int, frozenset[int]]:
        pairs = [as_list(p, key, 2) for p in as_list(x.get(key), key)]
        return {as_int(k, key, 0, n): frozenset(ints(v, key, 0, n)) for k, v in pairs}

    edges, gaps = follow("follow"), follow("gap_follow")
    if (
        n > MAX_ATOMS
        or len(variables) > MAX_VARIABLES
        or set(edges) != set(range(n))
        or any(not v <= edges[k] for k, v in gaps.items())
    ):
        raise bad("the automaton's size or edges")
    first, last = frozenset(ints(x.get("first"), "first", 0, n)), frozenset(ints(x.get("last"), "last", 0, n))
    guard_atoms = ints(x.get("guard_atoms", []), "guard atoms", 0, n)
    end_atoms = ints(x.get("end_atoms", []), "end atoms", 0, n)
    start_atoms = ints(x.get("start_atoms", []), "start atoms", 0, n)
    guards: dict[tuple[int, int], int] = {}
    for item in as_list(x.get("guards", []), "guards"):
        a, b, mask = (as_int(v, "guarded edge", 0) for v in as_list(item, "guarded edge", 3))
        if a >= n or b not in edges.get(a, ()) or not 0 < mask < 1 << len(guard_atoms):
            raise bad("a guarded edge")
        guards[(a, b)] = mask
    conditions = []
    for item in as_list(x.get("conditions", []), "conditions"):
        source, target, register, op, threshold, kind, text = as_list(item, "condition", 7)
        a, b = as_int(source, "condition edge", 0, n), as_int(target, "condition edge", 0, n)
        if b not in edges[a] or op not in (*ORDER_OPS, "==") or kind not in CONDITION_KINDS:
            raise bad("a condition on an edge")
        conditions.append(
            EdgeCondition(
                a, b, expr_from_json(register), op, expr_from_json(threshold), kind, as_str(text, "condition")
            )
        )
    orderings: list[RunOrder] = []
    for item in as_list(x.get("orderings", []), "orderings"):
        atom, register, kind = as_list(item, "run order", 3)
        order = RunOrder(as_int(atom, "run order atom", 0, n), expr_from_json(register), kind)
        g = order.register
        sources = {c.source for c in conditions} | {o.atom for o in orderings}
        if (
            not isinstance(g, Attr)
            or g.prev
            or g.var not in atoms[order.atom].labels
            or kind != register_kind(g.dtype)
            or order.atom in sources
        ):
            raise bad("a run order (the register of its atom's own occurrence, once per atom)")
        orderings.append(order)
    nfa = Nfa(
        tuple(atoms),
        first,
        last,
        edges,
        variables,
        gaps,
        guards,
        guard_atoms,
        end_atoms,
        start_atoms,
        tuple(conditions),
        tuple(orderings),
    )
    try:
        check_registers(list(nfa.conditions), nfa, shared)
    except UnsupportedError as err:
        raise bad(f"the conditions on edges ({err})") from None
    return nfa


def schema_to_json(s: Schema) -> Json:
    """The stream's event types, attributes and string dictionary as JSON."""
    types = [[n, f, sorted(sup)] for n, f, sup in zip(s.type_names, s.type_fields, s.supertypes, strict=True)]
    return {"types": types, "fields": s.fields, "strings": s.strings}


def schema_from_json(x: Json) -> Schema:
    """The schema :func:`schema_to_json` wrote, checked for consistency."""
    x = as_dict(x, "schema")

    def fields(f: Json) -> dict[str, str]:
        return {as_str(k, "attribute"): dtype_name(v, k) for k, v in as_dict(f, "fields").items()}

    names, type_fields, supertypes = [], [], []
    for item in as_list(x.get("types"), "event types"):
        name, own, sup = as_list(item, "event type", 3)
        names.append(as_str(name, "event type"))
        type_fields.append(fields(own))
        supertypes.append(frozenset(strs(sup, "supertypes")))
    strings = list(strs(x.get("strings"), "strings"))
    codes = dict(zip(strings, range(len(strings)), strict=True))
    if len(codes) != len(strings) or len(set(names)) != len(names):
        raise bad("the string dictionary or the event types repeat an entry")
    return Schema(names, type_fields, supertypes, fields(x.get("fields")), strings, codes)


def _hcq_event(name: str, fields: dict[str, str]) -> Any:
    """The defined Event class named ``name`` with exactly ``fields``."""
    found = [c for c in all_event_types().get(name, []) if c.__fields__ == fields]
    if not found:
        raise DataError(
            f"the snapshot's query reads event type {name!r} with fields {fields}; define that "
            "Event class in this process before restoring"
        )
    return found[0]


def hcq_to_json(p: HcqPlan) -> Json:
    """The plan of a hierarchical correlation as JSON."""
    from pycel.language.events import event_name

    return {
        "atoms": [
            [event_name(a.event), dict(a.event.__fields__), a.var, [expr_to_json(f) for f in a.filters]]
            for a in p.atoms
        ],
        "class_attrs": [list(c) for c in p.class_attrs],
        "class_dtypes": list(p.class_dtypes),
        "nodes": [sorted(n) for n in p.nodes],
        "shapes": [sorted(s) for s in p.shapes],
        "transitions": [
            [
                list(t.reads),
                t.target,
                list(t.children),
                t.final,
                [list(s) for s in t.same],
                [list(a) for a in t.child_attrs],
                list(t.target_attrs),
            ]
            for t in p.transitions
        ],
    }


def _pair(x: Json) -> tuple[str, str]:
    a, b = as_list(x, "attribute pair", 2)
    return as_str(a, "attribute"), as_str(b, "attribute")


def hcq_from_json(x: Json) -> HcqPlan:
    """The plan :func:`hcq_to_json` wrote, with every index checked."""
    from pycel.plan.hcq import MAX_CHILDREN

    x = as_dict(x, "conjunction plan")
    atoms = []
    for item in as_list(x.get("atoms"), "conjunction atoms"):
        name, fields, var, filters = as_list(item, "conjunction atom", 4)
        own = {as_str(k, "attribute"): dtype_name(v, k) for k, v in as_dict(fields, "fields").items()}
        atoms.append(
            HcqAtom(_hcq_event(as_str(name, "event type"), own), as_str(var, "variable"), _exprs(filters))
        )
    classes = tuple(
        tuple(None if a is None else as_str(a, "class attribute") for a in as_list(c, "class", len(atoms)))
        for c in as_list(x.get("class_attrs"), "classes")
    )
    dtypes = tuple(
        dtype_name(d, "class") for d in as_list(x.get("class_dtypes"), "class types", len(classes))
    )
    nodes = tuple(frozenset(ints(n, "node", 0, len(atoms))) for n in as_list(x.get("nodes"), "nodes"))
    shapes = tuple(
        frozenset(ints(s, "shape", 0, len(classes))) for s in as_list(x.get("shapes"), "shapes", len(nodes))
    )
    transitions = []
    for item in as_list(x.get("transitions"), "transitions"):
        reads, target, children, final, same, child_attrs, target_attrs = as_list(item, "transition", 7)
        kids = ints(children, "children", 0, len(nodes))
        if len(kids) > MAX_CHILDREN:
            raise bad("a transition has too many children")
        transitions.append(
            HcqTransition(
                ints(reads, "reads", 0, len(atoms)),
                as_int(target, "target", 0, len(nodes)),
                kids,
                as_bool(final, "final"),
                tuple(_pair(s) for s in as_list(same, "same")),
                tuple(
                    strs(a, "child attributes") for a in as_list(child_attrs, "child attributes", len(kids))
                ),
                strs(target_attrs, "target attributes"),
            )
        )
    return HcqPlan(tuple(atoms), classes, dtypes, nodes, shapes, tuple(transitions))


# -- the plan ---------------------------------------------------------------------
def plan_to_json(plan: Plan) -> Json:
    """Every field of ``plan`` as JSON data."""
    post = plan.post_filters
    return {
        "text": plan.text,
        "family": plan.family,
        "strategy": plan.strategy,
        "window_unit": plan.window_unit,
        "window_size": plan.window_size,
        "time_attribute": plan.time_attribute,
        "partition": list(plan.partition),
        "projection_mask": plan.projection_mask,
        "projected": plan.projected,
        "limit": plan.limit,
        "consume": plan.consume,
        "nfa": nfa_to_json(plan.nfa),
        "schema": schema_to_json(plan.schema),
        "join_keys": [[[list(p) for p in j.attributes], j.dtype] for j in plan.join_keys],
        "hcq": None if plan.hcq is None else hcq_to_json(plan.hcq),
        "post_filters": None if post is None else [expr_to_json(c) for c in post.conjuncts],
    }


def plan_from_json(x: Json) -> Plan:
    """The plan :func:`plan_to_json` wrote; DataError if it is not one."""
    x = as_dict(x, "plan")
    schema = schema_from_json(x.get("schema"))
    nfa = nfa_from_json(x.get("nfa"), shared_types(schema.supertypes))
    unit, strategy, family = x.get("window_unit"), x.get("strategy"), x.get("family")
    if unit not in _UNITS or strategy not in STRATEGIES or family not in _FAMILIES:
        raise bad(f"window unit {unit!r}, strategy {strategy!r} or family {family!r}")
    time_attribute = x.get("time_attribute")
    joins = []
    for j in as_list(x.get("join_keys"), "join keys"):
        attributes, dtype = as_list(j, "join key", 2)
        pairs = tuple(
            (as_str(t, "type"), as_str(a, "attribute"))
            for t, a in (as_list(p, "join attribute", 2) for p in as_list(attributes, "join"))
        )
        joins.append(JoinKey(pairs, dtype_name(dtype, "join key")))
    post = x.get("post_filters")
    hcq = x.get("hcq")
    if (hcq is not None) != (family == "parallel") or strategy not in _FAMILIES[family]:
        raise bad(f"family {family!r} with strategy {strategy!r}")
    if family in ("ranked", "maximal") and unit is not None:
        # Written before strategies chose among the runs that fit the window (#17):
        # continuing it would mix the old meaning into new output.
        raise bad(f"a {strategy.upper()} query with a window from an older pycel (run it again)")
    return Plan(
        text=as_str(x.get("text"), "query text"),
        family=family,
        strategy=strategy,
        nfa=nfa,
        schema=schema,
        partition=strs(x.get("partition"), "partition"),
        join_keys=tuple(joins),
        hcq=None if hcq is None else hcq_from_json(hcq),
        post_filters=None if post is None else PostFilters.of(_exprs(post)),
        window_unit=unit,
        window_size=_window_size(x.get("window_size")),
        time_attribute=None if time_attribute is None else as_str(time_attribute, "time attribute"),
        projection_mask=as_int(x.get("projection_mask"), "projection", 0, 1 << len(nfa.variables)),
        projected=as_bool(x.get("projected"), "projected"),
        limit=as_int(x.get("limit"), "limit", -1),
        consume=as_int(x.get("consume"), "consumption", 0, 3),
    )
