"""One part x one source of mentions of the ``discover`` method (:mod:`eventatlas.methods.discover`): run
:func:`eventatlas.discover.run.discover` on the mentions, then score detection, clustering, naming and the
new verdicts with :mod:`.score`; on the dev part, choose the novelty scorer and threshold."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .novelty import NOVELTY_SCORERS, best_links
from .score import choose_threshold, coverage, naming_hits, novelty

log = logging.getLogger(__name__)


def _mapping(ontology: str | None) -> dict[str, list[str]]:
    from ..atlas.gold import mapping_path
    from ..evaluation.naming import read_mapping

    mp = mapping_path(ontology)
    return read_mapping(mp) if mp is not None and mp.exists() else {}


def framed_types(ontology: str | None, link_to: list[str]) -> set[str]:
    """The types of ``ontology`` whose hand-mapped frames include one of the ``link_to`` inventories' types."""
    from .. import config
    from ..atlas.inventory import dataset_inventory

    have = {t for n in link_to for t in dataset_inventory(config.datasets_dir() / n).types}
    return {t for t, fs in _mapping(ontology).items() if set(fs) & have}


def _tops(links: pa.Table | None, inventory: str, scorer: str) -> dict[str, str]:
    """Source type id -> its rank-1 target type id in ``inventory`` by ``scorer``."""
    out: dict[str, str] = {}
    if links is None:
        return out
    for r in links.select(["source", "target", "method", "rank"]).to_pylist():
        if r["method"] == scorer and r["rank"] == 1 and r["target"].split("::", 1)[0] == inventory:
            out[r["source"].split("::", 1)[1]] = r["target"].split("::", 1)[1]
    return out


