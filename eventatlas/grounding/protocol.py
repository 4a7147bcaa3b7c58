"""The grounding protocol (what :mod:`eventatlas.methods.grounding` runs; its module doc says what it
measures): :func:`ground_variants` trains and scores each bi-encoder variant, picks the best on dev
(:func:`pick_on_dev`) and trains the cross-encoder over its top-k (:func:`_cross`)."""
from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

from ..data.selection import NotApplicable
from ..io import atomic_write_json

TRAINED = ("baseline", "multilabel", "hp", "hjl", "hp_hjl")


def _encoder(cfg: Any):
    from .biencoder import add_markers
    from ..modeling.mention_encoder import MentionEncoder

    enc = MentionEncoder(cfg.model_id, max_length=cfg.max_length)
    add_markers(enc)
    return enc


def _eval_rows(gd, split, ranked, scores, cfg, key, variant) -> list[dict]:
    from ..evaluation.grounding import evaluate_grounding
    from .discovery import discovery_scores
    from ..evaluation.base import metric_rows

    golds = gd.splits[split].golds
    key = key.replace(split=split, variant=variant)
    rows = evaluate_grounding([list(r) for r in ranked], golds, scores=[list(s) for s in scores], ks=cfg.ks, key=key)
    events = sorted(gd.events_of(split))
    try:
        disc = discovery_scores(ranked, gd.parent, events, k_retrieve=cfg.discovery_k, ks=cfg.ks)
        rows += metric_rows(disc, task="grounding", key=key)
    except ValueError:
        pass
    return rows


