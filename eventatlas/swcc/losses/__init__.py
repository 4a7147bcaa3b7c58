"""SWCC's losses, one a module: :mod:`.infonce` (weighted multi-positive InfoNCE), :mod:`.prototype`
(Sinkhorn-Knopp + swapped prediction, optional entropy term), :mod:`.mlm` (masking one non-special token +
the MLM loss), :mod:`.margin` (the margin ablation)."""
