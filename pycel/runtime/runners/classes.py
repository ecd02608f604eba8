"""Class ids for the runners that read a determinized automaton (sequential, ranked,
maximal): each distinct atom bit-vector of the data is a class, numbered as it first
appears; the tables are expanded for new classes before the loop runs."""

from __future__ import annotations

import numpy as np

from pycel.runtime.predicates import ClassTable
from pycel.runtime.snapshot.plan import Json, bad
from pycel.runtime.snapshot.tables import Reader, Writer


def save_classes(w: Writer, classes: ClassTable) -> Json:
    """The class table for a snapshot."""
    return w.add(classes.bits, np.int64)


def load_classes(r: Reader, x: Json, automaton_classes: list[int]) -> ClassTable:
    """The class table of a snapshot, checked against the classes the automaton's tables
    were expanded for (``automaton_classes``, a prefix of the table's)."""
    classes = ClassTable()
    classes.bits = r.get(x, "classes").tolist()
    classes.ids = {b: k for k, b in enumerate(classes.bits)}
    if len(classes.ids) != len(classes.bits):
        raise bad("class table")
    if automaton_classes != classes.bits[: len(automaton_classes)]:
        raise bad("the automaton's classes are not the stream's")
    return classes
