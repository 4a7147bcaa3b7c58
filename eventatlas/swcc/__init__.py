"""SWCC (Gao et al. 2022): event representations from weakly supervised contrastive learning (document
co-occurrence as weighted extra positives) and SwAV-style prototype clustering, with an MLM auxiliary.

Method internals of :mod:`eventatlas.methods.swcc` (layer: methods; builds on the data, models,
training and evaluation layers). One loss per module: :mod:`.losses.infonce` (weighted multi-positive
InfoNCE), :mod:`.losses.prototype` (Sinkhorn-Knopp + swapped prediction, optional entropy term),
:mod:`.losses.mlm` (masking one non-special token + the MLM loss), :mod:`.losses.margin` (the margin
ablation); :mod:`.data` (training events and co-occurrence partners), :mod:`.model` (encoder +
prototypes + MLM head), :mod:`.task` (the :class:`eventatlas.training.TrainTask`).
"""
