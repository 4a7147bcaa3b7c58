"""``event_detection``: find event triggers in sentences and type them (a token-level detector on the shared
encoder and the one training loop; :mod:`eventatlas.detection`).

Protocol (dataset defaults in ``datasets/registry.yaml``, ``protocol.detection``): only a dataset whose
sentences are fully annotated (``complete_sentences: true``; every trigger of a sentence is a mention, so its
other words are true negatives). Its sentences (with the documents' sentences that have no mention) are cut
sentence-disjointly: ``heldout_sentences`` held out, ``dev_sentences`` of the rest for choosing the epoch
and the identification threshold, the rest trains; the inventory is the training part's types.

Metric rows: task ``detection``, split ``dev`` (at the chosen epoch and threshold) and ``heldout``, the strict
TextEE scores ``ti_*`` / ``tc_*`` (:mod:`eventatlas.evaluation.detection`) and their counts, variant
``detector``; variant ``lexical`` for the baseline (training triggers with their majority type). ``training`` rows: the chosen
``threshold`` and ``epochs_selected``. Artifacts: the held-out predictions (Parquet: sentence, span, trigger,
type, both scores, the gold type where the span is gold) and the dev F1-against-threshold plot. The model
(encoder + ``identification`` and ``typing`` heads, the threshold and inventory on its card) is saved as
``run:<id>``.
"""
from __future__ import annotations

import logging
from typing import Optional

from pydantic import Field

from .base import MethodResult, NotApplicable
from .context import MethodContext
from .spec import MethodConfig, training_field

NAME = "event_detection"
log = logging.getLogger(__name__)

# A token-tagging fine-tune: AdamW, linear decay after a 10% warm-up, heads (random) at a higher rate.
TRAIN_DEFAULTS = {"epochs": 6, "batch_size": 16, "lr": 5e-5, "head_lr": 1e-3, "schedule": "linear",
                  "warmup_steps": 10_000, "warmup_max_ratio": 0.1, "max_grad_norm": 1.0}
DetectionTraining, _TRAIN = training_field(TRAIN_DEFAULTS)


class EventDetectionConfig(MethodConfig):
    model_id: Optional[str] = None
    complete_sentences: bool = Field(False, description="the dataset's sentences are fully annotated (its protocol "
                                                        "says so): required, else unannotated triggers would train "
                                                        "as negatives")
    heldout_sentences: float = Field(0.2, gt=0, lt=1)
    dev_sentences: float = Field(0.15, gt=0, lt=1, description="share of the non-held-out sentences for choosing "
                                                               "the epoch and threshold")
    heldout_seed: int = 0
    thresholds: list[float] = Field(default_factory=lambda: [round(0.05 * i, 2) for i in range(1, 20)])
    patience: int = Field(2, ge=1)
    type_weight: float = Field(1.0, ge=0)
    dropout: float = Field(0.1, ge=0, lt=1)
    max_length: int = Field(128, ge=8)
    max_train_sentences: Optional[int] = Field(None, ge=10, description="seeded subsample of the training sentences")
    eval_batch_size: int = Field(64, ge=1)
    lexical_baseline: bool = True
    train: DetectionTraining = _TRAIN


