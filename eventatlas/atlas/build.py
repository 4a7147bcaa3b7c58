"""Building the atlas incrementally: parts on disk, each rebuilt only when its inputs change.

The atlas directory (default ``<data root>/atlas``) holds one Parquet *part* per unit of work and a
``manifest.json`` naming each part with the fingerprint of its inputs:

* ``nodes/<inventory>``: an inventory's nodes (the dataset's fingerprint, or the run's assignments hash);
* ``declared/<inventory>``: its declared links (+ the mapping file and the FrameNet inventories present);
* ``learned/<source>__<target>__<encoder>``: the learned links of one pair with one encoder (both
  inventories' fingerprints, the encoder's fingerprint and the link configuration), with the pair's
  metric rows against the gold.

Fingerprints hold what a part is computed from (data, mapping file, encoder weights, link
configuration) and the part kind's version in :data:`VERSIONS`, never the code version: a code change
that leaves links as they were (a refactor, a new command, a fix elsewhere) rebuilds nothing, and one
that changes what a part holds bumps its kind's version, which rebuilds that kind only.

:func:`build` rebuilds a part only when its fingerprint changed (``full=True`` rebuilds all), and drops
the parts of inventories that are gone: a new dataset or run adds its nodes and links and leaves the
rest alone. Each part has an owner (``owner`` in the manifest): ``build`` for the nodes, the declared
links and the learned links of the default pairs, ``link`` for the pairs ``atlas link`` added (with their
``recipe``: pair, encoder, link options). A build replaces or drops only its own parts; a linked pair stays
until its inventories are gone or a link of the same pair and encoder replaces it.

The publish path (:func:`eventatlas.store.publishing.publish_atlas`) lands the changed parts in the
warehouse. The metric rows of every scored pair of the atlas go into one run record (task ``atlas``)
whose run id is the atlas's identity (:func:`record_id`, from its directory): a rebuild replaces its
rows in the warehouse instead of adding a copy.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow.parquet as pq

from .. import config
from ..io import atomic_write_json, sha256_file, write_parquet
from .declared import declared_links
from .inventory import RUN_PREFIX, Inventory, cluster_inventories, dataset_inventory
from .link import LinkConfig, encoder_label, gold_mapping, link_pair
from .manifest import ATLAS_FORMAT, ATLAS_MANIFEST, read_atlas_manifest

log = logging.getLogger(__name__)
# bump a kind's version when a code change alters what its parts hold (node columns, declared relations,
# scorers / calibration / gold scoring): the parts of that kind rebuild, the others stay
VERSIONS = {"nodes": 1, "declared": 1, "learned": 1}


def atlas_dir() -> Path:
    return config.data_root() / "atlas"


def _slug(s: str) -> str:
    """A file name for a part: readable, and unique per name (the readable part is cut and punctuation is
    folded, so names differing past 100 characters or only in punctuation would collide without the hash)."""
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', s).strip('_')[:100]}-{hashlib.sha256(s.encode()).hexdigest()[:12]}"


def _fp(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def discover(datasets: Sequence[str] | None = None, runs: Sequence[str] | None = None) -> list[Inventory]:
    """The inventories of the named datasets and runs (default: every ingested dataset with event types,
    every run under the runs dir that wrote clusterings)."""
    ddir, rdir = config.datasets_dir(), config.runs_dir()
    names = list(datasets) if datasets is not None else sorted(
        p.name for p in ddir.glob("*") if (p / "event_types.parquet").exists() and (p / "manifest.json").exists())
    invs = []
    for n in names:
        p = Path(n) if Path(n).is_dir() else ddir / n
        if not (p / "manifest.json").exists():
            raise FileNotFoundError(f"{p}: dataset {n!r} is not ingested")
        invs.append(dataset_inventory(p))
    run_dirs = [rdir / r for r in runs] if runs is not None else sorted(p for p in rdir.glob("*") if (p / "run.json").exists())
    for r in run_dirs:
        if not (r / "run.json").exists():
            raise FileNotFoundError(f"{r}: run {r.name!r} has no run record")
        invs += [i for i in cluster_inventories(r) if (i.dataset_dir / "mentions.parquet").exists()]
    return invs


def default_pairs(invs: Iterable[Inventory]) -> list[tuple[str, str]]:
    """Every non-FrameNet inventory (types and clusters) -> every FrameNet inventory; inventories without
    mentions have no evidence to link from (their nodes and declared links still join)."""
    invs = [i for i in invs if any(i.mentions.values())]
    fn = [i for i in invs if i.ontology == "FrameNet" and i.kind == "type"]
    return [(a.key, b.key) for a in invs if a.ontology != "FrameNet" for b in fn]


@dataclass
class BuildReport:
    root: str
    built: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"root": self.root, "built": self.built, "kept": self.kept, "removed": self.removed,
                "metric_rows": len(self.metrics), "pairs": self.pairs, "seconds": round(self.seconds, 2)}


def _link_inventory(key: str) -> Inventory | None:
    """The inventory a linked pair names, found afresh (a dataset under the datasets dir, a run's
    clustering); None when it is gone."""
    if key.startswith(RUN_PREFIX):
        rdir = config.runs_dir() / key[len(RUN_PREFIX):].split("/", 1)[0]
        if not (rdir / "run.json").exists():
            return None
        return next((i for i in cluster_inventories(rdir) if i.key == key), None)
    ddir = config.datasets_dir() / key
    return dataset_inventory(ddir) if (ddir / "manifest.json").exists() else None


def build(*, datasets: Sequence[str] | None = None, runs: Sequence[str] | None = None,
          pairs: Sequence[tuple[str, str]] | None = None, encoders: Sequence[str | None] = (None,),
          cfg: LinkConfig | None = None, root: str | Path | None = None, full: bool = False,
          prune: bool = True) -> BuildReport:
    """Build (or bring up to date) the atlas under ``root``; see the module doc.

    Each part has an owner, the step whose rows it holds. ``prune=True`` is ``atlas build``: it owns the
    nodes and declared links of every inventory in the atlas and the learned links of its pairs, and
    replaces or drops only those. ``prune=False`` is ``atlas link``: the learned parts of the named pairs
    become the link's own, with what made them (pair, encoder, link options); it adds the nodes and declared
    links of inventories new to the atlas, leaves the build's as they are and drops nothing. A
    later build keeps a linked part, with the nodes of its inventories, and brings it up to date with the
    link's own options when its inputs change; it drops it only when one of its inventories is gone. A
    link of the same pair and encoder replaces it."""
    from ..modeling.encode import model_fingerprint

    t0 = time.perf_counter()
    cfg = cfg or LinkConfig()
    owner = "build" if prune else "link"
    root = Path(root) if root is not None else atlas_dir()
    man = read_atlas_manifest(root)
    old = man["parts"]
    new: dict[str, dict[str, Any]] = {}
    rep = BuildReport(root=str(root))
    invs = discover(datasets, runs)
    by_key = {i.key: i for i in invs}
    linked = {n: p for n, p in old.items() if p.get("owner") == "link" and p.get("recipe")} if prune else {}
    for name, p in list(linked.items()):  # a linked pair's inventories stay in the atlas while they exist
        for key in (p["recipe"]["source"], p["recipe"]["target"]):
            if key not in by_key and (inv := _link_inventory(key)) is not None:
                by_key[key] = inv
                invs.append(inv)
        if not all(k in by_key for k in (p["recipe"]["source"], p["recipe"]["target"])):
            log.warning("atlas: %s is dropped: an inventory it links is gone", name)
            del linked[name]
    fns = [i for i in invs if i.ontology == "FrameNet" and i.kind == "type"]
    enc_fps: dict[str | None, str] = {}

    def part(name: str, fingerprint: str, make, kind: str, **meta: Any) -> None:
        fingerprint = _fp(VERSIONS[kind], fingerprint)
        path = root / kind / f"{_slug(name.split('/', 1)[1])}.parquet"
        prev = old.get(name)
        meta = {"owner": "build", **meta}
        # a link sees only its pair's inventories: the nodes and declared links the build made stay the build's
        mine = prune or kind == "learned"
        same = not full and prev is not None and prev.get("fingerprint") == fingerprint
        if prev and (root / prev["path"]).exists() and (same or not mine):
            new[name] = {**prev, **meta}
            rep.kept.append(name)
            return
        table, extra = make()
        write_parquet(table, path)
        new[name] = {"kind": kind, "fingerprint": fingerprint, "path": str(path.relative_to(root)),
                     "rows": table.num_rows, "sha256": sha256_file(path), **extra, **meta}
        rep.built.append(name)

    def learned(A: Inventory, B: Inventory, e: str | None, pcfg: LinkConfig, who: str) -> None:
        if e not in enc_fps:
            enc_fps[e] = model_fingerprint(e)["hash"]
        gold = gold_mapping(A, B)  # the gold fits the calibration and is scored: its change rebuilds
        fp = _fp(A.fingerprint, B.fingerprint, enc_fps[e], pcfg.as_dict(), A.majority, gold)

        def make():
            res = link_pair(A, B, pcfg, encoder=e, work_dir=root / "work")
            rep.metrics.extend(res.metrics)
            rep.pairs.append(res.info)
            log.info("atlas %s -> %s (%s): %d links in %.1fs", A.key, B.key, res.info["encoder"],
                     res.links.num_rows, res.info["seconds"])
            return res.links, {"info": res.info, "metrics": res.metrics}

        recipe = {"source": A.key, "target": B.key, "encoder": e, "config": pcfg.as_dict()}
        part(f"learned/{A.key}__{B.key}__{encoder_label(e)}", fp, make, "learned", owner=who,
             **({"recipe": recipe} if who == "link" else {}))

    for inv in invs:
        part(f"nodes/{inv.key}", _fp(inv.fingerprint), lambda inv=inv: (inv.node_table(), {}), "nodes")
        if inv.kind == "type":
            from .gold import mapping_path

            mp = mapping_path(inv.ontology)
            mfp = sha256_file(mp) if mp is not None and mp.exists() else None
            part(f"declared/{inv.key}", _fp(inv.fingerprint, mfp, sorted((f.key, f.fingerprint) for f in fns)),
                 lambda inv=inv: (declared_links(inv, fns), {}), "declared")
    todo = list(pairs) if pairs is not None else default_pairs(invs)
    for a, b in todo:
        if a not in by_key or b not in by_key:
            missing = a if a not in by_key else b
            raise FileNotFoundError(f"atlas link: no inventory {missing!r} (known: {', '.join(sorted(by_key))})")
        for e in encoders:
            if f"learned/{a}__{b}__{encoder_label(e)}" not in linked:  # a linked pair stays the link's
                learned(by_key[a], by_key[b], e, cfg, owner)
    for name, p in sorted(linked.items()):  # the link's own options, this build's device and precision
        r = p["recipe"]
        try:
            if r["encoder"] not in enc_fps:
                enc_fps[r["encoder"]] = model_fingerprint(r["encoder"])["hash"]
        except Exception as e:  # noqa: BLE001 - its encoder cannot be read now: its links stay as they are
            log.warning("atlas: %s is kept as linked, not brought up to date: encoder %s: %s", name, r["encoder"], e)
            new[name] = p
            rep.kept.append(name)
            continue
        pcfg = LinkConfig(**{**r["config"], "methods": tuple(r["config"]["methods"])}, device=cfg.device,
                          precision=cfg.precision)
        learned(by_key[r["source"]], by_key[r["target"]], r["encoder"], pcfg, "link")
    if not prune:
        new = {**{k: v for k, v in old.items() if k not in new}, **new}
    rep.removed = sorted(set(old) - set(new))
    atomic_write_json(root / ATLAS_MANIFEST, {"format": ATLAS_FORMAT, "parts": new, "link_config": cfg.as_dict()})
    for name in rep.removed:  # after the manifest: a crash in between leaves an unlisted file, not a listed gap
        (root / old[name]["path"]).unlink(missing_ok=True)
    rep.seconds = time.perf_counter() - t0
    return rep


def read_part(root: str | Path, name: str):
    man = read_atlas_manifest(root)
    return pq.read_table(Path(root) / man["parts"][name]["path"])


def record_id(root: str | Path) -> str:
    """The run id of an atlas's scores: one per atlas directory, so each rebuild replaces its rows."""
    return "atlas-" + hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:12]