def score_part(ctx: Any, cfg: Any, part: str, variant: str, sentences: list, spans: list, ddir: Path, own: Any,
               hidden: list[str], chosen: tuple[str, float] | None, *, scored: bool,
               detecting: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .. import config
    from ..detection.protocol import gold_of
    from ..evaluation.base import RowKey, metric_rows
    from ..evaluation.detection import evaluate_detection
    from ..evaluation.metrics import clustering_scores
    from .run import DiscoverConfig, discover

    key = RowKey(dataset=ctx.dataset, method="discover", seed=ctx.seed, split=part, variant=variant)
    rows: list[dict[str, Any]] = []
    if scored and detecting:
        rows += evaluate_detection([p[:4] for p in spans], gold_of(sentences), key=key, type_agnostic=(part == "all"))
    scorer, below = chosen or (cfg.novelty_scorer or "centroid", 0.5 if cfg.new_below is None else cfg.new_below)
    known = [config.datasets_dir() / n for n in cfg.link_to]
    dcfg = DiscoverConfig(k=cfg.k, algorithm=cfg.algorithm, encoder=cfg.model_id, link_to=[str(d) for d in known],
                          link_sample=cfg.link_sample, seed=ctx.seed, device=ctx.device, novelty_scorer=scorer,
                          new_below=below)
    out = ctx.run_dir / f"discover-{part}-{variant}"
    summary = discover(ddir, out, dcfg, say=log.info, inventories=[own] if own is not None else [])
    cards = pq.read_table(out / "types.parquet").to_pylist()
    assign = pq.read_table(out / "assignments.parquet").to_pylist()
    links = pq.read_table(out / "links.parquet") if (out / "links.parquet").exists() else None
    got: dict[str, Any] = {"mentions": summary["mentions"], "types": summary["types"], "how": summary["how"],
                           "seconds": summary["seconds"], "hidden": hidden}
    if not scored and part != "dev":
        return rows, got
    rkey = key.replace(representation="trigger", clustering=cfg.algorithm)
    matched = [a for a in assign if a["label"] is not None]
    counts = {"n_mentions": float(len(assign)), "n_matched": float(len(matched)), "n_types": float(len(cards))}
    if scored and len(matched) >= 2:
        rows += metric_rows({**clustering_scores([a["label"] for a in matched], [a["cluster"] for a in matched]),
                             **counts}, task="induction", key=rkey)
    gold_types = sorted({t for s in sentences for _, _, t in s.gold})
    mapping = _mapping(ctx.manifest.ontology)
    targets: list[tuple[str, list[str], dict[str, list[str]]]] = []
    if own is not None:
        targets.append((own.key, own.types, {t: [t] for t in own.types}))
    for d in known:
        from ..atlas.inventory import dataset_inventory

        inv = dataset_inventory(d)
        have = set(inv.types)
        targets.append((inv.key, inv.types, {t: [f for f in fs if f in have] for t, fs in mapping.items()}))
    if scored:
        naming: dict[str, float] = {"gold_type_coverage": coverage(cards, gold_types) or 0.0}
        rows += metric_rows(naming, task="naming", key=rkey)
        for inv_key, _, reach in targets:
            for m in NOVELTY_SCORERS:
                hits, asked = naming_hits(cards, _tops(links, inv_key, m), reach)
                if hits is not None:
                    rows += metric_rows({"naming_hits@1": hits, "naming_n_clusters": float(asked)}, task="naming",
                                        key=rkey.replace(setting=f"{m} -> {inv_key}"))
    if not hidden or links is None:
        return rows, got
    frames = [t for t in targets if t[0] != (own.key if own is not None else None)]
    mapped = {h for h in hidden if any(reach.get(h) for _, _, reach in frames)}
    positives, ignore = [h for h in hidden if h not in mapped], sorted(mapped)
    got.update(hidden_new=positives, hidden_mapped=ignore)
    inv_key = summary["inventory"]
    best = {m: {s.split("::", 1)[1]: v for s, v in best_links(links, m).items() if s.startswith(inv_key + "::")}
            for m in NOVELTY_SCORERS}
    if part == "dev" and chosen is None and cfg.novelty_scorer is None:
        options = []
        for m in NOVELTY_SCORERS:
            th, at, curve = choose_threshold(cards, {t: s for t, (_, s) in best[m].items()}, positives, ignore,
                                             cfg.thresholds[m])
            options.append((at["new_f1"] if at["new_f1"] is not None else -1.0, -NOVELTY_SCORERS.index(m), m, th, at))
            got.setdefault("curves", {})[m] = curve
        _, _, m, th, at = max(options)
        got["chosen"] = (m, th)
        rows += metric_rows({k: v for k, v in at.items() if k != "below" and v is not None}, task="discovery",
                            key=key.replace(setting=f"chosen: {m} < {th}"))
        log.info("discover %s dev/%s: novelty chosen %s < %s (new F1 %s)", ctx.dataset, variant, m, th, at["new_f1"])
        return rows, got
    if not scored:
        return rows, got
    verdict = {t: s < below for t, (_, s) in best[scorer].items()}
    res = novelty(cards, verdict, positives, ignore)
    # a hidden type some linked inventory has under another name: right when it is called known and its top
    # link there (by the novelty scorer) is one of its mapped frames
    asked = [c for c in cards if c.get("majority_label") in mapped]
    tops = [(_tops(links, k, scorer), reach) for k, _, reach in frames]  # once per inventory, not per type
    right = [c for c in asked if not verdict.get(c["type_id"]) and any(
        top.get(c["type_id"]) in set(reach.get(c["majority_label"]) or ()) for top, reach in tops)]
    res["hidden_linked"] = len(right) / len(asked) if asked else None
    res["n_hidden_mapped_types"] = float(len(asked))
    rows += metric_rows({k: v for k, v in res.items() if v is not None}, task="discovery",
                        key=key.replace(setting=f"{scorer} < {below}"))
    return rows, got


def gold_on_found(ctx: Any, cfg: Any, part: str, gold_dir: Path, found: set[tuple]) -> list[dict[str, Any]]:
    """The gold-mention clustering scored only on the gold mentions a detector also found (``found``: their
    ``(sentence key, start, end)``; variant ``gold_found``): the mentions the detected clustering is scored
    on, so the two B-cubed figures differ only by what detection did to the clustering (its extra and missing
    mentions), not by which mentions are scored."""
    from ..evaluation.base import RowKey, metric_rows
    from ..evaluation.metrics import clustering_scores

    out = ctx.run_dir / f"discover-{part}-gold" / "assignments.parquet"
    if not out.exists():
        return []
    m = pq.read_table(gold_dir / "mentions.parquet", columns=["mention_id", "doc_id", "sent_idx", "trigger_start",
                                                               "trigger_end"]).to_pydict()
    span = {i: ((d, int(k)), int(a), int(b)) for i, d, k, a, b in zip(*m.values())}
    rows = [r for r in pq.read_table(out).to_pylist() if span.get(r["mention_id"]) in found and r["label"]]
    if len(rows) < 2:
        return []
    key = RowKey(dataset=ctx.dataset, method="discover", seed=ctx.seed, split=part, variant="gold_found",
                 representation="trigger", clustering=cfg.algorithm)
    return metric_rows({**clustering_scores([r["label"] for r in rows], [r["cluster"] for r in rows]),
                        "n_matched": float(len(rows))}, task="induction", key=key)
