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
#: Largest ``limit(n)``: the engine keeps the per-end limit in an int64.
MAX_LIMIT = (1 << 63) - 1
#: Largest count window ``within(events=n)``: window sizes are float64, exact up to 2**53.
MAX_COUNT_WINDOW = 1 << 53
#: Largest stream position ``push(..., positions=)`` accepts: positions are int64, and a
#: position plus a count window must stay one.
MAX_POSITION = (1 << 62) - 1
#: Matches fitting the window (and passing the post-filters) that LAST/NEXT/MAX with
#: post-filters may compare at one end position (they are enumerated, then the strategy
#: chooses; without post-filters the choice is made on the run DAG, pycel.jit.choose and
#: pycel.jit.choose_max): above, the query is refused at run time instead of taking
#: exponential time and memory.
MAX_WINDOWED_CHOICES = 10_000
