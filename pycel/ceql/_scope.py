"""Which variables a pattern binds, as CEQL's SELECT and FILTER clauses read them.

:func:`bound_variables` lists each variable with the event types it may hold;
:func:`type_name_conflict` says when naming an event type as a variable means something
else in CORE (where ``T AS x`` binds both ``T`` and ``x``) than in pycel.
"""

from __future__ import annotations

from collections.abc import Mapping

from pycel.dsl import As, Atom, NotAtom, Pattern
from pycel.language.events import Event

from ._predicate import Scope


def bound_variables(node: Pattern) -> Scope:
    """Each variable ``node`` binds, with the event types it may hold (None: any type, from
    a negated atom), in the order they first appear in the pattern."""
    if isinstance(node, Atom):
        return {node.var: [node.event]}
    if isinstance(node, NotAtom):
        return {node.var: [None]}
    out: Scope = {}
    for child in node.children():
        for var, kinds in bound_variables(child).items():
            known = out.setdefault(var, [])
            known.extend(k for k in kinds if k not in known)
    if isinstance(node, As):
        every: list[type[Event] | None] = []
        for kinds in out.values():
            every.extend(k for k in kinds if k not in every)
        out[node.var] = every
    return out


def renamed_atoms(node: Pattern, cls: type[Event], name: str) -> bool:
    """Whether ``node`` has an atom of event type ``cls`` renamed (``T AS x``, x ≠ ``name``)."""
    if isinstance(node, Atom):
        return node.event is cls and node.var != name
    return any(renamed_atoms(c, cls, name) for c in node.children())


def type_name_conflict(node: Pattern, var: str, types: Mapping[str, type[Event]]) -> str | None:
    """Why reading variable ``var`` (an event type name) over ``node`` means something else
    in CORE, where ``T AS x`` binds both T and x; None when it means the same."""
    cls = types.get(var)
    if cls is None or not renamed_atoms(node, cls, var):
        return None
    if var in bound_variables(node):
        return (
            f"in CORE, {var!r} would also mean the occurrences of {var} renamed with AS, but "
            f"pycel binds {var!r} only to the bare {var} atoms; name the occurrences with AS "
            "and use those names"
        )
    return (
        f"{var!r} is an event type that is renamed with AS here; in pycel `{var} AS x` binds "
        f"only x (CORE also binds {var}); use the AS names"
    )
