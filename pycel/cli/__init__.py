"""The ``pycel`` command: run CORE-style CEQL queries over CSV or Parquet event files.

::

    pycel run --declaration stocks.ceql --query s3.ceql events.csv --format jsonl
    pycel explain s3.ceql --declaration stocks.ceql
    python -m pycel run ...

Exit status: 0 success; 1 bad data (the message names the row and column); 2 bad usage or
a query the engine cannot run (syntax errors show line and column). See ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Sequence
from typing import IO, Any

from ..ceql import bound_variables
from ..engine import CompiledQuery
from ..engine import compile as compile_query
from ..errors import CeqlSyntaxError, DataError, PatternError, UnsupportedError
from ..query import split_query
from ._data import TIME_UNITS, InputError, ReadOptions, Schema, open_source
from ._explain import explain
from ._load import Loaded, SourceError, UsageError, load
from ._output import FORMATS, Progress, Writer, summary

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_PIPE = 130, 141


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must not be negative")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``pycel`` command."""
    parser = argparse.ArgumentParser(
        prog="pycel",
        description="Complex event recognition: run CEQL queries (CORE's query language) over event files.",
        epilog="Exit status: 0 ok, 1 bad data, 2 bad usage or query. See docs/cli.md.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,explain}")

    run = sub.add_parser(
        "run",
        help="find the matches of a query in a CSV or Parquet file",
        description=(
            "Run a CEQL query over events read in chunks from CORE-style CSV (header row; "
            "event type first; then the attributes) or Parquet, and print the matches."
        ),
    )
    run.add_argument("data", metavar="DATA", help="CSV or Parquet (.parquet, .pq) file; - for CSV on stdin")
    _add_ceql_arguments(run, query_option=True)
    run.add_argument("-f", "--format", choices=FORMATS, default="text", help="output format (default: text)")
    run.add_argument("-o", "--output", metavar="FILE", help="write matches to FILE (default: stdout)")
    run.add_argument("--limit-rows", type=_non_negative, metavar="N", help="read at most N data rows")
    run.add_argument(
        "--chunk-size", type=_positive, default=100_000, metavar="N", help="rows per chunk (default: 100000)"
    )
    run.add_argument("--no-header", action="store_true", help="no header row (implies --positional)")
    run.add_argument(
        "--positional",
        action="store_true",
        help="ignore the header's names: each row holds its event type's attributes in declaration order",
    )
    run.add_argument("--type-column", metavar="NAME", help="event type column (default: the first)")
    run.add_argument(
        "--time-unit",
        choices=tuple(TIME_UNITS),
        default="ns",
        help="unit of integer values of primary_time/timestamp attributes (default: ns)",
    )
    run.add_argument("--input-format", choices=("csv", "parquet"), help="default: by the file name")
    run.add_argument("--progress", action="store_true", help="show progress even if stderr is not a terminal")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress line, summary or warnings")

    exp = sub.add_parser(
        "explain",
        help="show how pycel reads a query and the size of its automaton",
        description="Print the normalized pattern, its clauses and the automaton the engine compiles.",
    )
    exp.add_argument("query", metavar="QUERY", help="CEQL query: a file, - for stdin, or inline text")
    _add_ceql_arguments(exp, query_option=False)
    return parser


def _add_ceql_arguments(parser: argparse.ArgumentParser, *, query_option: bool) -> None:
    parser.add_argument(
        "-d",
        "--declaration",
        metavar="DECL",
        help="CREATE STREAM declaration: file or inline text (not needed if the query file starts with one)",
    )
    if query_option:
        parser.add_argument(
            "--query", required=True, metavar="QUERY", help="CEQL query: a file, - for stdin, or inline text"
        )
    parser.add_argument(
        "--time-attribute",
        metavar="ATTR",
        help="attribute that WITHIN ... SECONDS measures (default: primary_time)",
    )


def _say(message: str) -> None:
    print(f"pycel: {message}", file=sys.stderr)


def _source_error(err: SourceError) -> int:
    kind = "syntax error" if isinstance(err.error, CeqlSyntaxError) else "error"
    _say(f"{kind} in {err.label}: {err.error}")
    return EXIT_USAGE


def _bare_message(err: DataError) -> str:
    """The message of a DataError without the ``(row …, column …)`` it appends."""
    text = str(err)
    where = []
    if err.row is not None:
        where.append(f"row {err.row}")
    if err.column is not None:
        where.append(f"column {err.column!r}")
    suffix = f" ({', '.join(where)})"
    return text[: -len(suffix)] if where and text.endswith(suffix) else text


