"""``batch_attention``: batch-attention event type induction (Edwards & Ji, EACL 2023) for ``train-all``.

An encoder plus a Q/K clusterer is trained with the masked semi-supervised contrastive loss over
minibatch attention scores on the seen types' mentions (and the unseen ones as unlabelled), the
epoch is chosen without labels (silhouette window), and every clustering input (Attn-DotProduct,
Attn-Cosine, fine-tuned features) x algorithm is scored on the unseen types, beside the same encoder
before training (variant ``untuned:ft``), with type naming and FrameNet linking.

Data selection, training loop, device/precision and evaluation are the shared platform's
(:mod:`eventatlas.data`, :mod:`eventatlas.training`, :mod:`eventatlas.evaluation`); the seen/unseen
settings are dataset protocols in ``datasets/registry.yaml`` (ACE 10/23, MAVEN 150/18 with manifold
k = 3000, OntoEvent-MAVEN 10/40, FrameNet frames with 100 seen).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np
from pydantic import Field

from .. import config as paths
from ..data.selection import SelectionConfig
from ..io import atomic_write_json, sha256_file
from ..induction.protocol import select_mentions, train_representation
from .base import MethodResult, NotApplicable
from .context import MethodContext
from .spec import MethodConfig, training_field

NAME = "batch_attention"
MAPPINGS_DIR = paths.resource_dir("datasets") / "mappings"
# The stopping rule clusters the unseen mentions at several counts and needs 2 <= c <= n - 1;
# below this many unseen mentions (e.g. the shipped samples) the method has nothing to learn from.
MIN_UNSEEN_MENTIONS = 10
Input = Literal["attn_dot", "attn_dot_neg", "attn_cos", "ft", "attn_dot_norm"]
Algorithm = Literal["agglomerative", "manifold", "manifold_sym", "affinity"]


# The paper's settings: encoder lr 2e-5, the rest 1e-4, Adam, constant schedule with the published code's
# 1000 warm-up steps capped at 20% of training, batch 10, 10 epochs, no clipping. The batch attention
# needs 2 mentions a batch, and the epoch choice at least one epoch.
TRAIN_DEFAULTS = {"epochs": 10, "batch_size": 10, "lr": 2e-5, "head_lr": 1e-4, "optimizer": "adam",
                  "schedule": "constant", "warmup_steps": 1000, "warmup_max_ratio": 0.2, "max_grad_norm": None}
BatchAttentionTraining, _TRAIN = training_field(TRAIN_DEFAULTS, {"batch_size": 2, "epochs": 1})


class BatchAttentionConfig(SelectionConfig, MethodConfig):
    """The mention selection is :class:`eventatlas.data.SelectionConfig` (shared with untuned); training runs on
    part "train", and `eventatlas evaluate RUN --params '{"part": "heldout"}'` scores the saved model on the
    held-out sentences' unseen-type mentions."""

    representations: list[Literal["trigger", "sentence"]] = ["trigger"]
    k_seen: Optional[int] = Field(None, ge=1)  # training needs seen types
    n_clusters: Optional[int] = Field(None, ge=2)
    k_manifold: Optional[int] = Field(None, ge=2)
    inputs: list[Input] = ["attn_dot", "attn_dot_neg", "attn_cos", "ft", "attn_dot_norm"]
    algorithms: list[Algorithm] = ["agglomerative", "manifold", "manifold_sym", "affinity"]
    naming: bool = True
    linking: bool = True
    framenet_dir: Optional[Path] = None  # an ingested FrameNet (frames + definitions); default <data>/datasets/framenet
    mapping: Optional[str] = None  # type -> frames TSV in datasets/mappings (or a path, or "identity")
    max_mentions: Optional[int] = Field(20_000, ge=10)  # cap on the unseen mentions scored (10: a batch to score)
    max_train_mentions: Optional[int] = Field(None, ge=10)
    umap_plot: bool = True
    model_id: Optional[str] = None
    max_length: int = Field(128, ge=8)
    margin: float = 0.5
    dropout: float = Field(0.1, ge=0, lt=1)
    share_layernorm: bool = False  # the published code applies one LayerNorm to Q and K
    naming_weight: float = Field(1.0, ge=0)  # 0 disables the auxiliary naming head
    augmentation: Literal["auto", "backtranslation", "dropout_view", "token_perturb", "word_dropout"] = "auto"
    perturb_p: float = Field(0.1, ge=0, lt=1)
    # training options (each off by default; the encoder freeze / warm-up and the encoder lr are
    # train.encoder_freeze_steps / train.encoder_warmup_steps / train.lr beside train.head_lr):
    trigger_markers: bool = False  # "[" and "]" around the trigger in every input (training and evaluation)
    pseudo_k: int = Field(0, ge=0)  # >0: unseen-unseen pseudo-positives = mutual pseudo_k-NN of the untuned encoder
    pseudo_min_cos: float = Field(0.0, ge=-1, le=1)  # ... with at least this cosine
    eval_batch_size: int = Field(64, ge=1)
    stop_clusters: Optional[list[int]] = None  # None: (n_unseen_types x 1, 2, 4) capped below n
    stop_key: Optional[int] = None  # which count picks the epoch; None = mean over counts
    stop_rule: Literal["paper", "code"] = "paper"
    stop_window: int = Field(5, ge=1)
    keep_models: Literal["all", "chosen", "none"] = "chosen"
    # "dev": the epoch, input and algorithm with the best ARI on the seen types' mentions in the held-out
    # sentences (needs heldout_sentences; eventatlas.induction.dev); "label_free": the silhouette rule
    select_on: Literal["label_free", "dev"] = "label_free"
    dev_max_mentions: Optional[int] = Field(None, ge=10)  # a seeded subsample of the dev part above this
    dev_diagnostic: bool = True  # also record the held-out unseen curve per epoch (diagnosis only, never chooses)
    train: BatchAttentionTraining = _TRAIN


