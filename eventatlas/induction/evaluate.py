"""Clustering inputs x algorithms for a trained (or ensembled) model, scored on unseen mentions.

Inputs (square distance matrices over the unseen mentions):
  attn_dot      1 - S,          S = Q K^T / sqrt(d)  (asymmetric; see eventatlas.cluster for how
  attn_dot_neg  -S                                    each algorithm reads it)
  attn_cos      1 - cos(Q_i, K_j)
  attn_dot_norm -(z_row(S) + z_col(S)) / 2   (S standardised per row and per column, so a
                                   mention whose scores are all high (a "hub" key) or all low does not
                                   dominate average linkage; see ``normalised_scores``)
  ft            1 - cos(F_i, F_j)   (the fine-tuned encoder features)
Algorithms: agglomerative, manifold (faithful, unsymmetrised), manifold_sym, affinity
(which picks its own number of clusters). Average linkage, UMAP memberships (exp(-(d - rho)/sigma))
and affinity propagation's median preference are all invariant to adding a constant to every
distance, so ``attn_dot`` and ``attn_dot_neg`` must give the same partitions (the manifold methods get
the matrix shifted by its global minimum, since UMAP weights need non-negative distances): reported anyway,
as the issue asks, and the equality is a check on the pipeline.

Ensembles of N runs: S averaged over runs, features F concatenated (each run's F is unit-norm,
so the concatenation's cosine is the mean of the runs' cosines); Q/K cosine matrices averaged.
"""
from __future__ import annotations

import math
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from ..evaluation.base import RowKey

log = logging.getLogger(__name__)

