"""XLEL-WD pruning of event candidates; every drop is recorded with its reason."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from eventatlas.io import Rejects

from .wikidata import EventRecord


def prune(events: Iterable[EventRecord], languages: Iterable[str], rejects: Rejects, *, source: str = "wikidata") -> list[EventRecord]:
    """Drop classes, items without an English label, with a sitelink in only one build language,
    with a non-unique English label, or without an English article. (The English-description
    rule needs the article text and is applied in ``descriptions``.)"""
    evs = sorted({e.qid: e for e in events}.values(), key=lambda e: (len(e.qid), e.qid))
    langs = set(languages)
    classes = {c for e in evs for c in e.instance_of}
    en_counts = Counter(e.labels.get("en") for e in evs if e.labels.get("en"))
    kept = []
    for e in evs:
        n_lang = len(set(e.sitelinks) & langs)
        reason = None
        if e.qid in classes:
            users = sorted(x.qid for x in evs if e.qid in x.instance_of)[:5]
            reason, detail = "is_class", f"P31 target of candidates {users}"
        elif not e.labels.get("en"):
            reason, detail = "no_english_label", "no English label"
        elif n_lang < 2:
            reason, detail = "single_language", f"sitelinks in {n_lang} build language(s)"
        elif en_counts[e.labels["en"]] > 1:
            reason, detail = "duplicate_english_label", f"English label {e.labels['en']!r} used by {en_counts[e.labels['en']]} candidates"
        elif "en" not in e.sitelinks:
            reason, detail = "no_english_article", "no enwiki sitelink"
        if reason:
            rejects.add(source, e.qid, reason, detail, e.labels.get("en"))
        else:
            kept.append(e)
    return kept
