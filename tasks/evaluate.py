"""Evaluation task: assignments vs gold primary labels -> long-form metric rows (task ``induction``:
they score a clustering of mentions into types)."""
from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
from prefect import get_run_logger, task


@task(name="evaluate")
def evaluate_task(assignments: str, mentions_parquet: str, *, dataset: str, method: str, representation: str | None,
                  clustering: str | None, seed: int = 0, split: str | None = None, variant: str | None = None,
                  setting: str | None = None) -> list[dict[str, Any]]:
    from eventatlas.evaluation.metrics import clustering_scores

    logger = get_run_logger()
    a = pq.read_table(assignments, columns=["mention_id", "cluster"]).to_pydict()
    m = pq.read_table(mentions_parquet, columns=["mention_id", "labels"]).to_pydict()
    gold = {mid: labs[0] for mid, labs in zip(m["mention_id"], m["labels"]) if labs}
    pairs = [(gold[mid], c) for mid, c in zip(a["mention_id"], a["cluster"]) if mid in gold]
    if not pairs:
        raise ValueError(f"{assignments}: no assigned mention has a gold label in {mentions_parquet}")
    y, pred = zip(*pairs)
    scores = clustering_scores(list(y), list(pred))
    logger.info("%s: %d labelled of %d assigned; ari=%.4f", assignments, len(pairs), len(a["mention_id"]),
                scores.get("ari", float("nan")))
    return [{"task": "induction", "dataset": dataset, "split": split or "all", "setting": setting, "method": method,
             "representation": representation, "clustering": clustering, "variant": variant, "metric": k,
             "value": float(v), "seed": seed} for k, v in scores.items()]
