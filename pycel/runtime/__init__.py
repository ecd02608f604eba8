"""The runtime: a :class:`~pycel.runtime.stream.Stream` evaluates a plan over batches,
delegating to the runner of the plan's automaton family (runners/); keys, windows,
post-filters and snapshots."""
