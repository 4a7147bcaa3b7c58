"""The grounding cross-encoder (Ou et al. 2023, sec. 3.3) over the bi-encoder's top-k.

Input per (mention, candidate) pair: the marked mention input (its own, shorter window) followed by
the candidate input without its leading [CLS] (``[CLS] left [ENT_START] m [ENT_END] right [SEP] title
[ENT_TITLE] description [SEP]``); [CLS] -> linear -> score. Trained with BCE over the top-k of each
training mention, where :func:`force_golds` first puts every gold that retrieval missed in place of the
lowest-scoring negatives. At inference every candidate scoring >= tau_c (tuned on dev with
:func:`tune_threshold`) is output; when none passes the prediction is empty (NULL).

Title masking (``title_mask`` > 0): a trained cross-encoder was measured to rank by the candidate's identity
(frames that were training golds take its top-1 far more often than the bi-encoder's), so in training each
pair's title pieces are replaced by the mask token with that probability, drawn afresh per batch; the model
must then match the mention against the description. Evaluation pairs are never masked.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..modeling.inputs import ModelInput

POOL = "trigger"  # pooled positions = ModelInput.target = [0], the [CLS] piece


def force_golds(ranked: Sequence[int], golds: Sequence[int]) -> list[int]:
    """The top-k list with every missing gold put in place of the lowest-ranked non-gold entries
    (k unchanged; order otherwise kept). With more golds than k, the first k golds."""
    k = len(ranked)
    gold = list(dict.fromkeys(golds))
    out = list(ranked)
    missing = [g for g in gold if g not in out]
    if len(gold) >= k:
        return gold[:k]
    for g in missing:
        j = max(i for i, c in enumerate(out) if c not in gold)  # the lowest-scoring negative
        out[j] = g
    return out


def pair_input(mention: ModelInput, candidate: ModelInput, max_length: int) -> ModelInput:
    """Concatenate a mention input and a candidate input (its [CLS] dropped), truncating the candidate
    side first (keeping its final [SEP])."""
    room = max_length - len(mention.ids)
    cand = candidate.ids[1:]
    if room < 2:
        raise ValueError(f"mention input of {len(mention.ids)} pieces leaves no room in {max_length}")
    if len(cand) > room:
        cand = cand[: room - 1] + cand[-1:]
    return ModelInput(list(mention.ids) + list(cand), [0], [])


def mention_pairs(encoder, mentions, lists: Sequence[Sequence[int]], c_items: Sequence[ModelInput],
                  mention_length: int) -> list[list[ModelInput]]:
    """Each mention's pair inputs over its candidate list: the marked mention windowed to ``mention_length``
    pieces (at most half of the encoder's pair length), each candidate's input after it (:func:`pair_input`)."""
    from .biencoder import mention_inputs

    m_items = mention_inputs(encoder, mentions, budget=min(mention_length, encoder.max_length // 2) - 2)
    return [[pair_input(m_items[i], c_items[c], encoder.max_length) for c in cands]
            for i, cands in enumerate(lists)]


class CrossEncoder(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.hidden_size, 1)

    def forward_batch(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        h = self.encoder(batch["input_ids"], batch["attention_mask"], batch.get("pool"), POOL)
        return self.head(h).squeeze(-1)


def title_span(ids: Sequence[int], title_id: int, sep_id: int) -> tuple[int, int] | None:
    """Positions ``[a, b)`` of the candidate's title in a pair input: the pieces between the [SEP] that
    closes the mention side and the candidate's [ENT_TITLE] marker (None when the marker was truncated away)."""
    try:
        b = list(ids).index(title_id)
    except ValueError:
        return None
    a = max(j for j in range(b) if ids[j] == sep_id) + 1 if sep_id in ids[:b] else 1
    return (a, b) if b > a else None


def mask_titles(items: Sequence[ModelInput], spans: Sequence[tuple[int, int] | None], p: float, mask_id: int,
                rng: np.random.Generator) -> list[ModelInput]:
    """Each pair with its title pieces replaced by ``mask_id`` with probability ``p`` (one draw per pair)."""
    out = []
    for it, sp, u in zip(items, spans, rng.random(len(items))):
        if sp is None or u >= p:
            out.append(it)
            continue
        ids = list(it.ids)
        ids[sp[0]:sp[1]] = [mask_id] * (sp[1] - sp[0])
        out.append(ModelInput(ids, list(it.target), list(it.window)))
    return out


class CrossTask:
    """TrainTask: each example is a mention with its k (gold-forced) candidates."""

    def __init__(self, encoder, pairs: Sequence[Sequence[ModelInput]], labels: Sequence[Sequence[float]],
                 *, title_mask: float = 0.0):
        self.encoder, self.pairs, self.labels = encoder, [list(p) for p in pairs], [list(l) for l in labels]
        if not 0.0 <= title_mask <= 1.0:
            raise ValueError(f"title_mask must be a probability in [0, 1], got {title_mask}")
        self.title_mask, self.spans = float(title_mask), None
        if self.title_mask > 0:
            from .data import MARKERS

            tok = encoder.tokenizer
            title_id = tok.convert_tokens_to_ids(MARKERS[2])
            if title_id is None or title_id == tok.unk_token_id:
                raise ValueError(f"title_mask needs the {MARKERS[2]} marker in the encoder's vocabulary")
            self.mask_id = encoder.mask.id
            if self.mask_id is None:
                raise ValueError("title_mask needs a mask or unk token in the encoder's tokenizer")
            self.spans = [[title_span(p.ids, title_id, tok.sep_token_id) for p in ps] for ps in self.pairs]

    def lengths(self) -> list[int]:
        return [max(len(p.ids) for p in ps) for ps in self.pairs]

    def make_batch(self, indices: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        items = [p for i in indices for p in self.pairs[i]]
        if self.spans is not None:
            items = mask_titles(items, [s for i in indices for s in self.spans[i]], self.title_mask, self.mask_id, rng)
        y = torch.tensor([v for i in indices for v in self.labels[i]], dtype=torch.float32)
        return {"pairs": self.encoder.collate(items, POOL), "y": y}

    def loss(self, model: CrossEncoder, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        s = model.forward_batch(batch["pairs"])
        loss = F.binary_cross_entropy_with_logits(s, batch["y"])
        return loss, {"bce": float(loss.detach())}

    def param_groups(self, model: CrossEncoder, args) -> list[dict[str, Any]]:
        return [{"params": list(model.encoder.parameters()), "lr": args.lr, "name": "encoder"},
                {"params": list(model.head.parameters()), "lr": args.head_lr or args.lr, "name": "head"}]


@torch.no_grad()
def score_pairs(model: CrossEncoder, pairs: Sequence[Sequence[ModelInput]], *, device: str, batch_mentions: int = 8) -> np.ndarray:
    """(M, k) sigmoid scores of every mention's candidate pairs."""
    was = model.training
    model.eval()
    model.to(device)
    out = np.zeros((len(pairs), max((len(p) for p in pairs), default=0)), dtype=np.float32)
    try:
        for b0 in range(0, len(pairs), batch_mentions):
            chunk = pairs[b0:b0 + batch_mentions]
            items = [p for ps in chunk for p in ps]
            b = {k: v.to(device) for k, v in model.encoder.collate(items, POOL).items()}
            s = torch.sigmoid(model.forward_batch(b)).float().cpu().numpy()
            r = 0
            for i, ps in enumerate(chunk):
                out[b0 + i, : len(ps)] = s[r:r + len(ps)]
                r += len(ps)
    finally:
        model.train(was)
    return out


def tune_threshold(scores: np.ndarray, cands: np.ndarray, golds: Sequence[Sequence[int]],
                   grid: Sequence[float] | None = None) -> tuple[float, dict[str, float]]:
    """tau_c maximising strict accuracy (then micro-F1) of the thresholded sets on these (dev) mentions:
    ``scores`` (M, k) in [0, 1], ``cands`` (M, k) the candidate ids they score."""
    from ..evaluation import metrics as M

    scores, cands = np.asarray(scores), np.asarray(cands)
    if scores.shape != cands.shape:
        raise ValueError(f"scores {scores.shape} and candidate ids {cands.shape} differ in shape")
    if not np.issubdtype(cands.dtype, np.integer):  # a swapped call once tuned tau_c on ids as scores
        raise TypeError(f"candidate ids must be integers, got {cands.dtype} (scores and ids swapped?)")
    grid = list(grid) if grid is not None else [round(x, 2) for x in np.arange(0.05, 0.96, 0.05)]
    best, best_key, best_vals = grid[0], (-1.0, -1.0), {}
    gs = [set(g) for g in golds]
    for t in grid:
        pred = [[int(c) for c, s in zip(cr, sr) if s >= t] for cr, sr in zip(cands, scores)]
        sa = M.strict_accuracy(pred, gs)
        f1 = M.prf_micro(pred, gs)[2]
        if (sa, f1) > best_key:
            best, best_key, best_vals = t, (sa, f1), {"strict_acc": sa, "micro_f1": f1}
    return float(best), best_vals
