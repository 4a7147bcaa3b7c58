"""``discover`` scored: the whole ``eventatlas discover`` path on sentences whose gold it never reads, then
scored against that gold. Detection, clustering, naming and the known/new verdicts, each measured.

On a fully annotated dataset (registry protocol ``detection.complete_sentences``) the sentences are cut as
the detector's are (:func:`eventatlas.detection.protocol.split`; with a saved detector trained on this
dataset, its card's cut, so no scored sentence was seen in training). The mentions of the scored part come
from each of ``variants``: ``gold`` (the gold spans: what detection could at best give), ``lexical`` (the
lexical baseline fitted on the training part) and ``detector`` (the saved detector, ``detector: run:<id>``).
Each set of mentions is written as a dataset without labels for the types (the gold type rides along only
on the mentions whose span is gold, to score) and :func:`eventatlas.discover.run.discover` runs on it
unchanged: embedded, the count chosen without labels, clustered, described, linked to

* the dataset's own types, from its training sentences only, minus ``hidden_types`` types drawn (seeded)
  among those with at least ``hidden_min_mentions`` mentions in the part: the types the known inventory
  "lacks";
* the ``link_to`` inventories (e.g. FrameNet 1.5 verbs).

Rows (split = the part): ``detection`` (TI / TC, as event_detection scores them) per detecting variant;
``induction`` (every clustering metric over the mentions whose span is gold, ``n_clusters``, and
``n_mentions`` / ``n_matched``); ``naming`` (``hits1``: the top link by each evidence scorer against the
majority's own type, or its mapped frames for a FrameNet inventory; ``coverage``: the share of the part's gold
types that are some type's majority); ``discovery``: the new verdicts against the hidden types.
A hidden type with no frame of its hand mapping in the linked inventories should come out **new**; one
with a mapped frame there should come out linked to it (``hidden_linked``). The novelty scorer and threshold
are chosen on the dev part (its own hidden draw) by new F1 unless given; the chosen pair is a ``discovery``
row of the dev split. Artifacts: each variant's discover output (types, assignments, links) and the dev
curve.

On another dataset (``part: all``): every sentence, no hidden types, naming only where a mapping exists.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np
from pydantic import Field

from .base import MethodResult, NotApplicable
from .context import MethodContext
from .spec import MethodConfig, ParamError

NAME = "discover"
log = logging.getLogger(__name__)
SPLIT_KEYS = ("heldout_sentences", "dev_sentences", "heldout_seed")
HIDDEN_SALT = {"dev": 17, "heldout": 0, "all": 0}  # another hidden draw on dev: the threshold is not fitted on the test types


class DiscoverMethodConfig(MethodConfig):
    detector: Optional[str] = Field(None, description="run:<id> of a saved event_detection model (variant detector)")
    variants: Optional[list[Literal["gold", "lexical", "detector"]]] = Field(
        None, description="where the mentions come from (default: gold, lexical, and detector when one is given)")
    complete_sentences: bool = Field(False, description="the dataset's sentences are fully annotated (registry "
                                                        "protocol detection); required to score detection")
    part: Literal["heldout", "dev", "all"] = "heldout"
    heldout_sentences: float = Field(0.2, gt=0, lt=1)
    dev_sentences: float = Field(0.15, gt=0, lt=1)
    heldout_seed: int = 0
    k: Optional[int] = Field(None, ge=2, description="None: the label-free count (best cosine silhouette)")
    algorithm: Literal["agglomerative", "manifold", "manifold_sym"] = "agglomerative"
    model_id: Optional[str] = Field(None, description="the encoder of the mention vectors (default all-MiniLM-L6-v2)")
    link_own: bool = Field(True, description="link to the dataset's own training-part types (minus the hidden)")
    link_to: list[str] = Field(default_factory=list, description="ingested datasets of known inventories")
    link_sample: int = Field(100, ge=1, description="mentions per known type the linking embeds")
    hidden_types: int = Field(10, ge=0)
    hidden_min_mentions: int = Field(10, ge=1)
    novelty_scorer: Optional[Literal["centroid", "vote", "mnn"]] = Field(None, description="None: chosen on dev")
    new_below: Optional[float] = Field(None, description="None: chosen on dev (with the scorer)")
    thresholds: dict[str, list[float]] = Field(default_factory=lambda: {
        "centroid": [round(0.3 + 0.05 * i, 2) for i in range(14)],
        "vote": [round(0.05 * i, 2) for i in range(1, 14)], "mnn": [round(0.05 * i, 2) for i in range(1, 14)]})


def _hidden(sentences, train, k: int, min_n: int, seed: int, salt: int, framed: set[str]) -> list[str]:
    """``k`` types to hide, drawn (seeded) among those with at least ``min_n`` mentions in the part that the
    training part knows: half among the types without a mapped frame in the linked inventories (they should
    come out new), half among those with one (they should come out linked to it), so both verdicts are asked
    (most MAVEN types have a FrameNet frame: an unbalanced draw would ask "new" of one or two types)."""
    from collections import Counter

    in_part = Counter(t for s in sentences for _, _, t in s.gold)
    known = {t for s in train for _, _, t in s.gold}
    pool = sorted(t for t, n in in_part.items() if n >= min_n and t in known)
    if k <= 0 or not pool:
        return []
    rng = np.random.default_rng([seed, 31, salt])
    new, mapped = [t for t in pool if t not in framed], [t for t in pool if t in framed]
    n_new = min(len(new), k - min(len(mapped), k // 2))
    pick = [new[int(i)] for i in rng.choice(len(new), size=n_new, replace=False)] if n_new else []
    rest = min(len(mapped), k - n_new)
    pick += [mapped[int(i)] for i in rng.choice(len(mapped), size=rest, replace=False)] if rest else []
    return sorted(pick)


def _write(ddir: Path, name: str, man, sentences, spans) -> Path:
    """A dataset of the detected ``spans`` (``(key, start, end, *_)``) in ``sentences``; a mention whose span
    is gold carries its gold type (only for scoring: discover never reads it to shape the types)."""
    from ..io import DatasetWriter, stable_id

    text = {s.key: s.text for s in sentences}
    gold = {(s.key, a, b): t for s in sentences for a, b, t in s.gold}
    with DatasetWriter(ddir, name, tables=["mentions"]) as w:
        for key, a, b, *_ in spans:
            lab = gold.get((key, a, b))
            w.write("mentions", {"mention_id": stable_id(name, key[0], key[1], a, b), "dataset": name,
                                 "doc_id": key[0], "sent_idx": key[1], "sentence": text[key], "trigger_start": a,
                                 "trigger_end": b, "trigger": text[key][a:b], "labels": [lab] if lab else []})
        w.commit({"reader": "discover-scoring", "language": man.language, "ontology": man.ontology})
    return ddir


def _own_inventory(ctx: MethodContext, train, hidden: list[str]):
    """The dataset's types as known from its training sentences only, the hidden ones left out."""
    from dataclasses import replace

    from ..atlas.inventory import dataset_inventory

    inv = dataset_inventory(ctx.dataset_dir)
    keys = {s.key for s in train}
    m = ctx.table("mentions", ["mention_id", "doc_id", "sent_idx"]).to_pydict()
    ok = {i for i, d, k in zip(m["mention_id"], m["doc_id"], m["sent_idx"]) if (str(d), int(k)) in keys}
    keep = [i for i, t in enumerate(inv.types) if t not in set(hidden) and any(x in ok for x in inv.mentions[t])]
    return replace(inv, key=f"{inv.key}:known", fingerprint=f"{inv.fingerprint}:{'|'.join(hidden)}:{len(keys)}",
                   types=[inv.types[i] for i in keep], names=[inv.names[i] for i in keep],
                   definitions=[inv.definitions[i] for i in keep], parents=[inv.parents[i] for i in keep],
                   mentions={inv.types[i]: [x for x in inv.mentions[inv.types[i]] if x in ok] for i in keep})


