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

import logging
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import Field

from .. import config as paths
from ..data.selection import SelectionConfig
from ..induction.frozen import NAME, frozen_dev_choice, frozen_induction
from .base import MethodResult, NotApplicable
from .context import MethodContext
from .spec import EncoderConfig, MethodConfig

log = logging.getLogger(__name__)

Representation = Literal["sentence", "trigger", "mask", "mix", "window4"]
Algorithm = Literal["agglomerative", "manifold", "manifold_sym", "affinity"]


class UntunedConfig(SelectionConfig, MethodConfig):
    """The mention selection (k_seen, n_unseen, heldout_sentences, part, lu_pos, max_mentions, ...) is
    :class:`eventatlas.data.SelectionConfig`, shared with batch_attention."""

    trigger_markers: bool = False  # "[ trigger ]" in every input (modeling.inputs.mark_triggers), as batch_attention's option
    representations: Optional[list[Representation]] = None
    clusterings: Optional[list[Algorithm]] = None
    n_clusters: Optional[int] = Field(None, ge=2)
    splits: Optional[Union[list[str], str]] = None
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
    # "dev": choose the marker option x representation x clustering on the seen types' mentions in the held-out
    # sentences (needs heldout_sentences; eventatlas.induction.frozen.frozen_dev_choice)
    select_on: Literal["none", "dev"] = "none"
    marker_options: Optional[list[bool]] = None  # with select_on dev: the trigger_markers settings compared
    dev_max_mentions: Optional[int] = Field(None, ge=10)  # a seeded subsample of the dev part above this
    poolings: list[Literal["mean", "cls"]] = Field(default_factory=lambda: ["mean", "cls"],
                                                   description="event-pair datasets: sentence poolings scored")


def run(ctx: MethodContext) -> MethodResult:
    """Run the untuned baseline on one ingested dataset; see the module docstring."""
    cfg, man = ctx.config, ctx.manifest
    kinds = man.kinds()
    result = ctx.result()
    result.params = ctx.base_params(model_id=cfg.model_id or paths.DEFAULT_MODEL)
    if "typed_mentions" in kinds:
        if cfg.select_on == "dev":
            frozen_dev_choice(man, ctx.run_dir, ctx.seed, cfg, ctx.device, result)
        else:
            frozen_induction(man, ctx.run_dir, ctx.seed, cfg, ctx.device, result)
    if "event_pairs" in kinds:
        _similarity(ctx, result)
    if not result.metrics:
        raise NotApplicable(f"{man.path}: neither typed mentions nor event pairs (kinds: {sorted(kinds) or 'none'})")
    return result


def _similarity(ctx: MethodContext, result: MethodResult) -> None:
    from ..modeling.encode import Encoder
    from ..evaluation.base import RowKey
    from ..evaluation.pairs import benchmark_pairs, evaluate_encoder_pairs

    cfg, seed = ctx.config, ctx.seed
    pairs = benchmark_pairs(ctx.table("event_pairs"))
    if pairs.num_rows == 0:
        return
    enc = Encoder(cfg.model_id, device=ctx.device, progress=False, **cfg.encoder.model_dump())
    rows = evaluate_encoder_pairs(enc, pairs, poolings=cfg.poolings, template=cfg.template, lower=cfg.lower,
                                  key=RowKey(dataset=ctx.dataset, method=NAME, seed=seed))
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
