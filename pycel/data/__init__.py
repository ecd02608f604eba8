"""Data in and out: every input kind (events, dicts, pandas, Arrow, CSV/Parquet columns) to
columnar batches, and matches to Python objects, pandas and Arrow tables."""
