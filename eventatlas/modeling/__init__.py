"""Models shared by every method: mention inputs (:mod:`.inputs`), the trainable mention encoder
(:mod:`.mention_encoder`), saved models (:mod:`.saved`), the token-id cache (:mod:`.tokens`), embedding
(:mod:`.encode`) and device/precision choice (:mod:`.device`).

Nothing is re-exported here: importing :mod:`.device` (the CLI, the scale-out planner) must not import torch,
so each caller imports the submodule it needs."""
