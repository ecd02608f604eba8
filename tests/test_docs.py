"""Every code block of README.md and docs/*.md runs as written and says what it prints.

The fenced blocks of each document are checked by their language:

- ``python``: executed in a fresh namespace, with a temporary directory as the working
  directory (holding links to ``examples/`` and ``benchmarks/``, so paths relative to the
  repository root work and files written go nowhere). Its output is checked two ways:
  a line ``show(...)  # [...]`` (or ``show(...)`` followed by a comment line ``# [...]``)
  must return that literal (as a multiset: the engine's order within one end position is
  not part of the contract), and a ``text`` block that follows it with at most a short
  line of prose in between ("prints", "Output:") must equal what it prints (as a multiset
  of lines). A block whose first line is ``# continues the example above`` runs after the
  blocks before it in the same document (one test runs such a chain); every other block is
  complete on its own. Examples that use Spark run under the ``spark`` marker, as a script
  in a fresh process.
- ``console``: a terminal session. Each ``$ command`` runs in a fresh temporary directory
  per block (with the same links): in bash, or a plain ``pycel ...`` through
  ``pycel.cli.main`` in this process. Its standard output then standard error must equal
  the lines after it, except the elapsed time and rate of ``pycel``'s summary.
  ``echo $?`` shows the previous command's exit status.
- ``bash``: commands for the reader to run. ``pycel`` commands, ``--help`` calls and the
  example scripts that need no Spark run (and must succeed); every script a command names
  must exist; ``pip`` and other commands are not run.
- ``ceql``: parsed by :mod:`pycel.ceql` (a declaration, or a query over the last
  declaration of the document, else ``examples/data/stocks.ceql``).
- ``text``: output samples, diagrams, grammars; not checked.

Links: every relative link resolves to a file of the repository (and its anchor to a
heading), every repository path a document names in backquotes exists, and no document
refers to files outside the repository.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LANGUAGES = {"python", "console", "bash", "ceql", "text"}
CONTINUES = "# continues the example above"
SHOW = re.compile(r"^(show\(.*\))\s*(?:# (\[.*))?$")
SUMMARY_TIME = re.compile(r" in [0-9.]+ s \([0-9,.]+ events/s\)")
OUTPUT_LEAD = re.compile(r"^(prints|output|it prints|this prints)\s*:?$", re.I)
LINKED_DIRS = ("examples", "benchmarks")
SHELL_FREE = re.compile(r"^pycel [^|&;<>$`\\]*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its document, 1-based line of the opening fence, language,
    text, and the prose between the previous block and this one."""

    doc: str
    line: int
    lang: str
    text: str
    prose_before: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _parse(path: Path) -> list[Block]:
    return _parse_text(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())


def _parse_text(text: str, doc: str) -> list[Block]:
    """The fenced blocks of a markdown text (fences may be indented, as in a list item)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    prose: list[str] = []
    k = 0
    while k < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[k])
        if not opening:
            prose.append(lines[k])
            k += 1
            continue
        indent, lang, start = opening.group(1), opening.group(2), k
        body: list[str] = []
        k += 1
        while k < len(lines) and lines[k].strip() != "```":
            body.append(lines[k][len(indent) :] if lines[k].startswith(indent) else lines[k])
            k += 1
        assert k < len(lines), f"{doc}:{start + 1}: unclosed code block"
        blocks.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", "\n".join(prose).strip()))
        prose = []
        k += 1
    return blocks


BLOCKS = [block for path in DOCS for block in _parse(path)]


def _blocks(lang: str) -> list[Block]:
    return [b for b in BLOCKS if b.lang == lang]


def _params(lang: str) -> list[object]:
    return [pytest.param(block, id=block.id) for block in _blocks(lang)]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory in which ``examples/...`` paths resolve."""
    for name in LINKED_DIRS:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_block_names_a_checked_language() -> None:
    unknown = [f"{b.id} ```{b.lang}" for b in BLOCKS if b.lang not in LANGUAGES]
    assert not unknown, f"code blocks must be one of {sorted(LANGUAGES)} (output samples are text)"


