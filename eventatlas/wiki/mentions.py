"""Mention filters (XLEL-WD): context length, numeral consistency, per-string cap, event-level counts.

Every dropped mention goes to ``rejects`` with its reason; thresholds are parameters.
The seeded cap sorts each group by a content key first, so the kept contexts do not
depend on the order in which a backend delivered the pages.
"""
from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from eventatlas.io import Rejects, stable_id

_NUM = re.compile(r"\d+")
_YEAR = re.compile(r"(?<!\d)(\d{3,4})(?!\d)")


@dataclass
class Candidate:
    qid: str
    lang: str
    doc_title: str
    page_id: int
    paragraph: str
    start: int
    end: int
    anchor: str
    project: str = "wikipedia"
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        return (self.project, self.lang, self.doc_title, self.paragraph, self.start, self.end, self.qid)

    @property
    def where(self) -> str:
        return f"{self.lang}{self.project}:{self.doc_title}@{self.start}"


def numbers(text: str) -> set[str]:
    return {n.lstrip("0") or "0" for n in _NUM.findall(text or "")}


def numeral_consistent(context: str, label: str, description: str, event_year: int | None, window: int = 10) -> bool:
    """True unless the label holds a number that the context does not support.

    Supported: the context shares a number with label or description, or holds a year
    within ±``window`` of a year in the label/description or of the event's date.
    """
    lab = numbers(label)
    if not lab:
        return True
    ctx = numbers(context)
    if ctx & (lab | numbers(description)):
        return True
    years = {int(y) for y in _YEAR.findall(f"{label} {description}")}
    if event_year is not None:
        years.add(event_year)
    ctx_years = {int(y) for y in _YEAR.findall(context)}
    return any(abs(a - b) <= window for a in ctx_years for b in years)


def filter_mentions(cands: Iterable[Candidate], events: dict, rejects: Rejects, *, min_context_chars: int = 100,
                    max_context_chars: int = 2000, max_contexts_per_mention: int = 20, min_mentions: int = 30,
                    max_title_share: float = 0.5, seed: int = 0, titles: dict | None = None,
                    event_level: bool = True, source: str = "mentions") -> list[Candidate]:
    """Apply the filters in order; ``events`` maps qid -> EventRecord, ``titles`` (qid, lang) -> article title."""
    uniq = {c.key: c for c in cands}
    stage = []
    for c in sorted(uniq.values(), key=lambda c: c.key):
        n = len(c.paragraph)
        if n < min_context_chars:
            rejects.add(source, c.where, "context_too_short", f"{c.qid}: {n} < {min_context_chars} chars", c.paragraph)
            continue
        if n > max_context_chars:
            rejects.add(source, c.where, "context_too_long", f"{c.qid}: {n} > {max_context_chars} chars", c.paragraph)
            continue
        ev = events[c.qid]
        label = ev.labels.get(c.lang) or ev.labels.get("en", "")
        en_label = ev.labels.get("en", "")
        desc = f"{ev.descriptions.get(c.lang, '')} {ev.descriptions.get('en', '')}"
        if not (numeral_consistent(c.paragraph, label, desc, ev.year()) and numeral_consistent(c.paragraph, en_label, desc, ev.year())):
            rejects.add(source, c.where, "numeral_inconsistent", f"{c.qid}: label {label!r} has a number the context lacks", c.paragraph)
            continue
        stage.append(c)
    groups: dict[tuple, list[Candidate]] = defaultdict(list)
    for c in stage:
        groups[(c.qid, c.lang, c.anchor)].append(c)
    capped = []
    for g, members in sorted(groups.items()):
        if len(members) > max_contexts_per_mention:
            rng = random.Random(stable_id(seed, *g))
            keep = set(rng.sample(range(len(members)), max_contexts_per_mention))
            for i, c in enumerate(members):
                if i in keep:
                    capped.append(c)
                else:
                    rejects.add(source, c.where, "mention_cap", f"{c.qid}/{c.lang}/{c.anchor!r}: over {max_contexts_per_mention} contexts")
        else:
            capped.extend(members)
    if not event_level:
        return sorted(capped, key=lambda c: c.key)
    by_ev: dict[str, list[Candidate]] = defaultdict(list)
    for c in capped:
        by_ev[c.qid].append(c)
    out = []
    for qid, ms in sorted(by_ev.items()):
        if len(ms) < min_mentions:
            for c in ms:
                rejects.add(source, c.where, "too_few_mentions", f"{qid}: {len(ms)} < {min_mentions} mentions")
            continue
        t = sum(1 for c in ms if c.anchor.casefold() == ((titles or {}).get((qid, c.lang)) or "").casefold())
        if t / len(ms) >= max_title_share:
            for c in ms:
                rejects.add(source, c.where, "mostly_title_mentions", f"{qid}: {t}/{len(ms)} mentions equal the title")
            continue
        out.extend(ms)
    return sorted(out, key=lambda c: c.key)
