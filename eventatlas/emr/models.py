"""EMR models: the ad-hoc ranker and the per-query Siamese network.

* Ad-hoc: a mention is its frozen ``window4`` vector (last 4 layers over ±2 words, from
  :mod:`eventatlas.modeling.encode`); a query's score for a candidate is the mean cosine over its k shots,
  which :func:`eventatlas.evaluation.retrieval.rank` computes exactly as one search with the mean of
  the unit shot vectors (:func:`adhoc_query`).
* Siamese (trained per query, from that query alone): three dense layers (``hidden`` units, ReLU
  between them) on the frozen representation, shared by both branches; S = cosine of the two
  outputs; loss :func:`eventatlas.emr.losses.siamese.siamese_loss`. Same-class pairs = the pairs of the k
  shots (up to ``max_positive_pairs``); not-same-class pairs = a shot with a mention outside the
  query (the corpus: unlabelled, as a user has it), ``negatives`` fresh ones per epoch.

Speed: the representations are computed once; the networks of many queries are trained at once as
one stack of weight tensors (:class:`QueryNetworks`, batched matrix products) by the shared training
core (:class:`eventatlas.training.Trainer`, checkpoints and plots off). Adam is element-wise and each
network's loss only reaches its own weights, so training G stacked networks on the sum of their mean
losses is exactly training each alone.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import torch

from ..training.callbacks import Callback
from .losses.siamese import siamese_loss


def adhoc_query(shots: np.ndarray) -> np.ndarray:
    """(d,) search vector of a k-shot query: the mean of its unit shot vectors (score = mean cosine)."""
    from ..evaluation.retrieval import query_vectors

    return query_vectors([np.asarray(shots, dtype=np.float32)])[0]


@dataclass
class SiameseParams:
    epochs: int = 50
    batch_size: int = 50
    lr: float = 5e-5
    negatives: int = 150  # not-same-class pairs per query and epoch (sampled afresh)
    max_positive_pairs: int = 200
    hidden: int = 768
    layers: int = 3
    query_batch: int = 16  # networks trained at once

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class QueryNetworks(torch.nn.Module):
    """G independent MLPs ``d_in -> hidden (x layers)``, weights stacked as (G, fan_in, fan_out).

    ``residual``: the last layer maps back to ``d_in``, is initialised to zero and its output is added
    to the input, so an untrained network is the identity (ranking = the ad-hoc ranking) and training
    only moves away from it as far as the loss asks."""

    def __init__(self, n_networks: int, d_in: int, hidden: int = 768, layers: int = 3,
                 generator: torch.Generator | None = None, residual: bool = False):
        super().__init__()
        self.residual = bool(residual)
        dims = [d_in] + [hidden] * (layers - 1) + [d_in if residual else hidden]
        self.weights = torch.nn.ParameterList()
        self.biases = torch.nn.ParameterList()
        for a, b in zip(dims[:-1], dims[1:]):
            bound = 1.0 / math.sqrt(a)  # nn.Linear's default initialisation, per network
            self.weights.append(torch.nn.Parameter(torch.empty(n_networks, a, b).uniform_(-bound, bound, generator=generator)))
            self.biases.append(torch.nn.Parameter(torch.empty(n_networks, 1, b).uniform_(-bound, bound, generator=generator)))
        if self.residual:
            with torch.no_grad():
                self.weights[-1].zero_()
                self.biases[-1].zero_()

    @property
    def n_networks(self) -> int:
        return self.weights[0].shape[0]

    def replicate(self, n: int) -> "QueryNetworks":
        """``n`` independent copies of this one-network stack (per-query adaptation of a meta model)."""
        if self.n_networks != 1:
            raise ValueError(f"replicate() takes a one-network stack, this one has {self.n_networks}")
        dims = [self.weights[0].shape[1]] + [w.shape[2] for w in self.weights]
        out = QueryNetworks(n, dims[0], dims[1], len(self.weights), residual=self.residual)
        with torch.no_grad():
            for dst, src in zip([*out.weights, *out.biases], [*self.weights, *self.biases]):
                dst.copy_(src.detach().expand_as(dst))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (G, B, d_in), one batch per network, or (B, d_in) given to every network -> (G, B, hidden)."""
        h = x
        last = len(self.weights) - 1
        for i, (W, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.matmul(h, W) + b
            if i < last:
                h = torch.relu(h)
        return h + x if self.residual else h


def positive_pairs(k: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """(P, 2) index pairs i < j of k shots, a seeded subset of ``cap`` when there are more."""
    pairs = np.asarray(list(itertools.combinations(range(k), 2)), dtype=np.int64).reshape(-1, 2)
    if len(pairs) > cap:
        pairs = pairs[np.sort(rng.choice(len(pairs), size=cap, replace=False))]
    return pairs


class _PairTask:
    """The Siamese pairs of G stacked query networks as a :class:`eventatlas.training.TrainTask`.

    Example ``i`` of an epoch is pair column ``i``: the first ``n_pos`` columns are the fixed
    same-class shot pairs, the others not-same-class pairs (a shot with an outside mention) drawn
    afresh for every network each time the column is batched, from the loop's checkpointed RNG."""

    def __init__(self, shots: torch.Tensor, outside: torch.Tensor, pos: np.ndarray, n_neg: int):
        self.S, self.O, self.pos, self.n_neg = shots, outside, pos, n_neg
        self.G, self.k = shots.shape[0], shots.shape[1]
        self.g_idx = torch.arange(self.G)[:, None]

    def lengths(self) -> list[int]:
        return [1] * (len(self.pos) + self.n_neg)

    def make_batch(self, idx: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        is_pos = idx < len(self.pos)
        n = len(idx)
        left = np.where(is_pos, self.pos[np.minimum(idx, len(self.pos) - 1), 0], 0)[None, :].repeat(self.G, 0)
        right = np.where(is_pos, self.pos[np.minimum(idx, len(self.pos) - 1), 1], 0)[None, :].repeat(self.G, 0)
        n_neg = int((~is_pos).sum())
        left[:, ~is_pos] = rng.integers(self.k, size=(self.G, n_neg))
        out_idx = np.zeros((self.G, n), np.int64)
        out_idx[:, ~is_pos] = rng.integers(len(self.O), size=(self.G, n_neg))
        L = self.S[self.g_idx, torch.as_tensor(left)]
        y = torch.as_tensor(is_pos.astype(np.float32))
        R = torch.where(y[None, :, None].bool(), self.S[self.g_idx, torch.as_tensor(right)],
                        self.O[torch.as_tensor(out_idx)])
        return {"pairs": torch.cat([L, R], dim=1), "y": y}

    def loss(self, net: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        n = batch["y"].shape[0]
        out = net(batch["pairs"])
        S = torch.nn.functional.cosine_similarity(out[:, :n], out[:, n:], dim=-1)
        loss = siamese_loss(S, batch["y"].expand_as(S)).sum()  # sum of per-network means: independent networks
        return loss, {"mean_network_loss": float(loss.detach()) / self.G}


class _EpochProgress(Callback):
    """Reports each finished epoch to ``fn(done, total)`` (the search command's progress bar)."""

    def __init__(self, fn: Callable[[int, int], None], total: int):
        self.fn, self.total = fn, total

    def on_epoch_end(self, trainer, epoch: int) -> None:
        self.fn(epoch + 1, self.total)


class _EpochScores(Callback):
    """Scores the corpus with the block's networks after every epoch (dev learning curves)."""

    def __init__(self, fn, block: np.ndarray, corpus: np.ndarray, first: int, device: str):
        self.fn, self.block, self.corpus, self.first, self.device = fn, block, corpus, first, device

    def on_epoch_end(self, trainer, epoch: int) -> None:
        net = trainer.unwrapped
        was = net.training
        net.eval()
        self.fn(epoch + 1, self.first, siamese_scores(net, self.block, self.corpus, device=self.device))
        net.train(was)


def train_query_networks(shots: np.ndarray, outside: np.ndarray, params: SiameseParams, *, seed: int = 0,
                         device: str = "cpu", on_epoch: Callable[[int, int], None] | None = None,
                         init: QueryNetworks | None = None, callbacks: tuple[Callback, ...] = ()
                         ) -> tuple[QueryNetworks, list[float]]:
    """Train one Siamese network per query: ``shots`` (G, k, d) (k >= 2), ``outside`` (N, d) the
    unlabelled mentions negatives are drawn from. Returns the networks and the mean loss per epoch;
    ``on_epoch(done, total)`` after each epoch (a progress bar). ``init``: a one-network
    :class:`QueryNetworks` (a meta-trained model) every query network starts from, instead of a
    random initialisation (per-query adaptation); ``callbacks`` go to the trainer (e.g. a dev
    evaluation per epoch). The loop is the shared training core
    (Adam, constant lr, no clipping, fp32), without checkpoints or plots: a block of query networks
    trains in seconds and is thrown away after scoring."""
    import tempfile

    from ..training import Trainer, TrainingArgs

    G, k, d = shots.shape
    if k < 2:
        raise ValueError(f"the Siamese model needs at least 2 examples per query (same-class pairs), got {k}")
    if len(outside) == 0:
        raise ValueError("no outside mentions to draw not-same-class pairs from")
    rng = np.random.default_rng([seed, 11])
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    net = QueryNetworks(G, d, params.hidden, params.layers, generator=gen) if init is None else init.replicate(G)
    task = _PairTask(torch.as_tensor(np.ascontiguousarray(shots, dtype=np.float32)),
                     torch.as_tensor(np.ascontiguousarray(outside, dtype=np.float32)),
                     positive_pairs(k, params.max_positive_pairs, rng), int(params.negatives))
    args = TrainingArgs(epochs=params.epochs, batch_size=params.batch_size, lr=params.lr, optimizer="adam",
                        schedule="constant", max_grad_norm=None, precision="fp32", device=device, bucket=False,
                        checkpoints=False, plot=False, progress=False)
    with tempfile.TemporaryDirectory(prefix="emr-siamese-") as tmp:
        cbs = [*callbacks, *([_EpochProgress(on_epoch, params.epochs)] if on_epoch else [])]
        res = Trainer(net, task, args, tmp, seed=seed, phase="siamese", callbacks=cbs).fit()
    net.eval()
    return net, [h["loss"] / G for h in res.history]


@torch.no_grad()
def siamese_scores(net: QueryNetworks, shots: np.ndarray, corpus: np.ndarray, *, device: str = "cpu",
                   chunk: int = 4096) -> np.ndarray:
    """(G, N) mean cosine of each query network's shot outputs with its outputs of every corpus item."""
    S_t = torch.as_tensor(np.ascontiguousarray(shots, dtype=np.float32), device=device)
    q = torch.nn.functional.normalize(net(S_t), dim=-1).mean(dim=1)  # (G, h): mean of unit shot outputs
    out = np.empty((shots.shape[0], len(corpus)), dtype=np.float32)
    for c0 in range(0, len(corpus), chunk):
        X = torch.as_tensor(np.ascontiguousarray(corpus[c0:c0 + chunk], dtype=np.float32), device=device)
        Z = torch.nn.functional.normalize(net(X), dim=-1)  # (G, B, h)
        out[:, c0:c0 + len(X)] = torch.einsum("gh,gbh->gb", q, Z).cpu().numpy()
    return out


def siamese_rank_scores(shots: list[np.ndarray], corpus: np.ndarray, params: SiameseParams, *, seed: int = 0,
                        device: str = "cpu", progress: Callable[[int, int], None] | None = None,
                        init: QueryNetworks | None = None,
                        epoch_scores: Callable[[int, int, np.ndarray], None] | None = None,
                        ) -> tuple[np.ndarray, dict[str, Any]]:
    """Scores (Q, N) of per-query Siamese models for queries of equal k (``shots[q]``: (k, d)),
    trained ``query_batch`` at a time with the corpus as their unlabelled outside mentions.
    ``init``: start every network from this meta-trained one (adaptation). ``epoch_scores(epoch,
    first_query, scores)``: called after every epoch with the block's (G, N) scores (learning
    curves of retrieval quality; costs one scoring pass per epoch)."""
    Q = len(shots)
    scores = np.empty((Q, len(corpus)), dtype=np.float32)
    losses, t0 = [], time.perf_counter()
    for g0 in range(0, Q, params.query_batch):
        block = np.stack(shots[g0:g0 + params.query_batch])
        cbs = (_EpochScores(epoch_scores, block, corpus, g0, device),) if epoch_scores else ()
        net, hist = train_query_networks(block, corpus, params, seed=seed * 100_003 + g0, device=device, init=init,
                                         callbacks=cbs)
        scores[g0:g0 + len(block)] = siamese_scores(net, block, corpus, device=device)
        losses.append(hist)
        if progress:
            progress(min(g0 + len(block), Q), Q)
    first = float(np.mean([h[0] for h in losses])) if losses and losses[0] else float("nan")
    last = float(np.mean([h[-1] for h in losses])) if losses and losses[0] else float("nan")
    return scores, {"seconds": round(time.perf_counter() - t0, 2), "loss_first_epoch": first,
                    "loss_last_epoch": last, "queries": Q}
