"""grounding's losses, one a module: :mod:`.multilabel` (in-batch BCE, every gold a positive),
:mod:`.multisoftmax` (multi-positive softmax), :mod:`.softmax` (BLINK's in-batch softmax), :mod:`.hierarchy`
(the ComplEx parent-child score and its BCE)."""
