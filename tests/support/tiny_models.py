"""Tiny random transformers for tests (no download): a BERT over a given vocabulary."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable


def tiny_bert(root: Path, texts: Iterable[str], *, hidden: int = 32, layers: int = 1, seed: int = 0,
              name: str = "tiny_bert") -> Path:
    """Save a randomly initialised BERT (hidden 32, 1 layer) with a WordPiece vocab covering ``texts``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for s in texts for w in re.findall(r"\w+|[^\w\s]", s.lower())})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    d = Path(root) / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab=str(d / "vocab.txt"), do_lower_case=True).save_pretrained(d)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                     intermediate_size=2 * hidden, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(d)
    return d