def run(ctx: MethodContext) -> MethodResult:
    import pyarrow as pa

    from ..detection import protocol as P
    from ..detection.model import Detector, DetectionTask, word_scores
    from ..detection.words import sentences_of
    from ..evaluation.base import RowKey, metric_rows
    from ..io import write_parquet
    from ..modeling.mention_encoder import MentionEncoder, model_name
    from ..training import Trainer

    cfg = ctx.config
    if not cfg.complete_sentences:
        raise NotApplicable(f"{ctx.dataset}: its sentences are not declared fully annotated (registry protocol "
                            "detection.complete_sentences, or --params complete_sentences=true): unannotated "
                            "triggers would train as negatives")
    docs = ctx.table("documents") if "documents" in ctx.manifest.rows else None
    sentences = sentences_of(ctx.table("mentions"), docs)
    parts = P.split(sentences, cfg.heldout_sentences, cfg.dev_sentences, cfg.heldout_seed)
    parts["train"] = P.seeded_cap(parts["train"], cfg.max_train_sentences, ctx.seed)
    if not parts["dev"] or not parts["heldout"] or not parts["train"]:
        raise NotApplicable(f"{ctx.dataset}: {len(sentences)} sentences leave an empty part "
                            f"({', '.join(f'{k} {len(v)}' for k, v in parts.items())})")
    types = sorted({t for s in parts["train"] for _, _, t in s.gold})
    type_index = {t: i for i, t in enumerate(types)}
    enc = MentionEncoder(cfg.model_id, max_length=cfg.max_length)
    stats: dict[str, dict[str, int]] = {k: {} for k in parts}
    items = {k: P.encode_part(enc.tokenizer, v, enc.max_length, type_index, stats[k]) for k, v in parts.items()}
    model = Detector(enc, len(types), dropout=cfg.dropout)

    def scores(m, part: str = "dev"):
        return word_scores(m, items[part], device=ctx.device, batch_size=cfg.eval_batch_size, precision=ctx.precision)

    dev_sel = P.DevSelection(scores, parts["dev"], items["dev"], cfg.thresholds, types)
    stop = P.early_stopping(cfg.patience)
    trainer = Trainer(model, DetectionTask(items["train"], enc.pad_id, type_weight=cfg.type_weight), cfg.train,
                      ctx.run_dir / "train", seed=ctx.seed, callbacks=[dev_sel, stop], phase="detector")
    res = trainer.fit(resume=ctx.resume)
    epoch = stop.best_epoch if stop.best_epoch is not None else max(dev_sel.by_epoch, default=0)
    chosen = dev_sel.by_epoch.get(epoch) or {"threshold": 0.5, "curve": []}
    th = chosen["threshold"]

    result = ctx.result()
    result.add_training(res)
    key = RowKey(dataset=ctx.dataset, method=NAME, seed=ctx.seed,
                 setting=f"heldout {cfg.heldout_sentences:g} / dev {cfg.dev_sentences:g} of sentences")
    preds = {}
    for part in ("dev", "heldout"):
        preds[part] = P.predicted(parts[part], items[part], scores(model, part), th, types)
        result.metrics += P.rows(preds[part], parts[part], key.replace(split=part, variant="detector"))
    if cfg.lexical_baseline:
        result.metrics += P.lexical_rows(parts["train"], {p: (parts[p], items[p]) for p in ("dev", "heldout")}, key)
    result.metrics += metric_rows({"threshold": th, "epochs_selected": epoch + 1}, task="training",
                                  key=key.replace(split="dev"))

    gold = {(k, a, b): t for (k, a, b, t) in P.gold_of(parts["heldout"])}
    text = {s.key: s.text for s in parts["heldout"]}
    pred_rows = [{"doc_id": k[0], "sent_idx": k[1], "sentence": text[k], "start": a, "end": b, "trigger": text[k][a:b],
                  "type": t, "score": sc, "type_score": ts, "gold_type": gold.get((k, a, b))}
                 for (k, a, b, t, sc, ts) in preds["heldout"]]
    path = write_parquet(pa.Table.from_pylist(pred_rows, schema=pa.schema(
        [("doc_id", pa.string()), ("sent_idx", pa.int32()), ("sentence", pa.string()), ("start", pa.int32()),
         ("end", pa.int32()), ("trigger", pa.string()), ("type", pa.string()), ("score", pa.float32()),
         ("type_score", pa.float32()), ("gold_type", pa.string())])), ctx.run_dir / "detections_heldout.parquet")
    result.add_artifact("detections/heldout", path, rows=len(pred_rows))
    if chosen["curve"]:
        png = P.curve_png(chosen["curve"], th, ctx.run_dir / "dev_threshold.png",
                          f"{ctx.dataset}: dev F1 by threshold (epoch {epoch + 1})")
        result.add_artifact("plot/dev_threshold", png)
    unseen = sum(1 for s in parts["heldout"] for _, _, t in s.gold if t not in type_index)
    result.params = ctx.base_params(model_id=model_name(cfg.model_id))
    result.params.update({
        "parts": {k: {"sentences": len(v), "triggers": sum(len(s.gold) for s in v)} for k, v in parts.items()},
        "inventory": len(types), "heldout_triggers_of_unseen_types": unseen, "alignment": stats,
        "threshold": th, "epoch": epoch + 1, "dev_by_epoch": {e + 1: v["threshold"] for e, v in dev_sel.by_epoch.items()},
        "train": {k: v for k, v in res.summary().items() if k != "history"}})
    if cfg.save_model:
        from ..modeling.saved import ModelWriter

        w = ModelWriter(ctx.run_dir, method=NAME)
        w.encoder(enc)
        w.head("identification", model.identification.state_dict(), kind="token_classifier",
               config={"labels": ["O", "B", "I"]})
        w.head("typing", model.typing.state_dict(), kind="token_classifier", config={"labels": types})
        w.close(epoch=epoch + 1, precision=ctx.precision,
                inference={"threshold": th, "types": types, "max_length": enc.max_length,
                           "words": "the tokenizer's pre-tokenizer words, each scored at its first piece"})
    log.info("event_detection %s: held-out TI F1 %.1f, TC F1 %.1f (threshold %.2f, epoch %d)", ctx.dataset,
             *(100 * next(r["value"] for r in result.metrics if r["split"] == "heldout" and r["variant"] == "detector"
                          and r["metric"] == m) for m in ("ti_f1", "tc_f1")), th, epoch + 1)
    return result


