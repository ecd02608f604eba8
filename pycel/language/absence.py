"""Where absence may stand, and the sequence chains it stands in.

``seq(p, absent(C), q)`` constrains the gap between ``p`` and ``q``, so an absence is
meaningful between two parts of one sequence. A sequence is read as a *chain*: nested
``;`` nodes flattened, each part with the contiguity of the ``;`` before it. At the start
or the end of the whole pattern (``seq(absent(C), p)``, ``seq(p, absent(C))``) an absence
constrains the rest of the match's window, before its first event or after its last
(the checks require a window); anywhere else a chain's start or end is refused, as is
absence next to a contiguous ``:`` (nothing lies between adjacent events).

Example::

    chain = seq_chain(seq(A, absent(C), B))   # [(A, False), (ABSENT(C), False), (B, False)]
    window_absences(seq(A, B, absent(C)))     # (seq(A, B), (), (ABSENT(C),))
    check_absences(seq(seq(absent(C), B), A)) # UnsupportedError: absence at the start ...
"""

from __future__ import annotations

import attrs

from pycel.dsl import Absent, And, As, Filter, Or, Pattern, Plus, Seq
from pycel.errors import PatternError, UnsupportedError


def seq_chain(node: Seq) -> list[tuple[Pattern, bool]]:
    """The parts of the sequence ``node``, flattened, each with whether the ``;`` before it
    is contiguous (the first part's flag is False)."""
    left = seq_chain(node.left) if isinstance(node.left, Seq) else [(node.left, False)]
    right = seq_chain(node.right) if isinstance(node.right, Seq) else [(node.right, False)]
    head, contiguous = right[0][0], node.contiguous
    return left + [(head, contiguous)] + right[1:]


def has_absence(node: Pattern) -> bool:
    """Whether ``node`` contains an absence."""
    return isinstance(node, Absent) or any(has_absence(c) for c in node.children())


def split_end_absences(body: Pattern) -> tuple[Pattern, tuple[Absent, ...]]:
    """``body`` without the absences that end it, and those absences (in order). Only the
    pattern's own end counts: the last parts of its top sequence, also under ``as_`` and
    ``where`` (whose conditions then hold for the rest).

    Example: ``split_end_absences(seq(a, b, absent(c)))  # (seq(a, b), (ABSENT(c),))``
    """
    if isinstance(body, As | Filter):
        inner, ends = split_end_absences(body.inner)
        return (attrs.evolve(body, inner=inner) if ends else body), ends
    if not isinstance(body, Seq) or not isinstance(seq_chain(body)[-1][0], Absent):
        return body, ()
    if isinstance(body.right, Absent):
        rest, ends = split_end_absences(body.left)
        return rest, (*ends, body.right)
    rest, ends = split_end_absences(body.right)
    return Seq(body.left, rest, body.contiguous), ends


def split_start_absences(body: Pattern) -> tuple[Pattern, tuple[Absent, ...]]:
    """``body`` without the absences that start it, and those absences (in order): the
    first parts of its top sequence, also under ``as_`` and ``where``.

    Example: ``split_start_absences(seq(absent(c), a, b))  # (seq(a, b), (ABSENT(c),))``
    """
    if isinstance(body, As | Filter):
        inner, starts = split_start_absences(body.inner)
        return (attrs.evolve(body, inner=inner) if starts else body), starts
    if not isinstance(body, Seq) or not isinstance(seq_chain(body)[0][0], Absent):
        return body, ()
    if isinstance(body.left, Absent):
        rest, starts = split_start_absences(body.right)
        return rest, (body.left, *starts)
    rest, starts = split_start_absences(body.left)
    return Seq(rest, body.right, body.contiguous), starts


def window_absences(body: Pattern) -> tuple[Pattern, tuple[Absent, ...], tuple[Absent, ...]]:
    """``body`` without the absences that start and end it, and those (start, end): each
    constrains the rest of a match's window, before its first event or after its last.

    Example: ``window_absences(seq(absent(c), a, absent(d)))  # (a, (ABSENT(c),), (ABSENT(d),))``
    """
    rest, starts = split_start_absences(body)
    rest, ends = split_end_absences(rest)
    return rest, starts, ends


#: How the message names the operator an absence must not be the operand of.
_OPERATORS: dict[type, str] = {
    Plus: "plus() (+)", As: "as_() (AS)", Or: "| (OR)", And: "& (AND)", Filter: "where() (FILTER)"
}


def check_absences(
    node: Pattern, in_chain: bool = False, at_root: bool = True, parent: Pattern | None = None
) -> None:
    """Raise unless every absence stands between two parts of a sequence or at the start
    or end of the whole pattern (:func:`window_absences`), not next to a contiguous ``:``."""
    if at_root:
        if isinstance(node, Seq):
            chain = seq_chain(node)
            glued = [
                part
                for k, (part, contiguous) in enumerate(chain)
                if isinstance(part, Absent) and (contiguous or (k + 1 < len(chain) and chain[k + 1][1]))
            ]
            if glued:
                raise PatternError(
                    f"{glued[0]!r} next to a contiguous ':' can never be violated (adjacent "
                    "events have nothing between them); use ';'"
                )
        node = window_absences(node)[0]
    if isinstance(node, Absent):
        if not in_chain:
            operator = _OPERATORS.get(type(parent))
            here = f"; here it is the operand of {operator}, but it binds no event" if operator else ""
            raise PatternError(
                f"{node!r} must stand inside seq(), between the parts it separates "
                f"(e.g. seq(a, absent(c), b)){here}"
            )
        return
    if not isinstance(node, Seq):
        for child in node.children():
            check_absences(child, at_root=False, parent=node)
        return
    chain = seq_chain(node)
    for k, (part, contiguous) in enumerate(chain):
        if not isinstance(part, Absent):
            check_absences(part, at_root=False)
            continue
        if k == 0 or k == len(chain) - 1:
            where = "start" if k == 0 else "end"
            raise UnsupportedError(
                f"{part!r} at the {where} of a sequence is not supported: absence stands "
                "between two parts of a sequence (seq(a, absent(c), b)) or at the start or "
                "end of the whole pattern, with its window as the horizon "
                "(seq(a, absent(c)).within(...))"
            )
        if contiguous or chain[k + 1][1]:
            raise PatternError(
                f"{part!r} next to a contiguous ':' can never be violated (adjacent events "
                "have nothing between them); use ';'"
            )


def without_absences(node: Pattern) -> Pattern:
    """``node`` with its absences left out (``seq(p, absent(C), q)`` → ``seq(p, q)``).
    Under STRICT a match's positions are an interval of the (partition's) stream, so no
    event lies between its parts and every absence holds: STRICT runs the pattern without
    them.

    Example: ``without_absences(seq(a, absent(c), b)) == seq(a, b)``
    """
    if not has_absence(node):
        return node
    if isinstance(node, Seq):
        if isinstance(node.left, Absent):
            return without_absences(node.right)
        if isinstance(node.right, Absent):
            return without_absences(node.left)
        return Seq(without_absences(node.left), without_absences(node.right), node.contiguous)
    if isinstance(node, Or | And):
        return type(node)(without_absences(node.left), without_absences(node.right))
    if isinstance(node, Plus | As | Filter):
        return attrs.evolve(node, inner=without_absences(node.inner))
    return node  # (an absence stands inside seq(): check_absences)


__all__ = [
    "check_absences",
    "has_absence",
    "seq_chain",
    "split_end_absences",
    "split_start_absences",
    "window_absences",
    "without_absences",
]
