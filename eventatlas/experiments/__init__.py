"""Declared experiments (``experiments/*.yaml``): the schema (:mod:`.spec`), running their cells with reuse
and resume (:mod:`.run`), their tables and pages from the warehouse (:mod:`.results`) and their Prefect
deployments (:mod:`.deploy`). No Prefect here: ``flows/experiment.py`` runs the cells on train-all's runners."""
from .spec import Experiment, ExperimentError, experiment_files, load, load_all

__all__ = ["Experiment", "ExperimentError", "experiment_files", "load", "load_all"]
