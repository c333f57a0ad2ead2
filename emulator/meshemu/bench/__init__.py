"""Benchmarks: programs that print measured figures (min/median/max)."""
