"""batch_attention's training protocol (Edwards & Ji 2023): the seen/unseen selection of a run
(:func:`select_mentions`) and one representation's training with the unsupervised epoch choice
(:func:`train_representation`: naming targets, augmentation, optional pseudo-positives, the silhouette
window over the unseen mentions, pruning to the chosen epoch). :mod:`eventatlas.methods.batch_attention`
runs it per representation and evaluates with :func:`eventatlas.induction.evaluate.evaluate_trained`."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from .. import config as paths
from ..io import atomic_write_json

log = logging.getLogger(__name__)


def select_mentions(dataset_dir: str | Path, cfg: Any, seed: int):
    """The seen/unseen selection of a run (shared by ``run`` and the background trainer)."""
    return cfg.select(dataset_dir, seed=seed, k_seen_default=None if cfg.n_unseen else 10,
                      max_train=cfg.max_train_mentions)


def save_chosen(writer, model, out: Path, rep: str, epoch: int, cfg: Any, dev_choice: dict | None = None) -> None:
    """Put the chosen epoch's weights into the saved model: the encoder (``encoders/<rep>``), the
    clusterer's Q/K scorer (what the Attn-DotProduct / Attn-Cosine inputs need on new data) and the
    naming head. The raw epoch file goes unless ``keep_models`` asked to keep it."""
    import torch

    pt = out / "models" / f"epoch_{epoch:02d}.pt"
    model.load_state_dict(torch.load(pt, map_location="cpu", weights_only=True))
    writer.encoder(model.encoder, name=rep)
    cl = model.clusterer
    writer.head(f"clusterer_{rep}", cl.state_dict(), kind="attention_scorer",
                config={"dim": cl.d, "dropout": cfg.dropout, "share_layernorm": cl.share_layernorm,
                        "representation": rep, "epoch": epoch})
    if model.head is not None:
        writer.head(f"naming_{rep}", model.head.state_dict(), kind="naming_head",
                    config={"d_in": model.dim, "d_out": model.head.net[-1].out_features, "representation": rep})
    writer.card.inference[rep] = {"epoch": epoch, "trigger_markers": cfg.trigger_markers,
                                  "inputs": list(cfg.inputs), "stop_rule": "dev" if dev_choice else cfg.stop_rule}
    if dev_choice:  # the (input, algorithm) chosen on the dev part goes with the weights
        writer.card.inference[rep]["dev_choice"] = dict(dev_choice)
    if cfg.keep_models == "none":
        pt.unlink(missing_ok=True)


def train_representation(sel, cfg: Any, rep: str, out: Path, *, seed: int, device: str,
                         type_texts: dict[str, str], resume: bool = False, writer=None, dev_sel=None,
                         k_manifold: int | None = None) -> tuple[dict[str, Any], Any]:
    """Train one representation's model; returns the summary evaluation needs and the TrainResult.
    With a :class:`eventatlas.modeling.saved.ModelWriter`, the chosen epoch's model is added to it.
    With ``dev_sel`` (the held-out sentences' selection) the epoch, input and algorithm are chosen on its
    dev part (:mod:`eventatlas.induction.dev`), else by the label-free silhouette rule."""
    from ..modeling.encode import Encoder
    from ..modeling.mention_encoder import MentionEncoder
    from ..modeling.tokens import tokenize_cached
    from ..tracking.runinfo import set_seeds
    from ..training import Trainer
    from .augment import backtranslate, resolve_augmentation
    from .model import InductionModel
    from .training import InductionTask, SilhouetteSelection

    set_seeds(seed)
    enc = MentionEncoder(cfg.model_id, max_length=cfg.max_length)
    sentences, starts, ends = sel.sentences, sel.starts, sel.ends
    if cfg.trigger_markers:
        from ..modeling.inputs import mark_triggers

        sentences, starts, ends = mark_triggers(sentences, starts, ends)
    items, hit = tokenize_cached(enc, sentences, starts, ends, rep)
    # naming targets B_t: the *untuned* encoder's embedding of each seen type's name text
    name_targets = None
    if type_texts and cfg.naming_weight > 0:
        import torch

        e = Encoder(module=enc, device="cpu", precision="fp32", progress=False)
        name_targets = torch.from_numpy(e.encode_sentences([type_texts.get(t, t) for t in sel.seen_types],
                                                           normalize=True))
    model = InductionModel(enc, dropout=cfg.dropout, share_layernorm=cfg.share_layernorm,
                           name_dim=enc.hidden_size if name_targets is not None else None)
    augmentation = resolve_augmentation(cfg.augmentation)
    bt = None
    if augmentation == "backtranslation":
        bt = backtranslate(sel.sentences, paths.cache_dir() / "backtranslation" / "marian_bt.parquet", device=device)
    triggers = [s[a:b] for s, a, b in zip(sel.sentences, sel.starts, sel.ends)]
    pseudo, pseudo_info = None, None
    if cfg.pseudo_k:
        from .training import embed_fqk, mutual_neighbours

        unl = np.flatnonzero(sel.unseen_mask)
        f0 = embed_fqk(model, [items[i] for i in unl], rep, device="cpu", precision="fp32",
                       batch_size=cfg.eval_batch_size)["F"]
        pseudo = mutual_neighbours(f0, unl, cfg.pseudo_k, cfg.pseudo_min_cos)
        labels = sel.labels
        n_pairs = sum(len(v) for v in pseudo.values()) // 2
        n_right = sum(labels[i] == labels[j] for i, js in pseudo.items() for j in js) // 2
        # how clean the pseudo-labels are (gold of unseen mentions: a diagnostic only, never used to train)
        pseudo_info = {"k": cfg.pseudo_k, "min_cos": cfg.pseudo_min_cos, "mentions_with_partner": len(pseudo),
                       "pairs": n_pairs, "pair_precision": (n_right / n_pairs) if n_pairs else None}
        log.info("pseudo-labels: %s", pseudo_info)
    task = InductionTask(model, items, sel.seen_index, rep, augmentation=augmentation, perturb_p=cfg.perturb_p,
                         name_targets=name_targets, naming_weight=cfg.naming_weight, margin=cfg.margin,
                         sentences=sel.sentences, triggers=triggers, backtranslations=bt, pseudo_neighbours=pseudo)
    n_eval = len(sel.eval_index)
    base = cfg.stop_clusters or [len(sel.unseen_types) * m for m in (1, 2, 4)]
    counts = [c for c in base if 2 <= c <= n_eval - 1]
    # the saved model needs the chosen epoch's weights even when no epoch file is to be kept
    keep = "chosen" if writer is not None and cfg.keep_models == "none" else cfg.keep_models
    cb = SilhouetteSelection([items[i] for i in sel.eval_index], rep, out, counts, stop_key=cfg.stop_key,
                             eval_batch_size=cfg.eval_batch_size, keep_models=keep)
    callbacks, dev = [cb], None
    if dev_sel is not None:
        dev = _dev_callbacks(dev_sel, cfg, enc, rep, seed=seed, k_manifold=k_manifold)
        callbacks += dev[:2]
    trainer = Trainer(model, task, cfg.train, out, seed=seed, callbacks=callbacks, phase=rep)  # the run's device is in it
    res = trainer.fit(resume=resume)
    chosen = cb.choose(cfg.stop_window)
    rule, dev_choice, dev_info = cfg.stop_rule, None, None
    if dev is not None:
        dev_cb, stopper, n_dev = dev
        dev_choice = dev_cb.choice()
        if stopper.best_epoch != dev_choice["epoch"]:  # EarlyStopping restored the weights of its best epoch
            raise RuntimeError(f"dev choice epoch {dev_choice['epoch']} but restored epoch {stopper.best_epoch}")
        rule, chosen["dev"] = "dev", dev_choice["epoch"]
        dev_info = {"choice": dev_choice, "curves": dev_cb.curves, "diagnostic_heldout_unseen": dev_cb.diagnostic,
                    "label_free_rule": cfg.stop_rule, **n_dev}
    cb.prune_models(chosen[rule], is_main=trainer.is_main)
    if writer is not None and trainer.is_main:
        save_chosen(writer, model, out, rep, chosen[rule], cfg, dev_choice=dev_choice)
    summary = {
        "config": cfg.model_dump(mode="json"), "representation": rep, "seed": seed, "setting": sel.setting(),
        "augmentation": augmentation, "trigger_markers": cfg.trigger_markers, "pseudo_labels": pseudo_info,
        "precision": res.precision, "device": res.device, "token_cache_hit": hit,
        "n_mentions": len(sel), "n_unseen_mentions": n_eval, "seen_types": sel.seen_types,
        "unseen_types": sel.unseen_types, "stop_counts": counts, "history": res.history,
        "silhouettes": cb.silhouettes, "stop_scores": cb.scores, "chosen_epoch": chosen, "stop_rule": rule,
        "dev": dev_info,
        "total_seconds": res.seconds, "epoch_files": cb.epoch_files,
        "untuned_file": str(out / "epochs" / "untuned.npz"),
        "unseen_mention_ids": [sel.mention_ids[i] for i in sel.eval_index],
        "unseen_labels": sel.eval_labels.tolist(), "train": {k: v for k, v in res.summary().items() if k != "history"},
    }
    atomic_write_json(out / "train_summary.json", summary)
    return summary, res


def _dev_callbacks(dev_sel, cfg: Any, enc, rep: str, *, seed: int, k_manifold: int | None):
    """The dev-part callbacks: :class:`~eventatlas.induction.dev.DevSelection` (the dev ARI of every input x
    algorithm per epoch; the held-out unseen curve for the diagnosis when ``cfg.dev_diagnostic``) and an
    :class:`~eventatlas.training.EarlyStopping` on its ``dev_ari`` that never stops and restores the best epoch."""
    from ..modeling.tokens import tokenize_cached
    from ..training import EarlyStopping
    from .dev import DevSelection, dev_rows, subsample

    sentences, starts, ends = dev_sel.sentences, dev_sel.starts, dev_sel.ends
    if cfg.trigger_markers:
        from ..modeling.inputs import mark_triggers

        sentences, starts, ends = mark_triggers(sentences, starts, ends)
    rows = subsample(dev_rows(dev_sel), cfg.dev_max_mentions, seed)
    diag = dev_sel.eval_index if cfg.dev_diagnostic else np.array([], dtype=np.int64)
    need = np.concatenate([rows, diag]).astype(np.int64)
    items, _ = tokenize_cached(enc, [sentences[i] for i in need], [starts[i] for i in need], [ends[i] for i in need],
                               rep)
    labels = dev_sel.labels
    cb = DevSelection(items[:len(rows)], labels[rows], rep, inputs=cfg.inputs, algorithms=cfg.algorithms,
                      k_manifold=k_manifold, seed=seed, eval_batch_size=cfg.eval_batch_size,
                      diagnostic_items=items[len(rows):] if len(diag) else None,
                      diagnostic_labels=labels[diag] if len(diag) else None)
    stopper = EarlyStopping("dev_ari", mode="max", patience=cfg.train.epochs + 1, restore_best=True)
    n = {"n_dev_mentions": int(len(rows)), "n_dev_types": len(set(labels[rows].tolist())),
         "n_diagnostic_mentions": int(len(diag))}
    log.info("dev part: %d mentions of %d seen types in the held-out sentences", n["n_dev_mentions"], n["n_dev_types"])
    return cb, stopper, n
