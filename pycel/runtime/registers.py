"""The values edge conditions compare, per event, as the ordered loop reads them
(:mod:`pycel.jit.ordered`): each register and threshold as an ordered int64 key and a kind
(a number, NaN, or null).

Ints (and times, bools) are their own keys. A float's key is its IEEE bits with the
magnitude bits flipped below zero, so keys order as the floats do (``-0.0`` is ``0.0``
first); NaN and null are not keys but kinds: a comparison with null is false, with NaN
false except ``!=``.

An int compared with a float is compared exactly, as Python does, by turning the threshold
into a key of the register's kind for that operator (a row kind ``"int:<"``: float
thresholds as int keys for ``<``). Over ints, ``r < y`` is ``r < ceil(y)`` and ``r <= y``
is ``r <= floor(y)``; a threshold beyond every int64 is the kind :data:`ABOVE_ALL` (or
:data:`BELOW_ALL`), and ``r != y`` with y no int64 holds for every number, like ``!= NaN``.
Over floats, an int x that no float equals lies between two neighbouring floats lo < x < hi,
so ``r < x`` is ``r < hi`` and ``r <= x`` is ``r <= lo`` (no float lies between them),
and ``r == x`` never holds (``r != x`` always: the kind NaN).

Example::

    keys, kinds = ordered_keys([cond.register], "float", batch, scopes)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from pycel.data.ingest import EventBatch
from pycel.jit.ordered import ABOVE_ALL, BELOW_ALL, NAN, NULL, NUMBER, OrderedInput, ordered_input
from pycel.language.expr import Arith, Attr, Expr, expr_key
from pycel.plan.conditions import run_registers
from pycel.plan.determinize import DfaTables
from pycel.plan.planner import Plan

from .predicates import Overflows, compare, expression_values

Ints = npt.NDArray[np.int64]
_OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "!=": 4, "==": 5}
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)


def ordered_keys(
    exprs: Sequence[tuple[Expr[Any], str, str]], batch: EventBatch
) -> tuple[Ints, Ints]:
    """(keys, kinds), one row per (expression, kind, event type it is read on) and one
    column per event. The kind is "int" or "float", or "int:OP" / "float:OP" for a
    threshold of the other type compared by OP (module docstring). Integer overflow on an
    event of that type is the DataError of a filter (docs/data.md).

    Rows with the same values (the same expression up to its variables, e.g. a trend's
    ``prev(t).price`` and ``t.price``, and a comparison's threshold read by several
    conditions) are computed once, their overflows checked on the events of all of them.
    """
    n = len(batch)
    if not exprs:
        return np.zeros((1, n), dtype=np.int64), np.full((1, n), NULL, dtype=np.int64)
    # Every row is written below: no fill (each pass over a fresh 8 MB row costs its page
    # faults too).
    keys = np.empty((len(exprs), n), dtype=np.int64)
    kinds = np.empty((len(exprs), n), dtype=np.int64)
    groups: dict[object, tuple[Expr[Any], str, set[str], list[int]]] = {}
    for row, (e, kind, event) in enumerate(exprs):
        group = groups.setdefault((_value_key(e), kind), (e, kind, set(), []))
        group[2].add(event)
        group[3].append(row)
    log = Overflows()
    supertypes = batch.schema.supertypes
    for e, kind, events, rows in groups.values():
        log.scope = None
        if _has_arith(e):  # only arithmetic notes overflows
            is_type = np.array([not events.isdisjoint(s) for s in supertypes] + [False], dtype=np.bool_)
            log.scope = is_type[batch.type_ids]
        values, valid = expression_values(e, batch, log)
        first, *others = rows
        target, _, op = kind.partition(":")
        if op:
            _mixed_keys(target, op, values, valid, keys[first], kinds[first])
        elif kind == "int":
            _int_keys(values, valid, keys[first], kinds[first])
        else:
            _float_keys(values, valid, keys[first], kinds[first])
        for row in others:
            keys[row] = keys[first]
            kinds[row] = kinds[first]
    log.scope = None
    log.raise_first(batch)
    return keys, kinds


def _int_keys(values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any], keys: Ints, kinds: Ints) -> None:
    keys[:] = values
    kinds.fill(NUMBER)
    if not valid.all():
        invalid = ~valid
        keys[invalid] = 0
        kinds[invalid] = NULL


def _float_keys(values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any], keys: Ints, kinds: Ints) -> None:
    """IEEE bits with the magnitude flipped below zero (an arithmetic shift of the sign
    bit gives the mask), written into ``keys`` and ``kinds`` with one temporary."""
    f = values.astype(np.float64)  # a copy: ``values`` may be the batch's column
    invalid = None if valid.all() else ~valid
    if invalid is not None:
        f[invalid] = 0.0
    f += 0.0  # -0.0 → 0.0
    bits = f.view(np.int64)
    np.right_shift(bits, 63, out=keys)
    np.bitwise_and(keys, _MAGNITUDE, out=keys)
    np.bitwise_xor(keys, bits, out=keys)
    kinds.fill(NUMBER)
    nan = np.isnan(f)
    if nan.any():
        kinds[nan] = NAN
    if invalid is not None:
        kinds[invalid] = NULL


def _mixed_keys(
    target: str, op: str, values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any], keys: Ints, kinds: Ints
) -> None:
    """Keys of kind ``target`` for thresholds of the other type, compared by ``register op
    threshold`` exactly (module docstring)."""
    if target == "int":
        f = values.astype(np.float64)
        with np.errstate(invalid="ignore"):
            t = np.ceil(f) if op in ("<", ">=") else np.floor(f) if op in ("<=", ">") else f
            above, below = t >= 2.0**63, t < -(2.0**63)
            inside = (t == np.floor(t)) & ~above & ~below  # False for NaN and ±inf
        keys[:] = 0
        keys[inside] = t[inside].astype(np.int64)
        kinds.fill(NAN)  # NaN, and for != a threshold no int equals: holds for every number
        kinds[inside] = NUMBER
        if op != "!=":
            kinds[above] = ABOVE_ALL
            kinds[below] = BELOW_ALL
    else:
        i = values.astype(np.int64)
        f = i.astype(np.float64)  # the nearest float
        rounded_up, rounded_down = compare("<", i, f), compare(">", i, f)
        if op in ("<", ">="):  # the float above x
            f[rounded_down] = np.nextafter(f[rounded_down], np.inf)
        elif op in ("<=", ">"):  # the float below x
            f[rounded_up] = np.nextafter(f[rounded_up], -np.inf)
        _float_keys(f, valid, keys, kinds)
        if op in ("!=", "=="):  # no float equals x: == never holds, != always (as with NaN)
            kinds[(rounded_up | rounded_down) & valid] = NAN
    if not valid.all():
        invalid = ~valid
        keys[invalid] = 0
        kinds[invalid] = NULL


def _has_arith(e: Expr[Any]) -> bool:
    """Whether ``e`` computes (integer arithmetic, of ints, times or bools, may overflow)."""
    return isinstance(e, Arith) or any(_has_arith(c) for c in e.children())


def _value_key(e: object) -> object:
    """What an expression's values over a batch depend on: :func:`expr_key` without the
    variables an attribute is read through (a column is the same column for every
    occurrence, and for ``prev``)."""
    if isinstance(e, Attr):
        return ("Attr", e.name, e.dtype)
    if isinstance(e, Expr):
        fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(type(e))  # type: ignore[arg-type]
        return (type(e).__name__, *(_value_key(getattr(e, f.name)) for f in fields))
    if isinstance(e, tuple):
        return tuple(_value_key(v) for v in e)
    return expr_key(e)


def _threshold_kind(kind: str, op: str) -> str:
    """The row kind of a condition's thresholds (``"int:<"``: floats as int keys for <)."""
    register, _, threshold = kind.partition("/")
    return f"{register}:{op}" if threshold else register


def ordered_tables(plan: Plan, t: DfaTables, batch: EventBatch) -> OrderedInput:
    """The loop's view of ``plan``'s edge conditions for one batch (``t``: the automaton's
    current tables)."""
    conds = plan.nfa.conditions
    atoms = plan.nfa.atoms
    reg_exprs = [(e, kind, atoms[atom].event) for _, e, kind, atom in run_registers(plan.nfa)]
    thr_exprs = [(c.threshold, _threshold_kind(c.kind, c.op), atoms[c.target].event) for c in conds]
    # One call, so that a register and a threshold with the same values (a trend's
    # ``prev(t).price`` and ``t.price``) are computed once.
    keys, kinds = ordered_keys(reg_exprs + thr_exprs, batch)
    split = len(reg_exprs)
    reg, reg_kind, thr, thr_kind = keys[:split], kinds[:split], keys[split:], kinds[split:]
    return ordered_input(
        t.outcome, t.state_register, t.cptr, t.cond,
        np.array([_OPS[c.op] for c in conds] or [0], dtype=np.int64),
        np.arange(max(1, len(conds)), dtype=np.int64),
        reg, reg_kind, thr, thr_kind,
    )  # fmt: skip
