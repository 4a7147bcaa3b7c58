"""Type induction with a frozen encoder: the untuned baseline's protocol for typed mentions (what
:mod:`eventatlas.methods.untuned` runs; no training). Its rows carry the method name ``untuned``."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..io import write_parquet

log = logging.getLogger(__name__)

NAME = "untuned"
DEFAULT_CLUSTERINGS = ("agglomerative", "manifold", "manifold_sym", "affinity")
DEFAULT_REPRESENTATIONS = ("sentence", "trigger", "mask", "mix", "window4")
DEFAULT_K_SEEN = 10


def _embedding_meta(npy: Path) -> dict[str, Any]:
    side = npy.with_suffix(".json")
    return json.loads(side.read_text(encoding="utf-8")) if side.exists() else {}


def frozen_induction(man, out_dir: Path, seed: int, cfg: Any, device: str, result: Any) -> None:
    """Type induction with a frozen encoder into ``result`` (the untuned baseline's protocol, see
    :mod:`eventatlas.methods.untuned`): select the unseen types' mentions, embed them with each
    representation, cluster them with each algorithm, score, and draw one representation in 2-D."""
    from ..modeling.encode import embed_mentions, load_embeddings
    from ..evaluation.base import RowKey
    from ..evaluation.clustering import cluster_and_score

    splits = [cfg.splits] if isinstance(cfg.splits, str) else cfg.splits
    sel = cfg.select(man.path, seed=seed, k_seen_default=DEFAULT_K_SEEN, splits=splits)
    reps = list(cfg.representations or DEFAULT_REPRESENTATIONS)
    algos = list(cfg.clusterings or DEFAULT_CLUSTERINGS)
    only = None if cfg.metrics is None else set(cfg.metrics) | set(cfg.require_metrics)
    table, y = sel.eval_table(), sel.eval_labels
    k = int(cfg.n_clusters or sel.record["n_types_clustered"])
    split_name = ",".join(splits) if splits else (",".join(sorted({s for s in table["split"].to_pylist() if s})) or "all")
    setting = sel.setting()
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.trigger_markers:
        from ..modeling.inputs import mark_triggers

        ms, ma, mb = mark_triggers(table["sentence"].to_pylist(), table["trigger_start"].to_pylist(),
                                   table["trigger_end"].to_pylist())
        for name, col in (("sentence", pa.array(ms, pa.string())), ("trigger_start", pa.array(ma, table["trigger_start"].type)),
                          ("trigger_end", pa.array(mb, table["trigger_end"].type))):
            table = table.set_column(table.schema.get_field_index(name), name, col)
    selected = write_parquet(table, out_dir / "selected_mentions.parquet")
    result.add_artifact("selected_mentions", selected, table.num_rows)
    params = result.params
    params.update({"setting": setting, "n_clusters": k, "representations": reps, "clusterings": algos,
                   "selection": sel.record, "embeddings": {}})
    log.info("untuned %s: %d unseen mentions of %d types -> %d clusters (%s)", man.dataset, len(y),
             sel.record["n_types_clustered"], k, "subsampled" if sel.record["subsampled"] else "all")
    ids = table["mention_id"].to_pylist()
    timings: dict[str, float] = {}
    shown = cfg.projection_representation or ("trigger" if "trigger" in reps else reps[0])
    projected = None  # (X, gold, clusters) of the representation drawn
    enc_kw = {"device": device, **cfg.encoder.model_dump()}
    for rep in reps:
        t0 = time.perf_counter()
        emb_path = embed_mentions(selected, cfg.model_id, rep, cache_dir=cfg.cache_dir, **enc_kw)
        meta = _embedding_meta(emb_path)
        params["embeddings"][rep] = {"cache_key": meta.get("key"), "computed_on": meta.get("device"),
                                     "precision": meta.get("precision")}
        emb_ids, X = load_embeddings(emb_path)
        y_rep, ids_rep = y, ids
        if list(emb_ids) != ids:
            # the encoder leaves out mentions with unusable spans (its rejects file says why):
            # score the rest, and record how many were dropped
            pos = {m: i for i, m in enumerate(emb_ids)}
            keep = [i for i, m in enumerate(ids) if m in pos]
            if len(keep) < 2:
                raise ValueError(f"{emb_path}: fewer than 2 selected mentions have an embedding")
            X = X[[pos[ids[i]] for i in keep]]
            y_rep, ids_rep = y[keep], [ids[i] for i in keep]
            params.setdefault("embedding_dropped", {})[rep] = len(ids) - len(keep)
        timings[f"embed/{rep}"] = round(time.perf_counter() - t0, 3)
        variant = "trigger_markers" if cfg.trigger_markers else None  # rows say the inputs were marked
        key = RowKey(dataset=man.dataset, method=NAME, seed=seed, split=split_name, setting=setting,
                     representation=rep)
        ev = cluster_and_score({variant: X} if variant else X, y_rep.tolist(), n_clusters=k, algorithms=algos,
                               key=key, only=only)
        result.metrics += ev.rows
        for (_, algo), why in ev.skipped.items():
            # one algorithm over a dense-memory ceiling (affinity first) must not sink the others
            params.setdefault("skipped", {})[f"{rep}/{algo}"] = why
        for (_, algo), pred in ev.partitions.items():
            timings[f"cluster/{rep}/{algo}"] = ev.seconds.get((variant, algo))
            apath = write_parquet(pa.table({"mention_id": ids_rep, "label": y_rep.tolist(), "cluster": pred}),
                                  out_dir / "assignments" / f"{rep}__{algo}.parquet")
            result.add_artifact(f"assignments/{rep}/{algo}", apath, len(ids_rep))
            ari = next((r["value"] for r in ev.rows if r["metric"] == "ari" and r["clustering"] == algo), float("nan"))
            log.info("untuned %s %s/%s: ari=%.4f (%d clusters found)", man.dataset, rep, algo, ari,
                     len(set(pred.tolist())))
        if rep == shown:
            first = ev.partitions.get((None, "agglomerative"), next(iter(ev.partitions.values()), None))
            projected = (X, y_rep.tolist(), None if first is None else first.tolist())
    if cfg.projection != "none" and shown not in reps:
        params["projection"] = f"not drawn: representation {shown!r} is not among those computed {reps}"
    elif cfg.projection != "none" and projected is not None and len(projected[0]) >= 2:
        from ..tracking.plots import projection_png

        t0 = time.perf_counter()
        X, gold, clusters = projected
        info = projection_png(X, gold, out_dir / f"projection_{shown}.png",
                              f"untuned {man.dataset}, {shown} representation: unseen mentions ({setting})",
                              clusters=clusters, method=cfg.projection, seed=seed)
        result.add_artifact(f"plot/projection/{shown}", info["path"], info["points"])
        params["projection"] = {"representation": shown, "method": info["method"], "points": info["points"],
                                "of": info["of"]}
        timings["projection"] = round(time.perf_counter() - t0, 3)
        log.info("untuned %s: %s projection of %d %s embeddings -> %s", man.dataset, info["method"], info["points"],
                 shown, info["path"])
    params["timings_s"] = timings
