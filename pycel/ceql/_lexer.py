"""Tokenizer shared by the CEQL query and declaration parsers.

Keywords are case-insensitive; identifiers keep their case. Back-quoted identifiers
(`` `odd name` ``, ```` `` ```` for a literal back-quote) are never keywords. Strings use
single quotes (CORE) or double quotes (pycel); a quote is escaped by doubling it. ``--``
starts a comment to the end of the line, ``/* … */`` a block comment.
"""

from __future__ import annotations

import bisect
import re
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
    """Split ``text`` into tokens, ending with an ``eof`` token; raise CeqlSyntaxError."""
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
            i = n if end < 0 else end + 2
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
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

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