# -- python ------------------------------------------------------------------------------
def _literal(comment: str) -> object:
    """The bracketed literal at the start of ``comment``."""
    depth = 0
    for i, ch in enumerate(comment):
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0:
            return ast.literal_eval(comment[: i + 1])
    raise AssertionError(f"unbalanced literal in {comment!r}")


def _steps(block: Block) -> Iterator[tuple[str, str | None, int]]:
    """The block as (code, expected show() literal or None, line) steps, in order."""
    lines = block.text.splitlines()
    pending: list[str] = []
    first = 0
    k = 0
    while k < len(lines):
        show = SHOW.match(lines[k])
        if show is None:
            pending.append(lines[k])
            k += 1
            continue
        if pending:
            yield "\n".join(pending), None, block.line + 1 + first
        expected = show.group(2)
        if expected is None and k + 1 < len(lines) and lines[k + 1].startswith("# ["):
            expected = lines[k + 1][2:]
            k += 1
        yield show.group(1), expected, block.line + 1 + k
        k += 1
        pending, first = [], k
    if pending:
        yield "\n".join(pending), None, block.line + 1 + first


def _chains() -> list[list[Block]]:
    """The python blocks grouped into examples: a block and the blocks that continue it."""
    chains: list[list[Block]] = []
    for block in _blocks("python"):
        if block.text.startswith(CONTINUES):
            assert chains and chains[-1][0].doc == block.doc, f"{block.id} continues no example"
            chains[-1].append(block)
        else:
            chains.append([block])
    return chains


def _uses_spark(chain: list[Block]) -> bool:
    return any(m in b.text for b in chain for m in ("pycel.spark", "SparkSession"))


def _chain_params() -> list[object]:
    params: list[object] = []
    for chain in _chains():
        name = chain[0].id + (f"-{chain[-1].line}" if len(chain) > 1 else "")
        params.append(pytest.param(chain, id=name, marks=[pytest.mark.spark] if _uses_spark(chain) else []))
    return params


def _run_python(block: Block, namespace: dict[str, object]) -> tuple[str, int]:
    """Run ``block`` in ``namespace``; its printed output and the number of shows checked."""
    out = io.StringIO()
    checked = 0
    with contextlib.redirect_stdout(out):
        for code, expected, line in _steps(block):
            source = "\n" * (line - 1) + code  # tracebacks show the document's line numbers
            if not code.startswith("show("):
                exec(compile(source, block.doc, "exec"), namespace)
                continue
            got = eval(compile(source, block.doc, "eval"), namespace)
            if expected is not None:
                want = _literal(expected)
                assert sorted(got) == sorted(want), f"{block.doc}:{line}: {code} gave {got}"  # type: ignore[call-overload]
                checked += 1
    return out.getvalue(), checked


def _expected_output(block: Block) -> str | None:
    """The text block that shows what ``block`` prints, if the document has one."""
    k = BLOCKS.index(block)
    if k + 1 < len(BLOCKS):
        after = BLOCKS[k + 1]
        lead = after.prose_before
        if after.doc == block.doc and after.lang == "text" and (not lead or OUTPUT_LEAD.match(lead)):
            return after.text
    return None


@pytest.mark.parametrize("chain", _chain_params())
def test_python_example_runs_and_prints_what_the_doc_says(chain: list[Block], workdir: Path) -> None:
    if _uses_spark(chain):
        printed = _run_in_subprocess(chain, workdir)
    else:
        namespace: dict[str, object] = {"__name__": "__doc_example__"}
        printed = []
        for block in chain:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                printed.append(_run_python(block, namespace)[0])
    for block, output in zip(chain, printed, strict=True):
        expected = _expected_output(block)
        if expected is not None:
            got, want = sorted(output.splitlines()), sorted(expected.splitlines())
            assert got == want, f"{block.id} printed\n{output}"


