"""pycel: complex event recognition in Python, with the guarantees of the automata papers.

Declare event types, write patterns as typed Python expressions, run them::

    import pycel

    class Stock(pycel.Event):
        name: pycel.Field[str]
        price: pycel.Field[float]
        time: pycel.Field[int]

    class Buy(Stock): ...
    class Sell(Stock): ...

    s, b = pycel.alias(Sell, "s"), pycel.alias(Buy, "b")
    pattern = pycel.seq(s.where(s.name == "INTC"), b).within(events=10)
    matches = pycel.reference.evaluate(pattern, events)
"""

from . import reference
from .dsl import Pattern, not_, plus, seq
from .engine import CompiledQuery, Stream, compile
from .errors import CeqlSyntaxError, DataError, PatternError, PycelError, UnsupportedError
from .events import Event, Field, Timestamp, alias
from .expr import Expr
from .matches import Match, Matches

__all__ = [
    "CeqlSyntaxError",
    "CompiledQuery",
    "Stream",
    "compile",
    "DataError",
    "Event",
    "Expr",
    "Field",
    "Match",
    "Matches",
    "Pattern",
    "PatternError",
    "PycelError",
    "Timestamp",
    "UnsupportedError",
    "alias",
    "not_",
    "plus",
    "reference",
    "seq",
]