def _data_error(err: DataError, label: str, base: int) -> int:
    """Report a data error; rows are printed 1-based over the whole input."""
    row = None if err.row is None else (err.row if isinstance(err, InputError) else base + err.row)
    where = [label]
    if row is not None:
        where.append(f"row {row + 1} (position {row})")
    if err.column is not None:
        where.append(f"column {err.column!r}")
    _say(f"data error in {', '.join(where)}: {_bare_message(err)}")
    return EXIT_DATA


def output_variables(query: CompiledQuery, loaded: Loaded) -> list[str]:
    """The variables written per match: SELECTed ones in SELECT order, else all in pattern order."""
    spec = split_query(loaded.pattern)
    if spec.select is not None:
        return [v for v in spec.select if v in query.variables]
    ordered = [v for v in bound_variables(spec.body) if v in query.variables]
    return ordered + [v for v in query.variables if v not in ordered]


def _compile(loaded: Loaded) -> CompiledQuery:
    try:
        return compile_query(loaded.pattern, types=loaded.declaration.values())
    except (PatternError, UnsupportedError) as err:
        raise SourceError(loaded.query_source.label, err) from None


def _run(args: argparse.Namespace) -> int:
    if [args.declaration, args.query, args.data].count("-") > 1:
        raise UsageError("only one of --declaration, --query and DATA can be - (standard input)")
    loaded = load(args.declaration, args.query, time_attribute=args.time_attribute)
    query = _compile(loaded)
    options = ReadOptions(
        chunk_size=args.chunk_size,
        limit_rows=args.limit_rows,
        header=not args.no_header,
        positional=args.positional or args.no_header,
        type_column=args.type_column,
        time_unit=args.time_unit,
        input_format=args.input_format,
    )
    label = "<stdin>" if args.data == "-" else args.data
    try:
        source = open_source(args.data, Schema.of(loaded.declaration), options)
    except OSError as err:
        raise UsageError(f"cannot read {label}: {err.strerror or err}") from None
    except DataError as err:
        return _data_error(err, label, 0)
    out: IO[str] = sys.stdout
    try:
        if args.output not in (None, "-"):
            out = open(args.output, "w", encoding="utf-8", newline="")  # noqa: SIM115
    except OSError as err:
        source.close()
        raise UsageError(f"cannot write {args.output}: {err.strerror or err}") from None
    progress = Progress(sys.stderr, args.progress or (sys.stderr.isatty() and not args.quiet))
    began = time.perf_counter()
    stream = query.stream()
    found = base = 0
    try:
        writer = Writer(args.format, out, output_variables(query, loaded))
        for base, frame in source.chunks():  # noqa: B007 (base is read by the DataError handler)
            matches = stream.push(frame, type_column=source.type_column)
            writer.write(matches)
            found += len(matches)
            progress.update(stream.offset, found, source.fraction())
        out.flush()
    except DataError as err:
        progress.done()
        return _data_error(err, label, base)
    except KeyboardInterrupt:
        progress.done()
        _say(f"interrupted after {summary(stream.offset, found, time.perf_counter() - began)}")
        return EXIT_INTERRUPTED
    finally:
        source.close()
        if out is not sys.stdout:
            out.close()
    progress.done()
    if not args.quiet:
        _say(summary(stream.offset, found, time.perf_counter() - began))
    return EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    loaded = load(args.declaration, args.query, time_attribute=args.time_attribute)
    text, problem = explain(loaded)
    sys.stdout.write(text)
    if problem is not None:
        _say(f"error in {loaded.query_source.label}: {problem}")
        return EXIT_USAGE
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``pycel`` command with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    quiet = getattr(args, "quiet", False)

    def show(message: Any, category: Any, *_: Any, **__: Any) -> None:
        if not quiet:
            _say(f"warning: {message}")

    with warnings.catch_warnings():
        warnings.filterwarnings("always", category=UserWarning, module=r"pycel(\.|$)")
        warnings.showwarning = show
        try:
            return _run(args) if args.command == "run" else _explain(args)
        except UsageError as err:
            _say(f"error: {err}")
            return EXIT_USAGE
        except SourceError as err:
            return _source_error(err)
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_PIPE


def _silence_stdout() -> None:
    """After the reader of stdout went away (``| head``), stop Python's flush at exit failing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
