"""Pattern AST → CEQL text, the inverse of :func:`pycel.ceql.parse_query`.

Parentheses are written only where CEQL's precedence needs them. Query clauses may be
nested in any order in the AST; they are printed in CEQL's clause order, and parsing the
text back nests them in the canonical order (see ``docs/ceql.md``).
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import attrs

from pycel.dsl import (
    Absent,
    And,
    As,
    Atom,
    Consume,
    Filter,
    Limit,
    NotAtom,
    Or,
    PartitionBy,
    Pattern,
    Plus,
    Select,
    Seq,
    Strategy_,
    Within,
    as_pattern,
)
from pycel.errors import CeqlSyntaxError, UnsupportedError
from pycel.language.absence import seq_chain
from pycel.language.clauses import split_query
from pycel.language.events import Event, event_name
from pycel.language.expr import Arith, Attr, BoolOp, Compare, Const, Expr, IsIn, Like, Not, conjuncts

from ._lexer import quote_ident, quote_string
from ._predicate import searched_regex
from ._scope import type_name_conflict

_CLAUSES = (Within, PartitionBy, Select, Strategy_, Consume, Limit)
# CEL precedence levels (higher binds tighter); see _query._BINARY.
_FILTER, _OR, _AND, _CSEQ, _SEQ, _POSTFIX, _PRIMARY = 1, 2, 3, 4, 5, 6, 7
# Predicate precedence levels.
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_SUM, _P_PRODUCT, _P_UNARY, _P_PRIMARY = 1, 2, 3, 4, 5, 6, 7, 8
_OPS = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def to_ceql(pattern: object, *, stream: str = "S", time_attribute: str | None = None) -> str:
    """CEQL text for ``pattern`` that :func:`parse_query` turns back into an equal AST.

    ``stream`` is the name written after FROM. A window in seconds is written
    ``WITHIN n SECONDS [attr]`` (a pycel extension) unless ``attr`` is ``time_attribute``.
    Raises UnsupportedError for what CEQL cannot say: post-filters, timestamp constants,
    predicates without a variable, infinite numbers, patterns nested deeper than the parser
    reads (:data:`MAX_DEPTH`, :data:`MAX_NESTING`).

    Example::

        to_ceql(seq(s.where(s.price > 10), b).within(events=5))
        # 'SELECT * FROM S\\nWHERE (SELL AS s ; BUY AS b) FILTER s[price > 10]\\nWITHIN 5 EVENTS'
    """
    node = as_pattern(pattern)
    split_query(node)  # rejects duplicated or nested clauses
    found: dict[type, Pattern] = {}
    while isinstance(node, _CLAUSES):
        found[type(node)] = node
        node = node.inner
    body = node
    strategy = found.get(Strategy_)
    select = found.get(Select)
    head = "SELECT "
    if isinstance(strategy, Strategy_):
        head += strategy.name.upper() + " "
    if isinstance(select, Select):
        head += ", ".join(quote_ident(v) for v in select.variables) if select.variables else "NONE"
        for var in select.variables:
            _check_type_name(body, var, "SELECT")
    else:
        head += "*"
    _check_absence_filters(body)
    lines = [f"{head} FROM {quote_ident(stream)}", "WHERE " + cel_to_ceql(body)]
    partition = found.get(PartitionBy)
    if isinstance(partition, PartitionBy):
        lines.append("PARTITION BY " + ", ".join(f"[{quote_ident(k)}]" for k in partition.keys))
    window = found.get(Within)
    if isinstance(window, Within):
        lines.append("WITHIN " + _window(window, time_attribute))
    consume = found.get(Consume)
    if isinstance(consume, Consume):
        lines.append("CONSUME BY " + consume.policy.upper())
    limit = found.get(Limit)
    if isinstance(limit, Limit):
        lines.append(f"LIMIT {limit.n}")
    text = "\n".join(lines)
    _check_parses_back(text, body, time_attribute)
    return text


def _check_parses_back(text: str, body: Pattern, time_attribute: str | None) -> None:
    """Refuse text the parser would refuse: CEQL bounds how deeply a query nests
    (``MAX_DEPTH`` levels, ``MAX_NESTING`` parentheses), and a Python pattern can be
    built deeper than that."""
    # Imported here: the parser is the only judge of its limits, and it imports no printer.
    from ._query import parse_query

    try:
        with warnings.catch_warnings():  # the parse is ours: its warnings are not the user's
            warnings.simplefilter("ignore")
            parse_query(text, _event_types(body), time_attribute=time_attribute, time_unit="ns")
    except CeqlSyntaxError as err:
        raise UnsupportedError(f"CEQL text cannot say this pattern: {err.reason}") from None


def _window(window: Within, time_attribute: str | None) -> str:
    size = str(int(window.size)) if float(window.size).is_integer() else _number(window.size)
    if window.unit == "events":
        if not float(window.size).is_integer():
            raise UnsupportedError(f"a count window of {window.size} events is not a whole number")
        return f"{int(window.size)} EVENTS"
    assert window.on is not None
    if window.unit == "units":
        return f"{size} [{quote_ident(window.on)}]"
    text = f"{size} SECONDS"
    return text if window.on == time_attribute else f"{text} [{quote_ident(window.on)}]"


def _check_type_name(node: Pattern, var: str, where: str) -> None:
    types = {event_name(t): t for t in _event_types(node)}
    conflict = type_name_conflict(node, var, types)
    if conflict is not None:
        raise UnsupportedError(f"{where} {var}: no CEQL text means this pattern; {conflict}")


def _check_absence_filters(node: Pattern) -> None:
    """Refuse an ABSENT filter whose variables CEQL would read otherwise: the parser reads
    it over the absent event and the other parts of its sequence (``ABSENT(Buy FILTER
    Buy[…])`` next to ``Buy AS b`` would also mean b in CORE)."""
    if isinstance(node, Seq):
        chain = [part for part, _ in seq_chain(node)]
        scope = [part for part in chain if not isinstance(part, Absent)]
        for part in chain:
            if isinstance(part, Absent) and part.predicate is not None:
                readable: Pattern = Atom(part.event, part.var)
                for other in scope:
                    readable = Seq(readable, other)
                for var in sorted(v for v in part.predicate.variables() if v is not None):
                    _check_type_name(readable, var, "ABSENT(… FILTER")
            else:
                _check_absence_filters(part)
        return
    for child in node.children():
        _check_absence_filters(child)


def _event_types(node: Pattern) -> set[type[Event]]:
    if isinstance(node, (Atom, NotAtom, Absent)):
        return {node.event}
    return set().union(*(_event_types(c) for c in node.children()))


# -- CEL formulas ------------------------------------------------------------------------------
def cel_to_ceql(node: Pattern) -> str:
    """The CEL formula of a query body (no query clauses) as CEQL text.

    Example: ``cel_to_ceql(seq(A, plus(B)))`` → ``'A ; B+'``
    """
    return _cel(node)[0]


def _wrap(node: Pattern, level: int) -> str:
    text, own = _cel(node)
    return text if own >= level else f"({text})"


def _cel(node: Pattern) -> tuple[str, int]:
    if isinstance(node, Atom):
        name = quote_ident(event_name(node.event))
        if node.var == event_name(node.event):
            return name, _PRIMARY
        return f"{name} AS {quote_ident(node.var)}", _POSTFIX
    if isinstance(node, NotAtom):
        return _negated(node)
    if isinstance(node, Absent):
        return _absence(node), _PRIMARY
    if isinstance(node, Seq):
        level = _CSEQ if node.contiguous else _SEQ
        op = ":" if node.contiguous else ";"
        return f"{_wrap(node.left, level)} {op} {_wrap(node.right, level + 1)}", level
    if isinstance(node, Or):
        return f"{_wrap(node.left, _OR)} OR {_wrap(node.right, _OR + 1)}", _OR
    if isinstance(node, And):
        return f"{_wrap(node.left, _AND)} AND {_wrap(node.right, _AND + 1)}", _AND
    if isinstance(node, Plus):
        inner = _postfix_operand(node.inner)
        return inner + (":+" if node.contiguous else "+"), _POSTFIX
    if isinstance(node, As):
        if isinstance(node.inner, (Atom, NotAtom)):
            # Parenthesized: ``T AS x`` would rename the atom instead.
            inner = f"({_cel(node.inner)[0]})"
        else:
            inner = _wrap(node.inner, _POSTFIX)
        return f"{inner} AS {quote_ident(node.var)}", _POSTFIX
    if isinstance(node, Filter):
        if node.post_filter:
            raise UnsupportedError(f"{node!r}: CEQL has no post-filter (where(..., post_filter=True))")
        return f"{_wrap(node.inner, _FILTER)} FILTER {_filters(node.inner, node.predicate)}", _FILTER
    if isinstance(node, _CLAUSES):
        raise UnsupportedError(f"{type(node).__name__} applies to a whole query, not inside {node!r}")
    raise UnsupportedError(f"no CEQL form for {node!r}")


def _postfix_operand(node: Pattern) -> str:
    if isinstance(node, (Atom, NotAtom)) and _cel(node)[1] < _PRIMARY:
        return f"({_cel(node)[0]})"
    return _wrap(node, _POSTFIX)


def _negated(node: NotAtom) -> tuple[str, int]:
    name = event_name(node.event)
    inner = quote_ident(name)
    if node.predicate is not None:
        others = node.predicate.variables() - {node.var}
        if others:
            raise UnsupportedError(f"{node!r}: a negated atom's filter can only read the negated event")
        pred = node.predicate._map(lambda a: attrs.evolve(a, var=name))
        inner += f" FILTER {quote_ident(name)}[{expr_to_ceql(pred, name)}]"
    if node.var == f"not_{name}":
        return f"NOT({inner})", _PRIMARY
    return f"NOT({inner}) AS {quote_ident(node.var)}", _POSTFIX


def _absence(node: Absent) -> str:
    name = event_name(node.event)
    inner = quote_ident(name) + ("" if node.var == name else f" AS {quote_ident(node.var)}")
    if node.predicate is not None:
        inner += f" FILTER {quote_ident(node.var)}[{expr_to_ceql(node.predicate, node.var)}]"
    return f"ABSENT({inner})"


def _filters(inner: Pattern, predicate: Expr[bool]) -> str:
    """``x[…] AND y[…]``: one bracket per run of conjuncts that read the same first variable."""
    groups: list[tuple[str, list[Expr[bool]]]] = []
    for part in conjuncts(predicate):
        home = _first_variable(part)
        if home is None:
            raise UnsupportedError(f"the filter {part!r} reads no event attribute, so CEQL cannot attach it")
        if groups and groups[-1][0] == home:
            groups[-1][1].append(part)
        else:
            groups.append((home, [part]))
    texts = []
    for home, parts in groups:
        _check_type_name(inner, home, "FILTER")
        if len(parts) == 1:
            body = expr_to_ceql(parts[0], home)
        else:
            body = " AND ".join(_expr_wrap(p, home, _P_AND + 1) for p in parts)
        texts.append(f"{quote_ident(home)}[{body}]")
    return " AND ".join(texts)


def _first_variable(e: Expr[Any]) -> str | None:
    if isinstance(e, Attr):
        return e.var
    for child in e.children():
        var = _first_variable(child)
        if var is not None:
            return var
    return None


# -- predicates --------------------------------------------------------------------------------
def expr_to_ceql(e: Expr[Any], home: str) -> str:
    """A predicate or value as CEQL text inside ``home[…]``: attributes of ``home`` are
    written bare, those of other variables as ``var.attr`` (a pycel extension)."""
    return _expr(e, home)[0]


def _expr_wrap(e: Expr[Any], home: str, level: int) -> str:
    text, own = _expr(e, home)
    return text if own >= level else f"({text})"


def _expr(e: Expr[Any], home: str) -> tuple[str, int]:
    if isinstance(e, Attr):
        if e.var is None:
            raise UnsupportedError(f"{e!r} is not bound to a variable")
        name = quote_ident(e.name)
        if e.prev:
            return f"PREV({quote_ident(e.var)})[{name}]", _P_PRIMARY
        return (name if e.var == home else f"{quote_ident(e.var)}.{name}"), _P_PRIMARY
    if isinstance(e, Const):
        return _literal(e.value)
    if isinstance(e, Arith):
        level = _P_SUM if e.op in "+-" else _P_PRODUCT
        return f"{_expr_wrap(e.left, home, level)} {e.op} {_expr_wrap(e.right, home, level + 1)}", level
    if isinstance(e, Compare):
        left, right = _expr_wrap(e.left, home, _P_SUM), _expr_wrap(e.right, home, _P_SUM)
        return f"{left} {_OPS[e.op]} {right}", _P_CMP
    if isinstance(e, IsIn):
        values = ", ".join(_literal(v)[0] for v in e.values)
        op = "NOT IN" if e.negated else "IN"
        return f"{_expr_wrap(e.expr, home, _P_SUM)} {op} {{{values}}}", _P_CMP
    if isinstance(e, Like):
        operand = _expr_wrap(e.expr, home, _P_SUM)
        if not e.regex:
            return f"{operand} MATCHES {quote_string(sql_like_to_regex(e.pattern))}", _P_CMP
        searched = searched_regex(e.pattern)
        if searched is not None:
            return f"{operand} LIKE {quote_string(searched)}", _P_CMP
        return f"{operand} MATCHES {quote_string(e.pattern)}", _P_CMP
    if isinstance(e, BoolOp):
        level = _P_AND if e.op == "and" else _P_OR
        joiner = " AND " if e.op == "and" else " OR "
        return joiner.join(_expr_wrap(a, home, level + 1) for a in e.args), level
    if isinstance(e, Not):
        return f"NOT {_expr_wrap(e.arg, home, _P_NOT)}", _P_NOT
    raise UnsupportedError(f"no CEQL form for the expression {e!r}")


def _literal(value: Any) -> tuple[str, int]:
    if isinstance(value, bool):
        return ("TRUE" if value else "FALSE"), _P_PRIMARY
    if isinstance(value, int):
        return str(value), (_P_UNARY if value < 0 else _P_PRIMARY)
    if isinstance(value, float):
        text = _number(value)
        return text, (_P_UNARY if text.startswith("-") else _P_PRIMARY)
    if isinstance(value, str):
        return quote_string(value), _P_PRIMARY
    raise UnsupportedError(f"CEQL has no literal for {value!r}")


def _number(value: float) -> str:
    """A float as CEQL text that reads back as the same float (a dot before any exponent)."""
    if math.isinf(value) or math.isnan(value):
        raise UnsupportedError(f"CEQL has no literal for {value!r}")
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if e:  # CORE's lexer wants a '.' in the mantissa and no '+' in the exponent
        text = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent.lstrip('+')}"
    return text


def sql_like_to_regex(pattern: str) -> str:
    """The regular expression (whole-string match) equivalent to a SQL LIKE pattern."""
    body = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return "(?s)" + body
