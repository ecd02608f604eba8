"""pycel errors raised on Spark executors, raised again on the driver as pycel errors.

A :class:`pycel.DataError` raised while an executor runs a group (an unknown event
type, time going backwards, duplicate or late positions) fails the Spark job; the
driver then sees a ``PythonException`` (or a ``Py4JJavaError`` /
``StreamingQueryException``) whose text holds the worker's traceback, ending in the
line ``pycel.errors.DataError: <message>``. :func:`raise_pycel_errors` finds that line
and raises the pycel error of that class with that message.

Nothing here imports pyspark: the translation works on the exceptions' text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pycel import errors
from pycel.errors import PycelError

#: ``pycel.errors.DataError: message`` at the start of a line of a worker's traceback.
_ERROR_LINE = re.compile(rf"^{re.escape(errors.__name__)}\.(\w+): (.*)$", re.MULTILINE)


@contextmanager
def raise_pycel_errors() -> Iterator[None]:
    """Within this block, a Spark job that failed because of a pycel error on an executor
    raises that error (e.g. :class:`pycel.DataError`) with its original message; other
    exceptions pass through unchanged.

    :func:`pycel.spark.detect` is lazy: the job runs, and fails, at the action
    (``collect()``, ``write``, ``awaitTermination()``), so that is what goes in the block.

    Example::

        import pycel, pycel.spark

        try:
            with pycel.spark.raise_pycel_errors():
                rows = pycel.spark.detect(df, pattern, order_by="time").collect()
        except pycel.DataError as err:
            print(err)  # e.g. unknown event type 'Hold' ... at position 17, id='e17' ...
    """
    try:
        yield
    except PycelError:
        raise
    except Exception as err:
        found = pycel_error_in(err)
        if found is None:
            raise
        raise found from err


def pycel_error_in(err: BaseException) -> PycelError | None:
    """The pycel error an exception from a failed Spark job reports, if any: the last
    ``pycel.errors.<Class>: <message>`` line of its text (the outermost error of the
    worker's traceback), searched through the exception and its causes."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _from_text(_text_of(current))
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def _text_of(err: BaseException) -> str:
    """The exception's message; for py4j's Java errors, the Java exception's too."""
    text = str(err)
    java = getattr(err, "java_exception", None)
    if java is not None:
        try:
            text += "\n" + str(java.toString())
        except Exception:  # noqa: BLE001 - the JVM may be gone; the Python text still counts
            pass
    return text


def _from_text(text: str) -> PycelError | None:
    found = None
    for m in _ERROR_LINE.finditer(text):
        cls = getattr(errors, m.group(1), None)
        if isinstance(cls, type) and issubclass(cls, PycelError):
            found = (cls, m.group(2).rstrip())
    if found is None:
        return None
    cls, message = found
    try:
        return cls(message)
    except TypeError:  # an error class whose constructor needs more than a message
        return PycelError(message)
