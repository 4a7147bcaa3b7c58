"""What every EMR ranker is computed from: the candidate pool embedded once (:func:`embed_pool`, trigger
markers written in when asked), the representation names of metric rows (:func:`rep_label`), the per-query
training of the Siamese and adapted meta models (:func:`per_query_params`) and the list of evaluations of a
run (:func:`evaluations`), shared by the test episodes (:mod:`.protocol`), the development episode
(:mod:`.dev`) and the tuned encoder (:mod:`.tuned_encoder`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..io import write_parquet


def embed_pool(pool: pa.Table, out_dir: Path, cfg: Any, device: str, *, representation: str | None = None,
               model_id: str | None = None) -> tuple[pa.Table, np.ndarray, dict]:
    """Embed every pool item once (cached by content); items the encoder rejects are dropped (counted).
    ``representation`` / ``model_id`` default to the config's."""
    from ..modeling.encode import embed_mentions, load_embeddings

    path = write_parquet(pool, out_dir / "pool.parquet")
    if getattr(cfg, "trigger_markers", False):  # the encoder reads "... [ trigger ] ...", the span still the trigger
        from ..modeling.inputs import mark_table

        marked = mark_table(pool)
        path = write_parquet(marked, out_dir / "pool_marked.parquet")
    npy = embed_mentions(path, model_id or cfg.model_id, representation or cfg.representation,
                         cache_dir=cfg.cache_dir, device=device, **cfg.encoder.model_dump())
    ids, X = load_embeddings(npy)
    info = {"embeddings": npy.name, "dropped": 0}
    pool_ids = pool["mention_id"].to_pylist()
    if ids != pool_ids:
        pos = {m: i for i, m in enumerate(ids)}
        keep = [i for i, m in enumerate(pool_ids) if m in pos]
        info["dropped"] = len(pool_ids) - len(keep)
        pool = pool.take(pa.array(keep, pa.int64()))
        X = X[[pos[pool_ids[i]] for i in keep]]
    return pool, np.asarray(X, dtype=np.float32), info


def per_query_params(cfg: Any, sp: Any, model: str) -> Any:
    """The per-query training of ``siamese`` (``sp``) or ``meta_adapt`` (from the meta network's shape,
    ``adapt_epochs`` at ``adapt_lr``)."""
    from .models import SiameseParams

    if model == "siamese":
        return sp
    return SiameseParams(**{**sp.as_dict(), "epochs": cfg.meta.adapt_epochs, "lr": cfg.meta.adapt_lr,
                            "hidden": cfg.meta.hidden, "layers": cfg.meta.layers})


def rep_label(cfg: Any, rep: str) -> str:
    """A representation's name in metric rows: ``trigger+markers`` when the inputs carried trigger markers."""
    return f"{rep}+markers" if getattr(cfg, "trigger_markers", False) else rep


TRAINED_FEATURES = ("meta", "contrastive")  # rankers that are trained models' features, not frozen ad-hoc ones


def evaluations(cfg: Any, rankers: dict[str, np.ndarray], X: np.ndarray):
    """(model, representation, features) of every evaluation: ad-hoc over each ranker, the per-query
    models over the main representation, ``meta`` / ``contrastive`` over their own features."""
    main = rep_label(cfg, cfg.representation)
    for model in cfg.models:
        if model == "adhoc":
            yield "adhoc", main, X
            for name, Xr in rankers.items():
                if name not in TRAINED_FEATURES:
                    yield "adhoc", rep_label(cfg, name) if "@" not in name else name, Xr
        elif model in TRAINED_FEATURES:
            yield model, main, rankers[model]
        else:
            yield model, main, X
