"""Imports point one way, down the pipeline, and never in a circle.

Every module under pycel/ is parsed with ``ast``; every import counts, also one inside a
function, except those under ``if TYPE_CHECKING:`` (annotations only). Each module has a
layer (``LAYERS``, lowest first); a module may import:

- modules of a lower layer;
- modules of its own layer only within the same group (``pycel.cli`` may not import
  ``pycel.spark``, ``pycel.ceql`` not ``pycel.data``);
- no module that leads back to it (a cycle), whatever the layers.

``pycel.jit`` is compiled by Numba and imports only itself, numpy, numba and the standard
library. Importing ``pycel.a.b`` also runs ``pycel/__init__.py`` and ``pycel/a/__init__.py``;
those implicit package imports are not edges (every module would otherwise sit in a cycle
with ``pycel``, which imports everything to export it).
"""

from __future__ import annotations

import ast
import shutil
import sys
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

import pycel
from pycel.dsl import And, Atom, Or, Select, Seq, as_pattern
from pycel.errors import PatternError

PACKAGE = Path(__file__).resolve().parent.parent / "pycel"

Layers = tuple[tuple[int, str, tuple[str, ...]], ...]

#: (layer, group, modules) lowest first. ``pkg.*`` is a package and everything in it.
LAYERS: Layers = (
    (0, "errors and limits", ("pycel.errors", "pycel.limits")),
    (0, "jit", ("pycel.jit.*",)),
    (1, "language", ("pycel.language.*", "pycel.dsl")),
    (2, "ceql", ("pycel.ceql.*",)),
    (2, "data", ("pycel.data.*",)),
    (3, "plan", ("pycel.plan.*",)),
    (4, "runtime", ("pycel.runtime.*",)),
    (5, "engine", ("pycel.engine",)),
    (5, "reference", ("pycel.reference",)),
    (6, "cli", ("pycel.cli.*",)),
    (6, "spark", ("pycel.spark.*",)),
    (7, "pycel", ("pycel", "pycel.__main__")),
)

#: What pycel.jit may import besides itself and the standard library.
JIT_ALLOWED = {"numpy", "numba"}

#: Offenders allowed for now, each with who removes it, e.g.
#: ``"cycle: pycel.data.frames, pycel.data.ingest": "the ingestion engineer"``. The test
#: fails on any offender not listed here, and on a listed one that is gone (delete its line
#: then), so the list only shrinks. Keys are those of :func:`violations`. Empty: the last
#: ones (ingest/frames, cli/_data/_csv/_parquet, engine/snapshot, plan.postfilter ->
#: runtime.predicates) were removed by the restructuring of issue 14.
KNOWN_OFFENDERS: dict[str, str] = {}


class Edge(NamedTuple):
    """``importer`` imports ``imported`` at ``file:line``."""

    importer: str
    imported: str
    file: str
    line: int

    def where(self) -> str:
        return f"{self.file}:{self.line}"


# -- reading the imports -----------------------------------------------------------------
def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at ``root``."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except in the body of ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def imported_names(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names ``node`` imports, relative imports resolved: for ``from m import x``
    both ``m.x`` (in case x is a submodule) and ``m``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def read_edges(root: Path) -> tuple[list[Edge], dict[str, set[str]]]:
    """The import edges between the package's modules, and for every module its outside
    imports (top-level names, e.g. ``numpy``). An import of a pycel module that does not
    exist is no edge (importing it fails, which other tests see)."""
    modules = module_names(root)
    edges: list[Edge] = []
    outside: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        shown = path.relative_to(root.parent).as_posix()
        for node in import_nodes(tree):
            names = imported_names(module, path.name == "__init__.py", node)
            if isinstance(node, ast.ImportFrom) and names[-1].split(".")[0] != root.name:
                outside[module].add(names[-1].split(".")[0])
                continue
            if isinstance(node, ast.Import):
                for name in names:
                    if name.split(".")[0] == root.name:
                        if name in modules and name != module:
                            edges.append(Edge(module, name, shown, node.lineno))
                    else:
                        outside[module].add(name.split(".")[0])
                continue
            # from m import a, b: a and b are submodules or names defined in m
            *submodules, base = names
            targets = {name for name in submodules if name in modules}
            if len(targets) < len(submodules) and base in modules:
                targets.add(base)
            edges.extend(Edge(module, t, shown, node.lineno) for t in sorted(targets) if t != module)
    return edges, outside


# -- the rules ---------------------------------------------------------------------------
def layer_of(module: str, layers: Layers = LAYERS) -> tuple[int, str] | None:
    """``(layer, group)`` of a module, or None when ``LAYERS`` does not place it."""
    for layer, group, patterns in layers:
        for pattern in patterns:
            if pattern.endswith(".*"):
                package = pattern[:-2]
                if module == package or module.startswith(package + "."):
                    return layer, group
            elif module == pattern:
                return layer, group
    return None


