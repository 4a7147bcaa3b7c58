"""eventatlas: event datasets in one schema, event models, clustering and metrics.

This package is the plain core: no Prefect import anywhere under it, so each
algorithm is importable and testable alone. Prefect lives in ``tasks/`` and ``flows/``.
"""
__version__ = "0.1.0"
