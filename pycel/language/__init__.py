"""The pattern language below pycel.dsl: typed expressions, event types, query clauses and
the static checks of a query (the first layer of the pipeline, docs/architecture.md)."""
