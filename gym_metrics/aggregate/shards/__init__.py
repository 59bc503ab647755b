"""Sharded aggregation: partial states written per shard (Parquet) and their streaming merge,
computed a range of tasks at a time, equal byte for byte to the one-process file."""
