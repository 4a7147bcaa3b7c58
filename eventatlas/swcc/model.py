"""The SWCC model: the shared :class:`eventatlas.modeling.MentionEncoder` (trained), ``M`` prototype
vectors (normalised on each forward, see :mod:`.losses.prototype`) and an MLM head.

The MLM head is the encoder's own when its checkpoint has one (``AutoModelForMaskedLM`` loads it with no
missing head weights; its decoder is tied to the trained encoder's input embeddings as in pre-training);
otherwise (e.g. the sentence-transformers MiniLM, saved without a head) a linear layer from the hidden
size to the vocabulary, trained from scratch. ``model.mlm_source`` says which (recorded).
"""
from __future__ import annotations

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)

HEAD_NAMES = ("cls", "lm_head")  # BERT-style / RoBERTa-style MLM heads in transformers

__all__ = ["SWCCModel", "mlm_head"]


def mlm_head(encoder, *, load_pretrained: bool = True) -> tuple[nn.Module, str]:
    """(head mapping (B, T, hidden) -> (B, T, vocab), source) for ``encoder`` (a MentionEncoder)."""
    vocab = int(encoder.model.get_input_embeddings().weight.shape[0])
    if load_pretrained:
        try:
            from transformers import AutoModelForMaskedLM

            mlm, info = AutoModelForMaskedLM.from_pretrained(encoder.model_path, output_loading_info=True,
                                                             dtype=torch.float32)
            for name in HEAD_NAMES:
                head = getattr(mlm, name, None)
                if head is not None and not any(k.startswith(name + ".") for k in info.get("missing_keys", [])):
                    out = mlm.get_output_embeddings()
                    if out is not None and getattr(mlm.config, "tie_word_embeddings", True):
                        out.weight = encoder.model.get_input_embeddings().weight
                    return head, f"pretrained:{name}"
        except (OSError, ValueError) as e:  # no MLM class for this architecture
            log.info("no MLM head for %s (%s): a linear layer", encoder.model_path, e)
    return nn.Linear(encoder.hidden_size, vocab), "linear"


class SWCCModel(nn.Module):
    def __init__(self, encoder, *, n_prototypes: int = 10, mlm: bool = True, seed: int = 0):
        super().__init__()
        self.encoder = encoder
        g = torch.Generator().manual_seed(seed)
        self.prototypes = nn.Parameter(torch.randn(n_prototypes, encoder.hidden_size, generator=g))
        self.mlm_source = None
        if mlm:
            self.mlm_head, self.mlm_source = mlm_head(encoder)
        else:
            self.mlm_head = None

    def token_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