def ground_variants(ctx: Any, result: Any) -> None:
    """The grounding protocol for the method context ``ctx`` (config, manifest, run directory, seed, device):
    train and score every bi-encoder variant, pick the best on dev, and (``cross_encoder``) train and score
    the cross-encoder over its top-k with a dev-tuned threshold; fills ``result``."""
    import torch

    from ..evaluation.base import RowKey
    from ..evaluation.grounding import grounding_scores
    from ..tracking.runinfo import set_seeds
    from ..training import Trainer
    from . import biencoder as B
    from .data import load, setting

    cfg, man, seed, device, out_dir, dataset_dir = ctx.config, ctx.manifest, ctx.seed, ctx.device, ctx.run_dir, \
        ctx.dataset_dir
    caps = {"train": cfg.max_train_mentions, **{s: cfg.max_eval_mentions for s in cfg.eval_splits}}
    gd = load(dataset_dir, max_mentions=caps, seed=seed, splits=("train", *cfg.eval_splits))
    if len(gd.splits["train"]) < 2:
        raise NotApplicable(f"{dataset_dir}: {len(gd.splits['train'])} training mention(s); grounding needs 2 or more")
    evals = [s for s in cfg.eval_splits if len(gd.splits[s])]
    if not evals:
        raise NotApplicable(f"{dataset_dir}: no mention in {cfg.eval_splits}")
    row_key = RowKey(dataset=man.dataset, method=ctx.method, seed=seed, setting=setting(gd), representation="marked")
    result.params = ctx.base_params(selection=gd.record, variants={})
    train_events = gd.events_of("train")
    dev_scores: dict[str, dict[str, float]] = {}
    labels = {v: variant_label(v, cfg) for v in cfg.variants}
    for variant in cfg.variants:
        set_seeds(seed)
        label = labels[variant]
        vdir = out_dir / label
        enc = _encoder(cfg)
        m_items = {s: B.mention_inputs(enc, gd.splits[s]) for s in ("train", *evals)}
        c_items = B.candidate_inputs(enc, gd)
        hier = variant in ("hp", "hjl", "hp_hjl")
        model = B.BiEncoder(enc, hierarchy=hier, score=cfg.score, scale=cfg.scale)
        info: dict[str, Any] = {}
        if variant in ("hp", "hp_hjl"):
            task = B.HierarchyTask(enc, c_items, gd.parent, train_events, n_h=cfg.n_h)
            res = Trainer(model, task, cfg.hp, vdir / "hp", seed=seed, phase=f"{label}/hp").fit()
            result.add_training(res)
            info["hp"] = {"steps": res.steps, "seconds": res.seconds, "examples_per_s": res.examples_per_s}
        if variant in TRAINED:
            task = B.LinkingTask(enc, m_items["train"], gd.splits["train"].golds, c_items, gd.parent,
                                 loss="softmax" if variant == "baseline" else cfg.multilabel_loss,
                                 hjl_weight=cfg.hjl_weight if variant in ("hjl", "hp_hjl") else 0.0, n_h=cfg.n_h,
                                 train_events=train_events, mention_pool=cfg.mention_pool,
                                 negatives=cfg.negatives, negative_pool=gd.outside_eval())
            callbacks, stopper = [], None
            if cfg.select_on_dev and "dev" in evals:
                from ..training.callbacks import EarlyStopping, EvalCallback

                def dev_r_min(trainer, enc=enc, items=m_items["dev"]):
                    cvec = _vectors(enc, c_items, cfg, device)
                    mvec = _vectors(enc, items, cfg, device, pool=cfg.mention_pool)
                    ranked, _ = B.retrieve(mvec, cvec, min(max(cfg.ks), len(gd.type_ids)))
                    return {"dev_recall_at_min": grounding_scores([list(r) for r in ranked], gd.splits["dev"].golds,
                                                                  ks=cfg.ks)["recall_at_min"]}

                stopper = EarlyStopping("dev_recall_at_min", patience=cfg.patience)
                callbacks = [EvalCallback(dev_r_min), stopper]
            res = Trainer(model, task, cfg.train, vdir, seed=seed, phase=label, callbacks=callbacks).fit()
            result.add_training(res)
            info["train"] = {"steps": res.steps, "seconds": res.seconds, "examples_per_s": res.examples_per_s,
                             "tokens_per_s": res.tokens_per_s, "precision": res.precision}
            if stopper is not None:
                info["train"]["best_epoch"] = stopper.best_epoch
                info["train"]["dev_recall_at_min_by_epoch"] = [h.get("eval/dev_recall_at_min") for h in res.history]
        t0 = time.perf_counter()
        cv = _vectors(enc, c_items, cfg, device)
        k = min(max(max(cfg.ks), cfg.cross_k, cfg.discovery_k), len(gd.type_ids))
        for split in evals:
            mv = _vectors(enc, m_items[split], cfg, device, pool=cfg.mention_pool)
            ranked, scores = B.retrieve(mv, cv, k)
            rows = _eval_rows(gd, split, ranked, scores, cfg, row_key, label)
            result.metrics += rows
            if split == "dev" and variant != "untuned":
                dev_scores[label] = grounding_scores([list(r) for r in ranked], gd.splits["dev"].golds,
                                                     ks=sorted({*cfg.ks, cfg.cross_k}))
        info["eval_seconds"] = round(time.perf_counter() - t0, 2)
        if cfg.keep_models:
            enc.save(vdir / "model")
            np.save(vdir / "candidate_vectors.npy", cv)
        result.params["variants"][label] = info
        del model, enc
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    by = f"recall@{cfg.cross_k}" if cfg.cross_encoder else "recall_at_min"
    chosen = pick_on_dev(dev_scores, by) or next((labels[v] for v in cfg.variants if v != "untuned"),
                                                 labels[cfg.variants[0]])
    result.params["best_on_dev"], result.params["best_on_dev_by"] = chosen, by
    if cfg.cross_encoder and chosen in {labels[v] for v in cfg.variants if v in TRAINED}:
        _cross(cfg, gd, out_dir, chosen, seed, device, row_key, evals, result)
    atomic_write_json(out_dir / "grounding.json", {**result.params, "type_ids_sha": _sha(gd.type_ids)})
    result.add_artifact("grounding/params", out_dir / "grounding.json")
    if cfg.save_model:
        _save_model(cfg, gd, out_dir, chosen, result.params, ctx.precision)


