"""Few-shot event mention retrieval: k-shot m-way MAP of the ad-hoc and per-query Siamese models.

For each of ``repetitions`` seeded episodes (:func:`eventatlas.emr.episodes.sample_episode`, the
dataset's ``retrieval`` protocol in ``datasets/registry.yaml`` filling what the user left unset) and
each k in ``ks``, every model ranks the same test corpus for the same queries:

* ``adhoc``: mean cosine of the frozen ``representation`` (default ``window4``) over the k shots;
* ``siamese``: a network trained per query from that query alone
  (:func:`eventatlas.emr.models.siamese_rank_scores`);
* ``meta`` / ``meta_adapt`` (:mod:`eventatlas.emr.meta`): the same network trained once on other
  types — in this run (``meta`` block: the training types are a split file's ``train`` list, e.g.
  the MAVEN few-shot split, or the platform's seen types, :func:`eventatlas.data.select_labelled`)
  or loaded from an earlier run (``meta_run``, e.g. trained on MAVEN, evaluated here on
  OntoEvent-MAVEN) — ranking by mean cosine in its output space, or adapted per query from its
  weights. With a meta model in ``models``, the m types of every episode are restricted to types the
  network never saw (``meta.eval_split`` narrows them further), and every model is evaluated on
  those same episodes. A network trained here is saved in the run directory (``meta.pt``,
  ``meta.json``; artifact ``model/emr_meta``): ``eventatlas search --model meta:<run id>``.

* ``contrastive``: the encoder itself fine-tuned for retrieval on the training types (supervised
  contrastive loss over mentions of the same type, in-batch negatives; :mod:`eventatlas.emr.finetune`),
  ranking by mean cosine of its vectors; saved with the run (``search --model run:<run id>``).

With a split file's ``dev_split``, every trained ranker keeps the epoch the dev rule prefers and every
ranker of the run is scored on the development types (rows with split ``dev``; the rule, the mean of MAP
and novel-trigger recall@50 at k = 5, is :mod:`eventatlas.emr.dev`); ``params.dev_choice`` names the
ranker the rule prefers. Every test row also carries ``novel_recall@k``: among the relevant mentions
whose trigger lemma differs from every example's, the share in the top k.

Other rankers: ``representations`` adds the frozen encoder's other representations (``sentence``,
``trigger``, ``mask``, ...) and ``encoders`` other encoders (a fine-tuned encoder saved by another
method: an HF directory or id) as ad-hoc rankers (variant ``adhoc``, representation ``trigger`` or
``window4@<encoder name>``), so the leaderboard shows which representation retrieves best.

Tuning (``tune``): before the test, the Siamese hyper-parameters (lr x negatives per epoch, and the
epoch count read off each training's per-epoch dev scores) are chosen by MAP on a development
episode built from the development mentions only (:func:`eventatlas.emr.episodes.dev_episode`: dev
queries and dev corpus from each type's dev pool, "None" items outside the test corpus); the grid,
the per-epoch dev curves and the choice are recorded (artifact ``emr/siamese_dev_grid``).

The protocol itself (pool, rankers, meta network, tuning, episodes) is :mod:`eventatlas.emr.protocol`;
this module is the method's config and glue.

Metric rows (task ``retrieval``, split ``test``, setting ``k=5 m=10``, variant = the model,
representation = the ranker's representation): MAP, R-precision, P@k and Recall@k averaged over the
queries and then over the repetitions, plus ``map_std`` (sample std of MAP over repetitions); at the
largest k also per-type MAP (setting ``k=10 m=10 type=<type>``). The pool, every episode (items with
roles, queries with their shot mention ids), the per-repetition and per-type scores are artifacts.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

# embed_pool is imported from here by the representation benchmark
from ..emr.protocol import NAME, embed_pool, evaluate_episodes  # noqa: F401
from ..training.args import TrainingArgs
from .base import MethodResult
from .context import MethodContext
from .spec import EncoderConfig, MethodConfig, training_field

Representation = Literal["sentence", "trigger", "mask", "mix", "window4"]
Model = Literal["adhoc", "siamese", "meta", "meta_adapt", "contrastive"]


class SiameseTraining(BaseModel):
    """Per-query Siamese training (the paper's Adam 5e-5, batch 50, 50 epochs). Not a
    ``training.TrainingArgs``: the stacked per-query networks train with the shared ``Trainer`` on fixed
    arguments (Adam, constant lr, no clipping, fp32, no bucketing, checkpoints or plots: a block of query
    networks trains in seconds and is thrown away; see :func:`eventatlas.emr.models.train_query_networks`)."""

    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(50, ge=1)
    batch_size: int = Field(50, ge=1)
    lr: float = Field(5e-5, gt=0)
    negatives: int = Field(150, ge=1, description="not-same-class pairs per query and epoch")
    max_positive_pairs: int = Field(200, ge=1)
    hidden: int = Field(768, ge=1)
    layers: int = Field(3, ge=1)
    query_batch: int = Field(16, ge=1, description="per-query networks trained at once")


class SiameseTuning(BaseModel):
    """The Siamese dev grid: every (lr, negatives) pair trains for max(epochs) epochs on the dev
    queries; the dev MAP after each epoch in ``epochs`` is read off the same training."""

    model_config = ConfigDict(extra="forbid")

    lr: list[float] = Field(default_factory=lambda: [5e-5, 5e-4])
    negatives: list[int] = Field(default_factory=lambda: [150, 1000])
    epochs: list[int] = Field(default_factory=lambda: [5, 10, 25, 50])
    k: int = Field(5, ge=2, description="the dev queries' shot count")
    queries_per_type: int = Field(1, ge=1)
    n_none: int = Field(500, ge=0, description="'None' items of the dev corpus (outside the test corpus)")


class MetaTraining(TrainingArgs):
    """The meta-trained network (:mod:`eventatlas.emr.meta`) on the shared training core."""

    epochs: int = Field(10, ge=1)
    batch_size: int = Field(256, ge=1)
    lr: float = Field(1e-4, gt=0)
    optimizer: Literal["adamw", "adam"] = "adam"
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    max_grad_norm: Optional[float] = None
    bucket: bool = False
    precision: Literal["auto", "fp32", "bf16"] = "fp32"
    checkpoints: bool = False
    pairs: int = Field(20_000, ge=1, description="training pairs per epoch")
    pos_fraction: float = Field(0.5, gt=0, lt=1)
    hidden: int = Field(768, ge=1)
    layers: int = Field(3, ge=1)
    residual: bool = Field(False, description="output = input + MLP(input), last layer zero-initialised: starts as "
                           "the ad-hoc ranking")
    split_file: Optional[Path] = Field(None, description="JSON {split: [types]}; its train_split types are trained "
                                       "on (relative paths: under the shared data root)")
    train_split: str = "train"
    eval_split: Optional[str] = Field(None, description="restrict the evaluated types to this split of split_file")
    dev_split: Optional[str] = Field(None, description="choose the epoch by MAP on an episode of this split's "
                                     "types (neither trained on nor evaluated; early stopping, best weights kept)")
    patience: int = Field(3, ge=1)
    k_seen: int = Field(30, ge=1, description="without split_file: the k_seen most frequent types are trained on")
    unseen_only: bool = Field(True, description="with meta_run: evaluate only types the network did not see")
    adapt_epochs: int = Field(10, ge=1)
    adapt_lr: float = Field(5e-5, gt=0)


# The tuned encoder's training (model contrastive): AdamW with warm-up and clipping, fp32 declared (the result
# must not depend on which CPU ran it), no checkpoints (a few minutes; resume reruns it). Each step is one
# batch of P types x K mentions, so the core's batch size is 1 (one index = one drawn batch).
CONTRASTIVE_TRAIN = {"epochs": 5, "batch_size": 1, "lr": 2e-5, "schedule": "linear", "warmup_steps": 20,
                     "max_grad_norm": 1.0, "precision": "fp32", "bucket": False, "checkpoints": False}
ContrastiveTrainArgs, _CONTRASTIVE_TRAIN = training_field(CONTRASTIVE_TRAIN)


class ContrastiveTuning(BaseModel):
    """The encoder fine-tuned for retrieval on the training types (:mod:`eventatlas.emr.finetune`): supervised
    contrastive loss, in-batch negatives, epoch chosen by the dev rule when the split has dev types."""

    model_config = ConfigDict(extra="forbid")

    train: ContrastiveTrainArgs = _CONTRASTIVE_TRAIN
    steps_per_epoch: int = Field(60, ge=1)
    types_per_batch: int = Field(16, ge=2, description="P: training types per batch")
    per_type: int = Field(4, ge=2, description="K: mentions per type per batch (the positives)")
    temperature: float = Field(0.1, gt=0)
    diverse_positives: bool = Field(False, description="draw a type's K mentions one per trigger lemma (other "
                                    "words for the event as positives) instead of at random")
    patience: int = Field(3, ge=1, description="epochs without a better dev score before stopping")


class EMRConfig(MethodConfig):
    min_mentions: Optional[int] = Field(None, ge=2, description="types with at least this many mentions are the m types (default 100)")
    n_corpus: Optional[int] = Field(None, ge=1, description="test-corpus mentions per type (default 50)")
    n_query: Optional[int] = Field(None, ge=1, description="query-pool mentions per type (default 10)")
    n_dev: Optional[int] = Field(None, ge=0, description="development mentions per type, at most (default 40)")
    n_none: Optional[int] = Field(None, ge=0, description="'None' corpus items (default 2000)")
    max_types: Optional[int] = Field(None, ge=2, description="cap m by a seeded choice among the eligible types")
    queries_per_type: int = Field(10, ge=1)
    ks: list[int] = Field(default_factory=lambda: [2, 3, 5, 10])
    repetitions: int = Field(3, ge=1)
    models: list[Model] = Field(default_factory=lambda: ["adhoc", "siamese"])
    representation: Representation = "window4"
    representations: list[Representation] = Field(default_factory=list, description="more frozen representations "
                                                  "as ad-hoc rankers")
    encoders: list[str] = Field(default_factory=list, description="more encoders (HF id or a fine-tuned encoder's "
                                "directory) as ad-hoc rankers with `representation`")
    no_event: bool = True  # add content-word candidates of no-event sentences to the None side
    trigger_markers: bool = Field(False, description="embed every mention as '... [ trigger ] ...' (rows say "
                                  "representation trigger+markers)")
    contrastive: ContrastiveTuning = Field(default_factory=ContrastiveTuning)
    model_id: Optional[str] = None
    cache_dir: Optional[Path] = None
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    siamese: SiameseTraining = Field(default_factory=SiameseTraining)
    tune: Optional[SiameseTuning] = Field(None, description="choose the Siamese lr/negatives/epochs on dev mentions")
    meta: MetaTraining = Field(default_factory=MetaTraining)
    meta_run: Optional[str] = Field(None, description="a run id (or run directory) holding a meta-trained network: "
                                    "evaluate it instead of training one here")


def run(ctx: MethodContext) -> MethodResult:
    """Evaluate the EMR models on one ingested labelled dataset; see the module docstring. ``resume``
    has nothing to continue (no checkpoints: a run is minutes of per-query training) and reruns."""
    result = ctx.result()
    evaluate_episodes(ctx, result)
    return result


def apply(model, ctx: MethodContext) -> MethodResult:
    """Evaluate a saved EMR meta network on the context's dataset: its ``meta`` and ``meta_adapt``
    rankers beside the ad-hoc one, on types the network never saw (its own representation)."""
    cfg = ctx.config
    if "meta" not in model.card.heads:  # a tuned encoder (model contrastive): ranked like the frozen one, beside it
        spec = model.card.inference.get("contrastive") or {}
        ctx.config = cfg.model_copy(update={"encoders": [*cfg.encoders, str(model.encoder_path)], "models": ["adhoc"],
                                            "representation": model.card.representation or cfg.representation,
                                            "trigger_markers": bool(spec.get("trigger_markers", False))})
        return run(ctx)
    info = model.head("meta")[1]
    models = list(dict.fromkeys([*cfg.models, "meta"]))
    ctx.config = cfg.model_copy(update={"meta_run": model.ref, "models": models,
                                        "representation": info.get("representation", cfg.representation)})
    return run(ctx)
