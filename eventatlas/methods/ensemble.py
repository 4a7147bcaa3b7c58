"""Ensembles of finished batch_attention runs (the paper's E-FT), as a run of their own.

``ensemble_runs(run_dirs)`` takes finished runs of one dataset (e.g. seeds 0, 1, 2 of
``eventatlas train batch_attention DATASET``), and per representation they all trained combines the
chosen epoch's embeddings of each (:func:`eventatlas.induction.evaluate.ensemble_rows`), clusters them
with the members' cluster count and manifold neighbour count, and scores the unseen mentions. The
result is one run record (task ``ensemble``, seed -1, the members' run ids and precisions in its
params) under ``<data>/runs/<run_id>/``, for the publish path to land (``eventatlas ensemble``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from .. import config

METHOD = "batch_attention"


class EnsembleError(ValueError):
    """The runs cannot be ensembled (not finished batch_attention runs, or of different data/settings)."""


def _members(run_dirs: Sequence[Path]) -> list[dict]:
    from ..tracking.records import RecordError, read_record

    out = []
    for d in map(Path, run_dirs):
        try:
            run = read_record(d / "run.json")["run"]
        except RecordError as e:
            raise EnsembleError(str(e)) from None
        if run.get("method") != METHOD or run.get("status") != "completed":
            raise EnsembleError(f"{d}: run {run.get('run_id')} is a {run.get('status')} {run.get('method')} run; "
                                f"an ensemble takes completed {METHOD} runs")
        summaries = {p.parent.name: json.loads(p.read_text(encoding="utf-8"))
                     for p in sorted(d.glob("*/train_summary.json"))}
        if not summaries:
            raise EnsembleError(f"{d}: no <representation>/train_summary.json (not a {METHOD} training directory)")
        out.append({"dir": d, "run": run, "dataset": (run.get("params") or {}).get("dataset"),
                    "summaries": summaries})
    return out


def cluster_settings_of(dataset_dir: Path, summaries: list[dict]) -> dict:
    """``n_clusters`` / ``k_manifold`` the members were evaluated with (their config, else the dataset
    protocol's, as the runs themselves did); one for all."""
    from ..data import Manifest, protocol_for
    from .batch_attention import NAME, BatchAttentionConfig, cluster_settings

    proto = protocol_for(Manifest.read(dataset_dir), NAME, "induction")
    settings = {json.dumps(cluster_settings(BatchAttentionConfig.model_validate(s["config"]), proto), sort_keys=True)
                for s in summaries}
    if len(settings) != 1:
        raise EnsembleError(f"the runs were evaluated with different cluster settings: {sorted(settings)}")
    return json.loads(settings.pop())


def ensemble_runs(run_dirs: Sequence[str | Path]) -> tuple[Path, list[tuple]]:
    """Write the ensemble's run record; returns its path and ``(representation, members, metric rows)``."""
    from ..evaluation.base import RowKey
    from ..induction.evaluate import ensemble_rows
    from ..tracking.records import data_fingerprint, finish_record, new_record, write_metrics, write_record
    from ..tracking.runinfo import new_run_id

    members = _members(run_dirs)
    datasets = {m["dataset"] for m in members}
    if len(datasets) != 1 or None in datasets:
        raise EnsembleError(f"the runs are of different datasets: {sorted(map(str, datasets))}")
    dataset = datasets.pop()
    ddir = config.datasets_dir() / dataset
    if not (ddir / "manifest.json").exists():
        raise EnsembleError(f"dataset {dataset!r} of the runs is not ingested (no {ddir / 'manifest.json'})")
    reps = [r for r in members[0]["summaries"] if all(r in m["summaries"] for m in members)]
    if not reps:
        raise EnsembleError("the runs share no trained representation")
    rows, summary = [], []
    for rep in reps:
        sums = [m["summaries"][rep] for m in members]
        key = RowKey(dataset=dataset, method=METHOD, seed=-1, split="unseen", setting=sums[0].get("setting"),
                     representation=rep)
        try:
            new = ensemble_rows(sums, key, **cluster_settings_of(ddir, sums))
        except (ValueError, KeyError, FileNotFoundError) as e:  # other unseen mentions, a pruned epoch file
            raise EnsembleError(f"representation {rep}: {type(e).__name__}: {e}") from None
        rows += new
        summary.append((rep, len(sums), len(new)))
    run_id = new_run_id(f"{METHOD}-ensemble-{dataset}")
    params = {"dataset": dataset, "representations": reps,
              # each member's precision under "precision": the ensemble's configuration identity in the leaderboard
              "members": [{"run_id": m["run"]["run_id"], "seed": m["run"].get("seed"),
                           "precision": m["summaries"][reps[0]].get("precision")} for m in members]}
    rec = new_record(run_id, flow="ensemble", task="ensemble", method=METHOD, params=params,
                     data_fingerprints={dataset: data_fingerprint(ddir)}, seed=-1)
    out = config.runs_dir() / run_id
    write_metrics(rec, rows, out)
    return write_record(out, finish_record(rec)), summary
