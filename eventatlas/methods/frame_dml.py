"""``frame_dml``: supervised semantic frame induction with deep metric learning (Yamada et al. 2023).

Protocol (:func:`eventatlas.framedml.protocol.cross_validate`; dataset defaults in
``datasets/registry.yaml``, ``protocol.frame_dml``; every knob a parameter): the FrameNet mentions whose lexical unit is a verb (``lu_pos``) are split by *verb* into
``n_sets`` sets (:mod:`eventatlas.data.verbsplit`); for each fold i of ``folds``: test = set i,
dev = set i+1, train = the rest (optionally capped at ``train_cap_per_lu`` instances per LU;
``max_dev`` / ``max_test`` subsample dev / test, seeded).

Models (``losses``): ``vanilla`` (the encoder untouched) and the encoder fine-tuned on the training
frames by one loss (:mod:`eventatlas.framedml`): contrastive, triplet, softmax, ArcFace, AdaCos, on
the shared training core. Dev decides everything: for every trained margin (``margins[loss]``) and
every α of ``alphas``, dev is clustered one-step (cut at dev's gold frame count) and two-step
(pseudo-LU threshold giving dev's verb–frame pair count, pair-fraction cut); α is chosen per
clustering by dev B-cubed F, the margin by the best dev one-step B-cubed F. With ``select_epoch`` the
same dev score is taken after every epoch and the best epoch's weights are kept (``epochs_selected``). Test is then clustered
once with the chosen settings and the heights / thresholds transferred from dev
(:mod:`eventatlas.cluster.frames`), for ``word`` (α = 0), ``mask`` (α = 1) and ``w+m`` (chosen α).

Metric rows: task ``induction`` (B-cubed P/R/F, purity / inverse purity / F, n_clusters, n_frames;
``clustering`` = ``one_step`` | ``two_step``) and ``retrieval`` (``recall_all`` / ``recall_same`` /
``recall_diff``, :func:`eventatlas.evaluation.frames.ranking_recall`), split ``dev`` (the selected
setting) and ``test``, setting ``fold i`` (plus the caps), variant = the loss, representation =
``word`` | ``mask`` | ``w+m``; with several folds, also the mean over folds (setting ``mean of N
folds``); task ``training`` rows hold seconds per epoch, the chosen margin and α. Artifacts: the
dataset table (verbs, LUs, frames, instances per set), the dev selection grid per fold, and a
2-D t-SNE projection of test instances of the top-10 frames, vanilla vs the best fine-tuned model.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from ..framedml.protocol import DEFAULT_MARGINS, cross_validate
from .base import MethodResult
from .context import MethodContext
from .spec import MethodConfig, training_field

NAME = "frame_dml"
Loss = Literal["vanilla", "contrastive", "triplet", "softmax", "arcface", "adacos"]


# The paper's fine-tuning: AdamW lr 1e-5, batch 32, 5 epochs, gradient clipping 1.0, constant rate;
# classification heads (softmax / ArcFace / AdaCos class weights) in their own group at head_lr (randomly
# initialised, so faster than the encoder); no checkpoints: one short training per (fold, loss, margin),
# resume reruns it. Pairs and triplets come from the batch: at least 2 a batch.
TRAIN_DEFAULTS = {"epochs": 5, "batch_size": 32, "lr": 1e-5, "head_lr": 1e-3, "schedule": "constant",
                  "max_grad_norm": 1.0, "checkpoints": False}
FrameDMLTraining, _TRAIN = training_field(TRAIN_DEFAULTS, {"batch_size": 2})


class FrameDMLConfig(MethodConfig):
    lu_pos: str = "v"
    n_sets: int = Field(3, ge=2)
    split_seed: int = 0
    folds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    losses: list[Loss] = Field(default_factory=lambda: ["vanilla", "contrastive", "triplet", "softmax", "arcface",
                                                        "adacos"])
    margins: dict[str, list[float]] = Field(default_factory=lambda: {k: list(v) for k, v in DEFAULT_MARGINS.items()})
    alphas: list[float] = Field(default_factory=lambda: [round(0.1 * i, 1) for i in range(11)])
    arcface_scale: float = Field(64.0, gt=0)
    p_positive: float = Field(0.5, gt=0, lt=1, description="contrastive: chance that an anchor's partner is a positive")
    train_cap_per_lu: Optional[int] = Field(None, ge=1, description="training instances per LU (training-size study)")
    max_dev: Optional[int] = Field(None, ge=10, description="seeded subsample of dev instances; None: the whole dev set")
    max_test: Optional[int] = Field(None, ge=10, description="seeded subsample of test instances; None (default): "
                                                            "the whole test fold")
    train_representation: Literal["trigger", "mask"] = "trigger"
    select_epoch: bool = Field(False, description="score dev (one-step B-cubed F, best alpha) after every epoch and keep "
                                                  "the best epoch's weights (the dev-chosen epoch, recorded as epochs_selected)")
    ranking: bool = True
    projection: bool = True
    projection_frames: int = Field(10, ge=2)
    projection_max_points: int = Field(2000, ge=50)
    model_id: Optional[str] = None
    # a saved frame_dml model (run:<id>): drop every instance of a verb that model's training or dev set held
    # (its fold of its own dataset's verb split), so a cross-dataset score counts only verbs it never saw
    exclude_verbs_of: Optional[str] = None
    max_length: int = Field(128, ge=8)
    eval_batch_size: int = Field(64, ge=1)
    train: FrameDMLTraining = _TRAIN


def run(ctx: MethodContext) -> MethodResult:
    """Train and evaluate on one FrameNet dataset (see the module docstring)."""
    cfg = ctx.config
    bad = [f for f in cfg.folds if not 0 <= f < cfg.n_sets]
    if bad:
        raise ValueError(f"folds {bad} outside [0, {cfg.n_sets})")
    result = ctx.result()
    cross_validate(ctx, result)
    return result


def apply(model, ctx: MethodContext) -> MethodResult:
    """Apply a saved frame_dml model (:class:`eventatlas.modeling.saved.SavedModel`) to the context's FrameNet
    dataset with this method's own protocol, without training: the dataset's verbs are split into sets as in
    training, and for each fold of ``folds`` dev decides alpha and the cuts and test is clustered one-step and
    two-step, the saved encoder taking the frozen one's place (rows: variant = the loss it was trained with).
    The frozen encoder on the same data is ``eventatlas train frame_dml DATASET`` with ``losses: [vanilla]``
    (and the same ``exclude_verbs_of``)."""
    loss = (model.card.inference.get(model.selected or model.card.encoder) or {}).get("loss") or "saved"
    # nothing trains here: the training-only keys go, so the rows' setting is the vanilla baseline's
    ctx.config = ctx.config.model_copy(update={"model_id": model.ref, "losses": ["vanilla"], "save_model": False,
                                               "select_epoch": False, "train_cap_per_lu": None})
    result = ctx.result()
    cross_validate(ctx, result)
    for r in result.metrics:
        if r.get("variant") == "vanilla":
            r["variant"] = loss
    return result
