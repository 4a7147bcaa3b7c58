"""Open-IE event tuples grouped by document (Weber et al. 2018's inverse-cloze NYT file) -> events
as mentions with their documents, and within-document co-occurrence counts as ``event_pairs``.

Layout: one document per line; tuples separated by `` <TUP> ``; each tuple is four
whitespace-separated lower-cased heads ``verb subj obj prep`` (``_NULL_`` where absent). A tuple
introduced by `` <DIST> `` instead of `` <TUP> `` may be a distractor inserted from another document:
it is left out (counted in ``stats["distractors"]``), never counted as co-occurring.

Tables:

* ``documents``: ``doc_id = <file stem>:<line>``, ``extra = {n_events, n_distractors}``.
* ``mentions``: one per (non-distractor) tuple; ``sentence`` = the event text ``subj verb obj``
  (absent slots dropped), trigger = the verb; ``arguments`` subj / obj / prep; ``extra = {svo:
  {subj, verb, obj}, prep, position}`` so a method can re-render the event with any template.
* ``event_pairs`` (task ``cooccurrence``): one row per unordered pair of distinct events (by their
  (subj, verb, obj)) that occur in one document; ``score`` = the number of documents in which both
  occur. Pairs are aggregated over the whole file (memory O(distinct pairs)); a document's events
  are deduplicated first, so an event repeated in one document counts once. Pairs are counted among a
  document's first ``max_pair_events`` distinct events (reader option, default 100: at most 4,950
  pairs a document; quadratic growth made one 120 KB line 8 M pairs); a document past it is counted
  in ``stats["pair_capped_documents"]`` and its later events still become mentions.

A tuple without exactly four fields, or with a ``_NULL_`` verb, is rejected (file, line, tuple
position); a file in which no line holds a `` <TUP> `` separator is refused with an ``InputError``.
"""
from __future__ import annotations

import re
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects, stable_id
from ._common import bump, dumps, iter_lines

DEFAULT_DATASET = "event_tuples"
EXPECTED_TABLES = ("documents", "mentions", "event_pairs")
NULL = "_NULL_"
COOCCURRENCE_TASK = "cooccurrence"
_SEP = re.compile(r" <(TUP|DIST)> ")

__all__ = ["read", "DEFAULT_DATASET", "COOCCURRENCE_TASK", "parse_line"]


def _slot(x: str) -> str | None:
    return None if x == NULL else x


