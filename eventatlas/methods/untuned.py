"""The untuned baseline: a frozen encoder, no training.

* Datasets with typed mentions (type induction): the ``k_seen`` most frequent primary labels are
  "seen" (the protocol of :func:`eventatlas.data.select_labelled`), the unseen types' mentions are
  embedded with each representation and clustered into as many clusters as there are unseen types
  by each algorithm, and scored (task ``induction``). Dataset defaults come from the registry's
  ``protocol`` (FrameNet full text: verb lexical units, ``k_seen = 0`` = frames as clusters). Above
  ``max_mentions`` unseen mentions a seeded subsample is clustered (recorded in the params).
  A 2-D projection of one representation's embeddings (UMAP by default) coloured by gold type and
  by the induced clusters is a PNG artifact (``plot/projection/<representation>``).
* Event-pair datasets (hard similarity, transitive similarity, MCNC): every event is the text
  ``template`` filled with its (subject, verb, object) (lower-cased by default), pooled by each of
  ``poolings`` (mean -> representation ``sentence``, [CLS] -> ``cls``), and scored by
  :func:`eventatlas.evaluation.pairs.evaluate_encoder_pairs` (task ``similarity``).
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pyarrow as pa
from pydantic import Field

from .. import config as paths
from ..io import write_parquet
from .base import MethodResult, NotApplicable
from .context import MethodContext
from .spec import EncoderConfig, MethodConfig

log = logging.getLogger(__name__)

NAME = "untuned"
Representation = Literal["sentence", "trigger", "mask", "mix", "window4"]
Algorithm = Literal["agglomerative", "manifold", "manifold_sym", "affinity"]
DEFAULT_CLUSTERINGS = ("agglomerative", "manifold", "manifold_sym", "affinity")
DEFAULT_REPRESENTATIONS = ("sentence", "trigger", "mask", "mix", "window4")
DEFAULT_K_SEEN = 10
DEFAULT_MAX_MENTIONS = 20_000


class UntunedConfig(MethodConfig):
    k_seen: Optional[int] = Field(None, ge=0, description="most frequent types held out as seen (default: protocol, 10)")
    seen_types: Optional[list[str]] = None
    # MAVEN 150/18-style protocols: a fixed seeded choice of n_unseen types (see data.select_labelled)
    n_unseen: Optional[int] = Field(None, ge=2)
    unseen_min_mentions: int = Field(1, ge=1)
    unseen_seed: int = 0
    # a sentence-disjoint hold-out, as batch_attention's (data.select_labelled): part "heldout" clusters only
    # the held-out sentences' unseen-type mentions, the frozen baseline of a model evaluated there
    heldout_sentences: Optional[float] = Field(None, gt=0, lt=1)
    heldout_seed: int = 0
    part: Literal["train", "heldout"] = "train"
    trigger_markers: bool = False  # "[ trigger ]" in every input (modeling.inputs.mark_triggers), as batch_attention's option
    representations: Optional[list[Representation]] = None
    clusterings: Optional[list[Algorithm]] = None
    n_clusters: Optional[int] = Field(None, ge=2)
    splits: Optional[Union[list[str], str]] = None
    lu_pos: Optional[str] = None
    max_mentions: Optional[int] = Field(DEFAULT_MAX_MENTIONS, ge=2)
    model_id: Optional[str] = None
    metrics: Optional[list[str]] = None
    require_metrics: list[str] = Field(default_factory=list)  # always kept when `metrics` filters
    cache_dir: Optional[Path] = None
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    template: str = "{subj} {verb} {obj}"  # event-pair datasets: how an (s, v, o) event becomes text
    lower: bool = True  # event-pair texts lower-cased (SWCC's convention)
    # typed mentions: a PNG of one representation's embeddings in 2-D coloured by gold type and by
    # induced cluster (artifact plot/projection/<rep>); auto = UMAP (t-SNE when umap-learn is absent),
    # PCA below plots.AUTO_MIN_NONLINEAR points (the method used is in params["projection"])
    projection: Literal["auto", "umap", "tsne", "pca", "none"] = "auto"
    projection_representation: Optional[Representation] = None  # default: trigger if computed, else the first
    poolings: list[Literal["mean", "cls"]] = Field(default_factory=lambda: ["mean", "cls"],
                                                   description="event-pair datasets: sentence poolings scored")


def run(ctx: MethodContext) -> MethodResult:
    """Run the untuned baseline on one ingested dataset; see the module docstring."""
    cfg, man = ctx.config, ctx.manifest
    kinds = man.kinds()
    result = ctx.result()
    result.params = ctx.base_params(model_id=cfg.model_id or paths.DEFAULT_MODEL)
    if "typed_mentions" in kinds:
        _induction(man, ctx.run_dir, ctx.seed, cfg, ctx.device, result)
    if "event_pairs" in kinds:
        _similarity(ctx, result)
    if not result.metrics:
        raise NotApplicable(f"{man.path}: neither typed mentions nor event pairs (kinds: {sorted(kinds) or 'none'})")
    return result


def _embedding_meta(npy: Path) -> dict[str, Any]:
    side = npy.with_suffix(".json")
    return json.loads(side.read_text(encoding="utf-8")) if side.exists() else {}


def _induction(man, out_dir: Path, seed: int, cfg: UntunedConfig, device: str, result: MethodResult) -> None:
    from ..data import select_labelled
    from ..encode import embed_mentions, load_embeddings
    from ..evaluation.clustering import cluster_and_score

    splits = [cfg.splits] if isinstance(cfg.splits, str) else cfg.splits
    sel = select_labelled(man.path, k_seen=DEFAULT_K_SEEN if cfg.k_seen is None else cfg.k_seen,
                          seen_types=cfg.seen_types, splits=splits, lu_pos=cfg.lu_pos, max_eval=cfg.max_mentions,
                          seed=seed, n_unseen=cfg.n_unseen, unseen_min_mentions=cfg.unseen_min_mentions,
                          unseen_seed=cfg.unseen_seed, heldout_sentences=cfg.heldout_sentences,
                          heldout_seed=cfg.heldout_seed, part=cfg.part)
    reps = list(cfg.representations or DEFAULT_REPRESENTATIONS)
    algos = list(cfg.clusterings or DEFAULT_CLUSTERINGS)
    only = None if cfg.metrics is None else set(cfg.metrics) | set(cfg.require_metrics)
    table, y = sel.eval_table(), sel.eval_labels
    k = int(cfg.n_clusters or sel.record["n_types_clustered"])
    split_name = ",".join(splits) if splits else (",".join(sorted({s for s in table["split"].to_pylist() if s})) or "all")
    setting = sel.setting()
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.trigger_markers:
        from ..modeling.inputs import mark_triggers

        ms, ma, mb = mark_triggers(table["sentence"].to_pylist(), table["trigger_start"].to_pylist(),
                                   table["trigger_end"].to_pylist())
        for name, col in (("sentence", pa.array(ms, pa.string())), ("trigger_start", pa.array(ma, table["trigger_start"].type)),
                          ("trigger_end", pa.array(mb, table["trigger_end"].type))):
            table = table.set_column(table.schema.get_field_index(name), name, col)
    selected = write_parquet(table, out_dir / "selected_mentions.parquet")
    result.add_artifact("selected_mentions", selected, table.num_rows)
    params = result.params
    params.update({"setting": setting, "n_clusters": k, "representations": reps, "clusterings": algos,
                   "selection": sel.record, "embeddings": {}})
    log.info("untuned %s: %d unseen mentions of %d types -> %d clusters (%s)", man.dataset, len(y),
             sel.record["n_types_clustered"], k, "subsampled" if sel.record["subsampled"] else "all")
    ids = table["mention_id"].to_pylist()
    timings: dict[str, float] = {}
    shown = cfg.projection_representation or ("trigger" if "trigger" in reps else reps[0])
    projected = None  # (X, gold, clusters) of the representation drawn
    enc_kw = {"device": device, **cfg.encoder.model_dump()}
    for rep in reps:
        t0 = time.perf_counter()
        emb_path = embed_mentions(selected, cfg.model_id, rep, cache_dir=cfg.cache_dir, **enc_kw)
        meta = _embedding_meta(emb_path)
        params["embeddings"][rep] = {"cache_key": meta.get("key"), "computed_on": meta.get("device"),
                                     "precision": meta.get("precision")}
        emb_ids, X = load_embeddings(emb_path)
        y_rep, ids_rep = y, ids
        if list(emb_ids) != ids:
            # the encoder leaves out mentions with unusable spans (its rejects file says why):
            # score the rest, and record how many were dropped
            pos = {m: i for i, m in enumerate(emb_ids)}
            keep = [i for i, m in enumerate(ids) if m in pos]
            if len(keep) < 2:
                raise ValueError(f"{emb_path}: fewer than 2 selected mentions have an embedding")
            X = X[[pos[ids[i]] for i in keep]]
            y_rep, ids_rep = y[keep], [ids[i] for i in keep]
            params.setdefault("embedding_dropped", {})[rep] = len(ids) - len(keep)
        timings[f"embed/{rep}"] = round(time.perf_counter() - t0, 3)
        variant = "trigger_markers" if cfg.trigger_markers else None  # rows say the inputs were marked
        ev = cluster_and_score({variant: X} if variant else X, y_rep.tolist(), n_clusters=k, algorithms=algos, seed=seed, dataset=man.dataset,
                               method=NAME, split=split_name, setting=setting, representation=rep, only=only)
        result.metrics += ev.rows
        for (_, algo), why in ev.skipped.items():
            # one algorithm over a dense-memory ceiling (affinity first) must not sink the others
            params.setdefault("skipped", {})[f"{rep}/{algo}"] = why
        for (_, algo), pred in ev.partitions.items():
            timings[f"cluster/{rep}/{algo}"] = ev.seconds.get((variant, algo))
            apath = write_parquet(pa.table({"mention_id": ids_rep, "label": y_rep.tolist(), "cluster": pred}),
                                  out_dir / "assignments" / f"{rep}__{algo}.parquet")
            result.add_artifact(f"assignments/{rep}/{algo}", apath, len(ids_rep))
            ari = next((r["value"] for r in ev.rows if r["metric"] == "ari" and r["clustering"] == algo), float("nan"))
            log.info("untuned %s %s/%s: ari=%.4f (%d clusters found)", man.dataset, rep, algo, ari,
                     len(set(pred.tolist())))
        if rep == shown:
            first = ev.partitions.get((None, "agglomerative"), next(iter(ev.partitions.values()), None))
            projected = (X, y_rep.tolist(), None if first is None else first.tolist())
    if cfg.projection != "none" and shown not in reps:
        params["projection"] = f"not drawn: representation {shown!r} is not among those computed {reps}"
    elif cfg.projection != "none" and projected is not None and len(projected[0]) >= 2:
        from ..plots import projection_png

        t0 = time.perf_counter()
        X, gold, clusters = projected
        info = projection_png(X, gold, out_dir / f"projection_{shown}.png",
                              f"untuned {man.dataset}, {shown} representation: unseen mentions ({setting})",
                              clusters=clusters, method=cfg.projection, seed=seed)
        result.add_artifact(f"plot/projection/{shown}", info["path"], info["points"])
        params["projection"] = {"representation": shown, "method": info["method"], "points": info["points"],
                                "of": info["of"]}
        timings["projection"] = round(time.perf_counter() - t0, 3)
        log.info("untuned %s: %s projection of %d %s embeddings -> %s", man.dataset, info["method"], info["points"],
                 shown, info["path"])
    params["timings_s"] = timings


def _similarity(ctx: MethodContext, result: MethodResult) -> None:
    from ..encode import Encoder
    from ..evaluation.pairs import benchmark_pairs, evaluate_encoder_pairs

    cfg, seed = ctx.config, ctx.seed
    pairs = benchmark_pairs(ctx.table("event_pairs"))
    if pairs.num_rows == 0:
        return
    enc = Encoder(cfg.model_id, device=ctx.device, progress=False, **cfg.encoder.model_dump())
    rows = evaluate_encoder_pairs(enc, pairs, poolings=cfg.poolings, template=cfg.template, lower=cfg.lower,
                                  dataset=ctx.dataset, method=NAME, seed=seed)
    if not rows:
        raise NotApplicable(f"{ctx.dataset_dir}: no similarity metric is defined for this encoder on these pairs (every "
                            f"pair got the same cosine: a degenerate model?)")
    result.metrics += rows
    result.params.update({"template": cfg.template, "lower": cfg.lower, "poolings": cfg.poolings,
                          "event_pairs": pairs.num_rows, "precision": enc.precision})
    log.info("untuned %s: %s", ctx.dataset, ", ".join(f"{r['metric']}={r['value']:.4f}" for r in rows))


def apply(model, ctx: MethodContext) -> MethodResult:
    """Score a saved model's encoder (:class:`eventatlas.modeling.saved.SavedModel`) on the context's
    dataset with this baseline's protocol (typed mentions: cluster the unseen types' mentions; event
    pairs: similarity), the encoder taking the frozen one's place. Nothing is trained; the caller
    labels the rows with the model's method and where it was trained."""
    ctx.config = ctx.config.model_copy(update={"model_id": model.ref})
    return run(ctx)
