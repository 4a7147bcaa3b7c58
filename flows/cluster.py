"""``cluster``: embed (cached) then cluster a dataset's mentions; assignments Parquet out."""
from __future__ import annotations

from prefect import flow

from eventatlas import config
from eventatlas.tracking.runinfo import new_run_id
from tasks.cluster import cluster_task
from tasks.embed import embed_task


@flow(name="cluster")
def cluster(dataset: str, representation: str = "trigger", algorithm: str = "agglomerative",
            n_clusters: int | None = None, model_id: str | None = None, seed: int = 0, device: str = "auto") -> str:
    """``n_clusters`` defaults to the number of gold types, else (unlabelled mentions, e.g. detected ones) the
    count with the best silhouette (:mod:`eventatlas.cluster.selection`)."""
    mentions = config.datasets_dir() / dataset / "mentions.parquet"
    if not mentions.exists():
        raise FileNotFoundError(f"{mentions}: dataset {dataset!r} is not ingested")
    from eventatlas.modeling.encode import embeddings_dir

    emb = embed_task(str(mentions), model_id, representation, str(embeddings_dir()), {"device": device})
    out = config.runs_dir() / new_run_id(f"cluster-{dataset}") / f"{representation}__{algorithm}.parquet"
    return cluster_task(emb, algorithm, n_clusters, str(out), seed, str(mentions))
