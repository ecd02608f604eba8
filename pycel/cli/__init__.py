"""The ``pycel`` command: run CORE-style CEQL queries over CSV or Parquet event files.

::

    pycel run --declaration stocks.ceql --query s3.ceql events.csv --format jsonl
    pycel explain s3.ceql --declaration stocks.ceql
    python -m pycel run ...

Exit status: 0 success; 1 bad data (the message names the row and column; every match
ending before the bad row is written first); 2 bad usage or a query the engine cannot run
(syntax errors show line and column). An unexpected exception is one line asking for a
report (1 once data is read, 2 before), never a traceback. See ``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Protocol

import pandas as pd

from pycel.ceql import bound_variables
from pycel.data.ingest import check_input_columns
from pycel.data.matches import Matches
from pycel.engine import CompiledQuery, Stream
from pycel.engine import compile as compile_query
from pycel.errors import CeqlSyntaxError, DataError, PatternError, UnsupportedError
from pycel.language.clauses import split_query
from pycel.runtime.predicates import columns_read_by

from ._data import TIME_UNITS, InputError, ReadOptions, Schema, open_source
from ._explain import explain
from ._load import Loaded, SourceError, UsageError, for_command_line, load, too_deep
from ._output import FORMATS, OutputError, Progress, Writer, summary

__all__ = ["Feeder", "build_parser", "main"]

EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_PIPE = 130, 141
#: Matches held in memory at most (about) before they are written: ``--match-batch``.
MATCH_BATCH = 100_000
_RATE_DECAY = 0.9  # how fast Feeder forgets a burst of matches, per push
#: File names taken for JSON (refused: read as CSV they gave a puzzling header error).
_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")


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


def _installed_version() -> str:
    """pycel's installed version (for --version), or a note that it is not installed."""
    try:
        return importlib.metadata.version("pycel")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "(not installed: a source tree)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``pycel`` command."""
    parser = argparse.ArgumentParser(
        prog="pycel",
        description="Complex event recognition: run CEQL queries (CORE's query language) over event files.",
        epilog="Exit status: 0 ok, 1 bad data, 2 bad usage or query. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"pycel {_installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{run,explain}")

    run = sub.add_parser(
        "run",
        help="find the matches of a query in a CSV or Parquet file",
        description=(
            "Run a CEQL query over events read in chunks from CORE-style CSV (header row; "
            "event type first; then the attributes) or Parquet, and print the matches."
        ),
    )
    run.add_argument(
        "data",
        metavar="DATA",
        help="CSV or Parquet (.parquet, .pq) file; - for stdin (CSV unless --input-format parquet)",
    )
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
    run.add_argument("--input-format", choices=("csv", "parquet"), help="default: by the file name")
    run.add_argument(
        "--match-batch",
        type=_positive,
        default=MATCH_BATCH,
        metavar="N",
        help=f"hold about N matches at most before writing them (default: {MATCH_BATCH:,})",
    )
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
    parser.add_argument(
        "--time-unit",
        choices=tuple(TIME_UNITS),
        default="ns",
        help=(
            "unit of integer values of primary_time/timestamp attributes, and of n in "
            "WITHIN n [such an attribute] (default: ns)"
        ),
    )


def _say(message: str) -> None:
    print(f"pycel: {message}", file=sys.stderr)


def _source_error(err: SourceError) -> int:
    kind = "syntax error" if isinstance(err.error, CeqlSyntaxError) else "error"
    _say(f"{kind} in {err.label}: {err.message}")
    return EXIT_USAGE


def _data_error(err: DataError, label: str, base: int) -> int:
    """Report a data error; rows are printed 1-based over the whole input."""
    row = None if err.row is None else (err.row if isinstance(err, InputError) else base + err.row)
    where = [label]
    if row is not None:
        where.append(f"row {row + 1} (position {row})")
    if err.column is not None:
        where.append(f"column {err.column!r}")
    _say(f"data error in {', '.join(where)}: {_one_line(err.message)}")
    return EXIT_DATA


def _one_line(text: str) -> str:
    """``text`` on one line (messages of other libraries may hold line breaks)."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


class _Source(Protocol):
    """What ``pycel run`` needs of an event file reader (``_data.CsvSource``, ``_parquet.ParquetSource``)."""

    type_column: str

    def chunks(self) -> Iterator[tuple[int, pd.DataFrame]]: ...
    def fraction(self) -> float | None: ...
    def close(self) -> None: ...


class Feeder:
    """Pushes frames into ``stream`` and writes the matches of each push before the next,
    so that memory holds about ``budget`` matches at most, whatever the matches per chunk.

    The engine enumerates every match of a pushed batch at once, so a frame is pushed in
    sub-batches whose size adapts to the matches seen: each push takes a quarter of
    ``budget`` rows divided by the matches per row — the highest rate of the recent pushes
    (it decays by 10 % a push), and at least one — and at most twice the rows of the push
    before. Matches come in bursts (S3's all end at QQQ events), hence the margin; only a
    burst four times denser than any recent one (and than one match per row), or more than
    ``budget`` matches ending in one row (they are enumerated together), holds more.

    A data error at a row of a frame stops the feeding after the rows before it: they
    are pushed and their matches written (a push that fails changes nothing), then the
    error is raised as an :class:`InputError` naming the row's stream position.

    Example::

        feeder = Feeder(query.stream(), Writer("jsonl", sys.stdout, ["a", "b"]), "type", 100_000)
        for _, frame in source.chunks():
            feeder.feed(frame)
    """

    def __init__(self, stream: Stream, writer: Writer, type_column: str, budget: int) -> None:
        self.stream = stream
        self.writer = writer
        self.type_column = type_column
        self.budget = budget
        self.rows = max(1, budget // 100)  # the size of the next push
        self.rate = 0.0  # matches per row, the highest of the recent pushes (decaying)
        self.largest = 0  # the most matches one push returned: how many were held at once
        self.pushes = 0

    def feed(self, frame: pd.DataFrame, after_push: Callable[[], None] | None = None) -> None:
        """Push every row of ``frame`` (or those before its first bad row, then raise)."""
        at, end = 0, len(frame)
        failure: InputError | None = None
        while at < end:
            stop = min(end, at + self.rows)
            part = frame if stop - at == len(frame) else frame.iloc[at:stop]
            try:
                matches = self.stream.push(part, type_column=self.type_column)
            except DataError as err:
                if isinstance(err, InputError) or err.row is None or not 0 <= err.row < stop - at:
                    raise
                # Rows before the bad one are fine: push them (in smaller pushes if they
                # raise in turn on an earlier row), then report the first bad row.
                failure = InputError(err.message, row=self.stream.offset + err.row, column=err.column)
                end = at + err.row
                continue
            self._written(matches, stop - at)
            at = stop
            if after_push is not None:
                after_push()
        if failure is not None:
            raise failure

    def finish(self) -> None:
        """The data ended: write the matches that waited for their window to pass (a
        pattern that ends in an absence; at a bad row they stay unwritten)."""
        self._written(self.stream.close(), 0)

    def _written(self, matches: Matches, rows: int) -> None:
        """Write one push's matches, then size the next push."""
        found = len(matches)
        self.pushes += 1
        self.largest = max(self.largest, found)
        self.writer.write(matches)
        self.rate = max(found / max(rows, 1), self.rate * _RATE_DECAY)
        # Before any match, or when they are sparse, assume one per row: a sudden burst
        # of up to four matches per row still stays under the budget.
        allowed = int(self.budget / 4 / max(self.rate, 1.0))
        self.rows = max(1, min(2 * self.rows, allowed))  # (a push cut short by the frame's end is no sign)


def output_variables(query: CompiledQuery, loaded: Loaded) -> list[str]:
    """The variables written per match: SELECTed ones in SELECT order (each once: a JSON
    object or CSV header with a key twice is not what anyone reads), else all in pattern
    order."""
    spec = split_query(loaded.pattern)
    if spec.select is not None:
        return [v for v in dict.fromkeys(spec.select) if v in query.variables]
    ordered = [v for v in bound_variables(spec.body) if v in query.variables]
    return ordered + [v for v in query.variables if v not in ordered]


def _compile(loaded: Loaded) -> CompiledQuery:
    try:
        return compile_query(loaded.pattern, types=loaded.declaration.values())
    except (PatternError, UnsupportedError) as err:
        raise SourceError(loaded.query_source.label, err) from None
    except RecursionError:  # (a safety net: the parser bounds the nesting of a query)
        raise too_deep(loaded.query_source.label) from None


def _run(args: argparse.Namespace) -> int:
    if [args.declaration, args.query, args.data].count("-") > 1:
        raise UsageError("only one of --declaration, --query and DATA can be - (standard input)")
    loaded = load(args.declaration, args.query, time_attribute=args.time_attribute, time_unit=args.time_unit)
    query = _compile(loaded)
    options = ReadOptions(
        chunk_size=args.chunk_size,
        limit_rows=args.limit_rows,
        header=not args.no_header,
        positional=args.positional or args.no_header,
        type_column=args.type_column,
        time_unit=args.time_unit,
        input_format=args.input_format,
        columns=frozenset(columns_read_by(query)),  # the others are checked, not converted
    )
    label = "<stdin>" if args.data == "-" else args.data
    if args.input_format is None and args.data.lower().endswith(_JSON_SUFFIXES):
        raise UsageError(
            f"{args.data} looks like JSON; pycel run reads CSV or Parquet files (convert it, e.g. "
            "pandas.read_json(path, lines=True).to_parquet(...), or give --input-format csv if it holds CSV)"
        )
    try:
        source = open_source(args.data, Schema.of(loaded.declaration), options)
    except IsADirectoryError:
        raise UsageError(
            f"{label} is a directory: pycel run reads one CSV or Parquet file (a Parquet dataset, "
            "as Spark writes one, can be joined into one: pyarrow.parquet.read_table(directory) "
            "then pyarrow.parquet.write_table(table, 'events.parquet'), in the events' order)"
        ) from None
    except OSError as err:
        raise UsageError(f"cannot read {label}: {err.strerror or err}") from None
    except DataError as err:
        return _data_error(err, label, 0)
    except Exception as err:  # a bug in reading the file's head: one line, as for data errors
        _internal_error(err, f"opening {label}")
        return EXIT_DATA
    try:  # also for a file without rows, which never reaches the engine's check
        if not options.positional:
            check_input_columns(source.columns, columns_read_by(query))
    except DataError as err:
        source.close()
        return _data_error(err, label, 0)
    out: IO[str] = sys.stdout
    try:
        if args.output not in (None, "-"):
            out = open(args.output, "w", encoding="utf-8", newline="")  # noqa: SIM115
    except OSError as err:
        source.close()
        raise UsageError(f"cannot write {args.output}: {err.strerror or err}") from None
    try:
        writer = Writer(args.format, out, output_variables(query, loaded))
        feeder = Feeder(query.stream(), writer, source.type_column, args.match_batch)
        return _feed_all(args, source, feeder, label, loaded.query_source.label)
    finally:
        source.close()
        if out is not sys.stdout:
            with contextlib.suppress(OSError):  # already reported: the writes failed
                out.close()


def _feed_all(args: argparse.Namespace, source: _Source, feeder: Feeder, label: str, query_label: str) -> int:
    """Read every chunk into ``feeder`` and report how it ended: the summary, or the error
    after the matches of the rows before it (see docs/cli.md, exit status)."""
    progress = Progress(sys.stderr, args.progress or (sys.stderr.isatty() and not args.quiet))
    began = time.perf_counter()
    base = 0

    def pushed() -> None:
        progress.update(feeder.stream.offset, feeder.writer.written, source.fraction())

    def report() -> str:
        return summary(feeder.stream.offset, feeder.writer.written, time.perf_counter() - began)

    def stopped() -> None:
        if not args.quiet:
            _say(f"output complete before row {feeder.stream.offset + 1:,}: {report()}")

    try:
        for base, frame in source.chunks():  # noqa: B007 (base is read by the DataError handler)
            feeder.feed(frame, pushed)
        feeder.finish()
        feeder.writer.flush()
    except DataError as err:
        progress.done()
        _data_error(err, label, base)
        stopped()
        return EXIT_DATA
    except (PatternError, UnsupportedError) as err:  # the query, refused once data arrives
        progress.done()
        _say(f"error in {query_label}: {_one_line(for_command_line(str(err)))}")
        stopped()
        return EXIT_USAGE
    except OutputError as err:  # (no summary: what was written is unknown)
        progress.done()
        _say(f"cannot write the matches: {err}")
        return EXIT_DATA
    except BrokenPipeError:
        raise
    except OSError as err:  # the reader's I/O failed mid-file (a file that shrank, a bad disk)
        progress.done()
        reason = _one_line(str(err))
        _say(f"data error in {label}, after row {feeder.stream.offset:,}: cannot read further: {reason}")
        stopped()
        return EXIT_DATA
    except KeyboardInterrupt:
        progress.done()
        _say(f"interrupted after {report()}")
        return EXIT_INTERRUPTED
    except Exception as err:  # a bug: say so in one line, keep the exit status of data errors
        progress.done()
        _internal_error(err, f"reading {label} after row {feeder.stream.offset:,}")
        stopped()
        return EXIT_DATA
    progress.done()
    if not args.quiet:
        _say(report())
    return EXIT_OK


def _internal_error(err: BaseException, where: str) -> None:
    """One line for an exception pycel did not expect (the traceback with PYCEL_DEBUG=1)."""
    if os.environ.get("PYCEL_DEBUG"):
        traceback.print_exception(err, file=sys.stderr)
    text = _one_line(str(err)) or "(no message)"
    _say(
        f"internal error while {where}: {type(err).__name__}: {text} "
        "(please report this with the command; PYCEL_DEBUG=1 shows the traceback)"
    )


def _explain(args: argparse.Namespace) -> int:
    loaded = load(args.declaration, args.query, time_attribute=args.time_attribute, time_unit=args.time_unit)
    try:
        text, problem = explain(loaded)
    except RecursionError:  # (a safety net: the parser bounds the nesting of a query)
        raise too_deep(loaded.query_source.label) from None
    sys.stdout.write(text)
    if problem is not None:
        _say(f"error in {loaded.query_source.label}: {for_command_line(problem)}")
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
    said: set[str] = set()  # explain checks a query, then compiles it: say each warning once

    def show(message: Any, category: Any, *_: Any, **__: Any) -> None:
        if not quiet and str(message) not in said:
            said.add(str(message))
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
        except KeyboardInterrupt:
            _say("interrupted")
            return EXIT_INTERRUPTED
        except Exception as err:  # a bug, before any data was read: one line, exit status 2
            _internal_error(err, "reading the query" if args.command == "explain" else "preparing the run")
            return EXIT_USAGE


def _silence_stdout() -> None:
    """After the reader of stdout went away (``| head``), stop Python's flush at exit failing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
