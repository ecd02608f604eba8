"""The exceptions pycel raises. Every one derives from :class:`PycelError`.

Example::

    try:
        pycel.compile(pattern)
    except pycel.PatternError as err:
        print(err)
"""

from __future__ import annotations


class PycelError(Exception):
    """Base class of every error pycel raises on purpose."""


class PatternError(PycelError, TypeError):
    """A pattern is ill-formed: unbound variable, wrong types, unsafe or unsatisfiable."""


class UnsupportedError(PycelError, NotImplementedError):
    """A valid pattern uses something the engine does not support yet."""


class ResourceError(PycelError, MemoryError):
    """The engine ran out of memory while evaluating a push (e.g. the matches of a pattern
    with ``+`` and no window, which can be exponentially many); the stream cannot go on."""


class DataError(PycelError, ValueError):
    """Input data is wrong: unknown event type or attribute, bad value, time going back.

    ``row`` is the 0-based row of the offending input (when known), ``column`` its column;
    ``message`` is the text without them (for callers that place the error themselves).
    """

    def __init__(self, message: str, *, row: int | None = None, column: str | None = None):
        where = []
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.message = message
        self.row = row
        self.column = column


#: How many characters of a query line a syntax error shows around its column.
_CONTEXT = 100


class CeqlSyntaxError(PycelError, SyntaxError):
    """A CEQL text could not be parsed; carries 1-based ``line`` and ``column``, and
    ``reason`` (the message without them)."""

    def __init__(self, message: str, text: str, line: int, column: int):
        lines = text.splitlines() or [""]
        shown = lines[line - 1] if 0 < line <= len(lines) else ""
        # A long line is shown around the column (a generated one-line query can be
        # thousands of characters).
        start = max(0, min(column - 1 - _CONTEXT // 2, len(shown) - _CONTEXT))
        before, after = ("…" if start > 0 else ""), ("…" if start + _CONTEXT < len(shown) else "")
        shown = before + shown[start : start + _CONTEXT] + after
        caret = " " * (column - 1 - start + len(before)) + "^"
        super().__init__(f"{message} at line {line}, column {column}\n  {shown}\n  {caret}")
        self.line = line
        self.column = column
        self.reason = message  # what is wrong, without the position and the excerpt


def short_repr(value: object) -> str:
    """``repr(value)``, shortened when long (a 400-digit number in an error message).

    Example: ``short_repr(10**400)`` is ``'1000000000…0000000000 (401 characters)'``.
    """
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:10]}…{text[-10:]} ({len(text)} characters)"