def _save_model(cfg: Any, gd, out_dir, chosen: str, params: dict[str, Any], precision: str) -> None:
    """The saved model: the dev-chosen bi-encoder (default encoder ``biencoder``) with its candidate
    vectors, and the cross-encoder with its scoring head and dev-tuned threshold when one was trained."""
    import logging

    import torch

    from ..modeling.saved import ModelWriter

    vdir = out_dir / chosen
    if not (vdir / "model").exists():  # keep_models=false: the variants' weights were not kept
        logging.getLogger(__name__).warning("grounding: keep_models is false, so no model is saved")
        return
    w = ModelWriter(out_dir, method="grounding")
    # the variant directories stay (`ground --variant` reads them): the saved model links their files
    w.encoder_files(vdir / "model", max_length=cfg.max_length, name="biencoder", base_model=cfg.model_id)
    w.head("candidates", {"vectors": torch.from_numpy(np.load(vdir / "candidate_vectors.npy"))},
           kind="candidate_vectors", config={"type_ids_sha": _sha(gd.type_ids), "n": len(gd.type_ids),
                                             "score": cfg.score, "mention_pool": cfg.mention_pool, "variant": chosen})
    cross = params.get("cross") or {}
    if (out_dir / "cross" / "head.pt").exists():
        w.encoder_files(out_dir / "cross" / "model", max_length=cfg.cross_max_length, name="cross", default=False)
        head = torch.load(out_dir / "cross" / "head.pt", map_location="cpu", weights_only=True)
        w.head("cross_head", head, kind="cross_encoder_head", config={"tau_c": cross.get("tau_c"), "cross_k": cfg.cross_k})
    w.close(representation=cfg.mention_pool, precision=precision,
            inference={"bi_encoder": chosen, "dataset": params.get("dataset"), "tau_c": cross.get("tau_c")})


def variant_label(variant: str, cfg: Any) -> str:
    """The name of a variant in the metric rows and the run directory: ``multilabel`` etc. with the paper's BCE,
    ``multilabel+msoftmax`` etc. with another linking loss (so rows of different losses never share a name)."""
    if variant in ("untuned", "baseline") or cfg.multilabel_loss == "bce":
        return variant
    return f"{variant}+{cfg.multilabel_loss}"


def pick_on_dev(dev_scores: dict[str, dict[str, float]], metric: str) -> Optional[str]:
    """The variant with the highest dev ``metric`` (first in order on a tie); None when there is none. The
    cross-encoder re-ranks only the bi-encoder's top cross_k, so it is fed by the best dev Recall@cross_k
    (all golds retrievable), not the best Recall@min."""
    best, val = None, float("-inf")
    for v, s in dev_scores.items():
        if s[metric] > val:
            best, val = v, s[metric]
    return best


def _vectors(enc, items, cfg: Any, device: str, pool: str = "sentence") -> np.ndarray:
    """Retrieval vectors: raw for the dot score, unit rows for cosine (so faiss's inner product is the cosine)."""
    from ..evaluation._vectors import unit_rows
    from . import biencoder as B

    v = B.embed_items(enc, items, device=device, batch_size=cfg.eval_batch_size, pool=pool)
    return unit_rows(v, "retrieval vectors") if cfg.score == "cosine" else v


def _sha(xs) -> str:
    import hashlib

    return hashlib.sha256("\n".join(xs).encode()).hexdigest()[:16]


