"""Hierarchical event grounding (Ou et al. 2023): internals of the ``grounding`` method.

Layer: methods (builds on data, models, training and evaluation). One loss per module:
:mod:`.losses.multilabel` (in-batch BCE, every gold a positive), :mod:`.losses.softmax` (the BLINK
in-batch softmax baseline), :mod:`.losses.hierarchy` (the ComplEx parent-child score and its BCE).
"""
