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


def _marked(table: pa.Table) -> pa.Table:
    """``table`` with "[ trigger ]" in every sentence (:func:`eventatlas.modeling.inputs.mark_triggers`)."""
    from ..modeling.inputs import mark_triggers

    ms, ma, mb = mark_triggers(table["sentence"].to_pylist(), table["trigger_start"].to_pylist(),
                               table["trigger_end"].to_pylist())
    for name, col in (("sentence", pa.array(ms, pa.string())), ("trigger_start", pa.array(ma, table["trigger_start"].type)),
                      ("trigger_end", pa.array(mb, table["trigger_end"].type))):
        table = table.set_column(table.schema.get_field_index(name), name, col)
    return table


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
        table = _marked(table)
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


class _Collected:
    """What :func:`frozen_induction` writes into a method result (metrics, artifacts, params), for one option."""

    def __init__(self):
        self.metrics, self.artifacts, self.params = [], [], {}

    def add_artifact(self, kind: str, path: Any, rows: int | None = None) -> None:
        from ..io import sha256_file

        self.artifacts.append({"kind": kind, "path": str(path), "rows": rows, "sha256": sha256_file(path)})


def frozen_dev_choice(man, out_dir: Path, seed: int, cfg: Any, device: str, result: Any) -> None:
    """The frozen encoder chosen on the dev part (:mod:`eventatlas.induction.dev`): each marker option of
    ``cfg.marker_options`` (default: ``cfg.trigger_markers`` alone) x representation x algorithm clusters the
    seen types' mentions in the held-out sentences (rows split ``dev``, variant ``dev:<option>``); the best dev
    ARI picks (option, representation, algorithm), whose partition of the scored unseen mentions is repeated
    as variant / clustering ``dev_chosen`` (the choice and its dev ARI in ``params["dev_choice"]``). The scored rows of each
    option carry variant ``trigger_markers`` or ``no_markers``."""
    from ..evaluation.base import RowKey
    from ..evaluation.clustering import cluster_and_score
    from ..modeling.encode import embed_mentions, load_embeddings
    from .dev import dev_rows, heldout_part, subsample

    splits = [cfg.splits] if isinstance(cfg.splits, str) else cfg.splits
    dev_sel = heldout_part(cfg, man.path, seed, k_seen_default=DEFAULT_K_SEEN, splits=splits)
    idx = subsample(dev_rows(dev_sel), cfg.dev_max_mentions, seed)
    dev_table, y_dev = dev_sel.table.take(pa.array(idx, pa.int64())), dev_sel.labels[idx]
    algos = list(cfg.clusterings or DEFAULT_CLUSTERINGS)
    options = list(cfg.marker_options) if cfg.marker_options is not None else [cfg.trigger_markers]
    scores: dict[tuple[str, str, str], float] = {}
    first = len(result.metrics)
    for markers in options:
        name = "trigger_markers" if markers else "no_markers"
        sub = _Collected()
        opt = cfg.model_copy(update={"trigger_markers": markers, "select_on": "none", "marker_options": None})
        frozen_induction(man, out_dir / name, seed, opt, device, sub)
        result.metrics += [{**r, "variant": name} for r in sub.metrics]
        result.artifacts += [{**a, "kind": f"{name}/{a['kind']}"} for a in sub.artifacts]
        result.params.setdefault("options", {})[name] = sub.params
        dev_path = write_parquet(_marked(dev_table) if markers else dev_table, out_dir / name / "dev_mentions.parquet")
        for rep in list(cfg.representations or DEFAULT_REPRESENTATIONS):
            emb_ids, X = load_embeddings(embed_mentions(dev_path, cfg.model_id, rep, cache_dir=cfg.cache_dir,
                                                        device=device, **cfg.encoder.model_dump()))
            pos = {m: i for i, m in enumerate(dev_table["mention_id"].to_pylist())}
            y = y_dev[[pos[m] for m in emb_ids]].tolist()
            key = RowKey(dataset=man.dataset, method=NAME, seed=seed, split="dev", setting=dev_sel.setting(),
                         representation=rep, variant=f"dev:{name}")
            ev = cluster_and_score({f"dev:{name}": X}, y, n_clusters=len(set(y)), algorithms=algos, key=key,
                                   only=["ari"])
            for r in ev.rows:
                scores[(name, rep, r["clustering"])] = float(r["value"])
            result.metrics += ev.rows
    if not scores:
        raise ValueError("no dev score: nothing was clustered on the dev part")
    (name, rep, algo), best = max(scores.items(), key=lambda kv: kv[1])  # ties: the first in order
    chosen = [{**r, "variant": "dev_chosen", "clustering": "dev_chosen"} for r in result.metrics[first:]
              if r["variant"] == name and r["representation"] == rep and r["clustering"] == algo and r["split"] != "dev"]
    result.metrics += chosen  # (the choice's dev ARI is its dev:<option> row; in params["dev_choice"])
    result.params["dev_choice"] = {"option": name, "representation": rep, "algorithm": algo, "dev_ari": best,
                                   "n_dev_mentions": int(len(idx)), "n_dev_types": len(set(y_dev.tolist()))}
    result.params["dev_scores"] = {"/".join(k): v for k, v in scores.items()}
    log.info("untuned %s: chosen on dev: %s %s/%s (dev ARI %.4f)", man.dataset, name, rep, algo, best)
