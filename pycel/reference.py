"""The reference evaluator (test oracle). Being written; see issue 2."""
