"""Test support shared by the tests, the benchmarks and the chaos runs (not in the product).

Importable from the repository root (``tests`` is a package); ``bench/`` scripts put the
repository root on ``sys.path`` first.
"""
