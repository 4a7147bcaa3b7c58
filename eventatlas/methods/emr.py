"""Few-shot event mention retrieval (issue 10): k-shot m-way MAP of the ad-hoc and per-query Siamese models.

For each of ``repetitions`` seeded episodes (:func:`eventatlas.emr.episodes.sample_episode`, the
dataset's ``retrieval`` protocol in ``datasets/registry.yaml`` filling what the user left unset) and
each k in ``ks``, every model ranks the same test corpus for the same queries:

* ``adhoc``: mean cosine of the frozen ``representation`` (default ``window4``) over the k shots;
* ``siamese``: a network trained per query from that query alone
  (:func:`eventatlas.emr.models.siamese_rank_scores`).

Metric rows (task ``retrieval``, split ``test``, setting ``k=5 m=10``, variant = the model,
representation = the frozen representation): MAP, R-precision, P@k and Recall@k averaged over the
queries and then over the repetitions, plus ``map_std`` (sample std of MAP over repetitions). The
pool, every episode (items with roles, queries with their shot mention ids) and the per-repetition
scores are artifacts. Development pools are sampled and recorded; no hyper-parameter was tuned on
them yet (the Siamese defaults are the paper's).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from .. import config as paths
from ..io import write_parquet
from .base import MethodResult, NotApplicable
from .spec import EncoderConfig, MethodConfig, merge_defaults

log = logging.getLogger(__name__)

NAME = "emr"
Representation = Literal["sentence", "trigger", "mask", "mix", "window4"]
Model = Literal["adhoc", "siamese"]
RANK_KS = (1, 5, 10)


class SiameseTraining(BaseModel):
    """Per-query Siamese training (the paper's Adam 5e-5, batch 50, 50 epochs). Not a
    ``training.TrainingArgs``: the stacked per-query networks train in their own batched loop
    (see :mod:`eventatlas.emr.models`), so schedules, clipping, bucketing and checkpoints do not apply."""

    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(50, ge=1)
    batch_size: int = Field(50, ge=1)
    lr: float = Field(5e-5, gt=0)
    negatives: int = Field(150, ge=1, description="not-same-class pairs per query and epoch")
    max_positive_pairs: int = Field(200, ge=1)
    hidden: int = Field(768, ge=1)
    layers: int = Field(3, ge=1)
    query_batch: int = Field(16, ge=1, description="per-query networks trained at once")


class EMRConfig(MethodConfig):
    min_mentions: Optional[int] = Field(None, ge=2, description="types with at least this many mentions are the m types (default 100)")
    n_corpus: Optional[int] = Field(None, ge=1, description="test-corpus mentions per type (default 50)")
    n_query: Optional[int] = Field(None, ge=1, description="query-pool mentions per type (default 10)")
    n_dev: Optional[int] = Field(None, ge=0, description="development mentions per type, at most (default 40)")
    n_none: Optional[int] = Field(None, ge=0, description="'None' corpus items (default 2000)")
    max_types: Optional[int] = Field(None, ge=2, description="cap m by a seeded choice among the eligible types")
    queries_per_type: int = Field(10, ge=1)
    ks: list[int] = Field(default_factory=lambda: [2, 3, 5, 10])
    repetitions: int = Field(3, ge=1)
    models: list[Model] = Field(default_factory=lambda: ["adhoc", "siamese"])
    representation: Representation = "window4"
    no_event: bool = True  # add content-word candidates of no-event sentences to the None side
    model_id: Optional[str] = None
    cache_dir: Optional[Path] = None
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    siamese: SiameseTraining = Field(default_factory=SiameseTraining)


PROTOCOL_DEFAULTS = {"min_mentions": 100, "n_corpus": 50, "n_query": 10, "n_dev": 40, "n_none": 2000}


def embed_pool(pool: pa.Table, out_dir: Path, cfg: EMRConfig, device: str) -> tuple[pa.Table, np.ndarray, dict]:
    """Embed every pool item once (cached by content); items the encoder rejects are dropped (counted)."""
    from ..encode import embed_mentions, load_embeddings

    path = write_parquet(pool, out_dir / "pool.parquet")
    npy = embed_mentions(path, cfg.model_id, cfg.representation, cache_dir=cfg.cache_dir, device=device,
                         **cfg.encoder.model_dump())
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


def _scores_of(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"]: float(r["value"]) for r in rows}


def run(dataset_dir: str | Path, out_dir: str | Path, *, seed: int = 0, config: EMRConfig | None = None,
        resume: bool = False, **params: Any) -> MethodResult:
    """Evaluate the EMR models on one ingested labelled dataset; see the module docstring. ``resume``
    has nothing to continue (no checkpoints: a run is minutes of per-query training) and reruns."""
    from ..data import Manifest, protocol_for
    from ..device import describe, resolve_device
    from ..emr.episodes import candidate_pool, sample_episode
    from ..emr.models import SiameseParams, siamese_rank_scores
    from ..evaluation.base import metric_rows
    from ..evaluation.retrieval import evaluate_retrieval, evaluate_scores
    from ..runinfo import set_seeds

    cfg = config if config is not None else EMRConfig.model_validate(params)
    dataset_dir, out_dir = Path(dataset_dir), Path(out_dir)
    man = Manifest.read(dataset_dir)
    if "typed_mentions" not in man.kinds():
        raise NotApplicable(f"{dataset_dir}: no mentions with gold types (kinds: {sorted(man.kinds()) or 'none'})")
    cfg = merge_defaults(cfg, {**PROTOCOL_DEFAULTS, **protocol_for(man, NAME, "retrieval")})
    device = resolve_device(cfg.device)
    set_seeds(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = MethodResult(device=describe(device))
    sp = SiameseParams(**cfg.siamese.model_dump())
    pool = candidate_pool(dataset_dir, seed=seed, no_event=cfg.no_event)
    t0 = time.perf_counter()
    pool, X, emb = embed_pool(pool, out_dir, cfg, device)
    result.add_artifact("emr/pool", out_dir / "pool.parquet", pool.num_rows)
    timings: dict[str, float] = {"embed_pool": round(time.perf_counter() - t0, 2)}
    per_rep: list[dict[str, Any]] = []
    items_t, queries_t, episodes = [], [], []
    for r in range(cfg.repetitions):
        ep = sample_episode(pool, min_mentions=cfg.min_mentions, n_corpus=cfg.n_corpus, n_query=cfg.n_query,
                            n_dev=cfg.n_dev, n_none=cfg.n_none, queries_per_type=cfg.queries_per_type, ks=cfg.ks,
                            max_types=cfg.max_types, seed=seed * 1000 + r)
        episodes.append(ep.record)
        items, queries = ep.tables()
        items_t.append(items.append_column("repetition", pa.array([r] * items.num_rows, pa.int32())))
        queries_t.append(queries.append_column("repetition", pa.array([r] * queries.num_rows, pa.int32())))
        corpus = X[ep.corpus]
        for k in sorted(ep.queries):
            shots = [X[q.shots] for q in ep.queries[k]]
            relevant = ep.relevant(k)
            common = dict(ks=RANK_KS, dataset=man.dataset, method=NAME, seed=seed)
            for model in cfg.models:
                t1 = time.perf_counter()
                if model == "adhoc":
                    scores = _scores_of(evaluate_retrieval(shots, corpus, relevant, **common))
                    extra: dict[str, Any] = {}
                else:
                    S, extra = siamese_rank_scores(shots, corpus, sp, seed=seed * 1000 + r, device=device)
                    scores = _scores_of(evaluate_scores(S, relevant, **common))
                sec = time.perf_counter() - t1
                timings[f"r{r}/k{k}/{model}"] = round(sec, 2)
                per_rep.append({"repetition": r, "k": k, "m": len(ep.types), "model": model, "seconds": sec,
                                "queries": len(shots), **scores, **{f"train_{a}": b for a, b in extra.items()
                                                                     if a.startswith("loss")}})
                log.info("emr %s rep %d k=%d m=%d %s: map=%.4f (%.1fs)", man.dataset, r, k, len(ep.types), model,
                         scores["map"], sec)
    _write_tables(result, out_dir, items_t, queries_t, per_rep)
    m = episodes[0]["m"]
    for model in cfg.models:
        for k in sorted({row["k"] for row in per_rep}):
            reps = [row for row in per_rep if row["model"] == model and row["k"] == k]
            names = [n for n in reps[0] if n == "map" or n == "r_precision" or n.startswith(("p@", "recall@"))]
            mean = {n: float(np.mean([row[n] for row in reps])) for n in names}
            mean["map_std"] = float(np.std([row["map"] for row in reps], ddof=1)) if len(reps) > 1 else 0.0
            result.metrics += metric_rows(mean, task="retrieval", dataset=man.dataset, method=NAME, seed=seed,
                                          split="test", setting=f"k={k} m={m}", representation=cfg.representation,
                                          variant=model)
    result.params = {"method": NAME, "dataset": man.dataset, "model_id": cfg.model_id or paths.DEFAULT_MODEL,
                     "seed": seed, "config": cfg.model_dump(mode="json"), "device": result.device,
                     "episodes": episodes, "embedding": emb, "timings_s": timings,
                     "n_pool": pool.num_rows, "pool_sources": _counts(pool["source"].to_pylist())}
    return result


def _counts(xs: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def _write_tables(result: MethodResult, out_dir: Path, items_t, queries_t, per_rep) -> None:
    items = write_parquet(pa.concat_tables(items_t), out_dir / "episodes" / "items.parquet")
    result.add_artifact("emr/episode_items", items, sum(t.num_rows for t in items_t))
    queries = write_parquet(pa.concat_tables(queries_t), out_dir / "episodes" / "queries.parquet")
    result.add_artifact("emr/episode_queries", queries, sum(t.num_rows for t in queries_t))
    keys = list(dict.fromkeys(k for row in per_rep for k in row))  # siamese rows carry training losses too
    reps = write_parquet(pa.table({k: [row.get(k) for row in per_rep] for k in keys}),
                         out_dir / "scores_per_repetition.parquet")
    result.add_artifact("emr/scores_per_repetition", reps, len(per_rep))