def _mapping(name: str | None, unseen: list[str]) -> dict[str, list[str]] | None:
    from ..evaluation.naming import read_mapping

    if not name:
        return None
    if name == "identity":
        return {t: [t] for t in unseen}
    p = Path(name)
    return read_mapping(p if p.is_absolute() else MAPPINGS_DIR / name)


def run(ctx: MethodContext) -> MethodResult:
    """Train + evaluate on one dataset (see the module docstring)."""
    from ..evaluation.base import RowKey
    from ..induction.evaluate import evaluate_trained

    cfg, man, seed, device, out_dir, dataset_dir = ctx.config, ctx.manifest, ctx.seed, ctx.device, ctx.run_dir, \
        ctx.dataset_dir
    proto = ctx.protocol
    sel = select_mentions(dataset_dir, cfg, seed)
    n_eval = len(sel.eval_index)
    if not sel.seen_types or len(sel.unseen_types) < 2 or n_eval < MIN_UNSEEN_MENTIONS:
        raise NotApplicable(
            f"{dataset_dir}: batch_attention needs seen types, >= 2 unseen types and >= {MIN_UNSEEN_MENTIONS} "
            f"unseen mentions; got {len(sel.seen_types)} seen / {len(sel.unseen_types)} unseen types and "
            f"{n_eval} unseen mentions (k_seen={sel.record['k_seen']})")
    texts = man.type_texts()
    fn_dir = Path(cfg.framenet_dir) if cfg.framenet_dir else paths.datasets_dir() / "framenet"
    mp = _mapping(cfg.mapping or proto.get("mapping"), sel.unseen_types) if cfg.linking else None
    k_manifold = cfg.k_manifold if cfg.k_manifold is not None else proto.get("k_manifold")
    result = ctx.result()
    result.params = ctx.base_params(setting=sel.setting(), selection=sel.record, k_manifold=k_manifold,
                                    n_clusters=cfg.n_clusters or len(sel.unseen_types),
                                    framenet_dir=str(fn_dir) if mp is not None else None, train={})
    writer = None
    if cfg.save_model:
        from ..modeling.saved import ModelWriter

        writer = ModelWriter(out_dir, method=NAME)
    dev_sel = None
    if cfg.select_on == "dev":
        if not cfg.heldout_sentences:
            raise ValueError("select_on: dev needs heldout_sentences (the dev part is the seen types' mentions in "
                             "the held-out sentences)")
        dev_sel = select_mentions(dataset_dir, cfg.model_copy(update={"part": "heldout"}), seed)
    for rep in cfg.representations:
        rdir = out_dir / rep
        summary, res = train_representation(sel, cfg, rep, rdir, seed=seed, device=device, type_texts=texts,
                                            resume=ctx.resume, writer=writer, dev_sel=dev_sel, k_manifold=k_manifold)
        result.add_training(res)
        key = RowKey(dataset=man.dataset, method=NAME, seed=seed, split="unseen", setting=sel.setting(),
                     representation=rep)
        rows, arts = evaluate_trained(rdir, summary, key=key, n_clusters=cfg.n_clusters, k_manifold=k_manifold,
                                      inputs=cfg.inputs, algorithms=cfg.algorithms, model_id=cfg.model_id,
                                      names=texts if cfg.naming else {}, mapping=mp, framenet_dir=fn_dir,
                                      umap_plot=cfg.umap_plot)
        result.metrics += rows
        result.artifacts += arts
        result.artifacts.append({"kind": f"train_summary/{rep}", "path": str(rdir / "train_summary.json"),
                                 "sha256": sha256_file(rdir / "train_summary.json")})
        result.params["train"][rep] = {k: summary[k] for k in ("augmentation", "precision", "device", "chosen_epoch",
                                                               "total_seconds", "stop_counts", "trigger_markers",
                                                               "pseudo_labels")}
        result.params["train"][rep]["seconds_per_epoch"] = float(np.mean([h["seconds"] for h in summary["history"]]))
        if summary.get("dev"):
            from ..induction.dev import curve_png, label_free_summary

            dev = summary["dev"]
            result.params["train"][rep]["dev"] = label_free_summary(summary)
            p = curve_png(dev["curves"], rdir / "dev_curve.png",
                          f"{man.dataset} {rep} seed {seed}: dev ARI (seen types, held-out sentences)",
                          chosen=dev["choice"], label_free_epoch=summary["chosen_epoch"][cfg.stop_rule],
                          diagnostic=dev["diagnostic_heldout_unseen"])
            result.artifacts.append({"kind": f"plot/dev_curve/{rep}", "path": str(p), "sha256": sha256_file(p)})
    atomic_write_json(out_dir / "batch_attention_params.json", result.params)
    if writer is not None and writer.card.encoders:
        first = cfg.representations[0]
        writer.close(representation=first, epoch=result.params["train"][first]["chosen_epoch"][
                         "dev" if cfg.select_on == "dev" else cfg.stop_rule],
                     precision=ctx.precision,
                     inference=dict(writer.card.inference, seen_types=sel.seen_types, k_manifold=k_manifold))
    return result


