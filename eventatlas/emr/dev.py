"""The development side of the EMR protocol: an episode of the *development* types (a split file's
``dev`` list: neither trained on nor evaluated), the stated rule that scores a ranker on it, and the
per-epoch callback that lets a trained ranker keep its best epoch by that rule.

The rule (:func:`rule_score`): the mean of MAP and novel-trigger recall@50 at k = 5 shots. MAP alone
rewards finding the examples' own word again (a frozen trigger vector is near-lexical); novel-trigger
recall rewards finding the type's other words (raid, invasion, bombing for an "attacked" query), which
is what "more events like these" asks for. Both are fractions, so the mean weighs them equally.
The default ranker of ``eventatlas search`` is the one this rule prefers on dev (docs/methods/emr.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

DEV_K = 5
NOVEL_K = 50
RULE = f"mean of MAP and novel_recall@{NOVEL_K} at k = {DEV_K}, on the development types"


def rule_score(scores: dict[str, float]) -> float:
    """The dev rule of a ranker's scores (``map`` and ``novel_recall@50``; MAP alone when no dev query
    has a novel-trigger mention)."""
    novel = scores.get(f"novel_recall@{NOVEL_K}")
    return float(scores["map"]) if novel is None else 0.5 * (float(scores["map"]) + float(novel))


@dataclass
class DevEpisode:
    """A k = 5 episode of the development types over pool indices ``items`` (the corpus, then the shots)."""

    episode: Any
    items: np.ndarray  # pool indices whose features a ranker needs: corpus first, then every query's shots
    record: dict[str, Any]

    @property
    def queries(self):
        return self.episode.queries[self.record["k"]]

    def _split(self, F: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        n = len(self.episode.corpus)
        shots, at = [], n
        for q in self.queries:
            shots.append(F[at:at + len(q.shots)])
            at += len(q.shots)
        return shots, F[:n]

    def scores(self, F: np.ndarray | None = None, S: np.ndarray | None = None) -> dict[str, float]:
        """Scores of a ranker given the features ``F`` of :attr:`items` (ranked by mean cosine) or a
        (queries, corpus) score matrix ``S`` (a per-query network); ``rule`` is :func:`rule_score`."""
        from ..evaluation.base import RowKey
        from ..evaluation.retrieval import evaluate_retrieval, evaluate_scores

        k = self.record["k"]
        common = dict(ks=(1, 5, 10, NOVEL_K), key=RowKey(dataset="dev", method="emr", seed=0),
                      novel=self.episode.novel(k))
        if S is None:
            shots, corpus = self._split(F)
            rows = evaluate_retrieval(shots, corpus, self.episode.relevant(k), **common)
        else:
            rows = evaluate_scores(S, self.episode.relevant(k), **common)
        out = {r["metric"]: float(r["value"]) for r in rows}
        out["rule"] = rule_score(out)
        return out

    def shot_arrays(self, X: np.ndarray) -> list[np.ndarray]:
        """Every query's shot vectors from pool-aligned features ``X``."""
        return [X[q.shots] for q in self.queries]


def dev_episode(pool: pa.Table, cfg: Any, excluded: set[str], dev_types: list[str], seed: int) -> DevEpisode:
    """The development episode: the dev types' mentions (2 queries per type at k = 5) and "None" items
    drawn from a pool without the training and evaluated types (``excluded``), so neither shapes a choice."""
    from .episodes import sample_episode

    labels = pool["label"].to_pylist()
    keep = np.asarray([i for i, lab in enumerate(labels) if lab not in excluded], dtype=np.int64)
    sub = pool.take(pa.array(keep))
    k = min(DEV_K, cfg.n_query or DEV_K)
    ep = sample_episode(sub, min_mentions=cfg.min_mentions, n_corpus=cfg.n_corpus, n_query=cfg.n_query, n_dev=0,
                        n_none=cfg.n_none, queries_per_type=2, ks=[k], allowed_types=dev_types,
                        seed=seed * 1000 + 999)
    # back to indices of the full pool, so every ranker's pool-aligned features serve
    ep.corpus = keep[ep.corpus]
    ep.queries = {kk: [type(q)(q.type, keep[q.shots]) for q in qs] for kk, qs in ep.queries.items()}
    ep.pool = pool
    items = np.concatenate([ep.corpus, *[q.shots for q in ep.queries[k]]])
    return DevEpisode(ep, items, {"types": ep.types, "k": k, "queries": len(ep.queries[k]),
                                  "corpus_size": len(ep.corpus), "rule": RULE})


class DevCallback:
    """Per-epoch dev score of a ranker being trained (an ``EvalCallback`` function): ``features(trainer)``
    gives the features of the dev episode's items; ``history`` keeps the rule's curve."""

    def __init__(self, dev: DevEpisode, features: Callable[[Any], np.ndarray]):
        self.dev, self.features, self.history = dev, features, []

    def __call__(self, trainer) -> dict[str, float]:
        net = trainer.unwrapped
        was = net.training
        v = self.dev.scores(self.features(trainer))
        net.train(was)
        self.history.append(v["rule"])
        return {"dev_score": v["rule"], "dev_map": v["map"]}


def score_rankers_on_dev(dev: DevEpisode, cfg: Any, rankers: dict[str, np.ndarray], X: np.ndarray, sp: Any,
                         meta_model: Any, seed: int, device: str, result: Any, man: Any) -> dict[str, Any]:
    """Every ranker of the run on the development episode: metric rows (split ``dev``, with ``dev_rule``)
    and the ranker the rule prefers (ties: the first evaluated, i.e. the simpler one)."""
    from ..evaluation.base import RowKey, metric_rows
    from .models import siamese_rank_scores
    from .rankers import evaluations, per_query_params

    rows, best = [], None
    k, m = dev.record["k"], len(dev.episode.types)
    for model, rep, F in evaluations(cfg, rankers, X):
        if model in ("siamese", "meta_adapt"):
            S, _ = siamese_rank_scores(dev.shot_arrays(F), F[dev.episode.corpus], per_query_params(cfg, sp, model),
                                       seed=seed * 1000 + 777, device=device,
                                       init=meta_model.net if model == "meta_adapt" else None)
            sc = dev.scores(S=S)
        else:
            sc = dev.scores(F[dev.items])
        key = RowKey(dataset=man.dataset, method="emr", seed=seed, split="dev", representation=rep, variant=model,
                     setting=f"k={k} m={m}")
        result.metrics += metric_rows({"dev_rule": sc["rule"], "map": sc["map"],
                                       **{n: v for n, v in sc.items() if n.startswith("novel_recall@")}},
                                      task="retrieval", key=key)
        one = {"model": model, "representation": rep, "rule": round(sc["rule"], 4), "map": round(sc["map"], 4),
               f"novel_recall@{NOVEL_K}": round(sc.get(f"novel_recall@{NOVEL_K}", float("nan")), 4)}
        rows.append(one)
        if best is None or one["rule"] > best["rule"]:
            best = one
    return {"rule": RULE, "types": dev.record["types"], "scores": rows,
            "chosen": {"model": best["model"], "representation": best["representation"]}}
