"""CEQL's WITHIN clause: window sizes, their units and the attribute they measure.

``WITHIN n EVENTS``, ``WITHIN n [attribute]`` and ``WITHIN 1 HOURS 2 MINUTES 3 SECONDS
[attribute]`` become :class:`pycel.dsl.Within` nodes; :func:`sized` reports a size or
limit out of range at its token's line and column (also used for LIMIT).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pycel.dsl import Pattern, Within, check_window_size
from pycel.errors import CeqlSyntaxError, PatternError
from pycel.language.events import Event

from ._lexer import Cursor, Token
from ._predicate import located

_UNIT_SECONDS = {"HOURS": 3600, "MINUTES": 60, "SECONDS": 1}
#: Nanoseconds per ``time_unit`` (pycel keeps timestamps as int64 nanoseconds).
NS_PER_TIME_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _checked_float(size: int | float, unit: str) -> float:
    """``size`` as a float after checking its range (a huge int must not reach float())."""
    check_window_size(size, unit)
    return float(size)


def attribute_dtypes(types: Mapping[str, type[Event]], name: str) -> set[str]:
    """The types attribute ``name`` has in the event ``types`` (empty: none has it)."""
    return {cls.__fields__[name] for cls in types.values() if name in cls.__fields__}


def sized(build: Callable[[], Pattern], clause: str, tok: Token) -> Pattern:
    """``build()``, with an out-of-range size or limit reported at ``tok``'s line and column."""
    try:
        return build()
    except (PatternError, OverflowError) as err:
        shown = tok.text if len(tok.text) <= 24 else f"{tok.text[:10]}…{tok.text[-10:]}"
        raise PatternError(located(f"{clause} {shown}: {err}", tok)) from None


class WindowParser:
    """Parses the clause after ``WITHIN`` over the event types ``types``.

    ``time_attribute``: the attribute a window in HOURS/MINUTES/SECONDS measures when the
    query names none (None: the only timestamp attribute of ``types``); ``time_unit``: the
    unit of ``n`` in ``WITHIN n [timestamp attribute]`` (see :func:`pycel.ceql.parse_query`).
    """

    def __init__(
        self,
        cur: Cursor,
        types: Mapping[str, type[Event]],
        time_attribute: str | None,
        time_unit: str | None,
    ) -> None:
        self.cur = cur
        self.types = types
        self.time_attribute = time_attribute
        self.time_unit = time_unit

    def window(self, node: Pattern) -> Pattern:
        """``node WITHIN …``, the cursor standing after WITHIN."""
        cur = self.cur
        tok = cur.peek()
        if tok.kind != "number":
            raise cur.error("expected a window size (n EVENTS, n [attribute], or n HOURS/MINUTES/SECONDS)")
        if cur.at_keyword("EVENTS", k=1):
            cur.next()
            cur.next()
            if not isinstance(tok.value, int):
                raise CeqlSyntaxError(
                    "a count window needs a whole number of events", cur.text, tok.line, tok.column
                )
            count = tok.value
            return sized(lambda: Within(node, _checked_float(count, "events"), "events", None), "WITHIN", tok)
        if cur.at_op("[", k=1):
            cur.next()
            cur.next()
            attr_tok = cur.expect_ident("an attribute name")
            attr = self.time_attr(attr_tok)
            cur.expect_op("]")
            # n is in the attribute's units; a timestamp holds nanoseconds, and n counts
            # the unit its integers are read in (exact: no conversion through seconds).
            scale = self.ns_per_time_unit(attr_tok) if self.attr_dtype(attr_tok) == "time" else 1
            size = tok.value
            return sized(
                lambda: Within(node, _checked_float(size * scale, "units"), "units", attr), "WITHIN", tok
            )
        seconds: int | float = 0
        units: set[str] = set()
        while cur.peek().kind == "number":
            number = cur.next()
            unit = cur.accept_keyword(*_UNIT_SECONDS)
            if unit is None:
                raise cur.error(
                    "expected HOURS, MINUTES or SECONDS"
                    if units
                    else "expected EVENTS, [attribute], HOURS, MINUTES or SECONDS"
                )
            if unit.value in units:
                raise cur.error(f"{unit.value} given twice", unit)
            units.add(unit.value)
            seconds += number.value * _UNIT_SECONDS[unit.value]
        if cur.accept_op("["):
            attr_tok = cur.expect_ident("an attribute name")
            attr = self.time_attr(attr_tok)
            cur.expect_op("]")
        else:
            attr = self.default_time_attr(tok)
        total = seconds
        return sized(lambda: Within(node, _checked_float(total, "seconds"), "seconds", attr), "WITHIN", tok)

    def ns_per_time_unit(self, attr_tok: Token) -> int:
        if self.time_unit is None:
            raise PatternError(
                located(
                    f"WITHIN n [{attr_tok.value}]: {attr_tok.value!r} is a timestamp, so n needs a "
                    "unit: pass parse_query(..., time_unit='s', 'ms', 'us' or 'ns'), the unit its "
                    "integers are read in (pycel's Python API reads them as 'ns'), or write "
                    f"WITHIN n SECONDS [{attr_tok.value}]",
                    attr_tok,
                )
            )
        return NS_PER_TIME_UNIT[self.time_unit]

    def attr_dtype(self, tok: Token) -> str:
        """The one type of attribute ``tok`` in the event types (PatternError otherwise)."""
        dtypes = attribute_dtypes(self.types, tok.value)
        if not dtypes:
            raise PatternError(located(f"WITHIN: no event type has attribute {tok.value!r}", tok))
        if len(dtypes) > 1 and "time" in dtypes:
            raise PatternError(
                located(
                    f"WITHIN: attribute {tok.value!r} is a timestamp in some event types and "
                    f"a {'/'.join(sorted(dtypes - {'time'}))} in others",
                    tok,
                )
            )
        return "float" if len(dtypes) > 1 else next(iter(dtypes))

    def time_attr(self, tok: Token) -> str:
        dtypes = attribute_dtypes(self.types, tok.value)
        if not dtypes:
            raise PatternError(located(f"WITHIN: no event type has attribute {tok.value!r}", tok))
        bad = sorted(dtypes - {"int", "float", "time"})
        if bad:
            raise PatternError(
                located(f"WITHIN: attribute {tok.value!r} is {bad[0]}, not a number or time", tok)
            )
        self.attr_dtype(tok)
        result: str = tok.value
        return result

    def default_time_attr(self, tok: Token) -> str:
        name = self.time_attribute
        if name is None:
            stamps = {a for cls in self.types.values() for a, d in cls.__fields__.items() if d == "time"}
            if len(stamps) == 1:
                name = next(iter(stamps))
        if name is None:
            raise PatternError(
                located(
                    "WITHIN in HOURS/MINUTES/SECONDS needs the time attribute: write "
                    "WITHIN … SECONDS [attribute], pass parse_query(..., time_attribute=...), or "
                    "declare one attribute primary_time (CORE uses arrival time, which pycel "
                    "does not have)",
                    tok,
                )
            )
        if not any(name in cls.__fields__ for cls in self.types.values()):
            raise PatternError(
                located(f"WITHIN: time attribute {name!r} is not an attribute of any event type", tok)
            )
        return name