def _run_in_subprocess(chain: list[Block], workdir: Path) -> list[str]:
    """Run a Spark example as a script in ``workdir`` (a fresh process: Spark resolves
    relative paths against its own working directory, fixed when its JVM starts); what
    each block printed."""
    mark = "--- pycel doc block ---"
    script = workdir / "doc_example.py"
    script.write_text("".join(f"print({mark!r}, flush=True)\n{block.text}" for block in chain))
    done = subprocess.run(
        [sys.executable, script.name], cwd=workdir, env=_environment(), capture_output=True, text=True,
        timeout=1800,
    )
    assert done.returncode == 0, f"{chain[0].id}: {done.stderr[-4000:]}"
    return done.stdout.split(mark + "\n")[1:]


@pytest.mark.parametrize("doc", ["README.md", "docs/strategies.md"])
def test_show_lines_are_checked(doc: str) -> None:
    """The strategy examples are checked line by line (guards the show() parser)."""
    shows = [s for b in _blocks("python") if b.doc == doc for _, s, _ in _steps(b) if s is not None]
    assert len(shows) >= 8


# -- console -----------------------------------------------------------------------------
def _transcript(block: Block) -> list[tuple[str, list[str], int]]:
    """(command, expected output lines, line) for each ``$ command`` of a console block."""
    steps: list[tuple[str, list[str], int]] = []
    for k, line in enumerate(block.text.splitlines()):
        if line.startswith("$ "):
            steps.append((line[2:], [], block.line + 1 + k))
        else:
            assert steps, f"{block.id}: output before the first command"
            steps[-1][1].append(line)
    return steps


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("COLUMNS", None)
    return env


def _run_command(command: str, cwd: Path) -> tuple[int, list[str], str]:
    """Exit status, output lines (standard output, then error) and standard error of a
    command. A plain ``pycel ...`` runs in this process (``pycel.cli.main``, what the
    ``pycel`` script calls), which saves loading the engine again; the rest runs in bash."""
    if SHELL_FREE.match(command):
        from pycel.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(shlex.split(command)[1:])
        return status, (out.getvalue() + err.getvalue()).splitlines(), err.getvalue()
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=120
    )
    return done.returncode, (done.stdout + done.stderr).splitlines(), done.stderr


@pytest.mark.parametrize("block", _params("console"))
def test_console_session_prints_what_the_doc_shows(block: Block, workdir: Path) -> None:
    status = 0
    for command, expected, line in _transcript(block):
        if command.strip() == "echo $?":
            got = [str(status)]
        else:
            status, got, stderr = _run_command(command, workdir)
            assert "Traceback" not in stderr, f"{block.doc}:{line}: {stderr}"
        normalize = [SUMMARY_TIME.sub(" in T s (R events/s)", x) for x in got]
        want = [SUMMARY_TIME.sub(" in T s (R events/s)", x) for x in expected]
        assert normalize == want, f"{block.doc}:{line}: $ {command}\n" + "\n".join(got)


# -- bash --------------------------------------------------------------------------------
def _commands(block: Block) -> Iterator[list[str]]:
    for line in block.text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            for part in line.split("&&"):
                yield shlex.split(part)


