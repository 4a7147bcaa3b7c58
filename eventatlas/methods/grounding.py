"""``grounding``: hierarchical event grounding (Ou et al. 2023) for ``train-all``.

On a grounding dataset (the wiki builder's ``wikigrounding`` or the FrameNet benchmark
``framenet_grounding``): train the bi-encoder variants (internals in :mod:`eventatlas.grounding`) on the
training split and score each on dev and test (zero-shot: no dev/test event is seen in training):

* ``untuned``   the encoder before training (same inputs, dot score);
* ``baseline``  BLINK in-batch softmax, one gold (the atomic event);
* ``multilabel`` in-batch BCE, every gold a positive;
* ``hp``        multilabel after HP: the encoder (+ ComplEx head) pre-trained on the hierarchy loss;
* ``hjl``       multilabel + the hierarchy loss jointly every step;
* ``hp_hjl``    both.

Metrics (task ``grounding``, variant = the above): Recall@k (all golds in the top k), Recall@min,
strict accuracy of the top-|gold|, the atomic-only upper bound; hierarchy discovery Recall@k from each
variant's top-4 (``discovery_recall@k``). ``best_on_dev`` (the default model of ``eventatlas ground``) is the
trained variant with the best dev Recall@min, or, with ``cross_encoder``, the best dev Recall@cross_k: the
cross-encoder is trained over that variant's top-8 (gold-forced), which holds every gold only as often as
Recall@8 says, and scored with the dev-tuned threshold tau_c (variant
``cross:<bi-encoder variant>``: strict accuracy, micro/macro P/R/F1). Each variant's model and candidate
vectors are kept for ``eventatlas ground``.

The protocol itself is :mod:`eventatlas.grounding.protocol`; this module is the method's config and glue.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

# _vectors is imported from here by scripts/grounding_cross_prior.py
from ..grounding.protocol import _vectors, ground_variants  # noqa: F401
from .base import MethodResult
from .context import MethodContext
from .spec import MethodConfig, training_field

NAME = "grounding"
Variant = Literal["untuned", "baseline", "multilabel", "hp", "hjl", "hp_hjl"]


# Bi-encoder training (paper: lr 2e-5 ... here 1 epoch by default for CPU budgets); in-batch candidates:
# at least 2 mentions a batch.
TRAIN_DEFAULTS = {"epochs": 1, "batch_size": 32, "lr": 2e-5, "head_lr": 1e-3, "schedule": "linear",
                  "checkpoints": False, "plot": True}
# HP pre-training on the hierarchy loss (a few passes over the training trees)
HP_DEFAULTS = {"epochs": 3, "batch_size": 8, "lr": 2e-5, "head_lr": 1e-3, "schedule": "constant",
               "checkpoints": False, "plot": False}
# the cross-encoder: batch_size = mentions per batch (x cross_k pairs)
CROSS_DEFAULTS = {"epochs": 1, "batch_size": 4, "lr": 2e-5, "head_lr": 1e-3, "checkpoints": False, "plot": True}
GroundingTraining, _TRAIN = training_field(TRAIN_DEFAULTS, {"batch_size": 2, "epochs": 1})
HPTraining, _HP = training_field(HP_DEFAULTS, {"epochs": 1})
CrossTraining, _CROSS = training_field(CROSS_DEFAULTS, {"epochs": 1})


class GroundingConfig(MethodConfig):
    model_id: Optional[str] = None
    max_length: int = Field(128, ge=16)  # mention input (marked mention + both sides) and candidate input
    mention_pool: Literal["sentence", "trigger"] = "sentence"  # mean over the window, or over the marked span
    variants: list[Variant] = ["untuned", "baseline", "multilabel", "hp"]
    max_train_mentions: Optional[int] = Field(3000, ge=2)  # seeded subsample of the training split
    max_eval_mentions: Optional[int] = Field(1000, ge=1)  # per evaluation split
    eval_splits: list[Literal["dev", "test"]] = ["dev", "test"]
    ks: list[int] = [1, 4, 8, 16]
    n_h: int = Field(8, ge=1)  # sampled parents per batch for the hierarchy loss
    hjl_weight: float = Field(1.0, gt=0)
    # the linking loss of the multi-label variants (multilabel, hp, hjl, hp_hjl): the paper's in-batch BCE, or the
    # multi-positive softmax (every gold a positive, ranked against the row's negatives; README diagnosis). A
    # non-default loss is part of the variant's name in the metric rows and run directory (e.g. multilabel+msoftmax)
    multilabel_loss: Literal["bce", "msoftmax"] = "bce"
    # score and negatives (see eventatlas.grounding.biencoder): "cosine" = scale * cos, the BCE with a learned
    # bias; negatives = random pool candidates per batch from outside every evaluation split's events
    score: Literal["dot", "cosine"] = "dot"
    scale: float = Field(20.0, gt=0)
    negatives: int = Field(0, ge=0)
    # pick the training epoch on dev R@min (evaluated after every epoch; the best epoch's weights are kept)
    select_on_dev: bool = False
    patience: int = Field(2, ge=1)
    discovery_k: int = Field(4, ge=1)
    cross_encoder: bool = False
    cross_k: int = Field(8, ge=2)
    cross_max_length: int = Field(160, ge=32)
    cross_mention_length: int = Field(64, ge=16)
    max_cross_train_mentions: Optional[int] = Field(1000, ge=2)
    # probability of hiding a candidate's title in a cross-encoder training pair (see grounding.crossencoder)
    cross_title_mask: float = Field(0.0, ge=0.0, le=1.0)
    eval_batch_size: int = Field(64, ge=1)
    keep_models: bool = True
    train: GroundingTraining = _TRAIN
    hp: HPTraining = _HP
    cross: CrossTraining = _CROSS


def run(ctx: MethodContext) -> MethodResult:
    """Train and score the grounding variants on one grounding dataset (see the module docstring)."""
    result = ctx.result()
    ground_variants(ctx, result)
    return result
