"""Clustering task: embeddings in, assignments Parquet out."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import get_run_logger, task

from eventatlas.io import write_parquet


@task(name="cluster", task_run_name="cluster-{algorithm}")
def cluster_task(embeddings: str, algorithm: str, n_clusters: int | None, out_path: str, seed: int = 0,
                 mentions: str | None = None) -> str:
    from eventatlas.cluster import cluster
    from eventatlas.cluster.selection import n_clusters_for
    from eventatlas.modeling.encode import load_embeddings

    logger = get_run_logger()
    ids, X = load_embeddings(Path(embeddings))
    how = f"{n_clusters} clusters: given" if n_clusters is not None else "affinity propagation chose the count"
    if n_clusters is None and algorithm != "affinity":
        if mentions is None:
            raise ValueError(f"{algorithm} needs n_clusters (or the mentions table to choose it from)")
        n_clusters, how = n_clusters_for(mentions, X, algorithm, seed=seed)
    logger.info("%s", how)
    kw = {} if algorithm == "affinity" else {"n_clusters": n_clusters}
    pred = np.asarray(cluster(X, algorithm, seed=seed, **kw), dtype=np.int64)
    table = pa.table({"mention_id": list(ids), "cluster": pred}).replace_schema_metadata({"n_clusters": how})
    write_parquet(table, out_path)  # the metadata says how the count was chosen (the CLI prints it)
    logger.info("%s: %d points -> %d clusters -> %s", algorithm, len(pred), len(set(pred.tolist())), out_path)
    return out_path
