"""Representations of frame_dml: ``v_word`` (last-layer state of the target, mean of its word pieces),
``v_mask`` (the target replaced by one mask token) and ``v_w+m = (1 − α)·v_word + α·v_mask``.

``v_word`` and ``v_mask`` are L2-normalised before they are mixed and the mix is normalised again,
so α weighs two unit vectors and every clustering input is a unit vector (cosine = dot product).
Inputs come from the shared token cache; the frozen side of the shared encoder embeds them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..modeling.inputs import ModelInput

NAMES = {"word": "trigger", "mask": "mask"}  # representation name -> MentionEncoder pooling


def unit(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    n = np.linalg.norm(X, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return X / n


def mix(word: np.ndarray, mask: np.ndarray, alpha: float) -> np.ndarray:
    """Unit ``v_w+m`` from unit ``v_word`` / ``v_mask`` (α = 0: v_word, α = 1: v_mask)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    return unit((1.0 - alpha) * unit(word) + alpha * unit(mask))


def embed(module, items: dict[str, Sequence[ModelInput]], index: np.ndarray, *, device: str,
          precision: str = "auto", batch_size: int = 64) -> dict[str, np.ndarray]:
    """Unit ``word`` and ``mask`` vectors of the mentions ``index`` (rows of the prepared ``items``)."""
    from ..modeling.encode import Encoder

    enc = Encoder(module=module, device=device, precision=precision, batch_size=batch_size, progress=False)
    return {name: unit(enc.run([items[name][int(i)] for i in index], NAMES[name])) for name in ("word", "mask")}
