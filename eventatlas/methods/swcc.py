"""``swcc``: event representations by weakly supervised contrastive learning and prototype clustering
(SWCC, Gao et al. ACL 2022), trained on an ``event_cooccurrence`` dataset (the ``event_tuples`` reader)
and evaluated on every event-similarity benchmark at hand (hard similarity, transitive, MCNC).

Per step (internals in :mod:`eventatlas.swcc`): three dropout views q, k1, k2 of each event, one
co-occurring event p drawn by co-occurrence count with its weight (``weighting``: min-max as in the
paper, log or uniform), and the event with one non-special token masked;
``L = L_cl + beta * L_proto + gamma * L_mlm``. ``variant`` selects the paper's ablations
(``no_prototypes``, ``no_weak``, ``no_mlm``, ``infonce`` = dropout views only, ``margin``);
it is the ``variant`` column of the metric rows.

Training goes through the shared :class:`eventatlas.training.Trainer` (bucketed batches of cached token
ids, dynamic padding, checkpoints, step logs, learning curve); after every epoch the encoder is scored on
the evaluation datasets (``train_evals``: ``<dataset>/<metric>``), and at the end the metric rows come
from :func:`eventatlas.evaluation.pairs.evaluate_encoder_pairs` (task ``similarity``, setting = the
template). Artifacts: ``plot/prototypes`` (2-D PCA of the training events coloured by their prototype),
``swcc/prototypes`` (the assignment table) and (unless ``save_model`` is false) the saved model: the
fine-tuned encoder, loadable as ``run:<run_id>``, and the prototypes.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np
from pydantic import Field

from .. import config as paths
from ..io import atomic_write_json
from .base import MethodResult, NotApplicable
from .context import MethodContext
from .spec import MethodConfig, training_field

log = logging.getLogger(__name__)

NAME = "swcc"
Variant = Literal["swcc", "no_prototypes", "no_weak", "no_mlm", "infonce", "margin"]


# The paper's optimiser (Adam, betas (0.9, 0.997), eps 1e-9, batch 256) with rates tuned here (the paper's
# 2e-7 encoder rate is for 4M events; see README): encoder lr, prototypes/MLM head head_lr (the authors'
# code: 5e-4). In-batch negatives: at least 2 a batch, and no tiny last batch (drop_last).
TRAIN_DEFAULTS = {"epochs": 2, "batch_size": 256, "lr": 2e-5, "head_lr": 5e-4, "optimizer": "adam",
                  "betas": (0.9, 0.997), "eps": 1e-9, "schedule": "constant", "drop_last": True}
SWCCTraining, _TRAIN = training_field(TRAIN_DEFAULTS, {"batch_size": 2})


class SWCCConfig(MethodConfig):
    variant: Variant = "swcc"
    model_id: Optional[str] = None
    max_length: int = Field(32, ge=8)
    pooling: Literal["cls", "mean"] = "cls"  # the paper pools [CLS]
    template: str = "{subj} {verb} {obj}"
    lower: bool = True
    tau: float = Field(0.3, gt=0)
    n_prototypes: int = Field(10, ge=2)
    beta: float = Field(0.1, ge=0)  # paper; the authors' code used 0.3
    gamma: float = Field(1.0, ge=0)
    sinkhorn_eps: float = Field(0.05, gt=0)
    sinkhorn_iters: int = Field(3, ge=1)
    entropy_weight: float = Field(0.0, ge=0)  # the authors' code: 0.05 (not in the paper)
    margin: float = Field(0.5, gt=0)  # the margin-loss ablation
    weighting: Literal["minmax", "log", "uniform"] = "minmax"  # pair weights w (swcc.data.pair_weights)
    max_events: Optional[int] = Field(None, ge=4)  # seeded subsample of the training events (CPU budgets)
    # more event_cooccurrence datasets trained on beside the run's (names or directories), e.g. the FrameNet
    # GF triples (`extract-events --from framenet`); extra_max_events subsamples each of them as max_events does
    extra_datasets: list[str] = Field(default_factory=list)
    extra_max_events: Optional[int] = Field(None, ge=4)
    # the evaluated datasets that are dev sets: settings are chosen on their scores (params "dev"), the
    # others are test sets, never used to choose
    dev_datasets: list[str] = Field(default_factory=lambda: ["mcnc"])
    eval_datasets: Optional[list[str]] = None  # names or directories; None: every ingested event_pairs dataset
    eval_every_epoch: bool = True
    eval_batch_size: int = Field(128, ge=1)
    plot_events: int = Field(2000, ge=10)
    train: SWCCTraining = _TRAIN


def _dataset_dir(name: str, what: str) -> Path:
    """The directory of an ingested dataset given by name or directory."""
    d = Path(name) if Path(name).is_dir() else paths.datasets_dir() / name
    if not (d / "manifest.json").exists():
        raise ValueError(f"{what} {name!r} is not ingested (no {d / 'manifest.json'})")
    return d


def _eval_sets(cfg: SWCCConfig) -> dict[str, Any]:
    """{dataset name: benchmark event_pairs table} for the configured (or every ingested) dataset."""
    from ..data import Manifest, ingested
    from ..evaluation.pairs import benchmark_pairs

    if cfg.eval_datasets is None:
        mans = [m for m in ingested().values() if "event_pairs" in m.kinds()]
    else:
        mans = [Manifest.read(_dataset_dir(name, "eval dataset")) for name in cfg.eval_datasets]
    out = {}
    for m in sorted(mans, key=lambda m: m.dataset):
        t = benchmark_pairs(m.read_table("event_pairs"))
        if t.num_rows:
            out[m.dataset] = t
    return out


def run(ctx: MethodContext) -> MethodResult:
    """Train SWCC on one event-co-occurrence dataset and score it on the benchmarks (module doc).

    ``train.threads`` holds for the scoring before and after training too, not only inside the training
    loop: torch's reduction order, hence the last bits of every cosine and so a hard-similarity tie or
    rank, follows the intra-op thread count; the count is part of the configuration."""
    import torch

    from ..device import set_threads

    before = torch.get_num_threads()
    set_threads(ctx.config.train.threads)
    try:
        return _run(ctx)
    finally:
        torch.set_num_threads(before)


def _run(ctx: MethodContext) -> MethodResult:
    from ..encode import Encoder
    from ..evaluation.pairs import POOLING_REPRESENTATION, evaluate_encoder_pairs
    from ..modeling import MentionEncoder
    from ..modeling.tokens import tokenize_cached
    from ..swcc.data import load_events
    from ..swcc.model import SWCCModel
    from ..swcc.task import SWCCTask, switches
    from ..training import EvalCallback, Trainer

    cfg, man, seed, device, out_dir, dataset_dir = ctx.config, ctx.manifest, ctx.seed, ctx.device, ctx.run_dir, \
        ctx.dataset_dir
    sw = switches(cfg.variant)
    from ..data import Manifest

    extra = [_dataset_dir(x, "extra dataset") for x in cfg.extra_datasets]
    for d in extra:
        if "event_cooccurrence" not in Manifest.read(d).kinds():
            raise ValueError(f"extra dataset {d}: not event co-occurrence data (ingest event_tuples or run "
                             "extract-events)")
    events = load_events(dataset_dir, template=cfg.template, lower=cfg.lower, max_events=cfg.max_events, seed=seed,
                         weighting=cfg.weighting, extra_dirs=extra, extra_max_events=cfg.extra_max_events)
    if len(events) < cfg.train.batch_size and cfg.train.drop_last:
        raise NotApplicable(f"{dataset_dir}: {len(events)} events < one batch of {cfg.train.batch_size} "
                            "(lower train.batch_size)")
    evals = _eval_sets(cfg)
    rep = POOLING_REPRESENTATION[cfg.pooling]
    enc = MentionEncoder(cfg.model_id, max_length=cfg.max_length)
    # token ids of the event texts through the shared cache ("sentence" inputs = the whole text)
    items, hit = tokenize_cached(enc, events.texts, [0] * len(events), [len(t) for t in events.texts], "sentence")
    model = SWCCModel(enc, n_prototypes=cfg.n_prototypes, mlm=sw.mlm, seed=seed)
    task = SWCCTask(model, items, events, pooling_rep=rep, sw=sw, tau=cfg.tau, beta=cfg.beta, gamma=cfg.gamma,
                    sinkhorn_eps=cfg.sinkhorn_eps, sinkhorn_iters=cfg.sinkhorn_iters,
                    entropy_weight=cfg.entropy_weight, margin=cfg.margin)

    def score(_trainer=None) -> dict[str, float]:
        e = Encoder(module=enc, device=device, precision="fp32", batch_size=cfg.eval_batch_size, progress=False)
        out = {}
        for name, table in evals.items():
            for r in evaluate_encoder_pairs(e, table, poolings=[cfg.pooling], template=cfg.template, lower=cfg.lower,
                                            dataset=name, method=NAME, seed=seed, variant=cfg.variant):
                out[f"{name}/{r['metric']}"] = r["value"]
        return out

    callbacks = [EvalCallback(score)] if (evals and cfg.eval_every_epoch) else []
    before = score() if evals else {}
    trainer = Trainer(model, task, cfg.train, out_dir / "train", seed=seed, callbacks=callbacks, phase=cfg.variant)
    res = trainer.fit(resume=ctx.resume)

    result = ctx.result()
    result.add_training(res)
    e = Encoder(module=enc, device=device, precision="fp32", batch_size=cfg.eval_batch_size, progress=False)
    for name, table in evals.items():
        result.metrics += evaluate_encoder_pairs(e, table, poolings=[cfg.pooling], template=cfg.template,
                                                 lower=cfg.lower, dataset=name, method=NAME, seed=seed,
                                                 variant=cfg.variant)
    result.params = ctx.base_params(model_id=cfg.model_id or paths.DEFAULT_MODEL)
    result.params.update({"switches": sw.__dict__, "events": events.record, "token_cache_hit": hit,
                     "extra_datasets": {d.name: Manifest.read(d).data_fingerprint() for d in extra},
                     "dev_datasets": [x for x in cfg.dev_datasets if x in evals],
                     "dev": {f"{r['dataset']}/{r['metric']}": r["value"] for r in result.metrics
                             if r["dataset"] in cfg.dev_datasets},
                     "mlm_head": model.mlm_source, "eval_datasets": sorted(evals), "before_training": before,
                     "train": {k: v for k, v in res.summary().items() if k != "history"}, "history": res.history})
    if sw.prototypes or cfg.n_prototypes:
        _prototype_artifacts(model, e, events.texts, cfg, rep, out_dir, seed, result)
    if cfg.save_model:
        from ..modeling.saved import ModelWriter

        w = ModelWriter(out_dir, method=NAME)
        w.encoder(enc, pooling=cfg.pooling)
        if sw.prototypes or cfg.n_prototypes:
            w.head("prototypes", {"prototypes": model.prototypes}, kind="prototypes",
                   config={"n_prototypes": cfg.n_prototypes, "pooling": cfg.pooling})
        w.close(representation=rep, precision=ctx.precision,
                inference={"pooling": cfg.pooling, "template": cfg.template, "lower": cfg.lower})
    atomic_write_json(out_dir / "swcc_summary.json", result.params)
    if not result.metrics:
        log.warning("swcc %s: no event-pair benchmark ingested: trained, nothing scored", man.dataset)
    return result


def _prototype_artifacts(model, e, texts: list[str], cfg: SWCCConfig, rep: str, out_dir: Path, seed: int,
                         result: MethodResult) -> None:
    """2-D PCA of (a seeded sample of) the training events coloured by their nearest prototype."""
    import pyarrow as pa
    import torch

    from ..io import write_parquet

    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(texts), size=min(cfg.plot_events, len(texts)), replace=False))
    X = e.encode_sentences([texts[i] for i in idx], normalize=True, pooling=cfg.pooling)
    C = torch.nn.functional.normalize(model.prototypes.detach().float().cpu(), dim=1).numpy()
    assign = (X @ C.T).argmax(1)
    table = pa.table({"text": [texts[i] for i in idx], "prototype": assign.astype(np.int32)})
    path = write_parquet(table, out_dir / "prototype_assignments.parquet")
    result.add_artifact("swcc/prototypes", path, table.num_rows)
    from ..plots import projection_png

    png = out_dir / "prototypes_pca.png"
    projection_png(X, [f"prototype {a}" for a in assign], png,
                   f"SWCC ({cfg.variant}): training events coloured by their nearest prototype",
                   method="pca", seed=seed)
    result.add_artifact("plot/prototypes", png)
    result.params["prototype_counts"] = np.bincount(assign, minlength=cfg.n_prototypes).tolist()
