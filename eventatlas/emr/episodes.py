"""The k-shot m-way EMR evaluation framework: a seeded, recorded sampler over any labelled dataset.

A *pool* (:func:`candidate_pool`) holds every retrievable item of a dataset: its labelled mentions
(primary label = first of ``labels``) and, where the dataset marks sentences without events
(``documents.extra.n_events == 0``, e.g. the MAVEN sentence lists), one candidate trigger per such
sentence: a content word (alphabetic, >= 3 characters, not an English stop word), chosen by the
seed and recorded (``source = "no_event"``).

An *episode* (:func:`sample_episode`, after the EMR paper's protocol on ACE 2005) over a pool:

1. the m types are the types with at least ``min_mentions`` mentions (``max_types`` caps m by a
   seeded choice among them, recorded);
2. per type, a seeded shuffle of its mentions gives ``n_corpus`` to the test corpus, the next
   ``n_query`` to its query pool and up to ``n_dev`` of the rest to its development pool, so
   queries, corpus and dev never share a mention;
3. ``n_none`` "None" corpus items are drawn (seeded) from every pool item that belongs to none of
   the m types: mentions of other types and no-event candidates (counts per source recorded);
4. for each k in ``ks``, ``queries_per_type`` queries per type, each k distinct mentions of its
   query pool (seeded by (seed, k)).

Relevant = same type. Everything depends only on the pool and the seed, so every model compared
on an episode sees the same corpus and queries; :meth:`Episode.tables` writes it down.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Sequence

import numpy as np
import pyarrow as pa

from ..data.manifest import read_table, table_path
from ..data.selection import NotApplicable
from ..io import stable_id

POOL_COLUMNS = ("mention_id", "doc_id", "sentence", "trigger_start", "trigger_end", "trigger", "label", "source")
_WORD = re.compile(r"[A-Za-z]{3,}")


@dataclass(frozen=True)
class Query:
    """k shots (pool indices) of one type."""

    type: str
    shots: np.ndarray


@dataclass
class Episode:
    """One sampled k-shot m-way evaluation: indices into ``pool`` (see the module docstring)."""

    pool: pa.Table
    types: list[str]
    corpus: np.ndarray  # pool indices of the test corpus (the m types' mentions, then the None items)
    corpus_labels: list[str | None]  # None for the "None" items
    query_pool: dict[str, np.ndarray]
    dev: dict[str, np.ndarray]
    queries: dict[int, list[Query]]
    record: dict[str, Any] = field(default_factory=dict)

    def setting(self, k: int) -> str:
        return f"k={k} m={len(self.types)}"

    def relevant(self, k: int) -> list[np.ndarray]:
        """Per query of ``k``, the corpus positions (indices into ``corpus``) of its type."""
        from ..evaluation.retrieval import relevance_from_labels

        return relevance_from_labels([q.type for q in self.queries[k]], self.corpus_labels)

    def novel(self, k: int) -> list[np.ndarray]:
        """Per query of ``k``, the relevant corpus positions whose trigger lemma differs from every
        shot's (:func:`eventatlas.data.lemmas.trigger_lemma`): what a surface match of the examples'
        words cannot find (novel-trigger recall)."""
        from ..data.lemmas import trigger_lemma

        triggers = self.pool["trigger"].to_pylist()
        lemma = {int(i): trigger_lemma(triggers[int(i)] or "") for i in self.corpus}
        out = []
        for q, rel in zip(self.queries[k], self.relevant(k)):
            seen = {trigger_lemma(triggers[int(i)] or "") for i in q.shots}
            out.append(np.asarray([j for j in rel if lemma[int(self.corpus[j])] not in seen], dtype=np.int64))
        return out

    def tables(self) -> tuple[pa.Table, pa.Table]:
        """(items, queries): every pool item the episode uses with its role, and every query's shots."""
        ids = self.pool["mention_id"].to_pylist()
        labels = self.pool["label"].to_pylist()
        sources = self.pool["source"].to_pylist()
        rows: list[tuple[int, str]] = [(int(i), "corpus") for i in self.corpus]
        rows += [(int(i), "query_pool") for t in self.types for i in self.query_pool[t]]
        rows += [(int(i), "dev") for t in self.types for i in self.dev[t]]
        items = pa.table({"pool_index": [r[0] for r in rows], "mention_id": [ids[r[0]] for r in rows],
                          "role": [r[1] for r in rows], "label": [labels[r[0]] for r in rows],
                          "source": [sources[r[0]] for r in rows]})
        q_rows = [(k, qi, q.type, [ids[int(i)] for i in q.shots]) for k, qs in sorted(self.queries.items())
                  for qi, q in enumerate(qs)]
        queries = pa.table({"k": [r[0] for r in q_rows], "query": [r[1] for r in q_rows],
                            "type": [r[2] for r in q_rows], "shot_mention_ids": [r[3] for r in q_rows]})
        return items, queries


