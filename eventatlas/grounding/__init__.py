"""Hierarchical event grounding (Ou et al. 2023; issue 12): internals of the ``grounding`` method.

Layer: methods (builds on data, models, training and evaluation). One loss per module:
:mod:`.loss_multilabel` (in-batch BCE, every gold a positive), :mod:`.loss_softmax` (the BLINK
in-batch softmax baseline), :mod:`.loss_hierarchy` (the ComplEx parent-child score and its BCE).
"""
