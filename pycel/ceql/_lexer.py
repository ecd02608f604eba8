"""Tokenizer shared by the CEQL query and declaration parsers.

Keywords are case-insensitive; identifiers keep their case. Back-quoted identifiers
(`` `odd name` ``, ```` `` ```` for a literal back-quote) are never keywords. Strings use
single quotes (CORE) or double quotes (pycel); a quote is escaped by doubling it. ``--``
starts a comment to the end of the line, ``/* … */`` a block comment (an unterminated one is
an error). A leading byte-order mark (``\\ufeff``, as some editors save UTF-8) is skipped:
lines and columns count from after it.

:class:`Cursor` also bounds how deeply a query nests (:data:`MAX_DEPTH`): the parsers
recurse per parenthesis, and the engine's passes per level of the tree they build, so a
deeper query is a syntax error here instead of a ``RecursionError`` anywhere later
(:data:`MAX_NESTING` bounds the parsers' recursion).
"""

from __future__ import annotations

import bisect
import contextlib
import re
from collections.abc import Iterator
from typing import Any

import attrs

from pycel.errors import CeqlSyntaxError

#: Reserved words (CORE's lexer keywords plus pycel's TRUE/FALSE/MATCHES/CREATE/DECLARE).
#: Singular time units are spelled as their plural, as in CORE's lexer.
KEYWORDS: frozenset[str] = frozenset(
    """ALL AND ANY AS BY CONSUME CREATE DECLARE DISTINCT EVENT EVENTS FALSE FILTER FROM
    HOURS IN LAST LIKE LIMIT MATCHES MAX MINUTES NEXT NONE NOT OR PARTITION RANGE SECONDS SELECT
    STREAM STRICT TRUE UNLESS WHERE WITHIN""".split()
)
_ALIASES = {"HOUR": "HOURS", "MINUTE": "MINUTES", "SECOND": "SECONDS"}