def run(ctx: MethodContext) -> MethodResult:
    from ..detection import protocol as P
    from ..detection.words import sentences_of

    cfg = ctx.config
    if not cfg.complete_sentences:
        raise NotApplicable(f"{ctx.dataset}: its sentences are not declared fully annotated (registry protocol "
                            "detection.complete_sentences): detected mentions cannot be scored against its gold")
    variants = cfg.variants or ["gold", "lexical", *(["detector"] if cfg.detector else [])]
    if "detector" in variants and not cfg.detector:
        raise ParamError("discover: variant 'detector' needs detector: run:<id> (a saved event_detection model), "
                         "or leave it out of variants")
    det = None
    if cfg.detector and "detector" in variants:
        from ..detection.apply import load_detector
        from ..modeling.saved import resolve_ref

        card = resolve_ref(cfg.detector).card
        if card.trained_on == ctx.dataset and cfg.part != "all":
            theirs = {k: card.config.get(k) for k in SPLIT_KEYS}
            if theirs != {k: getattr(cfg, k) for k in SPLIT_KEYS}:
                raise ParamError(f"discover: the detector {cfg.detector} cut {ctx.dataset} with {theirs}; score it "
                                 "on the same cut (set those keys) or its training sentences would be scored")
        det = load_detector(cfg.detector, ctx.device)
    docs = ctx.table("documents") if "documents" in ctx.manifest.rows else None
    sentences = sentences_of(ctx.table("mentions"), docs)
    if cfg.part == "all":
        parts, train = {"all": sentences}, []
    else:
        cut = P.split(sentences, cfg.heldout_sentences, cfg.dev_sentences, cfg.heldout_seed)
        train = cut["train"]
        parts = {p: cut[p] for p in dict.fromkeys(["dev", cfg.part]) if cfg.novelty_scorer is None or p == cfg.part}
    from ..discover.evaluate import framed_types, gold_on_found, score_part

    framed = framed_types(ctx.manifest.ontology, cfg.link_to) if train and cfg.hidden_types else set()
    result = ctx.result()
    chosen: dict[str, tuple[str, float]] = {}
    info: dict[str, Any] = {}
    for part, sents in parts.items():
        hidden = _hidden(sents, train, cfg.hidden_types if train else 0, cfg.hidden_min_mentions, ctx.seed,
                         HIDDEN_SALT[part], framed)
        own = _own_inventory(ctx, train, hidden) if cfg.link_own and train else None
        for v in variants:
            if v == "lexical" and not train:
                log.info("discover %s: no training sentences (part all): the lexical variant is skipped", ctx.dataset)
                continue
            spans = _spans(v, sents, train, det)
            if len(spans) < 2:  # nothing to cluster: said, not failed (a tiny sample's dev part)
                log.info("discover %s %s/%s: %d mention(s), too few to induce types: skipped", ctx.dataset, part, v,
                         len(spans))
                info[f"{part}/{v}"] = {"skipped": f"{len(spans)} mention(s): too few to induce types"}
                continue
            ddir = _write(ctx.run_dir / "work" / f"{part}-{v}", f"{ctx.dataset}_{part}_{v}", ctx.manifest, sents, spans)
            rows, got = score_part(ctx, cfg, part, v, sents, spans, ddir, own, hidden, chosen.get(v),
                                   scored=(part == cfg.part), detecting=(v != "gold"))
            result.metrics += rows
            result.artifacts += got.pop("artifacts", [])
            if part == "dev" and got.get("chosen"):
                chosen[v] = got["chosen"]
            info[f"{part}/{v}"] = got
            if v == "detector" and part == cfg.part and "gold" in variants:
                gold = {(s.key, a, b) for s in sents for a, b, _ in s.gold}
                result.metrics += gold_on_found(ctx, cfg, part, ctx.run_dir / "work" / f"{part}-gold",
                                                {(k, a, b) for k, a, b, *_ in spans} & gold)
    result.params = ctx.base_params(detector=cfg.detector, parts={p: len(s) for p, s in parts.items()},
                                    train_sentences=len(train), chosen_on_dev={v: list(c) for v, c in chosen.items()},
                                    runs=info)
    return result


def _spans(variant: str, sents, train, det) -> list[tuple]:
    from ..detection import protocol as P
    from ..detection.lexical import LexicalDetector
    from ..detection.words import encode

    if variant == "gold":
        return [(s.key, a, b, t) for s in sents for a, b, t in s.gold]
    if variant == "detector":
        from ..detection.model import word_scores

        model, inf, _ = det
        items = encode(model.encoder.tokenizer, [s.text for s in sents], model.encoder.max_length)
        scores = word_scores(model, items, device=next(model.parameters()).device.type, batch_size=64)
        return P.predicted(sents, items, scores, float(inf["threshold"]), inf["types"])
    tok, max_len = _tokenizer(det)
    lex = LexicalDetector(train)
    items = encode(tok, [s.text for s in sents], max_len)
    return [(s.key, a, b, t) for s, it in zip(sents, items) for a, b, t in lex.predict(s.text, it.spans)]


def _tokenizer(det) -> tuple[Any, int]:
    """The detector's tokenizer (the lexical baseline must see the same words), else the default encoder's."""
    if det is not None:
        return det[0].encoder.tokenizer, det[0].encoder.max_length
    from transformers import AutoTokenizer

    from ..modeling.mention_encoder import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None)), 128
