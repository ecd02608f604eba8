"""Stream snapshots: the container format (:mod:`.state`), the plan as JSON data
(:mod:`.plan`) and the tables and arrays of the runtime state (:mod:`.tables`); see
docs/snapshots.md."""
