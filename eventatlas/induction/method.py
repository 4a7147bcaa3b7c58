"""``batch_attention`` method for ``train-all``: train, stop without labels, cluster, name, link.

``run(dataset_dir, out_dir, *, seed, **params) -> MethodResult``. Settings are dataset parameters
(``DATASET_SETTINGS``, keyed by the manifest's reader): ACE (10 seen / 23 unseen), MAVEN (150 seen /
18 unseen, manifold k = 3000), OntoEvent-MAVEN (10 seen / 40 unseen), FrameNet (frames as types,
verb LUs). Every metric row is long form (eventatlas.evaluation.base.METRIC_KEYS) with
``clustering`` = the algorithm and ``variant`` = ``<input>`` for the trained model at the stopping
epoch, ``untuned:ft`` for the same encoder before training (same pooling, same mentions),
``perfect`` for the gold partition in naming/linking, ``stopping`` for the chosen epochs (task
``training``); ``split`` is ``unseen``.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from .. import config
from ..io import atomic_write_json, sha256_file, write_parquet
from ..warehouse import legacy_metric_keys
from .data import load_mentions, type_texts
from .evaluate import ALGORITHMS, INPUTS, cluster_all, distance_inputs, score_partitions
from .train import TrainConfig, Trainer, load_epoch

log = logging.getLogger(__name__)

NAME = "batch_attention"
MAPPINGS_DIR = config.REPO_ROOT / "datasets" / "mappings"

DATASET_SETTINGS: dict[str, dict[str, Any]] = {
    "ace": {"k_seen": 10, "mapping": "ace_framenet.tsv"},
    "maven": {"k_seen": 150, "k_manifold": 3000, "mapping": "maven_framenet.tsv"},
    "ontoevent": {"k_seen": 10, "mapping": "ontoevent_framenet.tsv"},
    "framenet": {"k_seen": 100, "lu_pos": "v", "mapping": "identity"},
}
TRAIN_KEYS = {f for f in TrainConfig.__dataclass_fields__} - {"representation", "seed"}


def settings_for(dataset_dir: Path) -> tuple[str, dict[str, Any]]:
    from ..methods.base import dataset_kind, read_manifest

    man = read_manifest(dataset_dir)
    name = man.get("dataset") or dataset_dir.name
    kind = (dataset_kind(man) or name).lower()
    for prefix, s in DATASET_SETTINGS.items():
        if kind.startswith(prefix) or name.lower().startswith(prefix):
            return name, dict(s)
    return name, {"k_seen": 10}


def _row(dataset, rep, clustering, metric, value, seed) -> dict[str, Any]:
    # "<input>/<algorithm>", "perfect", ... -> clustering + variant and task, as warehouse migration 003 maps them
    keys = legacy_metric_keys(clustering, metric)
    return {"task": keys["task"], "dataset": dataset, "split": "unseen", "method": NAME, "representation": rep,
            "clustering": keys["clustering"], "variant": keys["variant"], "metric": metric, "value": float(value),
            "seed": seed}


def _embed_texts(model_id: str | None, texts: list[str]) -> np.ndarray:
    from ..encode import Encoder

    return Encoder(model_id).encode_sentences(texts, normalize=True)


def frame_table(framenet_dir: Path, model_id: str | None) -> tuple[list[str], np.ndarray, dict[str, set[str]]]:
    """Frame ids, definition embeddings (cached beside the run cache) and Inheritance descendants."""
    import pyarrow.parquet as pq

    from ..io import fingerprint_paths
    from .naming import inheritance_descendants

    types = pq.read_table(framenet_dir / "event_types.parquet", columns=["type_id", "definition"]).to_pylist()
    frame_ids = [t["type_id"] for t in types]
    rel = pq.read_table(framenet_dir / "type_relations.parquet", columns=["source_id", "target_id", "relation"]).to_pylist()
    desc = inheritance_descendants((r["source_id"], r["target_id"]) for r in rel if r["relation"] == "Inheritance")
    fp = fingerprint_paths([framenet_dir / "event_types.parquet"])
    cache = config.cache_dir() / "induction" / f"frames_{(model_id or config.DEFAULT_MODEL).replace('/', '_')}_{fp}.npy"
    if cache.exists():
        emb = np.load(cache)
    else:
        emb = _embed_texts(model_id, [t["definition"] or t["type_id"] for t in types])
        from ..io import atomic_path

        cache.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(cache) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, emb)
    return frame_ids, emb, desc


def _umap_png(f: np.ndarray, labels: np.ndarray, y_true: Sequence[str], path: Path, title: str, seed: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import umap

    xy = umap.UMAP(n_components=2, metric="cosine", random_state=seed, n_jobs=1).fit_transform(f)
    fig, axes = plt.subplots(1, 2, figsize=(13, 6))
    gold = {t: i for i, t in enumerate(sorted(set(y_true)))}
    for ax, lab, name in ((axes[0], labels, "induced clusters"), (axes[1], [gold[t] for t in y_true], "gold unseen types")):
        ax.scatter(xy[:, 0], xy[:, 1], c=np.asarray(lab) % 20, cmap="tab20", s=4)
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title)
    fig.tight_layout()
    from ..io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    return path


def evaluate_trained(out_dir: Path, summary: dict[str, Any], *, dataset: str, rep: str, seed: int, n_clusters: int | None,
                     k_manifold: int | None, inputs: Sequence[str], algorithms: Sequence[str], model_id: str | None,
                     names: dict[str, str], mapping: dict[str, list[str]] | None, framenet_dir: Path | None,
                     umap_plot: bool = True, epoch: int | None = None) -> tuple[list[dict], list[dict]]:
    """Metric rows and artifacts of one trained run directory (also used post hoc on saved runs)."""
    from ..cluster import cluster
    from .naming import framenet_linking, type_naming, valid_frames

    rows: list[dict] = []
    arts: list[dict] = []
    chosen = summary["chosen_epoch"][summary["stop_rule"]] if epoch is None else epoch
    ids = summary["unseen_mention_ids"]
    y = summary["unseen_labels"]
    k = int(n_clusters or len(set(y)))
    emb = load_epoch(summary["epoch_files"][chosen])
    untuned = load_epoch(summary["untuned_file"])
    for rule, e in summary["chosen_epoch"].items():
        rows.append(_row(dataset, rep, "stopping", f"stop_epoch_{rule}", e, seed))
    t0 = time.perf_counter()
    parts = cluster_all(distance_inputs(emb, inputs), k, algorithms=algorithms, k_manifold=k_manifold, seed=seed)
    base = {("untuned:ft", a): cluster(np.ascontiguousarray(1.0 - untuned["F"] @ untuned["F"].T), a,
                                        None if a == "affinity" else k, metric="precomputed", seed=seed,
                                        **({"k": min(k_manifold, len(y))} if k_manifold and a.startswith("manifold") else {}))
            for a in algorithms}
    log.info("clustered %d partitions in %.1fs", len(parts) + len(base), time.perf_counter() - t0)
    allparts = {**{f"{i}/{a}": v for (i, a), v in parts.items()}, **{f"{i}/{a}": v for (i, a), v in base.items()}}
    for key, sc in score_partitions({(c, ""): v for c, v in allparts.items()}, y).items():
        for m, v in sc.items():
            rows.append(_row(dataset, rep, key[0], m, v, seed))

    # naming / linking: centroids in the untuned encoder space, so the comparison between
    # perfect, untuned and trained partitions isolates the effect of the partition
    if names:
        cands = sorted(set(y))
        name_emb = _embed_texts(model_id, [names.get(t, t) for t in cands])
        for cname, lab in [("perfect", np.array(y))] + [(c, v) for c, v in allparts.items()]:
            m, crow = type_naming(untuned["F"], y, lab.tolist(), cands, name_emb)
            rows += [_row(dataset, rep, cname, mk, mv, seed) for mk, mv in m.items()]
    if mapping is not None and framenet_dir is not None and (framenet_dir / "event_types.parquet").exists():
        frame_ids, frame_emb, desc = frame_table(framenet_dir, model_id)
        valid = valid_frames(mapping, desc)
        for cname, lab in [("perfect", np.array(y))] + [(c, v) for c, v in allparts.items()]:
            m, _ = framenet_linking(untuned["F"], y, lab.tolist(), frame_ids, frame_emb, valid)
            rows += [_row(dataset, rep, cname, mk, mv, seed) for mk, mv in m.items()]

    # artifacts: embeddings at the stopping epoch, assignments, UMAP plot
    def vec(a: np.ndarray) -> pa.Array:
        a = np.ascontiguousarray(a, dtype=np.float32)
        return pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), a.shape[1])

    emb_tab = pa.table({"mention_id": ids, "label": y, "F": vec(emb["F"]), "Q": vec(emb["Q"]), "K": vec(emb["K"])})
    p = write_parquet(emb_tab, out_dir / "embeddings_unseen.parquet")
    arts.append({"kind": f"embeddings/{rep}", "path": str(p), "rows": len(ids), "sha256": sha256_file(p)})
    asg = {"mention_id": ids, "label": y, **{c.replace("/", "__").replace(":", "_"): v.astype(np.int64) for c, v in allparts.items()}}
    p = write_parquet(pa.table(asg), out_dir / "assignments_unseen.parquet")
    arts.append({"kind": f"assignments/{rep}", "path": str(p), "rows": len(ids), "sha256": sha256_file(p)})
    if umap_plot and len(ids) >= 10:
        p = _umap_png(emb["F"], allparts["attn_dot/agglomerative"] if "attn_dot/agglomerative" in allparts
                      else next(iter(allparts.values())), y, out_dir / "umap_unseen.png",
                      f"{dataset} {rep}: unseen mentions, epoch {chosen}", seed)
        arts.append({"kind": f"umap/{rep}", "path": str(p), "rows": len(ids), "sha256": sha256_file(p)})
    return rows, arts


# The stopping rule clusters the unseen mentions at several counts and needs 2 <= c <= n - 1;
# below this many unseen mentions (e.g. the shipped samples) the method has nothing to learn from.
MIN_UNSEEN_MENTIONS = 10


def _check_applicable(dataset_dir: Path, data: Any, k_seen: int) -> None:
    from ..methods.base import NotApplicable

    n_unseen = int(data.unseen_mask.sum())
    if not data.seen_types or len(data.unseen_types) < 2 or n_unseen < MIN_UNSEEN_MENTIONS:
        raise NotApplicable(
            f"{dataset_dir}: batch_attention needs seen types, >= 2 unseen types and >= {MIN_UNSEEN_MENTIONS} "
            f"unseen mentions; got {len(data.seen_types)} seen / {len(data.unseen_types)} unseen types and "
            f"{n_unseen} unseen mentions (k_seen={k_seen})")


def run(dataset_dir: str | Path, out_dir: str | Path, *, seed: int = 0, representations: Sequence[str] = ("trigger",),
        k_seen: int | None = None, n_clusters: int | None = None, k_manifold: int | None = None,
        inputs: Sequence[str] = INPUTS, algorithms: Sequence[str] = ALGORITHMS, naming: bool = True,
        linking: bool = True, framenet_dir: str | Path | None = None, mapping: str | None = None,
        max_mentions: int | None = None, umap_plot: bool = True, **train_params: Any):
    """Train + evaluate on one dataset; ``train_params`` are TrainConfig fields (epochs, batch_size, ...)."""
    from ..methods.base import MethodResult

    unknown = set(train_params) - TRAIN_KEYS
    if unknown:
        raise TypeError(f"unknown batch_attention parameters: {sorted(unknown)}")
    dataset_dir, out_dir = Path(dataset_dir), Path(out_dir)
    dataset, setting = settings_for(dataset_dir)
    k_seen = int(k_seen if k_seen is not None else setting["k_seen"])
    k_manifold = k_manifold if k_manifold is not None else setting.get("k_manifold")
    data = load_mentions(dataset_dir, k_seen, lu_pos=setting.get("lu_pos"), max_mentions=max_mentions, seed=seed)
    _check_applicable(dataset_dir, data, k_seen)
    texts = type_texts(dataset_dir)
    fn_dir = Path(framenet_dir) if framenet_dir else config.datasets_dir() / "framenet"
    mp = None
    if linking:
        mname = mapping or setting.get("mapping")
        if mname == "identity":
            mp = {t: [t] for t in data.unseen_types}
        elif mname:
            from .naming import read_mapping

            mp = read_mapping(Path(mname) if Path(mname).is_absolute() else MAPPINGS_DIR / mname)
    rows: list[dict] = []
    arts: list[dict] = []
    params: dict[str, Any] = {"method": NAME, "dataset": dataset, "k_seen": k_seen, "n_seen_types": len(data.seen_types),
                              "n_unseen_types": len(data.unseen_types), "representations": list(representations),
                              "k_manifold": k_manifold, "n_clusters": n_clusters or len(data.unseen_types),
                              "framenet_dir": str(fn_dir) if mp is not None else None, "train": {}}
    for rep in representations:
        cfg = TrainConfig(representation=rep, seed=seed, **train_params)
        rdir = out_dir / rep
        summary = Trainer(data, cfg, rdir, type_texts=texts).fit()
        r, a = evaluate_trained(rdir, summary, dataset=dataset, rep=rep, seed=seed, n_clusters=n_clusters,
                                k_manifold=k_manifold, inputs=inputs, algorithms=algorithms, model_id=cfg.model_id,
                                names=texts if naming else {}, mapping=mp, framenet_dir=fn_dir, umap_plot=umap_plot)
        rows += r
        arts += a + [{"kind": f"train_summary/{rep}", "path": str(rdir / "train_summary.json"),
                      "sha256": sha256_file(rdir / "train_summary.json")}]
        params["train"][rep] = {k: summary[k] for k in ("augmentation", "precision", "device", "chosen_epoch",
                                                         "total_seconds", "stop_counts", "trigger_fallbacks")}
        params["train"][rep]["config"] = summary["config"]
        params["train"][rep]["seconds_per_epoch"] = float(np.mean([h["train_seconds"] for h in summary["history"]]))
    atomic_write_json(out_dir / "batch_attention_params.json", params)
    return MethodResult(metrics=rows, artifacts=arts, params=params)


def evaluate_saved(run_dir: str | Path, dataset_dir: str | Path, *, seed: int, k_manifold: int | None = None,
                   n_clusters: int | None = None, framenet_dir: str | Path | None = None, mapping: str | None = None,
                   inputs: Sequence[str] = INPUTS, algorithms: Sequence[str] = ALGORITHMS, naming: bool = True,
                   umap_plot: bool = True):
    """Evaluate a finished training directory (``train_summary.json`` + epoch files) as ``run`` would:
    used for runs trained in the background (same code path as ``run`` after ``Trainer.fit``)."""
    import json

    from ..methods.base import MethodResult
    from .naming import read_mapping

    run_dir, dataset_dir = Path(run_dir), Path(dataset_dir)
    summary = json.loads((run_dir / "train_summary.json").read_text())
    dataset, setting = settings_for(dataset_dir)
    rep = summary["config"]["representation"]
    mname = mapping or setting.get("mapping")
    mp = None
    if mname and mname != "identity":
        mp = read_mapping(Path(mname) if Path(mname).is_absolute() else MAPPINGS_DIR / mname)
    elif mname == "identity":
        mp = {t: [t] for t in summary["unseen_types"]}
    fn_dir = Path(framenet_dir) if framenet_dir else config.datasets_dir() / "framenet"
    rows, arts = evaluate_trained(run_dir, summary, dataset=dataset, rep=rep, seed=seed, n_clusters=n_clusters,
                                  k_manifold=k_manifold if k_manifold is not None else setting.get("k_manifold"),
                                  inputs=inputs, algorithms=algorithms, model_id=summary["config"]["model_id"],
                                  names=type_texts(dataset_dir) if naming else {}, mapping=mp, framenet_dir=fn_dir,
                                  umap_plot=umap_plot)
    params = {"method": NAME, "dataset": dataset, "representation": rep, "posthoc_evaluation": True,
              **{k: summary[k] for k in ("augmentation", "precision", "device", "chosen_epoch", "total_seconds",
                                         "stop_counts", "trigger_fallbacks", "config")},
              "seconds_per_epoch": float(np.mean([h["train_seconds"] for h in summary["history"]]))}
    return MethodResult(metrics=rows, artifacts=arts, params=params)
