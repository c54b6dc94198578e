"""Analyses: pure functions over the schema tables returning DataFrames (no plotting, no I/O)."""
