"""Typed training arguments shared by every trained method (a block of each method's config)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


class TrainingArgs(BaseModel):
    """How a method trains: optimiser, schedule, batching, precision, device, checkpoints.

    ``lr`` is the encoder's learning rate; ``head_lr`` that of every other parameter group
    (classification heads, prototypes, projection MLPs); None = ``lr``. ``encoder_freeze_steps`` /
    ``encoder_warmup_steps`` hold the encoder still while freshly initialised heads first train.
    """

    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(1, ge=0)
    batch_size: int = Field(32, ge=1)
    lr: float = Field(2e-5, gt=0)
    head_lr: Optional[float] = Field(None, gt=0)
    optimizer: Literal["adamw", "adam"] = "adamw"
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0)
    schedule: Literal["constant", "linear", "cosine"] = "linear"
    warmup_steps: int = Field(0, ge=0)
    warmup_max_ratio: Optional[float] = Field(None, ge=0, le=1)  # cap warm-up at this share of all steps
    # the encoder group only (heads train meanwhile): lr 0 for the first encoder_freeze_steps optimizer
    # steps, then a linear ramp over encoder_warmup_steps on top of the schedule (see loop.encoder_lambda)
    encoder_freeze_steps: int = Field(0, ge=0)
    encoder_warmup_steps: int = Field(0, ge=0)
    max_grad_norm: Optional[float] = Field(1.0, gt=0)
    grad_accum: int = Field(1, ge=1)
    max_steps: Optional[int] = Field(None, ge=1)  # optimizer steps in total
    max_steps_per_epoch: Optional[int] = Field(None, ge=1)  # CPU budgets and smoke tests
    bucket: bool = True  # length-bucketed batches (dynamic padding)
    bucket_chunk: int = Field(50, ge=1)
    drop_last: bool = False
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: Optional[int] = Field(None, ge=1)
    checkpoint_every: Optional[int] = Field(None, ge=1)  # optimizer steps; a checkpoint also ends every epoch
    keep_checkpoints: int = Field(1, ge=1)
    # False: no checkpoints at all (no resume): for many tiny trainings (e.g. one network per query)
    # where writing model + optimiser state would cost more than the training itself
    checkpoints: bool = True
    plot: bool = True  # the learning-curve PNG
    log_every: int = Field(1, ge=1)
    progress: Optional[bool] = None  # None: a bar when attached to a terminal