def _stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def content_words(sentence: str) -> list[tuple[int, int]]:
    """Char spans (end-exclusive) of the sentence's content words: alphabetic, >= 3 letters, not a stop word."""
    stop = _stop_words()
    return [(m.start(), m.end()) for m in _WORD.finditer(sentence) if m.group().lower() not in stop]


def _no_event_sentences(dataset_dir: Path) -> list[tuple[str, int, str]]:
    """(doc_id, sent_idx, sentence) of every sentence of a document marked ``extra.n_events == 0``."""
    if not table_path(dataset_dir, "documents").exists():
        return []
    out = []
    t = read_table(dataset_dir, "documents", columns=["doc_id", "sentences", "extra"])
    for doc_id, sents, extra in zip(*(t[c].to_pylist() for c in ("doc_id", "sentences", "extra"))):
        try:
            n = json.loads(extra).get("n_events") if extra else None
        except (ValueError, AttributeError):
            n = None
        if n == 0:
            out += [(doc_id, i, s) for i, s in enumerate(sents or []) if s]
    return out


def candidate_pool(dataset_dir: str | Path, *, seed: int = 0, no_event: bool = True) -> pa.Table:
    """The retrievable items of an ingested dataset (columns :data:`POOL_COLUMNS`): its mentions with
    a primary label, then one seeded content-word candidate per no-event sentence (label null)."""
    d = Path(dataset_dir)
    p = table_path(d, "mentions")
    t = read_table(d, "mentions", columns=["mention_id", "doc_id", "sentence", "trigger_start", "trigger_end",
                                           "trigger", "labels"])
    labels = t["labels"].to_pylist()
    keep = [i for i, lab in enumerate(labels) if lab]
    if not keep:
        raise NotApplicable(f"{p}: no mention has a gold label, so there is nothing to evaluate retrieval against")
    cols = {c: t[c].take(pa.array(keep, pa.int64())).to_pylist() for c in POOL_COLUMNS[:6]}
    cols["label"] = [labels[i][0] for i in keep]
    cols["source"] = ["mention"] * len(keep)
    if no_event:
        rng = np.random.default_rng([seed, 31])
        dataset = d.name
        for doc_id, si, sent in _no_event_sentences(d):
            spans = content_words(sent)
            if not spans:
                continue
            a, b = spans[int(rng.integers(len(spans)))]
            cols["mention_id"].append(stable_id(dataset, doc_id, si, a, b, "no_event"))
            cols["doc_id"].append(doc_id)
            cols["sentence"].append(sent)
            cols["trigger_start"].append(a)
            cols["trigger_end"].append(b)
            cols["trigger"].append(sent[a:b])
            cols["label"].append(None)
            cols["source"].append("no_event")
    schema = pa.schema([("mention_id", pa.string()), ("doc_id", pa.string()), ("sentence", pa.string()),
                        ("trigger_start", pa.int32()), ("trigger_end", pa.int32()), ("trigger", pa.string()),
                        ("label", pa.string()), ("source", pa.string())])
    return pa.table(cols, schema=schema)


