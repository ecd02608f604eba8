"""Planning: normalization passes and automaton constructions that turn a checked query
into an immutable :class:`~pycel.plan.planner.Plan` (see planner.py)."""