@pytest.mark.parametrize("block", _params("bash"))
def test_bash_commands_exist_and_pycel_commands_run(block: Block, workdir: Path) -> None:
    for argv in _commands(block):
        if argv[0] == "pip" or argv[:3] == ["python", "-m", "pip"]:
            continue
        if argv[0] == "pycel" or argv[:3] == ["python", "-m", "pycel"] or "--help" in argv:
            argv = [sys.executable, *argv[1:]] if argv[0] == "python" else argv
            done = subprocess.run(
                argv, cwd=ROOT, env=_environment(), capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"{block.id}: {shlex.join(argv)}\n{done.stderr}"
            continue
        scripts = [a for a in argv[1:] if a.endswith((".py", ".sh")) or a.startswith("scripts/")]
        assert argv[0] in ("python", "bash"), f"{block.id}: unexpected command {shlex.join(argv)}"
        assert scripts and all((ROOT / s).is_file() for s in scripts), f"{block.id}: {shlex.join(argv)}"
        if argv[0] == "python" and _runs_in_process(argv[1]):
            done = subprocess.run(
                [sys.executable, *argv[1:]], cwd=ROOT, env=_environment(), capture_output=True, text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"{block.id}: {shlex.join(argv)}\n{done.stderr[-3000:]}"


def _runs_in_process(script: str) -> bool:
    """An example script that needs no Spark and no other Python (cheap enough to run)."""
    source = (ROOT / script).read_text()
    return script.startswith("examples/") and "pyspark" not in source


# -- ceql --------------------------------------------------------------------------------
@pytest.mark.parametrize("block", _params("ceql"))
def test_ceql_block_parses(block: Block) -> None:
    from pycel import ceql

    declaration = ceql.parse_declaration((ROOT / "examples/data/stocks.ceql").read_text())
    for earlier in _blocks("ceql"):
        if earlier.doc == block.doc and earlier.line < block.line and _is_declaration(earlier.text):
            declaration = ceql.parse_declaration(earlier.text)
    if _is_declaration(block.text):
        ceql.parse_declaration(block.text)
    else:
        ceql.parse_query(block.text, declaration)


def _is_declaration(text: str) -> bool:
    return re.search(r"\b(CREATE|DECLARE)\s+STREAM\b", text, re.I) is not None


# -- links -------------------------------------------------------------------------------
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:pycel|tests|benchmarks|examples|scripts|docs)/[\w./-]*?)(?:::\w+)?`")
CREATED = {"benchmarks/.venv-core"}  # made by the first benchmark run


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of ``path``."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#+\s+(.*)$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


@pytest.mark.parametrize("doc", [p.relative_to(ROOT).as_posix() for p in DOCS])
def test_links_stay_inside_the_repository(doc: str) -> None:
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    for outside in ("DESIGN.md", "../shared", "papers/"):
        assert outside not in text, f"{doc} refers to {outside}, which users do not have"
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        assert resolved.is_relative_to(ROOT), f"{doc}: {target} points outside the repository"
        assert resolved.exists(), f"{doc}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{doc}: no heading for #{anchor} in {file or doc}"
    for named in PATH.findall(text):
        assert named in CREATED or (ROOT / named).exists(), f"{doc} names {named}, which does not exist"


def test_every_doc_is_linked_from_the_readme() -> None:
    linked = {target.partition("#")[0] for target in LINK.findall((ROOT / "README.md").read_text())}
    docs = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").glob("*.md"))]
    missing = [doc for doc in docs if doc not in linked]
    assert not missing, f"README.md links none of {missing}"


# -- the checker itself ------------------------------------------------------------------
def test_the_checker_finds_the_blocks_and_catches_wrong_claims() -> None:
    """Guards against a parser that silently checks nothing or a show() check that passes."""
    assert {lang: len(_blocks(lang)) >= 1 for lang in LANGUAGES} == dict.fromkeys(LANGUAGES, True)
    assert len(_blocks("python")) >= 15 and len(_blocks("console")) >= 5
    text = (
        "intro\n\n  ```python\n  def show(x):\n      return [x]\n  show(1)  # [1]\n  ```\n"
        "prints\n```text\nhi\n```\n"
    )
    parsed = _parse_text(text, "doc.md")
    assert [(b.lang, b.line) for b in parsed] == [("python", 3), ("text", 9)]
    assert parsed[1].prose_before == "prints"
    namespace: dict[str, object] = {}
    assert _run_python(parsed[0], namespace) == ("", 1)
    wrong = Block("doc.md", 3, "python", parsed[0].text.replace("# [1]", "# [2]"), "")
    with pytest.raises(AssertionError, match="show"):
        _run_python(wrong, {})
