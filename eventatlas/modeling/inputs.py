"""Model inputs for event mentions: tokenization, trigger windowing and pooling targets.

This is the one definition of every mention representation's input (see
:mod:`eventatlas.modeling.mention_encoder` for the pooling): the frozen ``Encoder``, every trainer
and the token-id cache build their inputs here.

* ``sentence``  every real token (specials included, as sentence-transformers mean pooling does).
* ``cls``       the first position only (plain sentences: the [CLS] vector; see ``SENTENCE_POOLINGS``).
* ``trigger``   the word pieces that overlap the trigger's character span.
* ``mask``      the trigger replaced by ONE mask token (``unk`` when the tokenizer has no mask token);
  the piece at that position.
* ``window4``   the pieces of the words within +-2 words of the trigger (pooled over the last 4 layers).

Sentences longer than the budget are windowed around the target so it always survives truncation
(the context is split evenly left and right); plain sentences (``prepare_sentences``) keep the head,
like sentence-transformers.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

REPRESENTATIONS = ("sentence", "trigger", "mask", "mix", "window4")
# Poolings of a plain sentence (``prepare_sentences``): ``mean`` = the ``sentence`` representation
# (every real token), ``cls`` = the first position only (the [CLS] / <s> vector, as SWCC and BERT-style
# sentence encoders pool).
SENTENCE_POOLINGS = {"mean": "sentence", "cls": "cls"}
WINDOW_WORDS = 2  # window4: words within +-2 of the trigger
WINDOW_LAYERS = 4  # window4: last 4 hidden layers
# grounding's bi-encoder marks a mention's span with the first two, a candidate's title with the third
# (here, below grounding, so a saved model's card can say how its vectors are made)
ENTITY_MARKERS = ("[ENT_START]", "[ENT_END]", "[ENT_TITLE]")


@dataclass
class ModelInput:
    """One prepared model input: ids with specials, plus the pooling targets (positions)."""

    ids: list[int]
    target: list[int]  # positions pooled for trigger / mask
    window: list[int]  # positions pooled for window4

    def pool_positions(self, representation: str) -> list[int]:
        if representation == "sentence":
            return list(range(len(self.ids)))
        if representation == "cls":
            return [0]
        return self.window if representation == "window4" else self.target


class MaskToken:
    """The token that replaces the trigger for ``mask`` (the tokenizer's mask, else its unk)."""

    def __init__(self, tokenizer: Any):
        if tokenizer.mask_token is not None and tokenizer.mask_token_id is not None:
            self.kind, self.text, self.id = "mask", tokenizer.mask_token, tokenizer.mask_token_id
        elif tokenizer.unk_token is not None and tokenizer.unk_token_id is not None:
            self.kind, self.text, self.id = "unk", tokenizer.unk_token, tokenizer.unk_token_id
        else:
            self.kind, self.text, self.id = None, None, None


def check_span(sentence: Any, start: Any, end: Any) -> str | None:
    """Why a mention's span is unusable, or None when it is fine."""
    if not isinstance(sentence, str) or not sentence:
        return "empty or missing sentence"
    if start is None or end is None:
        return "missing trigger offsets"
    if isinstance(start, float) or isinstance(end, float) or not hasattr(start, "__index__") or not hasattr(end, "__index__"):
        return f"trigger offsets must be integers, got {start!r}, {end!r}"
    if not (0 <= start < end <= len(sentence)):
        return f"trigger offsets [{start},{end}) outside sentence of length {len(sentence)}"
    if not sentence[start:end].strip():
        return f"trigger span [{start},{end}) is blank"
    return None


def window(n: int, t0: int, t1: int, budget: int) -> tuple[int, int]:
    """[lo, hi) of at most ``budget`` of ``n`` pieces containing [t0, t1), context split evenly."""
    if n <= budget:
        return 0, n
    if t1 - t0 >= budget:  # the trigger alone overflows: keep its head
        return t0, t0 + budget
    lo = max(0, t0 - (budget - (t1 - t0)) // 2)
    hi = min(n, lo + budget)
    return max(0, hi - budget), hi


def prepare_mentions(tokenizer: Any, sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int],
                     representation: str, *, budget: int, mask: MaskToken, offset: int = 0) -> list[ModelInput]:
    """Tokenize once (fast tokenizer, no truncation) and build windowed inputs with pooling targets.

    ``budget`` is the number of content pieces that fit beside the special tokens."""
    if representation not in REPRESENTATIONS or representation == "mix":
        raise ValueError(f"cannot prepare inputs for representation {representation!r} "
                         f"(one of {[r for r in REPRESENTATIONS if r != 'mix']}; mix combines trigger and mask)")
    if representation == "mask":
        if mask.text is None:
            raise ValueError("tokenizer has neither a mask nor an unk token: the 'mask' representation is unavailable")
        if mask.kind == "unk":
            warnings.warn(f"tokenizer has no mask token, using unk token {mask.text!r} for 'mask'", stacklevel=3)
        texts, spans = [], []
        for s, a, b in zip(sentences, starts, ends):
            texts.append(s[:a] + mask.text + s[b:])
            spans.append((a, a + len(mask.text)))
    else:
        texts, spans = list(sentences), list(zip(starts, ends))
    enc = tokenizer(texts, add_special_tokens=True, truncation=False, return_offsets_mapping=True, verbose=False)
    items = []
    for i, (a, b) in enumerate(spans):
        ids, offs = enc["input_ids"][i], enc["offset_mapping"][i]
        seq, words = enc.sequence_ids(i), enc.word_ids(i)
        content = [j for j, sid in enumerate(seq) if sid is not None]
        if representation == "mask":
            tgt = [j for j in content if ids[j] == mask.id and offs[j][0] < b and offs[j][1] > a]
            if len(tgt) != 1:
                raise ValueError(f"mention {offset + i}: expected one {mask.text} piece, found {len(tgt)} in {texts[i]!r}")
        else:
            tgt = [j for j in content if offs[j][0] < b and offs[j][1] > a]
            if not tgt and representation != "sentence":
                raise ValueError(f"mention {offset + i}: trigger {texts[i][a:b]!r} at [{a},{b}) has no word pieces "
                                 f"(characters the tokenizer drops?)")
        lo, hi = window(len(content), content.index(tgt[0]) if tgt else 0,
                        content.index(tgt[-1]) + 1 if tgt else 0, budget)
        keep = content[lo:hi]
        head = [j for j in range(len(ids)) if seq[j] is None and (not content or j < content[0])]
        tail = [j for j in range(len(ids)) if seq[j] is None and content and j > content[-1]]
        order = head + keep + tail
        pos = {j: k for k, j in enumerate(order)}
        target = [pos[j] for j in tgt if j in pos]
        win: list[int] = []
        if representation == "window4":
            tw = [words[j] for j in tgt if words[j] is not None]
            w_lo, w_hi = min(tw) - WINDOW_WORDS, max(tw) + WINDOW_WORDS
            win = [pos[j] for j in keep if words[j] is not None and w_lo <= words[j] <= w_hi]
        items.append(ModelInput([ids[j] for j in order], target, win))
    return items


def prepare_sentences(tokenizer: Any, sentences: Sequence[str], max_length: int) -> list[ModelInput]:
    """Plain sentences, truncated at the head (sentence-transformers' behaviour)."""
    enc = tokenizer(list(sentences), truncation=True, max_length=max_length, add_special_tokens=True, verbose=False)
    return [ModelInput(list(ids), [], []) for ids in enc["input_ids"]]


def collate(items: Sequence[ModelInput], representation: str, pad_id: int) -> dict[str, Any]:
    """Dynamic padding to the longest input of the batch, plus the pooling weights.

    Returns torch tensors ``input_ids``, ``attention_mask`` (int64) and ``pool`` (float32, 1 on the
    positions the representation averages)."""
    import torch

    width = max(len(it.ids) for it in items)
    ids = np.full((len(items), width), pad_id, dtype=np.int64)
    att = np.zeros((len(items), width), dtype=np.int64)
    pool = np.zeros((len(items), width), dtype=np.float32)
    for r, it in enumerate(items):
        ids[r, : len(it.ids)] = it.ids
        att[r, : len(it.ids)] = 1
        pool[r, it.pool_positions(representation)] = 1.0
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(att), "pool": torch.from_numpy(pool)}


def mark_triggers(sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int], *, left: str = "[",
                  right: str = "]") -> tuple[list[str], list[int], list[int]]:
    """Sentences with ``left``/``right`` markers (space-separated, so any tokenizer splits them off)
    around each trigger; returns the new sentences and the trigger's new (start, end), which still
    cover exactly the trigger text (trigger-marked inputs, for sentence pooling too)."""
    out_s, out_a, out_b = [], [], []
    for s, a, b in zip(sentences, starts, ends):
        a, b = int(a), int(b)
        pre = f"{s[:a]}{left} "
        out_s.append(f"{pre}{s[a:b]} {right}{s[b:]}")
        out_a.append(len(pre))
        out_b.append(len(pre) + b - a)
    return out_s, out_a, out_b


def mark_table(table: Any) -> Any:
    """A mentions table (``sentence``, ``trigger_start``, ``trigger_end`` columns) with the trigger markers
    written into its sentences and the spans moved with them (:func:`mark_triggers`); column types kept."""
    import pyarrow as pa

    cols = ("sentence", "trigger_start", "trigger_end")
    new = mark_triggers(*(table[c].to_pylist() for c in cols))
    for name, values in zip(cols, new):
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pa.array(values, table.schema.field(name).type))
    return table