def cycles(edges: Iterable[Edge]) -> list[tuple[list[str], list[Edge]]]:
    """Each set of two or more modules that import each other in a circle (a strongly
    connected component), with one shortest circle through its first module."""
    graph: dict[str, dict[str, Edge]] = {}
    for e in edges:
        graph.setdefault(e.importer, {}).setdefault(e.imported, e)
        graph.setdefault(e.imported, {})
    # Tarjan's algorithm, iterative (no recursion limit to worry about).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    found = []
    for component in components:
        members = set(component)
        first = component[0]
        # Shortest way back to ``first`` inside the component (breadth first).
        came_by: dict[str, Edge] = {}
        frontier = [first]
        while first not in came_by:
            nxt = []
            for node in frontier:
                for child, e in sorted(graph[node].items()):
                    if child in members and child not in came_by:
                        came_by[child] = e
                        nxt.append(child)
            frontier = nxt
        path = [came_by[first]]
        while path[-1].importer != first:
            path.append(came_by[path[-1].importer])
        found.append((component, path[::-1]))
    return found


def violations(
    edges: Iterable[Edge],
    outside: Mapping[str, set[str]],
    layers: Layers = LAYERS,
) -> dict[str, str]:
    """Every broken rule: a stable key (for ``KNOWN_OFFENDERS``) -> a message naming the
    offending imports by file:line."""
    edges = list(edges)
    found: dict[str, str] = {}
    for module in sorted(outside):  # every module of the package
        if layer_of(module, layers) is None:
            found[f"no layer: {module}"] = f"{module} is in no layer: add it to LAYERS in {__name__}"
    for e in edges:
        src, dst = layer_of(e.importer, layers), layer_of(e.imported, layers)
        if src is None or dst is None or src == dst or dst[0] < src[0]:
            continue
        how = "a higher layer" if dst[0] > src[0] else "another group of its layer"
        found[f"{e.importer} -> {e.imported}"] = (
            f"{e.where()}: {e.importer} (layer {src[0]}, {src[1]}) imports {how}: "
            f"{e.imported} (layer {dst[0]}, {dst[1]})"
        )
    for module, names in sorted(outside.items()):
        where = layer_of(module, layers)
        if where is not None and where[1] == "jit":
            for name in sorted(names - JIT_ALLOWED - set(sys.stdlib_module_names) - {"__future__"}):
                found[f"{module} -> {name}"] = f"{module} is JIT code: it may not import {name}"
    for members, path in cycles(edges):
        inside = sorted(
            (e for e in edges if e.importer in members and e.imported in members), key=lambda e: e.where()
        )
        circle = " -> ".join([e.importer for e in path] + [path[0].importer])
        steps = "\n".join(f"    {e.where()}: {e.importer} imports {e.imported}" for e in inside)
        found["cycle: " + ", ".join(members)] = f"import cycle {circle}; the imports among them:\n{steps}"
    return found


# -- the package -------------------------------------------------------------------------
def test_imports_point_down_the_layers_without_cycles() -> None:
    found = violations(*read_edges(PACKAGE))
    new = {key: message for key, message in found.items() if key not in KNOWN_OFFENDERS}
    gone = sorted(set(KNOWN_OFFENDERS) - set(found))
    problems = list(new.values()) + [
        f"{key!r} is fixed: delete it from KNOWN_OFFENDERS in tests/test_layers.py" for key in gone
    ]
    assert not problems, "\n".join(problems)


def test_the_dsl_and_the_event_types_import_one_way() -> None:
    """pycel.dsl recognises event types by their ``__pycel_pattern__`` method and imports
    pycel.language.events only for annotations; events builds on the DSL."""
    edges, _ = read_edges(PACKAGE)
    pairs = {(e.importer, e.imported) for e in edges}
    assert ("pycel.language.events", "pycel.dsl") in pairs
    assert not any(
        e.importer.startswith(("pycel.dsl", "pycel.language.patternlike"))
        and e.imported == "pycel.language.events"
        for e in edges
    )


def test_what_stands_for_a_pattern_is_found_by_its_type_only() -> None:
    """The protocol that replaced the DSL's import of events: an event type and an alias
    stand for their atom, an event (an instance) does not, and attributes of the event type
    never shadow it (an alias of a type with a field named ``pattern`` raised TypeError
    "'Attr' object is not callable" when the alias reached a pattern through ``.pattern()``)."""

    class Quote(pycel.Event):
        pattern: pycel.Field[int]  # type: ignore[assignment]  # shadows Event.pattern()
        price: pycel.Field[float]

    class Trade(pycel.Event):
        price: pycel.Field[float]

    q = pycel.alias(Quote, "q")
    quote_q, trade = Atom(Quote, "q"), Atom(Trade, "Trade")
    assert as_pattern(Quote) == Atom(Quote, "Quote") and as_pattern(q) == quote_q
    assert q >> Trade == Seq(quote_q, trade) and Trade >> q == Seq(trade, quote_q)
    assert (q | Trade) == Or(quote_q, trade) and (q & Trade) == And(quote_q, trade)
    assert pycel.seq(q, Trade).select(q) == Select(Seq(quote_q, trade), ("q",))
    assert repr(q.where(q.pattern > 1)) == "(Quote AS q FILTER q.pattern > 1)"
    with pytest.raises(PatternError, match="is not a pattern"):
        as_pattern(Trade(price=1.0))
    with pytest.raises(PatternError, match="is not a pattern"):
        pycel.seq(Trade) >> Trade(price=1.0)  # type: ignore[operator]
    with pytest.raises(PatternError, match="pycel.Event itself is not an event type"):
        as_pattern(pycel.Event)


