"""Predicates inside CEQL filters, ``x[price > 10 AND name IN {'A', 'B'}]``."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from pycel.errors import PatternError
from pycel.language.events import Event, event_name
from pycel.language.expr import Arith, Attr, BoolOp, Compare, Const, Expr, IsIn, Like, Not

from ._lexer import Cursor, Token

_COMPARISONS = {"=": "==", "==": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

#: What a variable may be bound to: event types, or None for "any type" (a negated atom).
Scope = dict[str, list[type[Event] | None]]


_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")
_SEARCH = re.compile(r"((?:\(\?[aiLmsux]+\))*)\(\?s:\.\*\)\(\?:(.*)\)\(\?s:\.\*\)", re.DOTALL)


def search_regex(pattern: str) -> str:
    """A regex whose whole-string match is a *search* for ``pattern`` (CORE's LIKE).

    ``pycel.language.expr.Like`` matches the whole string; CORE's LIKE finds the regex anywhere
    (``name LIKE 'IMM'`` holds for RIMM). Leading global flags such as ``(?i)`` stay first.

    Example: ``search_regex("IMM")`` → ``'(?s:.*)(?:IMM)(?s:.*)'``
    """
    flags = _GLOBAL_FLAGS.match(pattern)
    head = flags.group() if flags else ""
    body = pattern[len(head) :]
    end = "\n" if "x" in head else ""  # a verbose-mode comment must not swallow the ')'
    return f"{head}(?s:.*)(?:{body}{end})(?s:.*)"


def searched_regex(regex: str) -> str | None:
    """The pattern ``regex`` searches for when it is a :func:`search_regex`, else None."""
    m = _SEARCH.fullmatch(regex)
    if m is None:
        return None
    head, body = m.group(1), m.group(2)
    if "x" in head:
        body = body.removesuffix("\n")
    pattern = head + body
    return pattern if search_regex(pattern) == regex else None


def _finite(value: Any, tok: Token, text: str) -> Any:
    """``value``, the number literal ``text`` read at ``tok``; PatternError when it
    overflowed to infinity."""
    if isinstance(value, float) and math.isinf(value):
        raise PatternError(
            located(f"{text} is outside the range of 64-bit floats (it would be read as infinity)", tok)
        )
    return value


def located(message: str, tok: Token) -> str:
    """``message`` with the token's line and column."""
    return f"{message} (line {tok.line}, column {tok.column})"


class PredicateParser:
    """``or := and (OR and)*; and := not (AND not)*; not := NOT not | comparison;
    comparison := sum [(= | != | < | …) sum | [NOT] IN {…} | IN RANGE(a, b) | [NOT] LIKE 's'];
    sum := product ((+|-) product)*; product := unary ((*|/|%) unary)*;
    unary := (-|+) unary | number | string | TRUE | FALSE | (or) | attr | var.attr
    | PREV(var)[attr]`` (``PREV`` is recognised before ``(`` only, and not back-quoted)."""

    def __init__(
        self, cur: Cursor, types: Iterable[type[Event]], var: str, scope: Scope, negated: bool
    ) -> None:
        self.cur = cur
        self.types = list(types)
        self.var = var
        self.scope = scope
        self.negated = negated

    def predicate(self) -> Expr[bool]:
        start = self.cur.peek()
        pred = self.disjunction()
        if pred.dtype != "bool":
            raise PatternError(located(f"{pred!r} is a {pred.dtype} expression, not a predicate", start))
        return pred

    def _build(self, tok: Token, f: Callable[..., Any], *args: Any) -> Any:
        try:
            result = f(*args)
        except PatternError as err:
            raise PatternError(located(str(err), tok)) from err
        return self.cur.built(result, tok)

    def disjunction(self) -> Expr[Any]:
        left = self.conjunction()
        while (tok := self.cur.accept_keyword("OR")) is not None:
            left = self._build(tok, BoolOp.build, "or", left, self.conjunction())
        return left

    def conjunction(self) -> Expr[Any]:
        left = self.negation()
        while (tok := self.cur.accept_keyword("AND")) is not None:
            left = self._build(tok, BoolOp.build, "and", left, self.negation())
        return left

    def negation(self) -> Expr[Any]:
        tok = self.cur.accept_keyword("NOT")
        if tok is None:
            return self.comparison()
        with self.cur.nested(tok):
            arg = self.negation()
        if arg.dtype != "bool":
            raise PatternError(located(f"NOT needs a predicate, but {arg!r} is {arg.dtype}", tok))
        result: Expr[bool] = self.cur.built(Not(arg), tok)
        return result

    def comparison(self) -> Expr[Any]:
        cur = self.cur
        left = self.sum()
        tok = cur.peek()
        if tok.kind == "op" and tok.value in _COMPARISONS:
            cur.next()
            result = self._build(tok, Compare.build, _COMPARISONS[tok.value], left, self.sum())
            after = cur.peek()
            if after.kind == "op" and after.value in _COMPARISONS:
                raise cur.error("comparisons cannot be chained (use AND)")
            return result  # type: ignore[no-any-return]
        negated = cur.at_keyword("NOT") and cur.at_keyword("IN", "LIKE", "MATCHES", k=1)
        if negated:
            cur.next()
        if (op := cur.accept_keyword("IN")) is not None:
            result = self.membership(left, op)
        elif (op := cur.accept_keyword("LIKE", "MATCHES")) is not None:
            result = self.like(left, op)
        else:
            return left
        if not negated:
            return result
        return IsIn(result.expr, result.values, True) if isinstance(result, IsIn) else Not(result)

    def membership(self, left: Expr[Any], tok: Token) -> Expr[bool]:
        cur = self.cur
        if cur.accept_keyword("RANGE"):
            cur.expect_op("(", "'(' after RANGE")
            low = self.sum()
            cur.expect_op(",")
            high = self.sum()
            cur.expect_op(")")
            result: Expr[bool] = self._build(tok, left.between, low, high)
            return result
        cur.expect_op("{", "'{' or RANGE after IN")
        if cur.accept_op(".."):  # {..high}
            high_tok = cur.peek()
            result = self._build(high_tok, Compare.build, "<=", left, self.literal(numeric=True))
            cur.expect_op("}")
            return result
        values: list[Any] = []
        if not cur.at_op("}"):
            first_tok = cur.peek()
            first = self.literal()
            if cur.accept_op(".."):  # {low..} or {low..high}
                if not isinstance(first, int | float) or isinstance(first, bool):
                    raise PatternError(located("a range needs numbers", first_tok))
                if cur.accept_op("}"):
                    result = self._build(first_tok, Compare.build, ">=", left, first)
                    return result
                high = self.literal(numeric=True)
                cur.expect_op("}")
                result = self._build(first_tok, left.between, first, high)
                return result
            values.append(first)
            while cur.accept_op(","):
                values.append(self.literal())
        cur.expect_op("}", "',' or '}'")
        result = self._build(tok, left.isin, values)
        return result

    def like(self, left: Expr[Any], tok: Token) -> Expr[bool]:
        """``x LIKE 're'``: CORE's regular-expression *search* (the regex matches somewhere
        in x); ``x MATCHES 're'`` (pycel): the regex matches the whole of x."""
        pattern = self.cur.peek()
        if pattern.kind != "string":
            raise self.cur.error(f"expected a quoted regular expression after {tok.value}")
        self.cur.next()
        if left.dtype != "str":
            raise PatternError(located(f"{tok.value} needs a string, but {left!r} is {left.dtype}", tok))
        regex = pattern.value if tok.value == "MATCHES" else search_regex(pattern.value)
        for candidate in {pattern.value, regex}:
            try:
                re.compile(candidate)
            except re.error as err:
                raise PatternError(
                    located(f"{tok.value} {pattern.text}: invalid regular expression ({err})", pattern)
                ) from err
        return Like(left, regex, regex=True)

    def literal(self, *, numeric: bool = False) -> Any:
        cur = self.cur
        tok = cur.peek()
        sign = 1
        if tok.kind == "op" and tok.value in ("-", "+"):
            cur.next()
            sign = -1 if tok.value == "-" else 1
            if cur.peek().kind != "number":
                raise cur.error("expected a number")
        value_tok = cur.peek()
        if value_tok.kind == "number":
            cur.next()
            text = value_tok.text if tok is value_tok else tok.text + value_tok.text
            return _finite(sign * value_tok.value, tok, text)
        if not numeric and value_tok.kind == "string":
            return cur.next().value
        if not numeric and cur.at_keyword("TRUE", "FALSE"):
            return cur.next().value == "TRUE"
        raise cur.error("expected a number" if numeric else "expected a number, a string, TRUE or FALSE")

    def sum(self) -> Expr[Any]:
        left = self.product()
        while (tok := self.cur.accept_op("+", "-")) is not None:
            left = self._build(tok, Arith.build, tok.value, left, self.product())
        return left

    def product(self) -> Expr[Any]:
        left = self.unary()
        while (tok := self.cur.accept_op("*", "/", "%")) is not None:
            left = self._build(tok, Arith.build, tok.value, left, self.unary())
        return left

    def unary(self) -> Expr[Any]:
        cur = self.cur
        tok = cur.accept_op("-", "+")
        if tok is None:
            return self.primary()
        if tok.value == "-" and cur.peek().kind == "number":  # -9223372036854775808 is an int64
            number = cur.next()
            return self.constant(-number.value, tok, "-" + number.text)
        with cur.nested(tok):
            arg = self.unary()
        if arg.dtype not in ("int", "float"):
            raise PatternError(located(f"unary {tok.value} needs a number, but {arg!r} is {arg.dtype}", tok))
        if tok.value == "+":
            return arg
        if isinstance(arg, Const):
            return Const(-arg.value)
        result: Expr[Any] = self._build(tok, Arith.build, "-", Const(0), arg)
        return result

    def primary(self) -> Expr[Any]:
        cur = self.cur
        tok = cur.peek()
        if tok.kind == "number":
            return self.constant(cur.next().value, tok, tok.text)
        if tok.kind == "string":
            cur.next()
            return Const(tok.value)
        if cur.at_keyword("TRUE", "FALSE"):
            cur.next()
            return Const(tok.value == "TRUE")
        if (paren := cur.accept_op("(")) is not None:
            with cur.nested(paren):
                inner = self.disjunction()
            cur.expect_op(")", "')' or an operator")
            return inner
        if tok.kind == "ident" and tok.text.upper() == "PREV" and cur.at_op("(", k=1):
            return self.previous()
        if tok.kind == "ident":
            cur.next()
            if cur.at_op(".") and cur.peek(1).kind == "ident":
                cur.next()
                return self.attribute(tok.value, cur.next(), qualifier=tok)
            return self.attribute(self.var, tok)
        raise cur.error("expected an attribute, a number, a string, TRUE, FALSE or '('")

    def constant(self, value: int | float, tok: Token, text: str) -> Const[Any]:
        """A number constant; one outside the int64 range, or a float literal too large for
        a float (``1e999``, which Python reads as infinity), is refused at ``tok``."""
        value = _finite(value, tok, text)
        try:
            return Const(value)
        except PatternError as err:
            raise PatternError(located(str(err), tok)) from None

    def previous(self) -> Attr[Any]:
        """``PREV(x)[attr]``: attribute ``attr`` of x's occurrence in the previous iteration
        of the ``+`` that binds x (a trend; the static checks say where it may stand)."""
        cur = self.cur
        keyword = cur.next()
        if self.negated:
            raise PatternError(
                located("inside NOT(…), a filter is about one event: it cannot read PREV(…)", keyword)
            )
        cur.expect_op("(", "'(' after PREV")
        var_tok = cur.expect_ident("a variable name (PREV(x)[attribute])")
        cur.expect_op(")", "')' after PREV(x")
        cur.expect_op("[", "'[' after PREV(x) (PREV(x)[attribute])")
        name_tok = cur.expect_ident("an attribute name (PREV(x)[attribute])")
        cur.expect_op("]", "']' after PREV(x)[attribute")
        return attrs.evolve(self.attribute(var_tok.value, name_tok, qualifier=var_tok), prev=True)

    def attribute(self, var: str, tok: Token, qualifier: Token | None = None) -> Attr[Any]:
        name: str = tok.value
        if var not in self.scope:
            where = qualifier or tok
            if self.negated:
                raise PatternError(
                    located(f"inside NOT(…), a filter can only read the negated event ({var!r})", where)
                )
            raise PatternError(
                located(f"predicate reads variable {var!r}, which the filtered pattern does not bind", where)
                + f"; it binds {sorted(self.scope)}"
            )
        kinds = self.scope[var]
        # In pattern order, so the owner is the first event type of the variable that has it.
        candidates = self.types if None in kinds else [k for k in kinds if k is not None]
        owners = [cls for cls in candidates if name in cls.__fields__]
        if not owners:
            names = sorted({event_name(c) for c in candidates})
            known = sorted({a for c in candidates for a in c.__fields__})
            raise PatternError(
                located(f"unknown attribute {name!r} of variable {var!r}", tok)
                + f" (event types {names} have attributes {known})"
            )
        dtypes = {cls.__fields__[name] for cls in owners}
        if len(dtypes) > 1:
            detail = ", ".join(f"{event_name(c)}: {c.__fields__[name]}" for c in owners)
            raise PatternError(located(f"attribute {name!r} of {var!r} has several types ({detail})", tok))
        return Attr(var, name, dtypes.pop(), event_name(owners[0]))