#: Operators, longest first so that ``<=`` wins over ``<``.
_OPERATORS = (
    ":+", "..", "<=", ">=", "<>", "!=", "==",
    "(", ")", "[", "]", "{", "}", ",", ";", ":", "+", "-", "*", "/", "%", ".", "=", "<", ">",
)  # fmt: skip
_NUMBER = re.compile(r"(?:\d+\.\d+|\d+\.(?=[eE][-+]?\d)|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_QUOTES = {"'": "'", '"': '"', "\u2018": "\u2019", "\u2019": "\u2019"}
#: The byte-order mark some editors put at the head of a UTF-8 file.
BOM = "\ufeff"
#: How many levels high the pattern and predicate trees a query builds may be (``A ; B ; C``
#: is three levels, two sequences over the atoms; ``x + 1 + 1`` likewise): far above what
#: anyone writes (the engine runs at most 62 atoms per pattern), and low enough that no pass
#: over the tree (printing, checks, planning) reaches Python's recursion limit.
MAX_DEPTH = 100
#: How many parentheses, NOTs and signs may stand inside each other: the parsers recurse
#: through several functions for each (eight in a predicate).
MAX_NESTING = 50


@attrs.frozen
class Token:
    """One token: ``kind`` is ident, keyword, number, string, op or eof.

    ``value`` is the identifier's name, the keyword in upper case, the number, the string's
    content or the operator; ``line`` and ``column`` are 1-based.
    """

    kind: str
    value: Any
    text: str
    line: int
    column: int

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        return repr(self.text)


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an ``eof`` token; raise CeqlSyntaxError.

    A leading byte-order mark is dropped first: positions are those of ``text`` without it.
    """
    text = text.removeprefix(BOM)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(at: int) -> tuple[int, int]:
        line = bisect.bisect_right(line_starts, at)
        return line, at - line_starts[line - 1] + 1

    def error(message: str, at: int) -> CeqlSyntaxError:
        return CeqlSyntaxError(message, text, *where(at))

    tokens: list[Token] = []

    def add(kind: str, value: Any, start: int, end: int) -> None:
        tokens.append(Token(kind, value, text[start:end], *where(start)))

    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise error("unterminated comment", i)
            i = end + 2
            continue
        start = i
        if ch.isalpha() or ch == "_":
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            upper = text[start:i].upper()
            upper = _ALIASES.get(upper, upper)
            if upper in KEYWORDS:
                add("keyword", upper, start, i)
            else:
                add("ident", text[start:i], start, i)
            continue
        if ch == "`" or ch in _QUOTES:
            close = "`" if ch == "`" else _QUOTES[ch]
            closers = "\u2019\u2018" if close == "\u2019" else close
            doubling = ch in "`'\""
            i += 1
            parts: list[str] = []
            while True:
                end = i
                while end < n and text[end] not in closers:
                    end += 1
                if end >= n:
                    what = "back-quoted identifier" if ch == "`" else "string"
                    raise error(f"unterminated {what}", start)
                parts.append(text[i:end])
                if doubling and text.startswith(close * 2, end):
                    parts.append(close)
                    i = end + 2
                    continue
                i = end + 1
                break
            value = "".join(parts)
            if ch == "`":
                if not value:
                    raise error("empty back-quoted identifier", start)
                add("ident", value, start, i)
            else:
                add("string", value, start, i)
            continue
        m = _NUMBER.match(text, i)
        if m is not None:
            word = m.group()
            number: int | float = float(word) if any(c in word for c in ".eE") else int(word)
            add("number", number, start, m.end())
            i = m.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                add("op", op, start, start + len(op))
                i += len(op)
                break
        else:
            raise error(f"unexpected character {ch!r}", start)
    tokens.append(Token("eof", None, "", *where(n)))
    return tokens


def _children(node: Any) -> list[object]:
    """The attrs nodes directly under ``node`` (its fields, and the items of tuple fields)."""
    if not attrs.has(type(node)):
        return []
    kids: list[object] = []
    for field in attrs.fields(type(node)):
        value = getattr(node, field.name)
        for item in value if isinstance(value, tuple | list) else (value,):
            if attrs.has(type(item)):
                kids.append(item)
    return kids


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote_ident(name: str) -> str:
    """``name`` as CEQL source: bare when it is a plain non-keyword identifier."""
    upper = name.upper()
    if _PLAIN.fullmatch(name) and upper not in KEYWORDS and upper not in _ALIASES:
        return name
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """``value`` as a single-quoted CEQL string (quotes doubled, as in CORE)."""
    return "'" + value.replace("'", "''") + "'"


class Cursor:
    """A position in a token list, with the helpers a recursive-descent parser needs."""

    def __init__(self, text: str) -> None:
        self.text = text.removeprefix(BOM)
        self.tokens = tokenize(self.text)
        self.i = 0
        self.depth = 0  # the parsers' nesting, see nested()
        self._heights: dict[int, tuple[object, int]] = {}  # id(node) -> (node, height)

    def too_deep(self, tok: Token, what: str, hint: str = "") -> CeqlSyntaxError:
        """The error of a query nested too deeply (``what``: beyond which limit), at ``tok``."""
        message = f"query nested too deeply (more than {what}{'; ' + hint if hint else ''})"
        return CeqlSyntaxError(message, self.text, tok.line, tok.column)

    @contextlib.contextmanager
    def nested(self, tok: Token) -> Iterator[None]:
        """One more level of the parsers' recursion (a parenthesis, NOT, a sign) at ``tok``;
        at most :data:`MAX_NESTING`."""
        if self.depth >= MAX_NESTING:
            raise self.too_deep(tok, f"{MAX_NESTING} parentheses, NOTs or signs inside each other")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def built(self, node: Any, tok: Token, hint: str = "") -> Any:
        """``node`` (a pattern or predicate just built at ``tok``), checked to be at most
        :data:`MAX_DEPTH` levels high; else the syntax error :meth:`too_deep`."""
        if self.height(node) > MAX_DEPTH:
            raise self.too_deep(tok, f"{MAX_DEPTH} levels", hint)
        return node

    def height(self, node: object) -> int:
        """Levels of the tree of attrs nodes under ``node`` (1 for a leaf); iterative, and
        remembered per node, so a chain built step by step costs one step per node."""
        memo = self._heights
        stack: list[tuple[object, bool]] = [(node, False)]
        while stack:
            top, expanded = stack.pop()
            if id(top) in memo:
                continue
            kids = _children(top)
            if expanded:
                memo[id(top)] = (top, 1 + max((memo[id(k)][1] for k in kids), default=0))
            else:
                stack.append((top, True))
                stack.extend((k, False) for k in kids if id(k) not in memo)
        return memo[id(node)][1]

    def peek(self, k: int = 0) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def at_keyword(self, *words: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "keyword" and tok.value in words

    def at_op(self, *ops: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "op" and tok.value in ops

    def accept_keyword(self, *words: str) -> Token | None:
        return self.next() if self.at_keyword(*words) else None

    def accept_op(self, *ops: str) -> Token | None:
        return self.next() if self.at_op(*ops) else None

    def expect_keyword(self, word: str, what: str | None = None) -> Token:
        if not self.at_keyword(word):
            raise self.error(f"expected {what or word}")
        return self.next()

    def expect_op(self, op: str, what: str | None = None) -> Token:
        if not self.at_op(op):
            raise self.error(f"expected {what or repr(op)}")
        return self.next()

    def expect_ident(self, what: str) -> Token:
        tok = self.peek()
        if tok.kind != "ident":
            hint = " (a reserved word: back-quote it to use it as a name)" if tok.kind == "keyword" else ""
            raise self.error(f"expected {what}{hint}")
        return self.next()

    def error(self, message: str, tok: Token | None = None, *, hint: str = "") -> CeqlSyntaxError:
        """A syntax error at ``tok`` (default: the next token), naming what was found, then
        ``hint`` (what to write instead)."""
        tok = tok or self.peek()
        found = f"{message}, found {tok.describe()}"
        return CeqlSyntaxError(f"{found} ({hint})" if hint else found, self.text, tok.line, tok.column)

    def foreign_operator(self) -> str:
        """A hint when the next token is another language's pattern operator (a Kleene
        star, a comma between events) where a CEL operator may stand; else ''."""
        if self.at_op("*"):
            return "CEQL has no '*' repetition: repeat with '+', one or more, e.g. SELL+"
        if self.at_op(","):
            return "a sequence is written with ';', e.g. SELL ; BUY"
        return ""
