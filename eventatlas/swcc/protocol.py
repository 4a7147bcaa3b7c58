"""The SWCC protocol (what :mod:`eventatlas.methods.swcc` runs): train the encoder with prototypes and MLM on
the shared training core, score it on every event-pair benchmark at hand after each epoch and at the end,
draw the prototypes and save the model. Torch and the model are imported inside: validating the method's
config (which imports :mod:`eventatlas.methods.swcc`) must not import torch."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from .. import config as paths
from ..data.selection import NotApplicable
from ..io import atomic_write_json

log = logging.getLogger(__name__)

NAME = "swcc"


def eval_sets(cfg: Any) -> tuple[dict[str, Any], set[str]]:
    """({dataset name: benchmark event_pairs table}, the doc_ids of their ``documents`` tables) for the
    configured (or every ingested) datasets. Those documents are kept out of training: a dev set built from
    held-out documents of the training corpus (the ``nyt_cloze_dev`` reader) must not be trained on."""
    from ..data import Manifest, ingested
    from ..data.manifest import find_dataset
    from ..evaluation.pairs import benchmark_pairs

    if cfg.eval_datasets is None:
        mans = [m for m in ingested().values() if "event_pairs" in m.kinds()]
    else:
        mans = [Manifest.read(find_dataset(name, "eval dataset")) for name in cfg.eval_datasets]
    out, docs = {}, set()
    for m in sorted(mans, key=lambda m: m.dataset):
        t = benchmark_pairs(m.read_table("event_pairs"))
        if t.num_rows:
            out[m.dataset] = t
            if m.rows.get("documents"):
                docs.update(m.read_table("documents", columns=["doc_id"])["doc_id"].to_pylist())
    return out, docs


def train_and_score(ctx: Any, result: Any) -> None:
    """Train SWCC on ``ctx``'s event-co-occurrence dataset into ``result`` and score it on the benchmarks
    (:mod:`eventatlas.methods.swcc`); ``ctx`` is the method's context, ``result`` its empty result."""
    from ..modeling.encode import Encoder
    from ..evaluation.base import RowKey
    from ..evaluation.pairs import POOLING_REPRESENTATION, evaluate_encoder_pairs
    from ..modeling.mention_encoder import MentionEncoder
    from ..modeling.tokens import tokenize_cached
    from ..training import EvalCallback, Trainer
    from .data import load_events
    from .model import SWCCModel
    from .task import SWCCTask, switches

    from ..data import Manifest
    from ..data.manifest import find_dataset

    cfg, man, seed, device, out_dir, ds_dir = ctx.config, ctx.manifest, ctx.seed, ctx.device, ctx.run_dir, \
        ctx.dataset_dir
    sw = switches(cfg.variant)
    extra = [find_dataset(x, "extra dataset") for x in cfg.extra_datasets]
    for d in extra:
        if "event_cooccurrence" not in Manifest.read(d).kinds():
            raise ValueError(f"extra dataset {d}: not event co-occurrence data (ingest event_tuples or run "
                             "extract-events)")
    evals, heldout = eval_sets(cfg)
    events = load_events(ds_dir, template=cfg.template, lower=cfg.lower, max_events=cfg.max_events, seed=seed,
                         weighting=cfg.weighting, extra_dirs=extra, extra_max_events=cfg.extra_max_events,
                         exclude_docs=heldout)
    if len(events) < cfg.train.batch_size and cfg.train.drop_last:
        raise NotApplicable(f"{ds_dir}: {len(events)} events < one batch of {cfg.train.batch_size} "
                            "(lower train.batch_size)")
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
                                            key=RowKey(dataset=name, method=NAME, seed=seed, variant=cfg.variant)):
                out[f"{name}/{r['metric']}"] = r["value"]
        return out

    callbacks = [EvalCallback(score)] if (evals and cfg.eval_every_epoch) else []
    before = score() if evals else {}
    trainer = Trainer(model, task, cfg.train, out_dir / "train", seed=seed, callbacks=callbacks, phase=cfg.variant)
    res = trainer.fit(resume=ctx.resume)

    result.add_training(res)
    e = Encoder(module=enc, device=device, precision="fp32", batch_size=cfg.eval_batch_size, progress=False)
    for name, table in evals.items():
        result.metrics += evaluate_encoder_pairs(e, table, poolings=[cfg.pooling], template=cfg.template,
                                                 lower=cfg.lower,
                                                 key=RowKey(dataset=name, method=NAME, seed=seed, variant=cfg.variant))
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



def _prototype_artifacts(model, e, texts: list[str], cfg: Any, rep: str, out_dir: Path, seed: int,
                         result: Any) -> None:
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
    from ..tracking.plots import projection_png

    png = out_dir / "prototypes_pca.png"
    projection_png(X, [f"prototype {a}" for a in assign], png,
                   f"SWCC ({cfg.variant}): training events coloured by their nearest prototype",
                   method="pca", seed=seed)
    result.add_artifact("plot/prototypes", png)
    result.params["prototype_counts"] = np.bincount(assign, minlength=cfg.n_prototypes).tolist()
