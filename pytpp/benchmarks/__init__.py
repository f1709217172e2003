"""Benchmarks run by `python -m pytpp bench CASE`: each module here is one case with run(h)."""