def cluster_settings(cfg: BatchAttentionConfig, proto: dict[str, Any]) -> dict[str, Any]:
    """``n_clusters`` and ``k_manifold`` of the evaluation: the run's config, else the dataset protocol's."""
    return {"n_clusters": cfg.n_clusters,
            "k_manifold": cfg.k_manifold if cfg.k_manifold is not None else proto.get("k_manifold")}


def apply(model, ctx: MethodContext) -> MethodResult:
    """Apply a saved batch-attention model (:class:`eventatlas.modeling.saved.SavedModel`) to the context's
    dataset: its unseen mentions (the selection rules of ``ctx.config`` over the new data) are embedded by
    the saved encoder and scored by the saved Q/K scorer, and every clustering input (Attn-DotProduct,
    Attn-Cosine, ft, ...) is clustered and scored as in training, beside the base encoder's features
    (variant ``untuned:ft``). Nothing is trained."""
    import torch

    from ..evaluation.base import RowKey
    from ..induction.evaluate import evaluate_trained
    from ..induction.model import InductionModel
    from ..induction.training import embed_fqk, save_npz
    from ..modeling.mention_encoder import MentionEncoder
    from ..modeling.inputs import mark_triggers
    from ..modeling.tokens import tokenize_cached

    card, cfg, man, seed, out_dir = model.card, ctx.config, ctx.manifest, ctx.seed, ctx.run_dir
    rep = model.selected or card.encoder
    info = card.inference.get(rep, {})
    sel = select_mentions(ctx.dataset_dir, cfg, seed)
    if len(sel.unseen_types) < 2 or len(sel.eval_index) < MIN_UNSEEN_MENTIONS:
        raise NotApplicable(f"{ctx.dataset_dir}: fewer than 2 types or {MIN_UNSEEN_MENTIONS} mentions to cluster "
                            f"({len(sel.unseen_types)} types, {len(sel.eval_index)} mentions)")
    state, head_cfg = model.head(f"clusterer_{rep}")
    enc = MentionEncoder(model.encoder_path, max_length=cfg.max_length)
    trained = InductionModel(enc, dropout=head_cfg.get("dropout", 0.1), share_layernorm=head_cfg["share_layernorm"])
    trained.clusterer.load_state_dict(state)
    base = InductionModel(MentionEncoder(card.base_model, max_length=cfg.max_length))
    sentences, starts, ends = sel.sentences, sel.starts, sel.ends
    if info.get("trigger_markers"):  # the inputs the model was trained on
        sentences, starts, ends = mark_triggers(sentences, starts, ends)
    ev = sel.eval_index
    files = {}
    for name, m in (("applied", trained), ("untuned", base)):
        items, _ = tokenize_cached(m.encoder, [sentences[i] for i in ev], [starts[i] for i in ev],
                                   [ends[i] for i in ev], rep)
        with torch.inference_mode():
            emb = embed_fqk(m, items, rep, device=ctx.device, precision=card.precision or "fp32",
                            batch_size=cfg.eval_batch_size, progress=f"apply {name} {rep}")
        files[name] = str(save_npz(out_dir / rep / "epochs" / f"{name}.npz", emb))
    summary = {"chosen_epoch": {}, "stop_rule": None, "epoch_files": [files["applied"]],
               "untuned_file": files["untuned"], "unseen_mention_ids": [sel.mention_ids[i] for i in ev],
               "unseen_labels": sel.eval_labels.tolist(),
               "dev": {"choice": info["dev_choice"]} if info.get("dev_choice") else None}
    texts = man.type_texts()
    fn_dir = Path(cfg.framenet_dir) if cfg.framenet_dir else paths.datasets_dir() / "framenet"
    mp = _mapping(cfg.mapping or ctx.protocol.get("mapping"), sel.unseen_types) if cfg.linking else None
    key = RowKey(dataset=man.dataset, method=NAME, seed=seed, split="unseen", setting=sel.setting(), representation=rep)
    rows, arts = evaluate_trained(out_dir / rep, summary, key=key, epoch=0, **cluster_settings(cfg, ctx.protocol),
                                  inputs=cfg.inputs, algorithms=cfg.algorithms, model_id=card.base_model,
                                  names=texts if cfg.naming else {}, mapping=mp, framenet_dir=fn_dir,
                                  umap_plot=cfg.umap_plot)
    result = ctx.result()
    result.metrics, result.artifacts = rows, arts
    result.params = {"selection": sel.record, "representation": rep, "setting": sel.setting(),
                     "trigger_markers": bool(info.get("trigger_markers")), "dev_choice": info.get("dev_choice")}
    return result
