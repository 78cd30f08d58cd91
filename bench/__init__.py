"""Benchmarks, run as scripts (``python bench/scan_to_publish.py``); a package for mypy."""
