"""batch_attention's losses, one a module: :mod:`.masked_contrastive` (the masked semi-supervised
contrastive loss over batch attention scores, and its four-term augmented form), :mod:`.naming` (the
auxiliary naming head's cosine loss)."""