# -- the checker itself, on planted offenders --------------------------------------------
def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "pycel"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_checker_reports_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "dsl.py": """\
                from pycel.errors import PatternError

                def helper():
                    from pycel.cli import main
                """,
            "cli/__init__.py": "from ._run import main\n",
            "cli/_run.py": "def main(): ...\n",
        },
    )
    found = violations(*read_edges(root))
    assert set(found) == {"pycel.dsl -> pycel.cli"}
    assert found["pycel.dsl -> pycel.cli"].startswith("pycel/dsl.py:4: pycel.dsl (layer 1, language)")


def test_checker_ignores_type_checking_imports_but_not_their_else(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "dsl.py": """\
                from typing import TYPE_CHECKING
                import typing

                if TYPE_CHECKING:
                    from pycel.engine import Stream
                if typing.TYPE_CHECKING:
                    import pycel.engine
                else:
                    from pycel import reference
                """,
            "engine.py": "",
            "reference.py": "",
        },
    )
    assert set(violations(*read_edges(root))) == {"pycel.dsl -> pycel.reference"}


def test_checker_reports_imports_across_groups_of_one_layer(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "ceql/__init__.py": "",
            "ceql/_query.py": "from ..data import frames\nfrom . import _lexer\n",
            "ceql/_lexer.py": "",
            "data/__init__.py": "",
            "data/frames.py": "",
            "jit/__init__.py": "",
            "jit/store.py": "import numpy as np\nimport pandas\nfrom pycel.errors import DataError\n",
            "errors.py": "",
        },
    )
    found = violations(*read_edges(root))
    assert set(found) == {
        "pycel.ceql._query -> pycel.data.frames",
        "pycel.jit.store -> pandas",
        "pycel.jit.store -> pycel.errors",
    }
    assert "pycel/ceql/_query.py:1:" in found["pycel.ceql._query -> pycel.data.frames"]
    assert "another group of its layer" in found["pycel.ceql._query -> pycel.data.frames"]


def test_checker_reports_a_cycle_with_each_import(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "plan/__init__.py": "",
            "plan/a.py": "from .b import x\n",
            "plan/b.py": "import pycel.plan.c\nfrom pycel.plan import f\n",
            "plan/c.py": "\n\ndef late():\n    from pycel.plan import a\n",
            "plan/d.py": "from pycel.plan import a\n",  # into the cycle, not part of it
            "plan/e.py": "from . import b\n",  # a second circle through b
            "plan/f.py": "from . import e\n",
        },
    )
    found = violations(*read_edges(root))
    key = "cycle: pycel.plan.a, pycel.plan.b, pycel.plan.c, pycel.plan.e, pycel.plan.f"
    assert set(found) == {key}
    assert "import cycle pycel.plan.a -> pycel.plan.b -> pycel.plan.c -> pycel.plan.a;" in found[key]
    steps = [line.strip() for line in found[key].splitlines()[1:]]
    assert steps == [
        "pycel/plan/a.py:1: pycel.plan.a imports pycel.plan.b",
        "pycel/plan/b.py:1: pycel.plan.b imports pycel.plan.c",
        "pycel/plan/b.py:2: pycel.plan.b imports pycel.plan.f",
        "pycel/plan/c.py:4: pycel.plan.c imports pycel.plan.a",
        "pycel/plan/e.py:1: pycel.plan.e imports pycel.plan.b",
        "pycel/plan/f.py:1: pycel.plan.f imports pycel.plan.e",
    ]


def test_checker_reports_a_module_without_a_layer(tmp_path: Path) -> None:
    root = _package(tmp_path, {"__init__.py": "", "snapshot.py": ""})
    assert set(violations(*read_edges(root))) == {"no layer: pycel.snapshot"}


def test_checker_fails_on_an_upward_import_planted_in_a_copy_of_pycel(tmp_path: Path) -> None:
    """The real package with one upward import planted (the JIT reading the expression
    language, which imports no JIT code, so no cycle): the check finds exactly that one."""
    copy = tmp_path / "pycel"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = violations(*read_edges(copy))
    store = copy / "jit" / "store.py"
    lines = len(store.read_text(encoding="utf-8").splitlines())
    with store.open("a", encoding="utf-8") as f:
        f.write("\n\ndef _planted() -> None:\n    from pycel.language.expr import Attr\n")
    after = violations(*read_edges(copy))
    assert set(after) - set(before) == {"pycel.jit.store -> pycel.language.expr"}
    assert after["pycel.jit.store -> pycel.language.expr"].startswith(f"pycel/jit/store.py:{lines + 4}: ")