def atlas_metrics(root: str | Path) -> list[dict[str, Any]]:
    """The metric rows of every learned part of the atlas, once each: the name scorer reads no mentions,
    so its rows, the same under every encoder, are kept once."""
    seen, rows = set(), []
    for _name, p in sorted(read_atlas_manifest(root)["parts"].items()):
        for r in p.get("metrics") or []:
            key = tuple(r.get(k) for k in ("dataset", "split", "setting", "representation", "variant", "metric", "seed"))
            if key not in seen:
                seen.add(key)
                rows.append(r)
    return rows


def write_record(report: BuildReport, *, encoders: Sequence[str | None], cfg: LinkConfig, flow: str = "atlas") -> Path | None:
    """The run record of the atlas's scores (task ``atlas``), written when this build built or removed a
    learned part (None otherwise, or when no pair has a gold): ``runs/<record_id>/run.json`` holds the
    metric rows of every scored pair in the atlas now, under the one run id of the atlas
    (:func:`record_id`), so publishing it replaces what the previous build published."""
    from ..tracking.records import finish_record, new_record, write_metrics
    from ..tracking.records import write_record as write_run

    if not any(n.startswith("learned/") for n in report.built + report.removed):
        return None
    rows = atlas_metrics(report.root)
    if not rows:
        return None
    run_id = record_id(report.root)
    run_dir = config.runs_dir() / run_id
    parts = read_atlas_manifest(report.root)["parts"]
    rec = new_record(run_id, flow=flow, task="atlas", method="atlas",
                     params={"encoders": [encoder_label(e) for e in encoders], "link_config": cfg.as_dict(),
                             "pairs": [p["info"] for n, p in sorted(parts.items()) if p.get("info")],
                             "atlas": report.root},
                     data_fingerprints={}, seed=cfg.seed, device="cpu")
    write_metrics(rec, rows, run_dir)
    return write_run(run_dir, finish_record(rec, "completed"))
