"""Read the declaration and the query of ``pycel run`` / ``pycel explain``.

Each argument is a file name, ``-`` (standard input), or inline CEQL text: an argument that
is not an existing file is taken as text when it contains white space, and is reported as a
missing file otherwise. A query file may start with its own ``CREATE STREAM``
declaration; then ``--declaration`` is not needed. Errors keep the line and column of the
original text.

Example::

    loaded = load("decl.ceql", "query.ceql", time_attribute=None, time_unit="ms")
"""

from __future__ import annotations

import sys
from pathlib import Path

import attrs

from pycel.ceql import Declaration, parse_declaration, parse_query, tokenize
from pycel.ceql._lexer import BOM
from pycel.dsl import Pattern
from pycel.errors import PycelError, UnsupportedError


class UsageError(Exception):
    """Bad command-line arguments (exit status 2)."""


#: Hints in the library's messages that name a Python parameter, and the command line's
#: option for the same thing.
_OPTION_FOR = {
    "pass parse_query(..., time_attribute=...)": "give --time-attribute ATTR",
    "time_attribute='": "--time-attribute '",
}


def for_command_line(message: str) -> str:
    """A library message worded for the command line: its options for Python parameters,
    and where it suggests a post-filter, how (CEQL has no syntax for one)."""
    for parameter, option in _OPTION_FOR.items():
        message = message.replace(parameter, option)
    if "post_filter=True" in message:
        message += (
            " (CEQL cannot write a post-filter: in Python, read the query with "
            "pycel.ceql.parse_query and add .where(..., post_filter=True))"
        )
    return message


class SourceError(Exception):
    """A CEQL error (syntax, pattern, unsupported) in the declaration or the query;
    ``message`` is the error's text, worded for the command line."""

    def __init__(self, label: str, error: PycelError) -> None:
        message = for_command_line(str(error))
        super().__init__(f"{label}: {message}")
        self.label = label
        self.error = error
        self.message = message


#: What a RecursionError while a query is parsed or compiled means to the user. The parser
#: bounds a query's nesting (``pycel.ceql.MAX_DEPTH``), so this is a safety net.
TOO_DEEP = (
    "the query is nested too deeply or too large to compile (it reached Python's recursion "
    "limit): split or simplify it"
)


def too_deep(label: str) -> SourceError:
    """The error of a query (from ``label``) that a RecursionError stopped."""
    return SourceError(label, UnsupportedError(TOO_DEEP))


@attrs.frozen
class Source:
    """A CEQL text and where it came from (a file name, ``<stdin>``, ``<query>``…)."""

    text: str
    label: str


def read_text(arg: str, what: str) -> Source:
    """The text an argument stands for (see the module docstring), without a leading
    byte-order mark. A file (also a device or pipe: ``/dev/stdin``, ``<(…)``) that holds no
    CEQL at all, only blanks and comments, is a :class:`UsageError` saying so."""
    if arg == "-":
        return _nonempty(Source(sys.stdin.read().removeprefix(BOM), "<stdin>"), what)
    path = Path(arg)
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except (OSError, ValueError):  # too long or not a valid path: text
        exists = is_dir = False
    if is_dir:
        raise UsageError(f"{what} {arg} is a directory, not a file")
    if exists:
        try:
            return _nonempty(Source(path.read_text(encoding="utf-8-sig"), arg), what)
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read the {what} file {arg}: {err}") from None
    if any(ch.isspace() for ch in arg):
        return Source(arg.removeprefix(BOM), f"<{what}>")
    raise UsageError(f"{what} file {arg!r} not found (inline {what} text must contain a space)")


def _nonempty(source: Source, what: str) -> Source:
    """``source``, unless it holds no token (a syntax error in it is reported later)."""
    try:
        empty = tokenize(source.text)[0].kind == "eof"
    except PycelError:
        empty = False
    if empty:
        raise UsageError(f"no {what} in {source.label} (it is empty)")
    return source


def _blank(text: str) -> str:
    """``text`` with every character but line breaks replaced by a space."""
    return "".join(ch if ch in "\r\n" else " " for ch in text)


def split_declaration(text: str) -> tuple[str | None, str]:
    """(declaration, query) of a query text that may start with ``CREATE STREAM``.

    Both parts keep their original line and column numbers: the other part is blanked.
    A leading byte-order mark is dropped (the positions count without it).
    """
    text = text.removeprefix(BOM)
    tokens = tokenize(text)
    if not tokens or tokens[0].kind != "keyword" or tokens[0].value not in ("CREATE", "DECLARE"):
        return None, text
    select = next((t for t in tokens if t.kind == "keyword" and t.value == "SELECT"), None)
    if select is None:
        return text, ""
    line_start = 0
    for _ in range(select.line - 1):
        line_start = text.index("\n", line_start) + 1
    at = line_start + select.column - 1
    return text[:at], _blank(text[:at]) + text[at:]


@attrs.frozen
class Loaded:
    """The parsed declaration and query, with their sources (for error messages)."""

    declaration: Declaration
    pattern: Pattern
    declaration_source: Source
    query_source: Source


def load_declaration(arg: str | None, query: Source) -> tuple[Declaration, Source, Source]:
    """The declaration (from ``arg`` or from the head of the query) and the bare query."""
    try:
        inline, rest = split_declaration(query.text)
    except PycelError as err:
        raise SourceError(query.label, err) from None
    if inline is not None and not rest.strip():
        problem = f"{query.label} holds a declaration but no SELECT query"
        given = None if arg is None else read_text(arg, "declaration")
        if given is not None and _starts_a_query(given.text):
            problem += f"; {given.label} holds a query: were --declaration and --query swapped?"
        raise UsageError(problem)
    if inline is not None and arg is not None:
        raise UsageError(f"{query.label} starts with its own declaration; drop --declaration")
    if inline is not None:
        source = Source(inline, query.label)
        query = Source(rest, query.label)
    elif arg is not None:
        source = read_text(arg, "declaration")
    else:
        raise UsageError(
            "no declaration: give --declaration FILE, or start the query file with CREATE STREAM"
        )
    if _starts_a_query(source.text):
        raise UsageError(
            f"{source.label} holds a SELECT query, not a CREATE STREAM declaration: "
            "give the declaration with --declaration (or at the head of the query file)"
        )
    try:
        return parse_declaration(source.text), source, query
    except PycelError as err:
        raise SourceError(source.label, err) from None
    except RecursionError:
        raise too_deep(source.label) from None


def _starts_a_query(text: str) -> bool:
    """Whether CEQL ``text`` starts with SELECT (a query where a declaration belongs)."""
    try:
        tokens = tokenize(text)
    except PycelError:
        return False
    return bool(tokens) and tokens[0].kind == "keyword" and tokens[0].value == "SELECT"


def load(declaration: str | None, query: str, *, time_attribute: str | None, time_unit: str = "ns") -> Loaded:
    """Read and parse both; CEQL errors become :class:`SourceError` naming the source.
    ``time_unit`` is ``--time-unit``: the unit of the data's integer timestamps, hence of
    ``n`` in ``WITHIN n [timestamp attribute]``."""
    query_source = read_text(query, "query")
    decl, decl_source, query_source = load_declaration(declaration, query_source)
    try:
        pattern = parse_query(query_source.text, decl, time_attribute=time_attribute, time_unit=time_unit)
    except PycelError as err:
        raise SourceError(query_source.label, err) from None
    except RecursionError:
        raise too_deep(query_source.label) from None
    return Loaded(decl, pattern, decl_source, query_source)
