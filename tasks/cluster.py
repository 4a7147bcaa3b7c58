"""Clustering task: embeddings in, assignments Parquet out."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import get_run_logger, task

from eventatlas.io import write_parquet


@task(name="cluster", task_run_name="cluster-{algorithm}")
def cluster_task(embeddings: str, algorithm: str, n_clusters: int | None, out_path: str, seed: int = 0) -> str:
    from eventatlas.cluster import cluster
    from eventatlas.modeling.encode import load_embeddings

    logger = get_run_logger()
    ids, X = load_embeddings(Path(embeddings))
    kw = {} if algorithm == "affinity" else {"n_clusters": n_clusters}
    pred = np.asarray(cluster(X, algorithm, seed=seed, **kw), dtype=np.int64)
    write_parquet(pa.table({"mention_id": list(ids), "cluster": pred}), out_path)
    logger.info("%s: %d points -> %d clusters -> %s", algorithm, len(pred), len(set(pred.tolist())), out_path)
    return out_path
