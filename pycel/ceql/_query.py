"""CEQL queries → pycel pattern AST (a hand-written recursive-descent parser).

This module parses the query's clauses (SELECT, FROM, WHERE, PARTITION BY, CONSUME BY,
LIMIT), the CEL formula after WHERE and its ``stream>T`` qualifiers; the FILTER clauses
are in :mod:`._filter`, the WITHIN clause in :mod:`._window`, the predicates inside
``x[…]`` in :mod:`._predicate`.

The grammar, its mapping to :mod:`pycel.dsl` nodes and the differences from CORE are in
``docs/ceql.md``. Operator precedence follows CORE's grammar, tightest first:
``T AS x`` / ``AS`` / ``+`` / ``:+``, then ``;``, then ``:``, then ``AND`` (pycel), then ``OR``,
then ``FILTER`` (so ``A ; B FILTER …`` filters the whole sequence).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping

import attrs

from pycel.dsl import (
    STRATEGIES,
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
)
from pycel.errors import CeqlSyntaxError, PatternError
from pycel.language.absence import seq_chain
from pycel.language.events import Event, event_name
from pycel.language.expr import BoolOp, Expr
from pycel.limits import MAX_ATOMS

from ._declaration import Declaration
from ._filter import FilterParser
from ._lexer import Cursor, Token
from ._predicate import located
from ._scope import bound_variables, type_name_conflict
from ._window import NS_PER_TIME_UNIT, WindowParser, attribute_dtypes, sized

__all__ = ["CeqlWarning", "bound_variables", "parse_query"]

TypesLike = Mapping[str, type[Event]] | Iterable[type[Event]]


class CeqlWarning(UserWarning):
    """A CEQL query uses something pycel accepts but ignores."""


#: Said when a sequence (OR, AND) of atoms is longer than the parser's MAX_DEPTH.
_ATOMS_HINT = f"the engine supports at most {MAX_ATOMS} atoms per pattern"

#: CEL binary operators: token → (precedence, builder). FILTER has precedence 1.
_FILTER_PREC = 1
_BINARY: dict[str, tuple[int, Callable[[Pattern, Pattern], Pattern]]] = {
    ";": (5, lambda a, b: Seq(a, b, False)),
    ":": (4, lambda a, b: Seq(a, b, True)),
    "AND": (3, And),
    "OR": (2, Or),
}


def parse_query(
    text: str, types: TypesLike, *, time_attribute: str | None = None, time_unit: str | None = None
) -> Pattern:
    """Parse one CEQL query into the pattern AST the Python DSL builds.

    ``types`` maps event names to :class:`pycel.Event` subclasses: a
    :class:`~pycel.ceql.Declaration`, any mapping, or an iterable of classes (named by
    :func:`pycel.language.events.event_name`). ``time_attribute`` is the attribute that
    ``WITHIN 1 hours 2 minutes 3 seconds`` measures; by default the declaration's
    ``primary_time`` attribute, else the only timestamp attribute of ``types``.
    ``time_unit`` (``s``, ``ms``, ``us`` or ``ns``) is the unit of ``n`` in ``WITHIN n
    [t]`` when ``t`` is a timestamp (``primary_time``) attribute: the unit its integer
    values are read in (``"ns"`` for integers given to pycel's Python API; the command
    line's ``--time-unit``). Such a window without ``time_unit`` is a PatternError, so that
    ``n`` is never read in a unit the data does not use.

    Raises :class:`pycel.CeqlSyntaxError` (1-based line and column) on malformed text,
    :class:`pycel.PatternError` on unknown event types, variables or attributes, and
    :class:`pycel.UnsupportedError` on CORE features pycel lacks.

    Example::

        decl = parse_declaration("CREATE STREAM S { EVENT SELL { name: string, price: double } }")
        p = parse_query("SELECT * FROM S WHERE SELL AS s FILTER s[price > 10] WITHIN 5 EVENTS", decl)
        # Within(Filter(Atom(SELL, 's'), s.price > 10), 5.0, 'events', None)
    """
    if isinstance(types, Mapping):
        named = dict(types)
    else:
        named = {event_name(cls): cls for cls in types}
    for name, cls in named.items():
        if not (isinstance(cls, type) and issubclass(cls, Event)):
            raise PatternError(f"types[{name!r}] is {cls!r}, not a pycel.Event subclass")
    if time_unit is not None and time_unit not in NS_PER_TIME_UNIT:
        raise PatternError(f"time_unit={time_unit!r}: choose one of {sorted(NS_PER_TIME_UNIT)}")
    if time_attribute is not None:  # checked even when no window reads it: a typo is an error
        dtypes = attribute_dtypes(named, time_attribute)
        if not dtypes or not dtypes <= {"int", "float", "time"}:
            what = "no event type has it" if not dtypes else f"it is {'/'.join(sorted(dtypes))}"
            raise PatternError(
                f"time_attribute={time_attribute!r}: {what}; the time attribute is a number or timestamp "
                "attribute of the event types"
            )
    parser = _QueryParser(
        text, named, types if isinstance(types, Declaration) else None, time_attribute, time_unit
    )
    return parser.query()


class _QueryParser:
    def __init__(
        self,
        text: str,
        types: dict[str, type[Event]],
        declaration: Declaration | None,
        time_attribute: str | None,
        time_unit: str | None,
    ) -> None:
        self.cur = Cursor(text)
        self.types = types
        self.declaration = declaration
        self.allowed: set[str] | None = None  # event names of the FROM streams
        self.from_streams: list[str] | None = None  # the FROM clause, when written
        if time_attribute is None and declaration is not None:
            time_attribute = declaration.time_attribute
        self.windows = WindowParser(self.cur, types, time_attribute, time_unit)
        self.filters = FilterParser(self.cur, types, self.check_qualifier)
        # ABSENT(… FILTER …) read before the sequence around it: (node, FILTER's token index).
        self.absences: list[tuple[Absent, int]] = []

    # -- query -----------------------------------------------------------------------------
    def query(self) -> Pattern:
        cur = self.cur
        cur.expect_keyword("SELECT")
        strategy: str | None = None
        tok = cur.peek()
        if tok.kind == "keyword" and tok.value.lower() in STRATEGIES:
            strategy = cur.next().value.lower()
        select = self.select_list()
        if strategy is None and select is not None and len(select) == 1 and self.starts_a_selection():
            word = select[0][1]
            raise CeqlSyntaxError(
                f"{word.value!r} is not a selection strategy (ALL, ANY, NEXT, LAST, MAX, STRICT), "
                "and variables in SELECT are separated by ','",
                cur.text,
                word.line,
                word.column,
            )
        if cur.accept_keyword("FROM"):
            self.from_list()
        for _, var_tok, stream_tok in select or ():
            if stream_tok is not None:
                self.check_qualifier(stream_tok, var_tok)
        cur.expect_keyword("WHERE", "FROM or WHERE")
        body = self.cel()
        if self.absences:
            end, body = cur.i, self.with_absence_filters(body)
            cur.i = end
        clauses = ["PARTITION BY", "WITHIN", "CONSUME BY", "LIMIT"]
        node = body
        partition: tuple[str, ...] = ()
        if cur.accept_keyword("PARTITION"):
            cur.expect_keyword("BY")
            partition = self.partition_list()
            clauses = clauses[1:]
        if cur.accept_keyword("WITHIN"):
            size_tok = cur.peek()
            node = self.windows.window(node)
            self.warn_seconds_on_a_number(node, size_tok)
            clauses = clauses[clauses.index("WITHIN") + 1 :]
        if partition:
            node = PartitionBy(node, partition)
        if select is not None:
            node = Select(node, self.checked_selection(body, select))
        if strategy is not None:
            node = Strategy_(node, strategy)
        if cur.accept_keyword("CONSUME"):
            cur.expect_keyword("BY")
            policy = cur.accept_keyword("NONE", "ANY", "PARTITION")
            if policy is None:
                raise cur.error("expected NONE, ANY or PARTITION")
            node = Consume(node, policy.value.lower())
            clauses = ["LIMIT"]
        if cur.accept_keyword("LIMIT"):
            tok = cur.peek()
            if tok.kind != "number" or not isinstance(tok.value, int) or tok.value < 1:
                raise cur.error("expected a positive integer")
            node = sized(lambda: Limit(node, tok.value), "LIMIT", cur.next())
            clauses = []
        if cur.at_op(";") and cur.peek(1).kind == "eof":
            cur.next()
        if cur.peek().kind != "eof":
            expected = "expected " + ", ".join(clauses + ["the end of the query"])
            raise cur.error(expected, hint=cur.foreign_operator() if clauses[:1] == ["PARTITION BY"] else "")
        return node

    def warn_seconds_on_a_number(self, node: Pattern, tok: Token) -> None:
        """A CeqlWarning when WITHIN … SECONDS (MINUTES, HOURS) measures a number
        attribute: its values count as seconds, whatever unit the data uses."""
        if not (isinstance(node, Within) and node.unit == "seconds" and node.on is not None):
            return
        on = node.on
        dtypes = {cls.__fields__[on] for cls in self.types.values() if on in cls.__fields__}
        if "time" in dtypes or not dtypes:
            return
        size = f"{node.size:g}"
        warnings.warn(
            located(
                f"WITHIN … SECONDS: {on} is a number ({'/'.join(sorted(dtypes))}), not a timestamp, so "
                f"its values count as seconds ({on}(end) - {on}(start) <= {size})",
                tok,
            )
            + f"; if {on} counts another unit, write WITHIN n [{on}] in that unit, or declare it "
            "primary_time (the command line's --time-unit gives its unit)",
            CeqlWarning,
            stacklevel=4,  # the caller of parse_query
        )

    def checked_selection(
        self, body: Pattern, select: list[tuple[str, Token, Token | None]]
    ) -> tuple[str, ...]:
        bound = bound_variables(body)
        for var, var_tok, _ in select:
            conflict = type_name_conflict(body, var, self.types)
            if conflict is not None:
                raise PatternError(located(f"SELECT {var}: {conflict}", var_tok))
            if var not in bound:
                raise PatternError(
                    located(f"SELECT names {var!r}, which the pattern does not bind", var_tok)
                    + f"; it binds {sorted(bound)}"
                )
        return tuple(var for var, _, _ in select)

    def select_list(self) -> list[tuple[str, Token, Token | None]] | None:
        """The selected variables, each with its token and its stream qualifier's token."""
        cur = self.cur
        if cur.accept_op("*"):
            return None
        if cur.accept_keyword("NONE"):
            return []
        names: list[tuple[str, Token, Token | None]] = []
        while True:
            tok = cur.expect_ident("'*', NONE or a variable name")
            stream_tok: Token | None = None
            if cur.at_op(">") and cur.peek(1).kind == "ident":  # stream>event
                cur.next()
                stream_tok, tok = tok, cur.next()
            if cur.accept_op("["):  # attribute projection: CORE 0.1.6 parses and ignores it
                while True:
                    cur.expect_ident("an attribute name")
                    if not cur.accept_op(","):
                        break
                cur.expect_op("]", "',' or ']'")
                warnings.warn(
                    located(f"SELECT {tok.value}[…]: attribute projection is ignored (as by CORE)", tok),
                    CeqlWarning,
                    stacklevel=4,
                )
            names.append((tok.value, tok, stream_tok))
            if not cur.accept_op(","):
                return names

    def starts_a_selection(self) -> bool:
        """Whether the next token could start a selection (after a misspelt strategy)."""
        tok = self.cur.peek()
        return (tok.kind == "op" and tok.value == "*") or tok.kind == "ident" or self.cur.at_keyword("NONE")

    def from_list(self) -> None:
        cur = self.cur
        allowed: set[str] = set()
        self.from_streams = []
        while True:
            tok = cur.expect_ident("a stream name")
            self.from_streams.append(tok.value)
            if self.declaration is not None:
                if tok.value not in self.declaration.streams:
                    raise PatternError(
                        located(f"unknown stream {tok.value!r}", tok)
                        + f"; declared streams: {sorted(self.declaration.streams)}"
                    )
                allowed.update(self.declaration.streams[tok.value])
            if not cur.accept_op(","):
                break
        if self.declaration is not None:
            self.allowed = allowed

    def partition_list(self) -> tuple[str, ...]:
        cur = self.cur
        keys: list[str] = []
        while True:
            cur.expect_op("[", "'[' (PARTITION BY [attribute, …])")
            while True:
                tok = cur.expect_ident("an attribute name")
                if not any(tok.value in cls.__fields__ for cls in self.types.values()):
                    raise PatternError(
                        located(f"PARTITION BY: no event type has attribute {tok.value!r}", tok)
                    )
                keys.append(tok.value)
                if not cur.accept_op(","):
                    break
            cur.expect_op("]", "',' or ']'")
            if not cur.accept_op(","):
                return tuple(keys)

    # -- CEL formulas ----------------------------------------------------------------------
    def cel(self, min_prec: int = _FILTER_PREC) -> Pattern:
        cur = self.cur
        left = self.cel_postfix()
        while True:
            tok = cur.peek()
            if tok.kind == "keyword" and tok.value == "FILTER":
                if min_prec > _FILTER_PREC:
                    break
                cur.next()
                left = cur.built(self.filters.filter_tree(left).apply(left), tok)
                continue
            key = tok.value if tok.kind in ("op", "keyword") else None
            if key not in _BINARY or _BINARY[key][0] < min_prec:
                break
            if key == ";" and cur.peek(1).kind == "eof":
                break  # a trailing ';' ends the query
            prec, build = _BINARY[key]
            cur.next()
            left = cur.built(build(left, self.cel(prec + 1)), tok, _ATOMS_HINT)
        return left

    def cel_postfix(self) -> Pattern:
        cur = self.cur
        node = self.cel_primary()
        while True:
            tok = cur.peek()
            if cur.accept_keyword("AS"):
                node = As(node, self.variable())
            elif cur.accept_op("+"):
                node = Plus(node, False)
            elif cur.accept_op(":+"):
                node = Plus(node, True)
            else:
                return node
            cur.built(node, tok)

    def variable(self) -> str:
        tok = self.cur.expect_ident("a variable name")
        if not tok.value.isidentifier():
            raise PatternError(located(f"variable name {tok.value!r} must be an identifier", tok))
        result: str = tok.value
        return result

    def cel_primary(self) -> Pattern:
        cur = self.cur
        if (paren := cur.accept_op("(")) is not None:
            with cur.nested(paren):
                node = self.cel()
            if not cur.at_op(")"):
                raise cur.error(
                    "expected ')' or an operator (; : OR AND + AS FILTER)", hint=cur.foreign_operator()
                )
            cur.next()
            return node
        if cur.at_keyword("NOT"):
            return self.negated_atom()
        if cur.peek().kind == "ident" and cur.peek().value.upper() == "ABSENT" and cur.at_op("(", k=1):
            return self.absence()
        if cur.peek().kind == "ident":
            cls, name = self.event_type()
            var = self.variable() if cur.accept_keyword("AS") else name
            return Atom(cls, var)
        raise cur.error("expected an event type, '(' or NOT(…)")

    def event_type(self) -> tuple[type[Event], str]:
        """An event type reference, ``T`` or ``stream>T``: the class and the name written."""
        cur = self.cur
        tok = cur.next()
        if cur.at_op(">") and cur.peek(1).kind == "ident":  # stream>event
            cur.next()
            event_tok = cur.next()
            self.check_qualifier(tok, event_tok)
            tok = event_tok
        cls = self.types.get(tok.value)
        if cls is None:
            raise PatternError(
                located(f"unknown event type {tok.value!r}", tok)
                + f"; known event types: {sorted(self.types)}"
            )
        if self.allowed is not None and tok.value not in self.allowed:
            raise PatternError(located(f"event type {tok.value!r} is not in the FROM streams", tok))
        return cls, tok.value

    def check_qualifier(self, stream_tok: Token, event_tok: Token) -> None:
        """Accept ``S>T`` only where it means what it means in CORE, else PatternError.

        pycel reads one input and cannot tell which stream an event came from, so a
        qualifier is honoured only when it changes nothing: S is a stream the query reads
        (its FROM stream, or a declared one when FROM is absent), and T is declared in no
        other stream the query reads. Without a declaration, S must be the single FROM stream.
        """
        stream, event = stream_tok.value, event_tok.value
        written = f"{stream}>{event}"
        if self.declaration is None:
            if self.from_streams != [stream]:
                raise PatternError(
                    located(
                        f"stream qualifier {written}: pycel reads a single stream and, without a "
                        "declaration, accepts a qualifier only when it names the one FROM stream "
                        f"(FROM {stream})",
                        stream_tok,
                    )
                )
            return
        streams = self.declaration.streams
        if stream not in streams:
            raise PatternError(
                located(f"unknown stream {stream!r}", stream_tok) + f"; declared streams: {sorted(streams)}"
            )
        if event not in streams[stream]:
            raise PatternError(located(f"stream {stream!r} has no event type {event!r}", event_tok))
        read = self.from_streams if self.from_streams is not None else list(streams)
        if stream not in read:
            raise PatternError(
                located(
                    f"stream qualifier {written}: stream {stream!r} is not in FROM {', '.join(read)}",
                    stream_tok,
                )
            )
        others = sorted({s for s in read if s != stream and event in streams[s]})
        if others:
            raise PatternError(
                located(
                    f"stream qualifier {written}: event type {event!r} is also declared in "
                    f"{', '.join(others)}, which this query reads too; pycel reads all of them as "
                    "one input and cannot tell which stream an event came from, so it would not "
                    f"honour the qualifier. Read one stream (FROM {stream}) or drop the qualifier",
                    stream_tok,
                )
            )

    def absence(self) -> Pattern:
        """``ABSENT(T [AS x] [FILTER …])`` (a pycel extension): no such event between the
        parts of the sequence around it. The FILTER may read the sequence's variables, so
        it is parsed once the whole pattern is known (:meth:`with_absence_filters`)."""
        cur = self.cur
        cur.next()
        cur.expect_op("(", "'(' after ABSENT")
        if cur.peek().kind != "ident":  # (ABSENT(), ABSENT(NOT(…)): no event type to look up)
            raise cur.error("expected an event type: ABSENT takes one event type, optionally filtered")
        cls, name = self.event_type()
        var = self.variable() if cur.accept_keyword("AS") else name
        node = Absent(cls, var, None)
        if cur.at_keyword("FILTER"):
            self.absences.append((node, cur.i))
            depth = 0
            while not (depth == 0 and cur.at_op(")")):
                if cur.peek().kind == "eof":
                    break
                depth += 1 if cur.at_op("(") else -1 if cur.at_op(")") else 0
                cur.next()
        cur.expect_op(")", "')' or FILTER (ABSENT takes one event type, optionally filtered)")
        return node

    def with_absence_filters(self, node: Pattern) -> Pattern:
        """``node`` with each deferred ABSENT filter parsed over the variables of the
        sequence it stands in (and its own)."""
        if isinstance(node, Absent):
            return self.absence_filter(node, node)
        if isinstance(node, (Or, And)):
            return attrs.evolve(
                node, left=self.with_absence_filters(node.left), right=self.with_absence_filters(node.right)
            )
        if isinstance(node, (Plus, As, Filter)):
            return attrs.evolve(node, inner=self.with_absence_filters(node.inner))
        if not isinstance(node, Seq):
            return node
        # The scope is the whole flattened sequence; the nesting is kept as written, so
        # that the pattern prints back to the same text.
        scope = [part for part, _ in seq_chain(node) if not isinstance(part, Absent)]

        def rebuild(part: Pattern) -> Pattern:
            if isinstance(part, Seq):
                return attrs.evolve(part, left=rebuild(part.left), right=rebuild(part.right))
            if isinstance(part, Absent):
                return self.absence_filter(part, scope)
            return self.with_absence_filters(part)

        return rebuild(node)

    def absence_filter(self, node: Absent, scope: Pattern | list[Pattern]) -> Absent:
        start = next((i for n, i in self.absences if n is node), None)
        if start is None:
            return node
        self.cur.i = start
        own = Atom(node.event, node.var)
        around = [own, *scope] if isinstance(scope, list) else [own]
        readable = around[0]
        for part in around[1:]:
            readable = Seq(readable, part)
        predicate: Expr[bool] | None = None
        while (tok := self.cur.accept_keyword("FILTER")) is not None:
            pred = self.filters.filter_tree(readable).predicate()
            predicate = pred if predicate is None else BoolOp.build("and", predicate, pred)
            self.cur.built(predicate, tok)
        return attrs.evolve(node, predicate=predicate)

    def negated_atom(self) -> Pattern:
        """``NOT(T [FILTER …])`` [``AS x``]: one event that is not such a T."""
        cur = self.cur
        cur.expect_keyword("NOT")
        cur.expect_op("(", "'(' after NOT")
        cls, name = self.event_type()
        predicate: Expr[bool] | None = None
        while (tok := cur.accept_keyword("FILTER")) is not None:
            tree = self.filters.filter_tree(Atom(cls, name), negated=True)
            pred = tree.predicate()
            predicate = pred if predicate is None else BoolOp.build("and", predicate, pred)
            cur.built(predicate, tok)
        cur.expect_op(")", "')' or FILTER (NOT takes one event type, optionally filtered)")
        var = self.variable() if cur.accept_keyword("AS") else f"not_{name}"
        if predicate is not None and var != name:
            predicate = predicate._map(lambda a: attrs.evolve(a, var=var) if a.var == name else a)
        return NotAtom(cls, var, predicate)
