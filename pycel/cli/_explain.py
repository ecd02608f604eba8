"""``pycel explain``: what a query means to pycel and how big its automaton is.

Prints the pattern (its ``repr`` and ``to_ceql``), the query clauses, the labeled Glushkov
automaton the engine compiles (one state per atom, plus the start), and the size of its
determinization over every predicate class the declared event types allow — each
combination of the atoms' predicates, an upper bound on what data can reach (the engine
itself determinizes lazily, only for the classes the data brings).

Example::

    text, problem = explain(loaded)     # problem: why the engine rejects it, or None
"""

from __future__ import annotations

import time
from itertools import product

from pycel.ceql import Declaration, to_ceql
from pycel.data.ingest import Schema
from pycel.engine import CompiledQuery
from pycel.engine import compile as compile_query
from pycel.errors import PatternError, UnsupportedError
from pycel.language.checks import check
from pycel.language.clauses import QuerySpec, split_query
from pycel.plan.automaton import AtomState, Nfa, build_nfa
from pycel.plan.conditions import key_pruning
from pycel.plan.determinize import Dfa
from pycel.plan.maximal import MaxDfa

from ._load import Loaded

#: Determinize only when there are at most this many predicate classes…
MAX_CLASSES = 4096
#: …and stop after this many states or seconds.
MAX_STATES = 20_000
MAX_SECONDS = 5.0


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def clauses(spec: QuerySpec) -> list[tuple[str, str]]:
    """The query clauses as (name, description) rows."""
    w = spec.window
    if w is None:
        window = "none (every match since the start of the stream)"
    elif w.unit == "events":
        window = f"{_number(w.size)} events (end - start <= {_number(w.size)} positions)"
    elif w.unit == "seconds":
        window = f"{_number(w.size)} seconds of [{w.on}] ({w.on}(end) - {w.on}(start) <= {_number(w.size)} s)"
    else:
        window = f"{_number(w.size)} [{w.on}] ({w.on}(end) - {w.on}(start) <= {_number(w.size)})"
    return [
        ("window", window),
        ("partition by", ", ".join(spec.partition) if spec.partition else "none"),
        ("select", ", ".join(spec.select) if spec.select is not None else "* (every variable)"),
        ("strategy", spec.strategy),
        ("consume by", spec.consume),
        ("limit", f"{spec.limit} matches per end position" if spec.limit is not None else "none"),
    ]


def _atom_row(nfa: Nfa, atom: AtomState) -> list[str]:
    reads = ("NOT " if atom.negated else "") + atom.event
    if atom.type_predicate is not None:
        reads += f" [{atom.type_predicate!r}]"
    filters = " AND ".join(repr(f) for f in atom.filters) or "-"
    follow = ", ".join(_edge(nfa, atom.index, b) for b in sorted(nfa.follow.get(atom.index, ()))) or "-"
    marks = [m for m, on in (("first", atom.index in nfa.first), ("final", atom.index in nfa.last)) if on]
    if atom.index in nfa.guard_atoms:
        marks.append(f"absence {nfa.guard_atoms.index(atom.index)} (blocks, binds nothing)")
    if atom.index in nfa.end_atoms:
        marks.append("absence that ends the pattern (drops a match it follows inside its window)")
    if atom.index in nfa.start_atoms:
        marks.append("absence that starts the pattern (drops a match it precedes inside its window)")
    return [str(atom.index), reads, ", ".join(sorted(atom.labels)), filters, follow, " ".join(marks)]


def _edge(nfa: Nfa, a: int, b: int) -> str:
    """``b``, ``b unless 0`` when absences 0… guard the edge a→b, ``b if c0`` when
    comparisons c0… stand on it."""
    mask = nfa.guards.get((a, b), 0)
    guards = [str(g) for g in range(len(nfa.guard_atoms)) if mask >> g & 1]
    text = f"{b} unless {'/'.join(guards)}" if guards else str(b)
    conds = nfa.edge_conditions(a, b)
    return text + (" if " + "/".join(f"c{k}" for k in conds) if conds else "")


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def predicate_classes(nfa: Nfa, declaration: Declaration) -> list[int] | int:
    """Every atom bit-vector an event of a declared type can have (its class), or just
    how many there are when that exceeds :data:`MAX_CLASSES`."""
    schema = Schema.for_types(declaration.values())
    per_type: list[tuple[int, list[int]]] = []  # (fixed bits, free bit indices)
    total = 0
    for supers in schema.supertypes:
        fixed, free = 0, []
        for a in nfa.atoms:
            is_type = a.event in supers
            if a.negated:
                base = "free" if is_type and a.type_predicate is not None else ("zero" if is_type else "one")
            else:
                base = "one" if is_type else "zero"
            if base == "one" and a.filters:
                base = "free"
            if base == "one":
                fixed |= 1 << a.index
            elif base == "free":
                free.append(a.index)
        per_type.append((fixed, free))
        total += 2 ** len(free)
    if total > MAX_CLASSES:
        return total
    found: dict[int, None] = {}
    for fixed, free in per_type:
        for choice in product((0, 1), repeat=len(free)):
            found.setdefault(fixed | sum(bit << k for bit, k in zip(choice, free, strict=True)), None)
    return list(found)