def parse_line(line: str) -> tuple[list[tuple[int, list[str]]], int]:
    """``([(position, fields)], n_distractors)`` of one document line: the first tuple and every tuple
    after `` <TUP> ``, each as its whitespace-split fields; `` <DIST> `` tuples are counted only."""
    parts = _SEP.split(line.strip())
    kept = [(0, parts[0].split())]
    n_dist = 0
    for k in range(1, len(parts) - 1, 2):
        if parts[k] == "TUP":
            kept.append(((k + 1) // 2, parts[k + 1].split()))
        else:
            n_dist += 1
    return kept, n_dist


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        fs = sorted(path.glob("*.txt"))
        if not fs:
            raise InputError(path, "-", "no *.txt files in directory")
        return fs
    return [path]


DEFAULT_MAX_PAIR_EVENTS = 100


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None,
         max_pair_events: int = DEFAULT_MAX_PAIR_EVENTS, **opts) -> Iterator[tuple[str, dict]]:
    counts: Counter = Counter()
    max_pair_events = int(max_pair_events)
    for f in _files(Path(path)):
        seen_sep = False
        n = 0
        for n, line in iter_lines(f):
            if not line.strip():
                continue
            seen_sep = seen_sep or " <TUP> " in line
            tuples, n_dist = parse_line(line)
            bump(stats, "distractors", n_dist)
            doc_id = f"{f.stem}:{n}"
            events: list[tuple[str | None, str, str | None]] = []
            rows = []
            for pos, fields in tuples:
                where = f"line {n}, tuple {pos}"
                if len(fields) != 4:
                    rejects.add(f, where, "bad_tuple", f"expected 4 fields 'verb subj obj prep', got {len(fields)}",
                                " ".join(fields))
                    continue
                verb, subj, obj, prep = fields
                if verb == NULL:
                    rejects.add(f, where, "no_verb", "the verb slot is _NULL_", " ".join(fields))
                    continue
                svo = (_slot(subj), verb, _slot(obj))
                rows.append(mention_row(dataset, doc_id, pos, svo, _slot(prep)))
                events.append(svo)
            if not rows:
                rejects.add(f, f"line {n}", "no_events", "no usable tuple in this document", line[:200])
                continue
            yield "documents", document_row(dataset, doc_id, f.name, {"n_events": len(rows), "n_distractors": n_dist})
            for r in rows:
                yield "mentions", r
            bump(stats, "documents")
            if count_pairs(counts, events, max_pair_events):
                bump(stats, "pair_capped_documents")
        if n and not seen_sep:
            raise InputError(f, "line 1", "no ' <TUP> ' separator in any line: not an event-tuple file "
                                          "(one document per line, tuples 'verb subj obj prep' joined by ' <TUP> ')")
    yield from cooccurrence_rows(dataset, counts)
    bump(stats, "cooccurring_pairs", len(counts))


def mention_row(dataset: str, doc_id: str, pos: int, svo: tuple, prep: str | None = None, *,
                source_sentence: str | None = None) -> dict:
    """One event as a mention: ``sentence`` = ``subj verb obj`` (absent slots dropped), trigger = the verb."""
    subj, verb, obj = svo
    sentence = " ".join(w for w in svo if w)
    t0 = len(subj) + 1 if subj else 0
    args = [{"role": role, "text": text, "start": None, "end": None, "entity_id": None}
            for role, text in (("subj", subj), ("obj", obj), ("prep", prep)) if text]
    extra = {"svo": {"subj": subj, "verb": verb, "obj": obj}, "prep": prep, "position": pos}
    if source_sentence is not None:
        extra["source_sentence"] = source_sentence
    return {"mention_id": stable_id(dataset, doc_id, pos), "dataset": dataset, "doc_id": doc_id, "sent_idx": pos,
            "sentence": sentence, "trigger_start": t0, "trigger_end": t0 + len(verb), "trigger": verb, "language": "en",
            "split": None, "labels": None, "arguments": args, "extra": dumps(extra)}


def document_row(dataset: str, doc_id: str, source: str | None, extra: dict) -> dict:
    return {"dataset": dataset, "doc_id": doc_id, "title": None, "language": "en", "text": None, "sentences": None,
            "source": source, "split": None, "extra": dumps(extra)}


def count_pairs(counts: Counter, events, max_events: int | None = None) -> bool:
    """Add one document's distinct events' unordered pairs (one canonical order) to ``counts``; with
    ``max_events``, only among the first that many distinct events (in document order). True when capped."""
    distinct = list(dict.fromkeys(events))
    capped = max_events is not None and len(distinct) > max_events
    if capped:
        distinct = distinct[:max_events]
    counts.update(combinations(sorted(distinct, key=lambda e: (e[1], e[0] or "", e[2] or "")), 2))
    return capped


def cooccurrence_rows(dataset: str, counts: Counter) -> Iterator[tuple[str, dict]]:
    """``event_pairs`` rows (task ``cooccurrence``, score = documents with both events)."""
    for (a, b), c in counts.items():
        ea = {"subj": a[0], "verb": a[1], "obj": a[2]}
        eb = {"subj": b[0], "verb": b[1], "obj": b[2]}
        yield "event_pairs", {"dataset": dataset, "item_id": stable_id(dataset, *a, *b), "task": COOCCURRENCE_TASK,
                              "block_id": None, "event_a": ea, "event_b": eb, "score": float(c), "extra": None}