INPUTS = ("attn_dot", "attn_dot_neg", "attn_cos", "ft", "attn_dot_norm")
ALGORITHMS = ("agglomerative", "manifold", "manifold_sym", "affinity")


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def scores_matrix(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.asarray(q, np.float64) @ np.asarray(k, np.float64).T / math.sqrt(q.shape[1])


def normalised_scores(s: np.ndarray) -> np.ndarray:
    """Scale-normalised score matrix: the mean of S z-scored along its rows and along its columns
    (the diagonal left out of the statistics; a constant row or column has unit scale)."""
    s = np.asarray(s, np.float64)
    n = s.shape[0]
    off = ~np.eye(n, dtype=bool) if n > 1 else np.ones((n, n), dtype=bool)
    m = np.where(off, s, np.nan)
    mu_r, sd_r = np.nanmean(m, axis=1, keepdims=True), np.nanstd(m, axis=1, keepdims=True)
    mu_c, sd_c = np.nanmean(m, axis=0, keepdims=True), np.nanstd(m, axis=0, keepdims=True)
    sd_r, sd_c = np.where(sd_r > 0, sd_r, 1.0), np.where(sd_c > 0, sd_c, 1.0)
    return 0.5 * ((s - mu_r) / sd_r + (s - mu_c) / sd_c)


def distance_inputs(emb: dict[str, np.ndarray], inputs: Sequence[str] = INPUTS) -> dict[str, np.ndarray]:
    """Distance matrices of one run (``emb`` has F, Q, K) or an ensemble (has S, cosQK, F)."""
    need_s = any(name in ("attn_dot", "attn_dot_neg", "attn_dot_norm") for name in inputs)
    s = (emb["S"] if "S" in emb else scores_matrix(emb["Q"], emb["K"])) if need_s else None
    out: dict[str, np.ndarray] = {}
    for name in inputs:
        if name == "attn_dot":
            out[name] = 1.0 - s
        elif name == "attn_dot_neg":
            out[name] = -s
        elif name == "attn_cos":
            c = emb["cosQK"] if "cosQK" in emb else _unit(emb["Q"]) @ _unit(emb["K"]).T
            out[name] = 1.0 - c
        elif name == "ft":
            f = _unit(emb["F"])
            out[name] = 1.0 - f @ f.T
        elif name == "attn_dot_norm":
            out[name] = -normalised_scores(s)
        else:
            raise ValueError(f"unknown clustering input {name!r}; known: {INPUTS}")
    return out


def ensemble(runs: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine N runs over the same mentions (same row order)."""
    runs = list(runs)
    if not runs:
        raise ValueError("ensemble of zero runs")
    n = {r["F"].shape[0] for r in runs}
    if len(n) != 1:
        raise ValueError(f"ensemble runs cover different mention counts: {sorted(n)}")
    s = np.mean([scores_matrix(r["Q"], r["K"]) for r in runs], axis=0)
    cos = np.mean([_unit(r["Q"]) @ _unit(r["K"]).T for r in runs], axis=0)
    f = np.concatenate([_unit(r["F"]) for r in runs], axis=1)
    return {"S": s, "cosQK": cos, "F": f}


def cluster_all(dists: dict[str, np.ndarray], n_clusters: int, *, algorithms: Sequence[str] = ALGORITHMS,
                k_manifold: int | None = None, seed: int = 0) -> dict[tuple[str, str], np.ndarray]:
    """Labels for every (input, algorithm) of square distance matrices (the evaluation layer's
    :func:`~eventatlas.evaluation.clustering.cluster_partitions`, precomputed)."""
    from ..evaluation.clustering import cluster_partitions

    return cluster_partitions(dists, n_clusters, algorithms=algorithms, metric="precomputed", k_manifold=k_manifold,
                              seed=seed)


def frame_table(framenet_dir: Path, model_id: str | None) -> tuple[list[str], np.ndarray, dict[str, set[str]]]:
    """Frame ids, definition embeddings (cached) and Inheritance descendants of an ingested FrameNet."""
    from .. import config
    from ..data.manifest import read_table
    from ..evaluation.naming import inheritance_descendants
    from ..io import atomic_path, fingerprint_paths
    from ..modeling.encode import Encoder

    types = read_table(framenet_dir, "event_types", columns=["type_id", "definition"]).to_pylist()
    frame_ids = [t["type_id"] for t in types]
    rel = read_table(framenet_dir, "type_relations", columns=["source_id", "target_id", "relation"]).to_pylist()
    desc = inheritance_descendants((r["source_id"], r["target_id"]) for r in rel if r["relation"] == "Inheritance")
    fp = fingerprint_paths([framenet_dir / "event_types.parquet"])
    cache = config.cache_dir() / "induction" / f"frames_{(model_id or config.DEFAULT_MODEL).replace('/', '_')}_{fp}.npy"
    if cache.exists():
        emb = np.load(cache)
    else:
        emb = Encoder(model_id, progress=False).encode_sentences([t["definition"] or t["type_id"] for t in types],
                                                                  normalize=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(cache) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, emb)
    return frame_ids, emb, desc


def umap_png(f: np.ndarray, labels: Sequence, y_true: Sequence[str], path: Path, title: str, seed: int) -> Path:
    """2-D UMAP of the features, coloured by induced cluster (left) and gold type (right)."""
    from ..tracking.plots import projection_png

    return Path(projection_png(f, y_true, path, title, clusters=labels, method="umap", seed=seed)["path"])


def evaluate_trained(out_dir: Path, summary: dict[str, Any], *, key: RowKey, n_clusters: int | None,
                     k_manifold: int | None, inputs: Sequence[str], algorithms: Sequence[str], model_id: str | None,
                     names: dict[str, str], mapping: dict[str, list[str]] | None, framenet_dir: Path | None,
                     umap_plot: bool = True, epoch: int | None = None) -> tuple[list[dict], list[dict]]:
    """Metric rows and artifacts of one trained run directory (also used post hoc on saved runs).

    ``key`` is the rows' identity (dataset, method, seed, split, setting, representation). Rows:
    task ``induction`` for every (input, algorithm) at the chosen epoch (variant = the input) and for
    the same encoder before training (variant ``untuned:ft``: its features' ``ft`` distances, clustered in the
    same call as the trained inputs, so its partitions equal the ``untuned`` method's on those features);
    ``naming`` / ``linking`` for those partitions and the gold one (variant ``perfect``); ``training`` for the chosen stopping epochs."""
    from ..evaluation.base import metric_rows
    from ..evaluation.clustering import evaluate_partitions
    from ..evaluation.naming import framenet_linking, type_naming, valid_frames
    from ..io import sha256_file, write_parquet
    from .training import load_npz

    rows: list[dict] = []
    arts: list[dict] = []
    chosen = summary["chosen_epoch"][summary["stop_rule"]] if epoch is None else epoch
    ids = summary["unseen_mention_ids"]
    y = summary["unseen_labels"]
    k = int(n_clusters or len(set(y)))
    emb = load_npz(summary["epoch_files"][chosen])
    untuned = load_npz(summary["untuned_file"])
    for rule, e in summary["chosen_epoch"].items():
        rows += metric_rows({f"stop_epoch_{rule}": e}, task="training",
                            key=key.replace(clustering=None, variant="stopping"))
    t0 = time.perf_counter()
    # the untuned encoder is one more input of the same clustering call, built as the trained `ft`
    # (float64 cosine distances): its partitions equal the `untuned` method's on the same features
    dists = {**distance_inputs(emb, inputs), "untuned:ft": distance_inputs(untuned, ("ft",))["ft"]}
    parts = cluster_all(dists, k, algorithms=algorithms, k_manifold=k_manifold, seed=key.seed)
    log.info("clustered %d partitions in %.1fs", len(parts), time.perf_counter() - t0)
    rows += evaluate_partitions({part: v.tolist() for part, v in parts.items()}, y, key=key)
    if summary.get("dev"):  # chosen on the dev part (eventatlas.induction.dev)
        rows += dev_metric_rows(summary, parts, y, key)

    # naming / linking: centroids in the untuned encoder space, so the comparison between
    # perfect, untuned and trained partitions isolates the effect of the partition
    labelled = [(("perfect", None), np.array(y))] + list(parts.items())
    if names:
        from ..modeling.encode import Encoder

        cands = sorted(set(y))
        name_emb = Encoder(model_id, progress=False).encode_sentences([names.get(t, t) for t in cands], normalize=True)
        for (variant, algo), lab in labelled:
            m, _ = type_naming(untuned["F"], y, lab.tolist(), cands, name_emb)
            rows += metric_rows(m, task="naming", key=key.replace(clustering=algo, variant=variant))
    if mapping is not None and framenet_dir is not None and (framenet_dir / "event_types.parquet").exists():
        frame_ids, frame_emb, desc = frame_table(framenet_dir, model_id)
        valid = valid_frames(mapping, desc)
        for (variant, algo), lab in labelled:
            m, _ = framenet_linking(untuned["F"], y, lab.tolist(), frame_ids, frame_emb, valid)
            rows += metric_rows(m, task="linking", key=key.replace(clustering=algo, variant=variant))

    # artifacts: embeddings at the stopping epoch, assignments, UMAP plot
    def vec(a: np.ndarray) -> pa.Array:
        a = np.ascontiguousarray(a, dtype=np.float32)
        return pa.FixedSizeListArray.from_arrays(pa.array(a.ravel()), a.shape[1])

    rep = key.representation
    emb_tab = pa.table({"mention_id": ids, "label": y, "F": vec(emb["F"]), "Q": vec(emb["Q"]), "K": vec(emb["K"])})
    p = write_parquet(emb_tab, out_dir / "embeddings_unseen.parquet")
    arts.append({"kind": f"embeddings/{rep}", "path": str(p), "rows": len(ids), "sha256": sha256_file(p)})
    asg = {"mention_id": ids, "label": y,
           **{f"{v}__{a}".replace(":", "_"): lab.astype(np.int64) for (v, a), lab in parts.items()}}
    p = write_parquet(pa.table(asg), out_dir / "assignments_unseen.parquet")
    arts.append({"kind": f"assignments/{rep}", "path": str(p), "rows": len(ids), "sha256": sha256_file(p)})
    if umap_plot and len(ids) >= 10:
        shown = parts.get(("attn_dot", "agglomerative"), next(iter(parts.values())))
        p = umap_png(emb["F"], shown, y, out_dir / "umap_unseen.png",
                     f"{key.dataset} {rep}: unseen mentions, epoch {chosen}", key.seed)
        arts.append({"kind": f"plot/umap/{rep}", "path": str(p), "rows": len(ids), "sha256": sha256_file(p)})
    return rows, arts


def ensemble_rows(summaries: list[dict], key: RowKey, n_clusters: int | None = None,
                  algorithms: Sequence[str] = ("agglomerative", "manifold", "manifold_sym"),
                  k_manifold: int | None = None) -> list[dict]:
    """Rows of the ensemble of several runs' chosen epochs (the paper's E-FT), ``key`` with seed -1;
    ``n_clusters`` and ``k_manifold`` as for the member runs (:func:`evaluate_trained`)."""
    from ..evaluation.clustering import evaluate_partitions
    from .training import load_npz

    ids = summaries[0]["unseen_mention_ids"]
    if any(s["unseen_mention_ids"] != ids for s in summaries):
        raise ValueError("ensemble runs do not share the unseen mentions")
    runs = [load_npz(s["epoch_files"][s["chosen_epoch"][s["stop_rule"]]]) for s in summaries]
    y = summaries[0]["unseen_labels"]
    parts = cluster_all(distance_inputs(ensemble(runs)), int(n_clusters or len(set(y))), algorithms=algorithms,
                        k_manifold=k_manifold)
    n = len(runs)
    return evaluate_partitions({(f"ensemble{n}:{inp}", algo): v.tolist() for (inp, algo), v in parts.items()}, y,
                               key=key.replace(seed=-1))


def dev_metric_rows(summary: dict[str, Any], parts: dict[tuple[str, str], np.ndarray], y: Sequence[str],
                    key) -> list[dict[str, Any]]:
    """Rows of the dev choice for :func:`eventatlas.induction.evaluate.evaluate_trained`: the chosen
    (input, algorithm)'s partition of the scored mentions again as variant / clustering ``dev_chosen``; with the
    training run's curves, the dev ARIs at the chosen epoch (split ``dev``, variant ``dev:<input>``), the
    choice's (variant ``dev_chosen``) and, at the label-free epoch, the same input's (variant ``label_free``);
    with the diagnostic, the held-out unseen ARIs at the label-free epoch (split ``heldout_unseen``, variant
    ``label_free:<input>``: the label-free rule's figure on the held-out sentences, beside the applied model's)."""
    from ..evaluation.base import metric_rows
    from ..evaluation.clustering import evaluate_partitions

    dev = summary.get("dev") or {}
    ch = dev.get("choice")
    if not ch:
        return []
    pick = (ch["input"], ch["algorithm"])
    rows = evaluate_partitions({("dev_chosen", "dev_chosen"): parts[pick]}, y, key=key) if pick in parts else []
    curves = dev.get("curves")
    if not curves:
        return rows
    d = key.replace(split="dev")
    for name, v in curves[ch["epoch"]].items():
        inp, algo = name.split("/", 1)
        rows += metric_rows({"ari": v}, task="induction", key=d.replace(variant=f"dev:{inp}", clustering=algo))
    rows += metric_rows({"ari": ch["dev_ari"]}, task="induction", key=d.replace(variant="dev_chosen",
                                                                              clustering="dev_chosen"))
    lf = summary["chosen_epoch"][dev["label_free_rule"]]
    name = f"{ch['input']}/{ch['algorithm']}"
    rows += metric_rows({"ari": curves[lf][name]}, task="induction",
                        key=d.replace(variant="label_free", clustering="dev_chosen"))
    for name, v in (dev.get("diagnostic_heldout_unseen") or [{}] * (lf + 1))[lf].items():
        inp, algo = name.split("/", 1)
        rows += metric_rows({"ari": v}, task="induction",
                            key=key.replace(split="heldout_unseen", variant=f"label_free:{inp}", clustering=algo))
    return rows
