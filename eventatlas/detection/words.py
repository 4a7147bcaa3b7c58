"""Sentences as the encoder's words, with gold triggers as word labels.

A *word* is what the fast tokenizer's pre-tokenizer makes a word (``word_ids``: BERT splits on white space and
punctuation); its character span is the union of its pieces' offsets, and it is scored through its first
piece. A trigger is the run of words its characters cover: the first word ``B``, the rest ``I``; every other
word ``O``. A gold trigger that does not start and end on word boundaries (a piece of a word) cannot be
predicted exactly; it is counted (``misaligned``) and stays in the gold, so the scores do not hide it.
Pieces past ``max_length`` are cut: their words and triggers are counted (``truncated_triggers``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

O, B, I = 0, 1, 2  # identification labels (type-agnostic BIO)
IGNORE = -100  # torch's cross-entropy ignore index


@dataclass
class Sentence:
    """One sentence and its gold triggers ``(start, end, type)`` (end-exclusive character offsets)."""

    key: Hashable  # (doc_id, sent_idx)
    text: str
    gold: list[tuple[int, int, str]] = field(default_factory=list)


@dataclass
class Encoded:
    """A sentence as model input: piece ids, the first piece of every word and every word's characters."""

    ids: list[int]
    first: list[int]  # piece index of each word's first piece
    spans: list[tuple[int, int]]  # character span of each word
    bio: list[int] = field(default_factory=list)  # per word: O / B / I
    types: list[int] = field(default_factory=list)  # per word: type index inside a trigger, else IGNORE


def encode(tokenizer: Any, texts: Sequence[str], max_length: int) -> list[Encoded]:
    """Tokenize once (fast tokenizer, truncated at ``max_length`` pieces) and group pieces into words."""
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, return_offsets_mapping=True,
                    add_special_tokens=True, verbose=False)
    out = []
    for i in range(len(texts)):
        first: list[int] = []
        spans: list[tuple[int, int]] = []
        last = None
        for j, (w, (a, b)) in enumerate(zip(enc.word_ids(i), enc["offset_mapping"][i])):
            if w is None or a == b:
                continue
            if w != last:
                first.append(j)
                spans.append((a, b))
                last = w
            else:
                spans[-1] = (spans[-1][0], b)
        out.append(Encoded(list(enc["input_ids"][i]), first, spans))
    return out


def label(enc: Encoded, sentence: Sentence, type_index: dict[str, int], stats: dict[str, int]) -> Encoded:
    """Fill ``enc.bio`` / ``enc.types`` from the sentence's gold triggers (types outside ``type_index``: the
    identification label only)."""
    n = len(enc.spans)
    bio, types = [O] * n, [IGNORE] * n
    for s, e, t in sentence.gold:
        covered = [k for k, (a, b) in enumerate(enc.spans) if a < e and b > s]
        if not covered:
            stats["truncated_triggers"] = stats.get("truncated_triggers", 0) + 1
            continue
        if enc.spans[covered[0]][0] != s or enc.spans[covered[-1]][1] != e:
            stats["misaligned"] = stats.get("misaligned", 0) + 1
        for r, k in enumerate(covered):
            bio[k] = B if r == 0 else I
            types[k] = type_index.get(t, IGNORE)
    enc.bio, enc.types = bio, types
    return enc


def sentences_of(mentions: Any, documents: Any | None) -> list[Sentence]:
    """Every sentence of a typed-mentions dataset with its gold triggers: the mentions grouped by
    ``(doc_id, sent_idx)`` (first label = the type), plus the documents' sentences that have none (the
    sentences without events are negatives too). Sorted by key, so the order is the same every time."""
    by: dict[Hashable, Sentence] = {}
    cols = mentions.select(["doc_id", "sent_idx", "sentence", "trigger_start", "trigger_end", "labels"]).to_pydict()
    for d, k, text, s, e, labels in zip(*cols.values()):
        if not labels:
            continue
        sent = by.setdefault((str(d), int(k)), Sentence((str(d), int(k)), text))
        if sent.text == text:  # a mention whose sentence differs from its siblings' is not this sentence's
            sent.gold.append((int(s), int(e), str(labels[0])))
    if documents is not None and "sentences" in documents.column_names:
        for d, sents in zip(documents["doc_id"].to_pylist(), documents["sentences"].to_pylist()):
            for k, text in enumerate(sents or []):
                if text and (str(d), k) not in by:
                    by[(str(d), k)] = Sentence((str(d), k), text)
    for s in by.values():
        s.gold = sorted(set(s.gold))
    return [by[k] for k in sorted(by)]