def _cross(cfg, gd, out_dir, chosen, seed, device, key, evals, result) -> None:
    """Cross-encoder over the chosen bi-encoder's top-k (see the module docstring)."""
    from ..evaluation.grounding import evaluate_grounding
    from ..modeling.mention_encoder import MentionEncoder
    from ..tracking.runinfo import set_seeds
    from ..training import Trainer
    from . import biencoder as B
    from . import crossencoder as X

    set_seeds(seed)
    bi = MentionEncoder(out_dir / chosen / "model", max_length=cfg.max_length)
    cv = np.load(out_dir / chosen / "candidate_vectors.npy")
    rng = np.random.default_rng(seed)
    tr = gd.splits["train"]
    n = len(tr)
    pick = np.arange(n) if cfg.max_cross_train_mentions is None or n <= cfg.max_cross_train_mentions else \
        np.sort(rng.choice(n, size=cfg.max_cross_train_mentions, replace=False))
    k = min(cfg.cross_k, len(gd.type_ids))
    tops: dict[str, np.ndarray] = {}
    sub_tr = type(tr)(*[[getattr(tr, f)[i] for i in pick] for f in ("ids", "sentences", "starts", "ends", "golds")])
    splits = {"train": sub_tr, **{s: gd.splits[s] for s in evals}}
    # zero-shot: the training lists are retrieved among the candidates outside every evaluation split's events.
    # Met in training only as negatives, those events would be learned as never right and ranked last at
    # evaluation, where they are the golds (the bi-encoder's pool negatives obey the same rule)
    allowed = gd.outside_eval()
    for s, ms in splits.items():
        mv = _vectors(bi, B.mention_inputs(bi, ms), cfg, device, pool=cfg.mention_pool)
        tops[s], _ = B.retrieve(mv, cv, k, among=allowed if s == "train" else None)
    del bi
    enc = MentionEncoder(out_dir / chosen / "model", max_length=cfg.cross_max_length)  # the pair's length
    c_items = B.candidate_inputs(enc, gd)

    def pairs(split, forced):
        ms = splits[split]
        lists = [X.force_golds(row.tolist(), ms.golds[i]) if forced else row.tolist()
                 for i, row in enumerate(tops[split])]
        lab = [[1.0 if c in ms.golds[i] else 0.0 for c in cands] for i, cands in enumerate(lists)]
        return X.mention_pairs(enc, ms, lists, c_items, cfg.cross_mention_length), lab, lists

    p_tr, y_tr, _ = pairs("train", True)
    model = X.CrossEncoder(enc)
    res = Trainer(model, X.CrossTask(enc, p_tr, y_tr, title_mask=cfg.cross_title_mask), cfg.cross, out_dir / "cross",
                  seed=seed, phase=f"cross:{chosen}").fit()
    result.add_training(res)
    info = {"bi_encoder": chosen, "train_mentions": len(p_tr), "steps": res.steps, "seconds": res.seconds,
            "mentions_per_s": res.examples_per_s, "pairs_per_s": res.examples_per_s * k}
    scored = {}
    for s in evals:
        p, _, lists = pairs(s, False)
        t0 = time.perf_counter()
        sc = X.score_pairs(model, p, device=device)
        info[f"{s}_inference_pairs_per_s"] = round(sum(len(x) for x in p) / max(time.perf_counter() - t0, 1e-9), 2)
        scored[s] = (np.array(lists), sc)
    if "dev" in scored:
        lists, sc = scored["dev"]
        tau, dev_vals = X.tune_threshold(sc, lists, gd.splits["dev"].golds)
    else:
        tau, dev_vals = 0.5, {}
    info["tau_c"], info["dev_at_tau"] = tau, dev_vals
    for s, (lists, sc) in scored.items():
        order = np.argsort(-sc, axis=1, kind="stable")
        ranked = np.take_along_axis(lists, order, 1)
        ss = np.take_along_axis(sc, order, 1)
        result.metrics += evaluate_grounding([list(r) for r in ranked], gd.splits[s].golds, scores=[list(x) for x in ss],
                                             threshold=tau, ks=[x for x in cfg.ks if x <= k],
                                             key=key.replace(split=s, variant=f"cross:{chosen}"))
    if cfg.keep_models:
        enc.save(out_dir / "cross" / "model")
        import torch

        torch.save(model.head.state_dict(), out_dir / "cross" / "head.pt")
    result.params["cross"] = info
