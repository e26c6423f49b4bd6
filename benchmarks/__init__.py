"""Benchmarks and long comparisons (a package, so ``benchmarks._support`` is ours even when an installed
distribution ships a top-level ``benchmarks`` package, as enlighten, a Toil dependency, does)."""