def determinized(nfa: Nfa, declaration: Declaration, *, pairs: bool = False) -> str:
    """A sentence on the size of the deterministic automaton over every class (with
    ``pairs``: of the MAX strategy's pair automaton)."""
    classes = predicate_classes(nfa, declaration)
    if isinstance(classes, int):
        return f"not computed: {classes} predicate classes (more than {MAX_CLASSES})"
    dfa: Dfa | MaxDfa = MaxDfa(nfa) if pairs else Dfa(nfa)
    states = dfa.pairs if isinstance(dfa, MaxDfa) else dfa.states
    began = time.perf_counter()
    for k in range(1, len(classes) + 1):
        try:
            dfa.expand(classes[:k])
        except UnsupportedError:
            return f"more than {len(states)} states (the engine's limit)"
        if len(states) > MAX_STATES or time.perf_counter() - began > MAX_SECONDS:
            return f"at least {len(states)} states (stopped after {k} of {len(classes)} predicate classes)"
    if isinstance(dfa, MaxDfa):
        moves = sum(len(rows) for by_pair in dfa.marks for rows in by_pair.values())
    else:
        moves = sum(len(m) for m in dfa.moves)
    return (
        f"{len(states)} states (with the start), {moves} transitions over "
        f"{len(classes)} predicate classes"
    )


def _correlation(query: CompiledQuery) -> list[str]:
    """How the engine runs the query's correlations: run keys and post-filters."""
    lines = [
        "key " + ", ".join(f"{t}.{a}" for t, a in key.attributes) for key in query.join_keys
    ]
    lines += [
        f"c{k} {c.text}: indexed, on edge {c.source}→{c.target}; the runs waiting there are "
        f"ordered by {c.register!r}"
        for k, c in enumerate(query.nfa.conditions)
    ]
    if query.post_filters is not None:
        for c in query.post_filters.conjuncts:
            keyed = key_pruning(c, query.nfa)
            how = (
                "as soon as its variables are bound, or on complete matches"
                if keyed is None
                else f"the runs waiting after {keyed[0].var} are ordered by {keyed[0]!r}: where it "
                f"fails on one, those {keyed[1]} it are skipped"
            )
            lines.append(f"post-filter {c!r} (residual: checked while enumerating; {how})")
    if query.hcq is not None:
        plan = query.hcq
        lines += [
            f"nested classes: parallelized automaton, {len(plan.nodes)} states "
            f"(q-tree nodes), {len(plan.transitions)} transitions"
        ]
    return lines or ["none"]


def explain(loaded: Loaded) -> tuple[str, str | None]:
    """(the explanation, the reason the engine rejects the query or None)."""
    pattern, decl = loaded.pattern, loaded.declaration
    out = ["pattern:", f"  {pattern!r}", "", "CEQL:"]
    try:
        out += ["  " + line for line in to_ceql(pattern, stream=decl.stream).splitlines()]
    except (PatternError, UnsupportedError) as err:
        out += [f"  not printable: {err}"]
    spec = split_query(pattern)
    out += ["", "clauses:"] + [f"  {name + ':':<14}{text}" for name, text in clauses(spec)]
    problem: str | None = None
    try:
        check(spec)
        # The engine's automaton (AND expanded, joins as keys, post-filters split off);
        # when the engine refuses the query, the plain automaton of the body if it exists.
        query = compile_query(pattern, types=decl.values())
        nfa = query.nfa
        out += ["", "correlation:"] + [f"  {line}" for line in _correlation(query)]
    except (PatternError, UnsupportedError) as err:
        problem = str(err)
        try:
            nfa = build_nfa(spec.body)
        except (PatternError, UnsupportedError):
            out += ["", f"automaton: not built: {err}"]
            return "\n".join(out) + "\n", str(err)
    moves = len(nfa.first) + sum(len(f) for f in nfa.follow.values())
    out += [
        "",
        "automaton (labeled Glushkov NFA, one state per atom):",
        f"  atoms:       {len(nfa.atoms)} ({len(nfa.atoms) + 1} states with the start)",
        f"  transitions: {moves}",
        f"  variables:   {len(nfa.variables)} ({', '.join(nfa.variables)})",
    ]
    header = ["atom", "reads", "binds", "filters", "next", ""]
    out += _table([header, *(_atom_row(nfa, a) for a in nfa.atoms)])
    out += ["", f"deterministic automaton: {determinized(nfa, decl)}"]
    if spec.strategy == "max" and problem is None and query.family != "maximal":
        # MAX chooses among an end's runs (those inside the window, if any) on the run DAG;
        # the pair automaton is not built.
        among = "the runs inside the window" if spec.window is not None else "all the runs"
        out += [f"MAX: chosen among {among} at each end (no pair automaton)"]
    elif spec.strategy == "max":
        out += [f"MAX pair automaton (T, E, U): {determinized(nfa, decl, pairs=True)}"]
    out += ["", f"engine: not supported: {problem}" if problem else "engine: supported"]
    return "\n".join(out) + "\n", problem
