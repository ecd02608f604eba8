"""The examples in README.md and docs/strategies.md print what their comments say.

Each ``show(...)  # [...]`` line of a document's Python blocks is evaluated after the
blocks before it; the literal at the start of its comment must equal the output (as a
multiset: the engine's order within a batch is not part of the contract)."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOW = re.compile(r"^(show\(.*\))\s+# (\[.*)$")


def _literal(comment: str) -> object:
    """The bracketed literal at the start of ``comment``."""
    depth = 0
    for i, ch in enumerate(comment):
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0:
            return ast.literal_eval(comment[: i + 1])
    raise AssertionError(f"unbalanced literal in {comment!r}")


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("doc", ["README.md", "docs/strategies.md"])
def test_show_lines_print_what_they_say(doc: str) -> None:
    blocks = [b for b in _blocks(ROOT / doc) if "show(" in b]
    assert blocks, f"{doc} has no show() examples"
    namespace: dict[str, object] = {"__name__": f"doc_{Path(doc).stem}"}
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:  # the block's definitions first, then its show() lines
            exec(compile(_without_shows(block), doc, "exec"), namespace)  # noqa: S102 - our own docs
            for line in block.splitlines():
                match = SHOW.match(line)
                if match:
                    got = eval(match.group(1), namespace)  # noqa: S307 - our own docs
                    assert sorted(got) == sorted(_literal(match.group(2))), line  # type: ignore[call-overload]
                    checked += 1
    assert checked >= 8


def _without_shows(block: str) -> str:
    return "\n".join(line for line in block.splitlines() if not SHOW.match(line))
