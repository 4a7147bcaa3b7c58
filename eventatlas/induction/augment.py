"""Augmented views of a batch for the 4-term contrastive loss.

``backtranslation``: MarianMT en->X->en (X in de/fr/es/zh, Helsinki-NLP/opus-mt-*), one language
sampled per mention per epoch; every (sentence, language) translation is computed once and cached
as Parquet. It needs the eight Marian checkpoints locally (HF cache); offline they are absent, so
``auto`` falls back to a named offline augmentation and the run records which one ran:

``dropout_view``: the same tokens through the encoder a second time; the two views differ only by
dropout noise (SimCSE-style).
``token_perturb``: each non-special, non-trigger word piece is dropped with probability p
(resampled every epoch with the run's seeded RNG), then a second forward pass.
``word_dropout``: the same, but whole words (a word piece and its ``##`` continuations)
are dropped, never a word holding a trigger piece or a special token, so the view stays readable
text around an intact trigger.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..io import write_parquet

log = logging.getLogger(__name__)

AUGMENTATIONS = ("backtranslation", "dropout_view", "token_perturb", "word_dropout")
BT_LANGUAGES = ("de", "fr", "es", "zh")
BT_CACHE_SCHEMA = pa.schema([("key", pa.string()), ("lang", pa.string()), ("text", pa.string()),
                             ("translation", pa.string())])


def marian_ids(lang: str) -> tuple[str, str]:
    return f"Helsinki-NLP/opus-mt-en-{lang}", f"Helsinki-NLP/opus-mt-{lang}-en"


def marian_available(langs: Sequence[str] = BT_LANGUAGES) -> bool:
    """True when every en<->lang Marian checkpoint loads from the local cache (no download)."""
    try:
        from transformers import MarianTokenizer  # noqa: F401
        from huggingface_hub import try_to_load_from_cache
    except Exception:  # pragma: no cover - transformers always present here
        return False
    for lang in langs:
        for mid in marian_ids(lang):
            hit = try_to_load_from_cache(mid, "config.json")
            if not isinstance(hit, str) or not os.path.exists(hit):
                return False
    return True


def resolve_augmentation(requested: str = "auto", fallback: str = "dropout_view") -> str:
    if requested == "auto":
        if marian_available():
            return "backtranslation"
        log.warning("MarianMT checkpoints not available offline: augmentation falls back to %r", fallback)
        return fallback
    if requested not in AUGMENTATIONS:
        raise ValueError(f"unknown augmentation {requested!r}; known: {AUGMENTATIONS} or 'auto'")
    if requested == "backtranslation" and not marian_available():
        raise RuntimeError("augmentation='backtranslation' needs the Helsinki-NLP/opus-mt-en<->{de,fr,es,zh} "
                           "checkpoints in the local Hugging Face cache; use 'auto' to fall back")
    return requested


def _key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def backtranslate(texts: Sequence[str], cache_path: str | os.PathLike, langs: Sequence[str] = BT_LANGUAGES,
                  *, batch_size: int = 16, device: str = "cpu", max_length: int = 256) -> dict[tuple[str, str], str]:
    """Back-translations of every text through every language, cached in one Parquet file.

    Returns ``{(text, lang): back_translation}``. Only missing pairs are translated; the cache is
    rewritten atomically after each language so an interrupted run keeps finished languages.
    """
    import torch
    from tqdm import tqdm
    from transformers import MarianMTModel, MarianTokenizer

    cache_path = Path(cache_path)
    done: dict[tuple[str, str], str] = {}
    rows: list[dict] = []
    if cache_path.exists():
        for r in pq.read_table(cache_path).to_pylist():
            done[(r["text"], r["lang"])] = r["translation"]
            rows.append(r)
    uniq = list(dict.fromkeys(texts))

    def run(model_id: str, batch: list[str]) -> list[str]:
        tok = MarianTokenizer.from_pretrained(model_id, local_files_only=True)
        model = MarianMTModel.from_pretrained(model_id, local_files_only=True).to(device).eval()
        out: list[str] = []
        for i in tqdm(range(0, len(batch), batch_size), desc=model_id, leave=False):
            enc = tok(batch[i:i + batch_size], return_tensors="pt", padding=True, truncation=True,
                      max_length=max_length).to(device)
            with torch.no_grad():
                gen = model.generate(**enc, max_length=max_length, num_beams=1)
            out.extend(tok.batch_decode(gen, skip_special_tokens=True))
        return out

    for lang in langs:
        todo = [t for t in uniq if (t, lang) not in done]
        if not todo:
            continue
        fwd, bwd = marian_ids(lang)
        back = run(bwd, run(fwd, todo))
        for t, b in zip(todo, back):
            done[(t, lang)] = b
            rows.append({"key": _key(t), "lang": lang, "text": t, "translation": b})
        write_parquet(pa.Table.from_pylist(rows, schema=BT_CACHE_SCHEMA), cache_path)
    return done


def token_perturb(ids: Sequence[int], protect: set[int], rng: np.random.Generator, p: float = 0.1) -> list[int]:
    """Drop each position not in ``protect`` (special tokens, trigger pieces) with probability p.

    Returns the kept positions (indices into ``ids``); at least the protected ones survive.
    """
    keep = [i for i in range(len(ids)) if i in protect or rng.random() >= p]
    return keep


def word_starts(tokens: Sequence[str]) -> list[bool]:
    """Whether each word piece starts a word: WordPiece marks continuations with ``##``;
    SentencePiece / byte-level BPE mark starts with ``▁`` / ``Ġ`` (then an unmarked piece continues)."""
    marks_starts = any(t.startswith(("\u2581", "\u0120")) for t in tokens)
    if marks_starts:
        return [i == 0 or t.startswith(("\u2581", "\u0120")) or not t[:1].isalnum() for i, t in enumerate(tokens)]
    return [not t.startswith("##") for t in tokens]


def word_dropout(tokens: Sequence[str], protect: set[int], rng: np.random.Generator, p: float = 0.1) -> list[int]:
    """Drop whole words with probability p; a word with a protected piece (trigger, special token)
    always survives. Returns the kept positions (indices into ``tokens``)."""
    starts = word_starts(tokens)
    words: list[list[int]] = []
    for i, s in enumerate(starts):
        if s or not words:
            words.append([i])
        else:
            words[-1].append(i)
    keep: list[int] = []
    for w in words:
        if any(i in protect for i in w) or rng.random() >= p:
            keep.extend(w)
    return keep
