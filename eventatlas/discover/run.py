"""``discover``: a dataset's mentions -> embedded -> clustered into types (the count chosen without labels
unless given) -> described -> linked to known inventories; Parquet out (``types``, ``assignments``,
``links``), written atomically into the output directory.

Gold labels, when a dataset has them, are never read to choose or shape the types (this is discovery);
they are only carried onto each card as its majority label, for scoring against the gold later.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..schema import DISCOVERED_TYPES as TYPES

log = logging.getLogger(__name__)


@dataclass
class DiscoverConfig:
    k: int | None = None                # None: the count with the best cosine silhouette
    algorithm: str = "agglomerative"
    representation: str = "trigger"
    encoder: str | None = None          # None: the default encoder; a HF id, a path or run:<id>
    link_to: list[str] = field(default_factory=list)  # dataset names (or directories) of known inventories
    link_sample: int | None = 200       # mentions per type the linking embeds (None: all)
    n_examples: int = 3
    # eventatlas.discover.novelty: new when the best link's raw score of this scorer is under new_below (the
    # pair the discover_maven experiment's dev part chose on every seed; its page says how little it separates)
    novelty_scorer: str = "vote"
    new_below: float = 0.25
    seed: int = 0
    device: str | None = None


def _inventory(key: str, dataset: str, dataset_dir: Path, cards: list[dict[str, Any]], run_id: str) -> Any:
    from ..atlas.inventory import Inventory

    return Inventory(key=key, kind="cluster", dataset=dataset, dataset_dir=dataset_dir, ontology=None,
                     fingerprint=key, types=[c["type_id"] for c in cards], names=[c["name"] for c in cards],
                     definitions=[None] * len(cards), parents=[None] * len(cards),
                     mentions={c["type_id"]: c["mention_ids"] for c in cards},
                     majority=[c["majority_label"] for c in cards], run_id=run_id)


def discover(dataset_dir: str | Path, out_dir: str | Path, cfg: DiscoverConfig | None = None, *,
             say: Callable[[str], None] = log.info, inventories: list[Any] | None = None,
             embeddings: str | Path | None = None) -> dict[str, Any]:
    """Discover the types of ``dataset_dir``'s mentions into ``out_dir``; returns a summary (counts, how the
    count was chosen, the files, the seconds of each stage, ``vectors``: who made them). ``inventories``: known
    inventories (:class:`eventatlas.atlas.inventory.Inventory`, e.g. a part of a dataset's types) linked to after
    those ``cfg.link_to`` names. ``embeddings``: the mentions' ``cfg.representation`` vectors already computed
    (a ``.npy`` in :func:`eventatlas.modeling.encode.load_embeddings`' layout, rows by mention_id, e.g. the
    detector's same-pass vectors) with ``cfg.encoder``: not embedded again; the targets are embedded with
    ``cfg.encoder``, so both sides of a link share one space."""
    import pyarrow.parquet as pq

    from ..atlas.inventory import dataset_inventory, type_set
    from ..atlas.link import LinkConfig, link_pair
    from ..atlas.scorers import EVIDENCE_SCORERS
    from ..cluster import cluster
    from ..cluster.selection import chosen_by_silhouette
    from ..data import Manifest
    from ..errors import InputError
    from ..io import atomic_write_json, write_parquet
    from ..modeling.encode import embed_mentions, load_embeddings
    from ..modeling.mention_encoder import model_name
    from .describe import describe_types, map_2d
    from .novelty import NOVELTY_SCORERS, mark_new

    cfg = cfg or DiscoverConfig()
    if cfg.novelty_scorer not in NOVELTY_SCORERS:
        raise ValueError(f"novelty scorer {cfg.novelty_scorer!r}: one of {', '.join(NOVELTY_SCORERS)}")
    man = Manifest.read(dataset_dir)
    ddir, out = Path(dataset_dir), Path(out_dir)
    mpath = man.table("mentions")
    if not mpath.exists() or not man.rows.get("mentions"):
        raise InputError(mpath, "file", f"dataset {man.dataset} has no mentions to discover types in; find them "
                                        f"first: `eventatlas detect {man.dataset} --model run:<detector>`")
    known = [(Path(d) if Path(str(d)).is_dir() else ddir.parent / str(d)) for d in cfg.link_to]
    for d in known:  # a missing inventory is refused before the encoder runs
        if not (d / "manifest.json").exists():
            raise InputError(d, "dataset", f"--link-to {d.name}: not an ingested dataset")
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    if embeddings is not None:
        ids, X, vectors_by = _given(embeddings, cfg.representation)
    else:
        ids, X = load_embeddings(embed_mentions(mpath, cfg.encoder, cfg.representation, device=cfg.device))
        vectors_by = f"{model_name(cfg.encoder)} (embedded)"
    seconds["embed"] = round(time.perf_counter() - t, 2)
    if len(ids) < 2:
        raise InputError(mpath, "file", f"{len(ids)} usable mention(s): too few to induce types")
    t = time.perf_counter()
    if cfg.k is not None:
        k, how = min(cfg.k, len(ids)), f"{min(cfg.k, len(ids))} types: given"
    else:
        k, why = chosen_by_silhouette(X, cfg.algorithm, seed=cfg.seed)
        how = f"{k} types: {why or 'too few mentions to compare counts'}"
    clusters = cluster(np.asarray(X), cfg.algorithm, n_clusters=k, seed=cfg.seed)
    seconds["cluster"] = round(time.perf_counter() - t, 2)
    log.info("discover %s: %s", man.dataset, how)
    cols = ["mention_id", "doc_id", "sent_idx", "sentence", "trigger", "trigger_start", "trigger_end", "labels"]
    table = pq.read_table(mpath, columns=cols)
    rows = {r["mention_id"]: r for r in table.to_pylist()}
    if embeddings is not None and (stray := next((i for i in ids if i not in rows), None)) is not None:
        raise InputError(Path(embeddings), "file", f"vector of mention {stray!r}, which {man.dataset} lacks: "
                                                   "vectors of another dataset")
    mentions = [rows[i] for i in ids]
    cards = describe_types(mentions, X, clusters, n_examples=cfg.n_examples)
    key = f"discover:{man.dataset}"
    inv = _inventory(key, man.dataset, ddir, cards, out.name)  # link rows carry the run's id
    t = time.perf_counter()
    link_tables = []
    for target in [*(dataset_inventory(d) for d in known), *(inventories or [])]:
        lcfg = LinkConfig(methods=EVIDENCE_SCORERS, max_per_type=cfg.link_sample, seed=cfg.seed,
                          representation=cfg.representation, device=cfg.device)
        sets = None
        if embeddings is not None:  # the source's sample from the given vectors, the target's with their encoder
            sets = (_sample(inv, ids, X, lcfg), type_set(target, encoder=cfg.encoder, representation=cfg.representation,
                                                         max_per_type=cfg.link_sample, seed=cfg.seed,
                                                         device=cfg.device, precision=lcfg.precision))
        res = link_pair(inv, target, lcfg, encoder=cfg.encoder, sets=sets)
        link_tables.append(res.links)
        say(f"linked {len(cards)} types to {target.key} ({len(target.types)} types): {res.links.num_rows} link rows")
    seconds["link"] = round(time.perf_counter() - t, 2)
    mark_new(cards, key, pa.concat_tables(link_tables) if link_tables else None, cfg.novelty_scorer, cfg.new_below)
    out.mkdir(parents=True, exist_ok=True)
    of = {c["type_id"]: c for c in cards}
    type_of = {m: c["type_id"] for c in cards for m in c["mention_ids"]}
    write_parquet(pa.Table.from_pylist([{k_: c[k_] for k_ in TYPES.names} for c in cards], schema=TYPES),
                  out / "types.parquet")
    gold = {m: (lab[0] if (lab := rows[m].get("labels")) else None) for m in ids}
    # the layout every clustering run writes (mention_id, cluster, label): the atlas reads it as an inventory
    xy = map_2d(X, cfg.seed)  # the page's map of the mentions
    write_parquet(pa.table({"mention_id": list(ids), "type_id": [type_of[m] for m in ids],
                            "cluster": [int(of[type_of[m]]["cluster"]) for m in ids],
                            "label": pa.array([gold[m] for m in ids], pa.string()),
                            "x": pa.array(xy[:, 0], pa.float32()), "y": pa.array(xy[:, 1], pa.float32())}),
                  out / "assignments.parquet")
    files = {"types": str(out / "types.parquet"), "assignments": str(out / "assignments.parquet")}
    if link_tables:
        write_parquet(pa.concat_tables(link_tables), out / "links.parquet")
        files["links"] = str(out / "links.parquet")
    n_new = sum(bool(c["new"]) for c in cards)
    summary = {"dataset": man.dataset, "inventory": key, "mentions": len(ids), "types": len(cards), "how": how,
               "new": n_new if link_tables else None,
               "config": asdict(cfg), "files": files, "seconds": seconds, "vectors": vectors_by,
               "linked_to": [d.name for d in known] + [i.key for i in inventories or []]}
    atomic_write_json(out / "discover.json", summary)
    return summary


def _given(path: str | Path, representation: str) -> tuple[list[str], np.ndarray, str]:
    """(ids, vectors, who made them) of pre-computed vectors; their ``.json`` sidecar, when there, names the
    maker and the representation (refused when it is not the run's)."""
    import json

    from ..errors import InputError
    from ..modeling.encode import load_embeddings

    path = Path(path)
    ids, X = load_embeddings(path)
    side = path.with_suffix(".json")
    meta = json.loads(side.read_text(encoding="utf-8")) if side.exists() else {}
    if meta.get("representation", representation) != representation:
        raise InputError(path, "file", f"{meta['representation']} vectors, but this run uses {representation}")
    return ids, np.asarray(X, dtype=np.float32), meta.get("by") or f"given ({path.name})"


def _sample(inv: Any, ids: list[str], X: np.ndarray, lcfg: Any) -> Any:
    """The inventory's linking sample (:meth:`Inventory.selection`, as :func:`eventatlas.atlas.inventory.type_set`
    takes it) from vectors already computed, L2-normalised as it does."""
    from ..atlas.scorers.base import TypeSet

    pos = {m: r for r, m in enumerate(ids)}
    sel = inv.selection(lcfg.max_per_type, lcfg.seed)
    pick = [(i, m) for i, t in enumerate(inv.types) for m in sel[t] if m in pos]
    V = X[[pos[m] for _, m in pick]] if pick else np.zeros((0, X.shape[1]), dtype=np.float32)
    V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
    return TypeSet(types=list(inv.types), names=list(inv.names), X=V, owner=[i for i, _ in pick],
                   mention_ids=[m for _, m in pick])


def record(out_dir: str | Path, dataset_dir: str | Path, cfg: DiscoverConfig, summary: dict[str, Any] | None,
           started_at: str, error: BaseException | None = None) -> Path:
    """The run record of a discover run (``<out_dir>/run.json``): its config, data fingerprint and files
    (``discover/types``, ``assignments/discover``: the atlas's cluster inventory of the run, ``discover/links``);
    a failed run's names its error. Published like every run record (the one writer)."""
    from ..data import Manifest
    from ..io import sha256_file
    from ..tracking.records import fail_record, finish_record, new_record, write_record

    out = Path(out_dir)
    man = Manifest.read(dataset_dir)
    rec = new_record(out.name, flow="discover", task="discover", method="discover", seed=cfg.seed,
                     params={"dataset": man.dataset, **asdict(cfg)},
                     data_fingerprints={man.dataset: man.data_fingerprint()}, started_at=started_at)
    if error is not None:
        return write_record(out, fail_record(rec, error, out))
    kinds = {"types": "discover/types", "assignments": "assignments/discover", "links": "discover/links"}
    import pyarrow.parquet as pq

    rec["artifacts"] = [{"kind": kinds[k], "path": p, "rows": pq.ParquetFile(p).metadata.num_rows,
                         "sha256": sha256_file(p)} for k, p in (summary or {}).get("files", {}).items()]
    if (summary or {}).get("page"):  # the run's HTML page (cards, map, search), written after the tables
        rec["artifacts"].append({"kind": "discover/page", "path": summary["page"], "rows": None,
                                 "sha256": sha256_file(summary["page"])})
    rec["run"]["summary"] = {k: (summary or {}).get(k) for k in ("mentions", "types", "how", "new", "seconds",
                                                                   "linked_to", "vectors")}
    return write_record(out, finish_record(rec))
