"""Runnable benchmarks for MagneticStorage; results land in ``benchmarks/results/``."""
