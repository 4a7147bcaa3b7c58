"""Embedding task, cached by (file fingerprint, model, representation, encoder options)."""
from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task

from eventatlas.io import fingerprint_paths


def embed_cache_key(context, parameters: dict[str, Any]) -> str:
    """Safe to cache: the output is a pure function of the file's content and these options.
    The cache dir is part of the key so a moved cache is recomputed, not dangling."""
    fp = fingerprint_paths([parameters["mentions_parquet"]])
    opts = {k: parameters.get(k) for k in ("model_id", "representation", "cache_dir", "options")}
    return "embed-" + hashlib.sha256(json.dumps([fp, opts], sort_keys=True, default=str).encode()).hexdigest()[:32]


@task(name="embed", task_run_name="embed-{representation}", cache_key_fn=embed_cache_key,
      cache_expiration=timedelta(days=30), persist_result=True)
def embed_task(mentions_parquet: str, model_id: str | None, representation: str, cache_dir: str | None = None,
               options: dict[str, Any] | None = None) -> str:
    from eventatlas.modeling.encode import embed_mentions

    logger = get_run_logger()
    out = embed_mentions(Path(mentions_parquet), model_id, representation, cache_dir=cache_dir, **(options or {}))
    logger.info("embedded %s (%s, %s) -> %s", mentions_parquet, model_id or "default model", representation, out)
    return str(out)
