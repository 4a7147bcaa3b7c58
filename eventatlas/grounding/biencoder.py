"""The grounding bi-encoder (Ou et al. 2023, after BLINK) on the shared training core.

* Mention input ``[CLS] left [ENT_START] mention [ENT_END] right [SEP]``: the marked text goes through
  :func:`eventatlas.modeling.inputs.prepare_mentions`, whose window keeps the marked mention and splits
  the rest of the ``max_length`` budget (128) evenly between the two sides. Candidate input
  ``[CLS] title [ENT_TITLE] description [SEP]`` (head-truncated). The markers are added to the
  tokenizer as special tokens (new embedding rows) and saved with the model.
* One shared :class:`~eventatlas.modeling.MentionEncoder` encodes both sides (a Siamese bi-encoder;
  BLINK uses two copies: one model halves the CPU memory and the pre-training of HP then reaches the
  mention side too), mean-pooled (the default encoder is a mean-pooling sentence-transformer) over the whole
  input, or on the mention side over the marked span only (``mention_pool="trigger"``); score = dot product.
* Losses: ``bce`` (:mod:`.losses.multilabel`, every gold a positive), ``msoftmax`` (:mod:`.losses.multisoftmax`,
  every gold a positive, each ranked against the row's negatives by a softmax) or ``softmax``
  (:mod:`.losses.softmax`, BLINK); ``hjl_weight`` > 0 adds the ComplEx hierarchy BCE (:mod:`.losses.hierarchy`)
  over N_h sampled in-batch parents (HJL). :class:`HierarchyTask` trains on the hierarchy loss alone (HP pre-training).
  Only the training split's hierarchy is ever seen in training (zero-shot).
* Pool negatives (``negatives`` > 0): each batch adds that many candidates drawn at random from the
  pool *outside* every evaluation split's events (all-zero target columns / extra softmax columns).
  Without them the in-batch candidates are only the training golds (76 atomic FrameNet frames, 42 %
  Self_motion), so the ~1,100 never-seen frames of the pool are never pushed away and, after training,
  outrank the gold even for *training* mentions (diagnosis in the README).
* Score: ``dot`` (the paper's dot product) or ``cosine`` (unit vectors times ``scale``; the BCE then
  adds a learned bias, as a sigmoid of a bounded cosine needs an offset). Unnormalised mean-pooled
  MiniLM vectors make hubs under the dot product (a few long candidates on top of every list).
* Retrieval: faiss top-k by dot product over the whole candidate pool
  (:func:`eventatlas.evaluation.retrieval.rank` with ``normalize=False``; with ``cosine`` the stored
  vectors are unit rows, so the dot product is the cosine).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..modeling.inputs import ModelInput
from .data import MARKERS, GroundingData, Mentions
from .losses.hierarchy import ComplExHierarchy, hierarchy_bce
from .losses.multilabel import batch_candidates, multilabel_bce
from .losses.multisoftmax import multipositive_softmax
from .losses.softmax import batch_targets, softmax_ce

REP = "sentence"  # mean pooling over the (windowed) input
MENTION_POOLS = ("sentence", "trigger")  # mention side: the whole window, or the marked span ([ENT_START] m [ENT_END])
SCORES = ("dot", "cosine")
LOSSES = ("bce", "msoftmax", "softmax")  # multi-label targets for the first two, the atomic gold for softmax


def add_markers(encoder) -> bool:
    """Give the encoder's tokenizer the marker tokens (and the model their embedding rows); False
    when they are already there (a saved grounding model)."""
    tok = encoder.tokenizer
    vocab = tok.get_vocab()
    missing = [m for m in MARKERS if m not in vocab]
    if not missing:
        return False
    tok.add_tokens(list(MARKERS), special_tokens=True)  # never split, never lower-cased
    encoder.model.resize_token_embeddings(len(tok))
    return True


def mention_inputs(encoder, mentions: Mentions, *, cache: bool = True, budget: int | None = None) -> list[ModelInput]:
    """Marked mention inputs windowed to the encoder's budget (or a smaller ``budget`` of content pieces,
    e.g. the mention half of a cross-encoder pair)."""
    from .. import config
    from ..modeling.inputs import prepare_mentions
    from ..modeling.tokens import tokenize_cached

    texts, a, b = mentions.marked()
    if budget is not None:
        return prepare_mentions(encoder.tokenizer, texts, a, b, REP, budget=min(budget, encoder.budget), mask=encoder.mask)
    if not cache:
        return encoder.prepare(texts, a, b, REP)
    # own cache namespace: the key hashes the tokenizer files on disk, not the markers added in memory
    items, _ = tokenize_cached(encoder, texts, a, b, REP, cache_dir=config.cache_dir() / "tokens" / "grounding_markers")
    return items


def candidate_inputs(encoder, gd: GroundingData) -> list[ModelInput]:
    return encoder.prepare_sentences(gd.candidate_texts())


class BiEncoder(nn.Module):
    def __init__(self, encoder, *, hierarchy: bool = False, score: str = "dot", scale: float = 20.0):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        self.encoder, self.score, self.scale = encoder, score, float(scale)
        self.hier = ComplExHierarchy(encoder.hidden_size) if hierarchy else None
        # BCE offset for cosine logits (scale * cos lies in [-scale, scale]; half-way is a neutral start)
        self.bias = nn.Parameter(torch.tensor(-0.5 * self.scale)) if score == "cosine" else None

    def embed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Raw pooled vectors (the hierarchy head works on these)."""
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch.get("pool"), REP)

    def scores(self, m: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """(B, U) mention x candidate logits: ``m . c`` or ``scale * cos(m, c)``."""
        if self.score == "dot":
            return m @ c.T
        return self.scale * (F.normalize(m, dim=-1) @ F.normalize(c, dim=-1).T)


def _parents_in(cands: Sequence[int], parent: np.ndarray, allowed: set[int], n_h: int, rng: np.random.Generator):
    """Sample up to ``n_h`` in-batch events with an in-batch child (edges of ``allowed`` events only);
    returns (parent positions, (P, U) positives) or None."""
    pos = {c: j for j, c in enumerate(cands)}
    kids: dict[int, list[int]] = {}
    for c in cands:
        p = int(parent[c])
        if p >= 0 and p in pos and c in allowed and p in allowed:
            kids.setdefault(pos[p], []).append(pos[c])
    if not kids:
        return None
    ps = sorted(kids)
    if len(ps) > n_h:
        ps = sorted(rng.choice(ps, size=n_h, replace=False).tolist())
    y = torch.zeros(len(ps), len(cands))
    for r, p in enumerate(ps):
        y[r, kids[p]] = 1.0
    return torch.tensor(ps, dtype=torch.long), y


class LinkingTask:
    """TrainTask: mention -> in-batch candidates (+ the hierarchy loss for HJL)."""

    def __init__(self, encoder, mention_items: Sequence[ModelInput], golds: Sequence[Sequence[int]],
                 cand_items: Sequence[ModelInput], parent: np.ndarray, *, loss: str = "bce", hjl_weight: float = 0.0,
                 n_h: int = 8, train_events: set[int] | None = None, mention_pool: str = REP,
                 negatives: int = 0, negative_pool: Sequence[int] = ()):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.encoder, self.items, self.golds, self.cands = encoder, list(mention_items), [list(g) for g in golds], list(cand_items)
        self.parent, self.kind, self.hjl_weight, self.n_h = parent, loss, float(hjl_weight), int(n_h)
        if mention_pool not in MENTION_POOLS:
            raise ValueError(f"mention_pool must be one of {MENTION_POOLS}, got {mention_pool!r}")
        self.mention_pool = mention_pool
        self.train_events = train_events if train_events is not None else {g for gs in self.golds for g in gs}
        self.negatives, self.negative_pool = int(negatives), np.asarray(sorted(set(negative_pool)), dtype=np.int64)
        if self.negatives > 0 and len(self.negative_pool) == 0:
            raise ValueError("negatives > 0 needs a non-empty negative_pool")

    def lengths(self) -> list[int]:
        return [len(it.ids) for it in self.items]

    def make_batch(self, indices: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        golds = [self.golds[i] for i in indices]
        if self.kind != "softmax":
            cands, target = batch_candidates(golds)
        else:
            cands, target = batch_targets([g[0] for g in golds])
        if self.negatives > 0:
            extra = sample_negatives(self.negative_pool, set(cands) | {g for gs in golds for g in gs}, self.negatives, rng)
            cands = cands + extra
            if self.kind != "softmax":  # new all-negative columns; softmax targets are column indices, unchanged
                target = torch.cat([target, torch.zeros(len(golds), len(extra))], dim=1)
        batch = {"mentions": self.encoder.collate([self.items[i] for i in indices], self.mention_pool),
                 "candidates": self.encoder.collate([self.cands[c] for c in cands], REP), "target": target}
        if self.hjl_weight > 0:
            h = _parents_in(cands, self.parent, self.train_events, self.n_h, rng)
            if h is not None:
                batch["h_parents"], batch["h_pos"] = h
        return batch

    def loss(self, model: BiEncoder, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        m = model.embed(batch["mentions"])
        c = model.embed(batch["candidates"])
        s = model.scores(m, c)
        if self.kind == "bce":
            link = multilabel_bce(s if model.bias is None else s + model.bias, batch["target"])
        elif self.kind == "msoftmax":  # shift-invariant: the BCE bias plays no part
            link = multipositive_softmax(s, batch["target"])
        else:
            link = softmax_ce(s, batch["target"])
        terms = {"link": float(link.detach())}
        loss = link
        if self.hjl_weight > 0 and "h_parents" in batch:
            lh = hierarchy_bce(model.hier, c, batch["h_parents"], batch["h_pos"])
            terms["hierarchy"] = float(lh.detach())
            loss = loss + self.hjl_weight * lh
        return loss, terms

    def param_groups(self, model: BiEncoder, args) -> list[dict[str, Any]]:
        groups = [{"params": [p for p in model.encoder.parameters() if p.requires_grad], "lr": args.lr, "name": "encoder"}]
        if model.hier is not None:
            groups.append({"params": list(model.hier.parameters()), "lr": args.head_lr or args.lr, "name": "hierarchy"})
        if getattr(model, "bias", None) is not None:
            groups.append({"params": [model.bias], "lr": args.head_lr or args.lr, "name": "bias"})
        return groups


def sample_negatives(pool: np.ndarray, exclude: set[int], n: int, rng: np.random.Generator) -> list[int]:
    """Up to ``n`` distinct candidates of ``pool`` not in ``exclude`` (seeded, uniform)."""
    free = pool[~np.isin(pool, np.fromiter(exclude, dtype=np.int64, count=len(exclude)))] if exclude else pool
    if len(free) == 0:
        return []
    return [int(x) for x in rng.choice(free, size=min(n, len(free)), replace=False)]


class HierarchyTask:
    """TrainTask for HP: the ComplEx loss alone over the training split's trees. A batch is a few
    parents of the training hierarchy with their children (the positives) and the other events of the
    batch as in-batch negatives."""

    def __init__(self, encoder, cand_items: Sequence[ModelInput], parent: np.ndarray, train_events: set[int], *, n_h: int = 8):
        self.encoder, self.cands, self.parent, self.n_h = encoder, list(cand_items), parent, int(n_h)
        self.allowed = set(train_events)
        kids: dict[int, list[int]] = {}
        for c in sorted(self.allowed):
            p = int(parent[c])
            if p >= 0 and p in self.allowed:
                kids.setdefault(p, []).append(c)
        self.kids = kids
        self.parents = sorted(kids)
        if not self.parents:
            raise ValueError("no parent-child edge among the training events: nothing to pre-train on")

    def lengths(self) -> list[int]:
        return [len(self.cands[p].ids) for p in self.parents]

    def make_batch(self, indices: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        cands: list[int] = []
        for i in indices:
            p = self.parents[i]
            for c in [p, *self.kids[p]]:
                if c not in cands:
                    cands.append(c)
        h = _parents_in(cands, self.parent, self.allowed, self.n_h, rng)
        ps, y = h
        return {"candidates": self.encoder.collate([self.cands[c] for c in cands], REP), "h_parents": ps, "h_pos": y}

    def loss(self, model: BiEncoder, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        c = model.embed(batch["candidates"])
        lh = hierarchy_bce(model.hier, c, batch["h_parents"], batch["h_pos"])
        return lh, {"hierarchy": float(lh.detach())}

    param_groups = LinkingTask.param_groups


def embed_items(encoder, items: Sequence[ModelInput], *, device: str, precision: str = "fp32", batch_size: int = 64,
                pool: str = REP) -> np.ndarray:
    """Vectors of prepared inputs with the shared frozen-inference path (:class:`eventatlas.modeling.encode.Encoder`);
    ``pool="trigger"`` averages the marked span of mention inputs."""
    from ..modeling.encode import Encoder

    return Encoder(module=encoder, device=device, precision=precision, batch_size=batch_size, progress=False).run(items, pool)


def retrieve(mention_vecs: np.ndarray, cand_vecs: np.ndarray, k: int,
             among: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k candidate indices and dot scores per mention (faiss inner product); ``among`` restricts the
    search to those candidate indices (the indices returned are still the pool's)."""
    from ..evaluation.retrieval import rank

    if among is not None:
        among = np.asarray(among, dtype=np.int64)
        ids, scores = retrieve(mention_vecs, cand_vecs[among], min(k, len(among)))
        return among[ids], scores
    ids, scores = [], []
    for _, i, s in rank(mention_vecs, cand_vecs, k=k, normalize=False):
        ids.append(i)
        scores.append(s)
    return np.concatenate(ids), np.concatenate(scores)