def sample_episode(
    pool: pa.Table,
    *,
    min_mentions: int = 100,
    n_corpus: int = 50,
    n_query: int = 10,
    n_dev: int = 40,
    n_none: int = 2000,
    queries_per_type: int = 10,
    ks: Sequence[int] = (2, 5, 10),
    max_types: int | None = None,
    allowed_types: Collection[str] | None = None,
    seed: int = 0,
) -> Episode:
    """Sample one k-shot m-way episode over ``pool`` (see the module docstring). ``allowed_types``
    restricts the m types (e.g. to the types a meta-trained model never saw); the other types'
    mentions stay available as "None" items."""
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"ks must be positive shot counts, got {ks}")
    if ks[-1] > n_query:
        raise ValueError(f"k={ks[-1]} shots need a query pool of at least {ks[-1]} mentions per type (n_query={n_query})")
    if min_mentions < n_corpus + n_query:
        raise ValueError(f"min_mentions={min_mentions} must cover n_corpus + n_query = {n_corpus + n_query}: "
                         "a type's corpus and query mentions must be distinct")
    labels = pool["label"].to_pylist()
    by_type: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        if lab is not None:
            by_type.setdefault(lab, []).append(i)
    candidates = by_type if allowed_types is None else {t: v for t, v in by_type.items() if t in set(allowed_types)}
    eligible = sorted(t for t, ix in candidates.items() if len(ix) >= min_mentions)
    if len(eligible) < 2:
        which = "" if allowed_types is None else f" among the {len(candidates)} allowed type(s) present"
        raise NotApplicable(f"{len(eligible)} type(s){which} have at least min_mentions={min_mentions} mentions "
                            f"(largest: {max((len(v) for v in candidates.values()), default=0)}); need 2 for retrieval")
    rng = np.random.default_rng([seed, 1])
    types = eligible
    if max_types is not None and max_types < len(eligible):
        if max_types < 2:
            raise ValueError(f"max_types must be >= 2, got {max_types}")
        types = sorted(rng.choice(eligible, size=max_types, replace=False).tolist())
    corpus, corpus_labels = [], []
    query_pool, dev = {}, {}
    for t in types:
        ix = np.asarray(by_type[t], dtype=np.int64)
        perm = ix[np.random.default_rng([seed, 2, _salt(t)]).permutation(len(ix))]
        corpus += perm[:n_corpus].tolist()
        corpus_labels += [t] * n_corpus
        query_pool[t] = perm[n_corpus:n_corpus + n_query]
        dev[t] = perm[n_corpus + n_query:n_corpus + n_query + n_dev]
    chosen = set(types)
    outside = np.asarray([i for i, lab in enumerate(labels) if lab not in chosen], dtype=np.int64)
    take = min(n_none, len(outside))
    none = np.sort(np.random.default_rng([seed, 3]).choice(outside, size=take, replace=False)) if take else outside[:0]
    corpus += none.tolist()
    corpus_labels += [None] * len(none)
    queries: dict[int, list[Query]] = {}
    for k in ks:
        qrng = np.random.default_rng([seed, 4, k])
        queries[k] = [Query(t, np.sort(qrng.choice(query_pool[t], size=k, replace=False)))
                      for t in types for _ in range(queries_per_type)]
    sources = pool["source"].to_pylist()
    none_sources: dict[str, int] = {}
    for i in none:
        none_sources[sources[i]] = none_sources.get(sources[i], 0) + 1
    record = {"seed": int(seed), "min_mentions": int(min_mentions), "n_eligible_types": len(eligible),
              "m": len(types), "types": types, "n_corpus_per_type": int(n_corpus), "n_query_pool": int(n_query),
              "n_dev_max": int(n_dev), "dev_sizes": {t: int(len(v)) for t, v in dev.items()},
              "n_none_requested": int(n_none), "n_none": int(len(none)), "none_sources": none_sources,
              "n_outside_available": int(len(outside)), "corpus_size": len(corpus), "ks": ks,
              "queries_per_type": int(queries_per_type),
              "allowed_types": None if allowed_types is None else sorted(set(allowed_types))}
    return Episode(pool=pool, types=types, corpus=np.asarray(corpus, dtype=np.int64), corpus_labels=corpus_labels,
                   query_pool=query_pool, dev=dev, queries=queries, record=record)


def _salt(type_id: str) -> int:
    """A stable integer per type (Python's hash() is salted per process)."""
    return int(stable_id(type_id, length=4), 16)


def dev_episode(ep: Episode, *, n_query: int, n_none: int, queries_per_type: int, ks: Sequence[int],
                seed: int = 0) -> Episode:
    """An episode built from ``ep``'s development mentions only, for tuning: per type, the first
    ``n_query`` of its dev pool are the dev query pool and the rest its dev corpus; the "None" items
    are drawn from the outside items that are *not* in ``ep``'s test corpus, so no test item, test
    query or test label is seen while tuning. Types with fewer than ``n_query + 1`` dev mentions are
    left out (recorded)."""
    ks = sorted({int(k) for k in ks})
    if ks[-1] > n_query:
        raise ValueError(f"k={ks[-1]} shots need a dev query pool of at least {ks[-1]} (n_query={n_query})")
    types = [t for t in ep.types if len(ep.dev[t]) > n_query]
    if len(types) < 2:
        raise NotApplicable(f"{len(types)} type(s) have more than {n_query} development mentions; need 2 to tune")
    corpus, corpus_labels, query_pool = [], [], {}
    for t in types:
        query_pool[t] = ep.dev[t][:n_query]
        corpus += ep.dev[t][n_query:].tolist()
        corpus_labels += [t] * (len(ep.dev[t]) - n_query)
    labels = ep.pool["label"].to_pylist()
    chosen, test = set(ep.types), set(ep.corpus.tolist())
    outside = np.asarray([i for i, lab in enumerate(labels) if lab not in chosen and i not in test], dtype=np.int64)
    take = min(n_none, len(outside))
    none = np.sort(np.random.default_rng([seed, 6]).choice(outside, size=take, replace=False)) if take else outside[:0]
    corpus += none.tolist()
    corpus_labels += [None] * len(none)
    queries = {}
    for k in ks:
        qrng = np.random.default_rng([seed, 7, k])
        queries[k] = [Query(t, np.sort(qrng.choice(query_pool[t], size=k, replace=False)))
                      for t in types for _ in range(queries_per_type)]
    record = {"seed": int(seed), "m": len(types), "types": types, "left_out": sorted(set(ep.types) - set(types)),
              "n_none": int(len(none)), "corpus_size": len(corpus), "ks": ks, "queries_per_type": int(queries_per_type)}
    return Episode(pool=ep.pool, types=types, corpus=np.asarray(corpus, dtype=np.int64), corpus_labels=corpus_labels,
                   query_pool=query_pool, dev={t: ep.dev[t][:0] for t in types}, queries=queries, record=record)
