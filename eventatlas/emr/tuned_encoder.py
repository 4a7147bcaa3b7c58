"""The ``contrastive`` EMR ranker: the encoder fine-tuned for retrieval on the training types
(:mod:`.finetune`), its epoch chosen by the dev rule (:mod:`.dev`), then used like the frozen one —
mean cosine of its vectors over the examples — on types it never saw. The tuned encoder is kept in the
run directory and, with ``save_model``, in the run's saved model, so ``eventatlas search --model
run:<id>`` ranks with it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .. import config as paths


def contrastive_ranker(pool: pa.Table, X: np.ndarray, out_dir: Path, cfg: Any, seed: int, device: str, result: Any,
                       split: dict[str, Any], dev: Any, writer: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """(pool-aligned features of the tuned encoder, record). Trains on the ``split``'s training types only."""
    from ..modeling.inputs import mark_triggers
    from ..modeling.mention_encoder import MentionEncoder
    from ..modeling.tokens import tokenize_cached
    from ..tracking.runinfo import set_seeds
    from .finetune import encode_inputs, train_retrieval_encoder
    from .rankers import embed_pool

    cc, rep = cfg.contrastive, cfg.representation
    if rep in ("mix", "window4"):
        raise ValueError(f"model contrastive trains one pooled vector: representation {rep!r} is not one "
                         "(use trigger, mask or sentence)")
    set_seeds(seed)
    enc = MentionEncoder(cfg.model_id, max_length=cfg.encoder.max_length)
    sents, starts, ends = (pool[c].to_pylist() for c in ("sentence", "trigger_start", "trigger_end"))
    if cfg.trigger_markers:
        sents, starts, ends = mark_triggers(sents, starts, ends)
    items, _ = tokenize_cached(enc, sents, [int(a) for a in starts], [int(b) for b in ends], rep)
    labels = pool["label"].to_pylist()
    seen = set(split["seen"])
    train_rows = [i for i, lab in enumerate(labels) if lab in seen]
    keys = None
    if cc.diverse_positives:
        from ..data.lemmas import trigger_lemma

        triggers = pool["trigger"].to_pylist()
        keys = [trigger_lemma(triggers[i] or "") for i in train_rows]
    callbacks, fn, before = (), None, None
    if dev is not None:
        from ..training.callbacks import EarlyStopping, EvalCallback
        from .dev import DevCallback

        dev_items = [items[int(i)] for i in dev.items]
        before = dev.scores(X[dev.items])["rule"]  # the frozen encoder on the same dev episode
        fn = DevCallback(dev, lambda tr: encode_inputs(tr.unwrapped, dev_items, rep, device=str(tr.accelerator.device)))
        callbacks = (EvalCallback(fn), EarlyStopping("dev_score", "max", patience=cc.patience, restore_best=True))
    t0 = time.perf_counter()
    res = train_retrieval_encoder(enc, [items[i] for i in train_rows], [labels[i] for i in train_rows],
                                  cc.train.model_copy(update={"device": device}), types_per_batch=cc.types_per_batch,
                                  per_type=cc.per_type, steps=cc.steps_per_epoch, representation=rep,
                                  temperature=cc.temperature, out_dir=out_dir / "contrastive_training", seed=seed,
                                  callbacks=callbacks, keys=keys)
    result.add_training(res)
    enc_dir = enc.save(out_dir / "contrastive_encoder")
    p, F, _ = embed_pool(pool, out_dir, cfg, device, model_id=str(enc_dir))
    if p.num_rows != pool.num_rows:  # same tokenizer and spans as the frozen pass: nothing new is rejected
        raise ValueError(f"the tuned encoder rejected {pool.num_rows - p.num_rows} pool items the frozen one took")
    best = int(np.argmax(fn.history)) + 1 if fn is not None and fn.history else None
    info = {"train_types": len(seen), "n_train_mentions": len(train_rows), "seconds": round(time.perf_counter() - t0, 1),
            "steps_per_epoch": cc.steps_per_epoch, "batch": f"{cc.types_per_batch} types x {cc.per_type}",
            "temperature": cc.temperature, "epochs_trained": len(res.history), "epochs_selected": best,
            "dev_curve": fn.history if fn is not None else None, "frozen_dev": before,
            "best_dev": max(fn.history) if fn is not None and fn.history else None,
            "final_loss": res.history[-1]["loss"] if res.history else None, "precision": res.precision,
            "trigger_markers": bool(cfg.trigger_markers), "diverse_positives": bool(cc.diverse_positives)}
    if writer is not None:
        writer.encoder_files(enc_dir, max_length=enc.max_length, name="contrastive", default=True,
                             base_model=_base(cfg))
    return F, info


def _base(cfg: Any) -> str:
    from ..modeling.card import base_model_name

    return base_model_name(cfg.model_id) or str(cfg.model_id or paths.DEFAULT_MODEL)
