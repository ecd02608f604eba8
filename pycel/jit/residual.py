"""Residual predicates checked while matches are enumerated (issue #15 item 4).

A post-filter (``where(..., post_filter=True)``) is checked on complete matches by
:mod:`pycel.runtime.postfilter`, which stays the authority. Before that, the enumerator
prunes: when the node it adds to the current path binds the last variable a conjunct
reads, it evaluates the conjunct on every combination of bound events that includes the
new node, and when one combination is not True (False, or unknown through a null) no
completion of the path can pass ("for all combinations", docs/postfilter.md), so the
walk does not go below that node. Pruning is *conservative*: where the interpreter cannot
be sure it agrees with the column-wise evaluator (an integer overflow) it does not prune,
and the complete check decides. Otherwise it is exact (an int compares with a float as
Python compares them), which consumption relies on (:mod:`pycel.runtime.residual`).

The conjuncts are data, not code: small stack programs (built per push by
:mod:`pycel.runtime.residual`) over the attribute columns of the events a match may still
include, so every query runs the same compiled interpreter. Each program row is
``(op, a, b)``; values live on three parallel stacks (int64, float64, valid), booleans in
the int64 one as 0/1.

Example::

    holds = residual_holds(res, path, d, 0)   # False: prune the subtree of path node d
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .arrays import Flags, Int, Ints, Truth
from .inner import inner

Floats = npt.NDArray[np.float64]

# Opcodes (pycel.runtime.residual emits them; keep the two lists in step).
(LOAD_I, LOAD_F, CONST_I, CONST_F, TO_F, ADD_I, SUB_I, MUL_I, MOD_I, ADD_F, SUB_F, MUL_F, DIV_F,
 CMP_I, CMP_F, CMP_IF, CMP_FI, AND, OR, NOT, TRUTHY) = range(21)  # fmt: skip
# Comparison codes (operand a of CMP_*).
EQ, NE, LT, LE, GT, GE = range(6)
_INT64_MIN = np.int64(-(2**63))
_INT64_MAX = np.int64(2**63 - 1)
_MUL_SAFE = 2.0**62
_TWO_63 = 2.0**63

# The columns of stats: per conjunct, combinations evaluated and those that failed; then
# the path nodes the enumerator visited (the work pruning saves).
S_CHECKED, S_FAILED = 0, 1


class Residual(NamedTuple):
    """The residual conjuncts of one push as the enumerator reads them.

    ``code[i] = (op, a, b)``; conjunct c is rows ``ptr[c]:ptr[c+1]`` and reads the
    variables of bit-mask ``variables[c]``; ``order``: the conjuncts in the order to try
    (most often failing first). Column k of the int (float) attributes is row k of
    ``ints`` (``floats``), indexed by position − ``base``, valid where ``int_valid``
    (``float_valid``). ``stats[c] = (checked, failed)``; ``visits[0]``: nodes visited.
    ``binding`` maps a variable to the position bound in the combination being checked;
    the stacks and ``occ`` are work space. Key pruning (:func:`residual_key_sides`): conjunct
    c compares a register of variable ``key_var[c]`` (-1: none) by which the runs binding
    it are ordered; where it fails, the runs on side ``key_side[c]`` fail too;
    ``key_above[d]``/``key_below[d]``: the keys from which on (up to which) the index at
    path depth d fails, as found so far (the enumerator's work space). Emptiness probes
    (:mod:`pycel.jit.probe`): ``key_probe[c]``, the variables (bits) whose runs each hold a
    snapshot of the index of ``key_var[c]``'s runs, snapshots that only grow (0: none);
    ``key_column[c] = (kind, row)``: the column of the register, ``kind`` 0 in ``ints``,
    1 in ``floats``, -1 none; ``probe_floor[c]``: the probed runs with ids up to it fail
    c in the current enumeration, ``probe_ceiling[c]``: those from it on pass it (work
    space)."""

    code: Ints
    fconst: Floats
    ptr: Ints
    variables: Ints
    order: Ints
    ints: Ints
    int_valid: Flags
    floats: Floats
    float_valid: Flags
    base: np.int64
    stats: Ints
    visits: Ints
    binding: Ints
    istack: Ints
    fstack: Floats
    vstack: Flags
    occ: Ints
    digits: Ints
    key_var: Ints
    key_side: Ints
    key_above: Ints
    key_below: Ints
    key_probe: Ints
    key_column: Ints
    probe_floor: Ints
    probe_ceiling: Ints


def _cmp(op: Int, x: float | Int, y: float | Int) -> Truth:
    """``x op y``; for floats IEEE: a NaN compares False, except with !=, as numpy's
    comparisons do."""
    if op == EQ:
        return x == y
    if op == NE:
        return x != y
    if op == LT:
        return x < y
    if op == LE:
        return x <= y
    if op == GT:
        return x > y
    return x >= y


#: ``x op y`` is ``y flip[op] x``.
_FLIP = np.array([EQ, NE, GT, GE, LT, LE], dtype=np.int64)


@inner
def _int_float_cmp(op: Int, x: Int, f: float) -> Truth:
    """``x op f`` exactly, as Python compares an int with a float. Rounding to float64
    is monotone and keeps floats, so where float(x) != f that comparison decides; where
    they are equal f is an integer (at most 2**63, which every int64 is below)."""
    g = float(x)
    if g != f:  # (NaN: False, except !=)
        return _cmp_f_jit(op, g, f)
    if f >= _TWO_63:
        return _cmp_i_jit(op, np.int64(0), np.int64(1))
    return _cmp_i_jit(op, x, np.int64(f))


@inner
def _mul_overflows(x: Int, y: Int) -> Truth:
    """Whether ``x * y`` leaves int64, tested without multiplying (the bounds divided by
    one operand, rounded toward zero)."""
    if x == 0 or y == 0:
        return False
    if x > 0:
        return x > _INT64_MAX // y if y > 0 else y < _trunc_div(_INT64_MIN, x)
    if y > 0:
        return x < _trunc_div(_INT64_MIN, y)
    return y < _trunc_div(_INT64_MAX, x)


@inner
def _trunc_div(a: Int, b: Int) -> Int:
    """``a / b`` rounded toward zero (b != 0, not MIN / -1)."""
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


# One dispatcher per operand type (each compiles one signature).
_cmp_i_jit = inner(_cmp)
_cmp_f_jit = inner(_cmp)


@inner
def _evaluate(res: Residual, first: Int, last: Int) -> Int:
    """Run program rows first..last-1 on the current ``binding``: 1 True, 0 not True
    (False or unknown), -1 unsure (an integer overflow, an inexact int/float compare)."""
    code, ist, fst, vst = res.code, res.istack, res.fstack, res.vstack
    base = res.base
    top = 0
    for i in range(first, last):
        op, a, b = code[i, 0], code[i, 1], code[i, 2]
        if op == LOAD_I:
            row = res.binding[a] - base
            ist[top] = res.ints[b, row]
            vst[top] = res.int_valid[b, row]
            top += 1
        elif op == LOAD_F:
            row = res.binding[a] - base
            fst[top] = res.floats[b, row]
            vst[top] = res.float_valid[b, row]
            top += 1
        elif op == CONST_I:
            ist[top] = a
            vst[top] = True
            top += 1
        elif op == CONST_F:
            fst[top] = res.fconst[a]
            vst[top] = True
            top += 1
        elif op == TO_F:  # an int operand of float arithmetic, rounded as Python does
            fst[top - 1] = float(ist[top - 1])
        elif op == TRUTHY:
            ist[top - 1] = 1 if ist[top - 1] != 0 else 0
        elif op == NOT:
            ist[top - 1] = 1 - ist[top - 1]
        elif op == AND or op == OR:
            # Three-valued over the top a values: AND is False if one is, True if all are.
            n = a
            decided = False
            all_valid = True
            for k in range(top - n, top):
                if vst[k] and ist[k] == (0 if op == AND else 1):
                    decided = True
                all_valid = all_valid and vst[k]
            top -= n
            if decided:
                ist[top] = 0 if op == AND else 1
                vst[top] = True
            else:
                ist[top] = 1 if op == AND else 0
                vst[top] = all_valid
            top += 1
        else:  # binary: arithmetic or a comparison of the top two values
            top -= 1
            valid = vst[top - 1] and vst[top]
            x, y = ist[top - 1], ist[top]
            fx, fy = fst[top - 1], fst[top]
            # Overflow is tested before the operation: Numba's integer arithmetic may assume
            # it does not wrap, so a test on the wrapped result can be optimized away.
            if op == ADD_I:
                if valid and ((y > 0 and x > _INT64_MAX - y) or (y < 0 and x < _INT64_MIN - y)):
                    return -1
                ist[top - 1] = x + y if valid else 0
            elif op == SUB_I:
                if valid and ((y < 0 and x > _INT64_MAX + y) or (y > 0 and x < _INT64_MIN + y)):
                    return -1
                ist[top - 1] = x - y if valid else 0
            elif op == MUL_I:
                # |x·y| below 2**62 by float magnitude fits; above, the exact test.
                if valid and abs(float(x) * float(y)) >= _MUL_SAFE and _mul_overflows(x, y):
                    return -1
                ist[top - 1] = x * y if valid else 0
            elif op == MOD_I:
                valid = valid and y != 0
                ist[top - 1] = 0 if (not valid or y == -1) else x % y
            elif op == ADD_F:
                fst[top - 1] = fx + fy
            elif op == SUB_F:
                fst[top - 1] = fx - fy
            elif op == MUL_F:
                fst[top - 1] = fx * fy
            elif op == DIV_F:
                valid = valid and fy != 0.0
                fst[top - 1] = fx / fy if valid else 0.0
            elif op == CMP_I:
                ist[top - 1] = 1 if valid and _cmp_i_jit(a, x, y) else 0
            elif op == CMP_F:
                ist[top - 1] = 1 if valid and _cmp_f_jit(a, fx, fy) else 0
            elif op == CMP_IF:
                ist[top - 1] = 1 if valid and _int_float_cmp(a, x, fy) else 0
            else:  # CMP_FI: fx op y is y (op flipped) fx
                ist[top - 1] = 1 if valid and _int_float_cmp(_FLIP[a], y, fx) else 0
            vst[top - 1] = valid
    return 1 if vst[0] and ist[0] == 1 else 0


@inner
def work_space(res: Residual, d: Int) -> Ints:
    """``res.occ``, or a larger one for this call when the path is deeper than it holds."""
    if res.occ.shape[0] < 64 * (d + 2):
        return np.empty(64 * (d + 2), dtype=np.int64)
    return res.occ


@inner
def conjunct_fails(res: Residual, path: Ints, d: Int, c: Int, occ: Ints, counted: Truth) -> bool:
    """Whether conjunct ``c`` is not True (False, or unknown through a null) on some
    combination of the path's bound events that includes node ``d`` (the path ``0..d``
    binds all its variables); each combination is counted in ``stats`` if ``counted``."""
    wanted = res.variables[c]
    digits = res.digits
    # occ: per variable of the conjunct (in bit order), the path nodes binding it, as
    # [count, node...] blocks; then a mixed-radix walk over their combinations.
    nvars = 0
    used = 0
    v = 0
    rest = wanted
    while rest != 0:
        if rest & 1:
            count = 0
            for k in range(d + 1):
                if (path[2 * k + 1] >> v) & 1:
                    occ[used + 1 + count] = k
                    count += 1
            occ[used] = count
            used += count + 1
            nvars += 1
        rest >>= 1
        v += 1
    for j in range(nvars):
        digits[j] = 0
    while True:
        # The combination of the current digits, if it includes node d.
        at = 0
        includes = False
        v = 0
        j = 0
        rest = wanted
        while rest != 0:
            if rest & 1:
                node = occ[at + 1 + digits[j]]
                includes = includes or node == d
                res.binding[v] = path[2 * node]
                at += occ[at] + 1
                j += 1
            rest >>= 1
            v += 1
        if includes:
            if counted:
                res.stats[c, S_CHECKED] += 1
            if _evaluate(res, res.ptr[c], res.ptr[c + 1]) == 0:
                if counted:
                    res.stats[c, S_FAILED] += 1
                return True
        # Next combination (the last variable's digit turns fastest).
        j = nvars - 1
        while j >= 0:
            at_of = 0  # variable j's block in occ
            for _ in range(j):
                at_of += occ[at_of] + 1
            digits[j] += 1
            if digits[j] < occ[at_of]:
                break
            digits[j] = 0
            j -= 1
        if j < 0:
            return False


@inner
def bound_variables(path: Ints, d: Int) -> Int:
    """The variables the path nodes 0..d bind."""
    bound = 0
    for k in range(d + 1):
        bound |= path[2 * k + 1]
    return bound


@inner
def residual_holds(res: Residual, path: Ints, d: Int, passed: Int) -> bool:
    """Whether path node ``d`` may stay: every conjunct that it completes (it binds one of
    the conjunct's variables, and the path ``0..d`` binds all of them) holds on every
    combination of bound events that includes node d. ``path[2k]``/``path[2k+1]``: the
    position and the variable bits of node k (the enumerator's path cache); ``passed``:
    conjuncts (bit c) already found to hold there (:func:`residual_key_sides`)."""
    res.visits[0] += 1
    mask = path[2 * d + 1]
    bound = bound_variables(path, d)
    occ = work_space(res, d)
    for i in range(res.order.shape[0]):
        c = res.order[i]
        wanted = res.variables[c]
        if (wanted & mask) == 0 or (wanted & ~bound) != 0 or (c < PASSED_BITS and (passed >> c) & 1):
            continue
        if conjunct_fails(res, path, d, c, occ, True):
            return False
    return True


#: :func:`residual_key_sides`' bits: skip the runs ordered below (above) the node's, and
#: the node itself fails; above them (``>> PASSED_SHIFT``) the conjuncts that hold there.
SKIP_BELOW, SKIP_ABOVE, NODE_FAILS = 1, 2, 4
PASSED_SHIFT, PASSED_BITS = 3, 60


@inner
def residual_key_sides(res: Residual, path: Ints, d: Int) -> Int:
    """Which parts of an ordered run index node to skip (:data:`SKIP_BELOW`,
    :data:`SKIP_ABOVE`, :data:`NODE_FAILS` bits), path node ``d`` being its content, and
    (shifted by :data:`PASSED_SHIFT`) the conjuncts it checked that hold there, which
    :func:`residual_holds` then does not check again.

    A key-pruned conjunct ``f(…) OP g(a)`` that node d completes by binding a (and no other
    variable of it) fails on a combination: then it fails on the same combination for
    every run ordered beyond d's on its side (the index orders them by g(a), and OP is
    monotone in it), so the enumerator does not enter that subtree. Runs whose g(a) is
    NaN or null wait in indexes of their own, ordered by creation; there every order
    comparison fails on every run, so skipping by it is right too."""
    mask = path[2 * d + 1]
    bound = bound_variables(path, d)
    occ = work_space(res, d)
    sides = 0
    for c in range(res.key_var.shape[0]):
        v = res.key_var[c]
        if v < 0 or not (mask >> v) & 1:
            continue
        wanted = res.variables[c]
        if (wanted & ~bound) != 0 or (mask & wanted) != (1 << v):
            continue
        # Counted once per node, as residual_holds counts its checks.
        res.stats[c, S_CHECKED] += 1
        if conjunct_fails(res, path, d, c, occ, False):
            res.stats[c, S_FAILED] += 1
            sides |= res.key_side[c] | NODE_FAILS
        elif c < PASSED_BITS:
            sides |= 1 << (c + PASSED_SHIFT)
    return sides


def empty_residual() -> Residual:
    """No residual conjuncts (the enumerator's residual variant is not used then)."""
    z = np.zeros(0, dtype=np.int64)
    zf = np.zeros(0, dtype=np.float64)
    return Residual(
        np.zeros((0, 3), dtype=np.int64), zf, np.zeros(1, dtype=np.int64), z, z,
        np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0), dtype=np.bool_),
        np.zeros((0, 0), dtype=np.float64), np.zeros((0, 0), dtype=np.bool_), np.int64(0),
        np.zeros((0, 2), dtype=np.int64), np.zeros(1, dtype=np.int64), z, z, zf,
        np.zeros(0, dtype=np.bool_), z, np.zeros(64, dtype=np.int64), z, z, z, z, z,
        np.zeros((0, 2), dtype=np.int64), z, z,
    )  # fmt: skip
