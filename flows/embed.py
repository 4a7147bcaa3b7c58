"""``embed``: embed a dataset's mentions with each representation (cached by content)."""
from __future__ import annotations

from prefect import flow

from eventatlas import config
from tasks.embed import embed_task


@flow(name="embed")
def embed(dataset: str, representations: list[str] | None = None, model_id: str | None = None,
          options: dict | None = None) -> dict[str, str]:
    """Returns representation -> embeddings path (``.npy`` + ``.ids.parquet``)."""
    from eventatlas.modeling.encode import REPRESENTATIONS

    mentions = config.datasets_dir() / dataset / "mentions.parquet"
    if not mentions.exists():
        raise FileNotFoundError(f"{mentions}: dataset {dataset!r} is not ingested")
    from eventatlas.modeling.encode import embeddings_dir

    cache = str(embeddings_dir())  # resolved now so the task cache key names the real directory
    return {rep: embed_task(str(mentions), model_id, rep, cache, options)
            for rep in (representations or list(REPRESENTATIONS))}
