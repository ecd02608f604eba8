"""The engine's fixed limits, in one place (each stage imports the ones it enforces).

Example::

    from pycel.limits import MAX_ATOMS
"""

#: Atoms per pattern: an event's atom predicates are packed into one int64 bit-vector.
MAX_ATOMS = 62
#: Variables per pattern: a label set is an int64 bit mask of variables.
MAX_VARIABLES = 63
#: States of the lazily determinized automaton before the pattern is refused.
MAX_STATES = 1 << 20
#: Pairs (T, E, U) of the MAX strategy's automaton before the pattern is refused.
MAX_PAIRS = 1 << 16
