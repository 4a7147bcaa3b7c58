"""Each command's body, written once: ingest, the train grid (train-all), the atlas, declared experiments.

A pipeline runs its steps through an injected :class:`~eventatlas.pipelines.engine.Engine`: where the
train/evaluate jobs of a grid run (this process, a Dask cluster, Prefect task runs), how run records land in
the warehouse (the one publish path) and where progress lines go. The CLI passes the in-process engine;
``flows/`` only decorates these functions for Prefect, passing an engine whose steps are Prefect tasks. No
Prefect here: the core never imports ``flows`` or ``tasks``.
"""
from __future__ import annotations
