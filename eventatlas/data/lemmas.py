"""Trigger lemmas: the word a mention's trigger is a form of (``attacked`` -> ``attack``, ``bought`` -> ``buy``).

Used where "the same word" must be told from "the same event" (retrieval's novel-trigger recall). The
lemmatizer is simplemma: dictionary-based, its data inside the wheel (no model download, no spaCy
pipeline), 30+ languages. A multi-word trigger is lemmatised word by word; case is folded.
"""
from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"\w+(?:[-']\w+)*")


@lru_cache(maxsize=65536)
def trigger_lemma(trigger: str, lang: str = "en") -> str:
    """The lower-case lemma of a trigger (words lemmatised one by one, joined by a space)."""
    import simplemma

    words = _TOKEN.findall(str(trigger).lower())
    return " ".join(simplemma.lemmatize(w, lang=lang).lower() for w in words)
