"""The untuned baseline: cluster the unseen types' mentions with a frozen encoder.

Protocol (type induction, as in the CEO's reference figures): the ``k_seen`` most
frequent primary labels are "seen" (ties broken by type id), every other type is
"unseen"; the unseen mentions are embedded with each representation and clustered into
as many clusters as there are unseen types, by each clustering method; each partition
is scored with :func:`eventatlas.metrics.clustering_scores` against the primary labels.

Dataset defaults (applied when the caller does not override them):
FrameNet full text = "verbs (frames as clusters)": verb lexical units only (LU ending
``.v``), ``k_seen=0`` so every frame is a cluster. Above ``max_mentions`` selected
mentions we subsample deterministically with the run seed (recorded in the params),
since average linkage on N points needs O(N^2) memory and time on a CPU.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .. import config
from ..io import sha256_file, write_parquet
from ..runinfo import set_seeds
from .base import MethodResult, NotApplicable, dataset_kind, read_manifest

log = logging.getLogger(__name__)

NAME = "untuned"
DEFAULT_CLUSTERINGS = ("agglomerative", "manifold", "manifold_sym", "affinity")
DEFAULT_K_SEEN = 10
DEFAULT_MAX_MENTIONS = 20_000

# Keyed by the reader that produced the dataset (manifest "reader"); prefix match.
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "framenet": {"setting": "verbs (frames as clusters)", "lu_pos": "v", "k_seen": 0,
                 "require_metrics": ["bcubed_f", "purity_f"]},
}


def _defaults_for(manifest: dict[str, Any], dataset_name: str) -> dict[str, Any]:
    kind = (dataset_kind(manifest) or dataset_name or "").lower()
    for prefix, d in DATASET_DEFAULTS.items():
        if kind.startswith(prefix):
            return dict(d)
    return {}


def _lu_pos(extra: str | None) -> str | None:
    if not extra:
        return None
    try:
        lu = json.loads(extra).get("lu")
    except (ValueError, AttributeError):
        return None
    if not isinstance(lu, str) or "." not in lu:
        return None
    return lu.rsplit(".", 1)[1]


def select_mentions(
    table: pa.Table,
    *,
    k_seen: int,
    splits: Sequence[str] | None = None,
    lu_pos: str | None = None,
    max_mentions: int | None = DEFAULT_MAX_MENTIONS,
    seed: int = 0,
) -> tuple[pa.Table, np.ndarray, dict[str, Any]]:
    """Rows of the unseen-type mentions to cluster, their primary labels and selection stats.

    Pure function of its inputs (tested on hand-made tables).
    """
    n_total = table.num_rows
    if splits:
        table = table.filter(pc.is_in(table["split"], value_set=pa.array(list(splits), pa.string())))
    labels = table["labels"].to_pylist()
    keep = [bool(lab) for lab in labels]
    if lu_pos is not None:
        if "extra" not in table.column_names:
            raise ValueError("lu_pos filter needs the mentions' 'extra' column (FrameNet LU)")
        pos = [_lu_pos(e) for e in table["extra"].to_pylist()]
        keep = [k and p == lu_pos for k, p in zip(keep, pos)]
    idx = np.flatnonzero(keep)
    table = table.take(pa.array(idx, pa.int64()))
    y_all = np.array([labels[i][0] for i in idx], dtype=object)
    counts = Counter(y_all.tolist())
    ranked = sorted(counts, key=lambda t: (-counts[t], t))  # ties: type id ascending
    k_requested = k_seen
    # Tiny datasets (the shipped samples) may have <= k_seen types: keep at least two
    # unseen types so there is something to cluster; recorded as k_seen vs k_seen_requested.
    k_seen = max(0, min(k_seen, len(counts) - 2))
    seen = set(ranked[:k_seen])
    unseen_mask = np.array([t not in seen for t in y_all], dtype=bool)
    table = table.filter(pa.array(unseen_mask))
    y = y_all[unseen_mask]
    n_unseen = len(y)
    subsampled = False
    if max_mentions and n_unseen > max_mentions:
        rng = np.random.default_rng(seed)
        pick = np.sort(rng.choice(n_unseen, size=max_mentions, replace=False))
        table = table.take(pa.array(pick, pa.int64()))
        y = y[pick]
        subsampled = True
    stats = {
        "n_mentions_total": n_total,
        "n_labelled_selected": int(len(idx)),
        "n_types": len(counts),
        "k_seen_requested": k_requested,
        "k_seen": k_seen,
        "seen_types": ranked[:k_seen],
        "n_seen_types": len(seen),
        "n_unseen_types": len(counts) - len(seen),
        "n_unseen_mentions": n_unseen,
        "n_mentions_clustered": int(len(y)),
        "n_types_clustered": len(set(y.tolist())),
        "subsampled": subsampled,
    }
    return table, y, stats


def run(
    dataset_dir: str | Path,
    out_dir: str | Path,
    *,
    seed: int = 0,
    k_seen: int | None = None,
    representations: Sequence[str] | None = None,
    clusterings: Sequence[str] | None = None,
    n_clusters: int | None = None,
    splits: Sequence[str] | str | None = None,
    lu_pos: str | None = None,
    max_mentions: int | None = DEFAULT_MAX_MENTIONS,
    model_id: str | None = None,
    metrics: Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    encoder: dict[str, Any] | None = None,
) -> MethodResult:
    """Run the untuned baseline on one ingested dataset; see the module docstring."""
    from ..cluster import cluster
    from ..cluster.guards import DenseBudgetError
    from ..encode import REPRESENTATIONS, embed_mentions, load_embeddings
    from ..metrics import clustering_scores

    dataset_dir, out_dir = Path(dataset_dir), Path(out_dir)
    manifest = read_manifest(dataset_dir)
    dataset = manifest.get("dataset") or dataset_dir.name
    defaults = _defaults_for(manifest, dataset)
    if k_seen is None:
        k_seen = defaults.get("k_seen", DEFAULT_K_SEEN)
    if lu_pos is None:
        lu_pos = defaults.get("lu_pos")
    if isinstance(splits, str):
        splits = [splits]
    representations = list(representations or REPRESENTATIONS)
    clusterings = list(clusterings or DEFAULT_CLUSTERINGS)
    metric_names = list(metrics) if metrics else None
    if metric_names is not None:
        metric_names += [m for m in defaults.get("require_metrics", []) if m not in metric_names]
    set_seeds(seed)

    src = dataset_dir / "mentions.parquet"
    table = pq.read_table(src)
    sel, y, stats = select_mentions(table, k_seen=k_seen, splits=splits, lu_pos=lu_pos,
                                    max_mentions=max_mentions, seed=seed)
    del table
    if len(y) < 2 or stats["n_types_clustered"] < 2:
        raise NotApplicable(f"{src}: only {len(y)} unseen mentions / {stats['n_types_clustered']} unseen types "
                         f"after selection (k_seen={k_seen}, splits={splits}, lu_pos={lu_pos}); nothing to cluster")
    k = int(n_clusters or stats["n_types_clustered"])
    split_name = ",".join(splits) if splits else (
        ",".join(sorted({s for s in sel["split"].to_pylist() if s})) or "all")
    out_dir.mkdir(parents=True, exist_ok=True)
    selected_path = write_parquet(sel, out_dir / "selected_mentions.parquet")
    params = {
        "method": NAME, "dataset": dataset, "setting": defaults.get("setting", "unseen types"),
        "n_clusters": k, "splits": list(splits) if splits else None, "lu_pos": lu_pos,
        "max_mentions": max_mentions, "representations": representations, "clusterings": clusterings,
        "model_id": model_id or config.DEFAULT_MODEL, "encoder": encoder or {}, "seed": seed, **stats,
    }
    log.info("untuned %s: %d unseen mentions of %d types -> %d clusters (%s)", dataset, len(y),
             stats["n_types_clustered"], k, "subsampled" if stats["subsampled"] else "all")

    rows: list[dict[str, Any]] = []
    artifacts: list[dict[str, Any]] = [
        {"kind": "selected_mentions", "path": str(selected_path), "rows": sel.num_rows,
         "sha256": sha256_file(selected_path)}
    ]
    ids = sel["mention_id"].to_pylist()
    timings: dict[str, float] = {}
    bar = tqdm(total=len(representations) * len(clusterings), desc=f"untuned {dataset}", unit="run")
    for rep in representations:
        t0 = time.perf_counter()
        emb_path = embed_mentions(selected_path, model_id, rep, cache_dir=cache_dir, **(encoder or {}))
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
        for method in clusterings:
            t0 = time.perf_counter()
            kw = {} if method == "affinity" else {"n_clusters": k}
            try:
                pred = np.asarray(cluster(X, method, seed=seed, **kw))
            except DenseBudgetError as e:
                # one method over the dense-memory ceiling (affinity first) must not sink the others
                log.warning("untuned %s %s/%s skipped: %s", dataset, rep, method, e)
                params.setdefault("skipped", {})[f"{rep}/{method}"] = str(e)
                bar.update(1)
                continue
            scores = clustering_scores(y_rep.tolist(), pred.tolist())
            timings[f"cluster/{rep}/{method}"] = round(time.perf_counter() - t0, 3)
            for name, value in scores.items():
                if metric_names is not None and name not in metric_names:
                    continue
                rows.append({"task": "induction", "dataset": dataset, "split": split_name, "method": NAME,
                             "representation": rep, "clustering": method, "variant": None, "metric": name,
                             "value": float(value), "seed": seed})
            apath = write_parquet(
                pa.table({"mention_id": ids_rep, "label": y_rep.tolist(), "cluster": pred.astype(np.int64)}),
                out_dir / "assignments" / f"{rep}__{method}.parquet",
            )
            artifacts.append({"kind": f"assignments/{rep}/{method}", "path": str(apath), "rows": len(ids_rep),
                              "sha256": sha256_file(apath)})
            log.info("untuned %s %s/%s: ari=%.4f (%d clusters found)", dataset, rep, method,
                     scores.get("ari", float("nan")), len(set(pred.tolist())))
            bar.update(1)
    bar.close()
    params["timings_s"] = timings
    return MethodResult(metrics=rows, artifacts=artifacts, params=params)
