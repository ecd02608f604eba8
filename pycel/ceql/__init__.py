"""CEQL, the query language of the CORE engine, for pycel.

:func:`parse_declaration` turns CORE's ``CREATE STREAM`` declarations into
:class:`pycel.Event` subclasses, :func:`parse_query` turns a ``SELECT … FROM … WHERE …``
query into the same pattern AST the Python DSL builds, and :func:`to_ceql` prints a pattern
back as CEQL. The supported grammar, its mapping to the DSL, pycel's extensions and the
differences from CORE are in ``docs/ceql.md``.

Example::

    from pycel import ceql

    decl = ceql.parse_declaration('''
        CREATE STREAM Stock {
            EVENT BUY  { name: string, price: double, volume: int, stock_time: int },
            EVENT SELL { name: string, price: double, volume: int, stock_time: int }
        }''')
    pattern = ceql.parse_query('''
        SELECT * FROM Stock
        WHERE SELL AS s ; BUY AS b
        FILTER s[name = 'INTC'] AND b[price > 10]
        WITHIN 100 [stock_time]''', decl)
    matches = pycel.reference.evaluate(pattern, events)
    print(ceql.to_ceql(pattern, stream=decl.stream))
"""

from ._declaration import TYPE_NAMES, Declaration, event_class, parse_declaration, to_declaration
from ._lexer import KEYWORDS, MAX_DEPTH, MAX_NESTING, quote_ident, quote_string, tokenize
from ._predicate import search_regex, searched_regex
from ._printer import cel_to_ceql, expr_to_ceql, sql_like_to_regex, to_ceql
from ._query import CeqlWarning, bound_variables, parse_query

__all__ = [
    "KEYWORDS",
    "MAX_DEPTH",
    "MAX_NESTING",
    "TYPE_NAMES",
    "CeqlWarning",
    "Declaration",
    "bound_variables",
    "cel_to_ceql",
    "event_class",
    "expr_to_ceql",
    "parse_declaration",
    "parse_query",
    "quote_ident",
    "quote_string",
    "search_regex",
    "searched_regex",
    "sql_like_to_regex",
    "to_ceql",
    "to_declaration",
    "tokenize",
]