def apply(model, ctx: MethodContext) -> MethodResult:
    """Score a saved detector (:class:`eventatlas.modeling.saved.SavedModel`) on the context's dataset without
    training: on the dataset it was trained on, its held-out sentences (the cut its card records); on another
    one, every sentence. Classification is scored only when every gold type of the dataset is in the model's
    inventory; otherwise the rows are type-agnostic (identification only: the inventories differ)."""
    from ..detection import protocol as P
    from ..detection.apply import load_detector
    from ..detection.model import word_scores
    from ..detection.words import encode, sentences_of
    from ..evaluation.base import RowKey
    from ..evaluation.detection import evaluate_detection

    cfg = ctx.config
    if not cfg.complete_sentences:
        raise NotApplicable(f"{ctx.dataset}: its sentences are not declared fully annotated (registry protocol "
                            "detection.complete_sentences): a detector cannot be scored against partial gold")
    det, inf, ref = load_detector(model.ref, ctx.device)
    docs = ctx.table("documents") if "documents" in ctx.manifest.rows else None
    sentences = sentences_of(ctx.table("mentions"), docs)
    part = "all"
    if model.card.trained_on == ctx.dataset:
        tc = model.card.config
        sentences = P.split(sentences, tc.get("heldout_sentences", 0.2), tc.get("dev_sentences", 0.15),
                            tc.get("heldout_seed", 0))["heldout"]
        part = "heldout"
    items = encode(det.encoder.tokenizer, [s.text for s in sentences], det.encoder.max_length)
    scores = word_scores(det, items, device=ctx.device, batch_size=cfg.eval_batch_size, precision=ctx.precision)
    pred = P.predicted(sentences, items, scores, float(inf["threshold"]), inf["types"])
    gold_types = {t for s in sentences for _, _, t in s.gold}
    agnostic = not gold_types <= set(inf["types"])
    result = ctx.result()
    key = RowKey(dataset=ctx.dataset, method=NAME, seed=ctx.seed, split=part, variant="detector",
                 setting="type-agnostic (other inventory)" if agnostic else None)
    result.metrics += evaluate_detection([p[:4] for p in pred], P.gold_of(sentences), key=key, type_agnostic=agnostic)
    result.params = ctx.base_params(model=ref, sentences=len(sentences), threshold=inf["threshold"],
                                    type_agnostic=agnostic, gold_types_outside_inventory=len(gold_types - set(inf["types"])))
    return result
