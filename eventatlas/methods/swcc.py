"""``swcc``: event representations by weakly supervised contrastive learning and prototype clustering
(SWCC, Gao et al. ACL 2022), trained on an ``event_cooccurrence`` dataset (the ``event_tuples`` reader)
and evaluated on every event-similarity benchmark at hand (hard similarity, transitive, MCNC).

Per step (internals in :mod:`eventatlas.swcc`, the protocol in :mod:`eventatlas.swcc.protocol`): three dropout views q, k1, k2 of each event, one
co-occurring event p drawn by co-occurrence count with its weight (``weighting``: min-max as in the
paper, log or uniform), and the event with one non-special token masked;
``L = L_cl + beta * L_proto + gamma * L_mlm``. ``variant`` selects the paper's ablations
(``no_prototypes``, ``no_weak``, ``no_mlm``, ``infonce`` = dropout views only, ``margin``);
it is the ``variant`` column of the metric rows.

Training goes through the shared :class:`eventatlas.training.Trainer` (bucketed batches of cached token
ids, dynamic padding, checkpoints, step logs, learning curve); after every epoch the encoder is scored on
the evaluation datasets (``train_evals``: ``<dataset>/<metric>``), and at the end the metric rows come
from :func:`eventatlas.evaluation.pairs.evaluate_encoder_pairs` (task ``similarity``, setting = the
template). The documents of every evaluated dataset that has a ``documents`` table (the ``nyt_cloze_dev``
dev set: held-out NYT documents) are kept out of the training data (params ``events.excluded_documents``). Artifacts: ``plot/prototypes`` (2-D PCA of the training events coloured by their prototype),
``swcc/prototypes`` (the assignment table) and (unless ``save_model`` is false) the saved model: the
fine-tuned encoder, loadable as ``run:<run_id>``, and the prototypes.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from ..swcc.protocol import train_and_score
from .base import MethodResult
from .context import MethodContext
from .spec import MethodConfig, training_field

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
    # others are test sets, never used to choose. nyt_cloze_dev: narrative cloze on held-out NYT documents
    # (eventatlas.readers.nyt_cloze_dev); an evaluated dataset's documents are never trained on
    dev_datasets: list[str] = Field(default_factory=lambda: ["nyt_cloze_dev"])
    eval_datasets: Optional[list[str]] = None  # names or directories; None: every ingested event_pairs dataset
    eval_every_epoch: bool = True
    eval_batch_size: int = Field(128, ge=1)
    plot_events: int = Field(2000, ge=10)
    train: SWCCTraining = _TRAIN


def run(ctx: MethodContext) -> MethodResult:
    """Train SWCC on one event-co-occurrence dataset and score it on the benchmarks (module doc).

    ``train.threads`` holds for the scoring before and after training too, not only inside the training
    loop: torch's reduction order, hence the last bits of every cosine and so a hard-similarity tie or
    rank, follows the intra-op thread count; the count is part of the configuration."""
    import torch

    from ..modeling.device import set_threads

    result = ctx.result()
    before = torch.get_num_threads()
    set_threads(ctx.config.train.threads)
    try:
        train_and_score(ctx, result)
    finally:
        torch.set_num_threads(before)
    return result
