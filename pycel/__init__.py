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

from pycel import reference
from pycel.data.matches import Match, Matches
from pycel.dsl import Pattern, absent, not_, plus, seq
from pycel.engine import CompiledQuery, Stream, compile
from pycel.errors import CeqlSyntaxError, DataError, PatternError, PycelError, ResourceError, UnsupportedError
from pycel.language.events import Event, Field, Timestamp, alias, prev
from pycel.language.expr import Expr

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
    "ResourceError",
    "Timestamp",
    "UnsupportedError",
    "absent",
    "alias",
    "not_",
    "plus",
    "prev",
    "reference",
    "seq",
]
