"""The atlas's nodes: every type of every ingested inventory and every induced cluster of a run.

An :class:`Inventory` is one set of types with the mentions that are their evidence: a dataset's
``event_types`` (with the mentions labelled with each; FrameNet frames, Wikidata event classes of a
wiki build, ACE/MAVEN/OntoEvent types alike), or the clusters of one clustering of a finished run
(``assignments/<rep>/<algo>`` artifacts: ``mention_id``, ``label``, ``cluster``, keyed
``run:<run_id>/<rep>/<algo>``; or one integer column per clustering of an ``assignments/<rep>`` artifact,
keyed ``run:<run_id>/<rep>/<column>``). Node ids are ``<inventory>::<type_id>``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import config
from ..errors import InputError
from ..io import sha256_file, write_parquet
from .scorers.base import TypeSet

log = logging.getLogger(__name__)
RUN_PREFIX = "run:"
N_NODE_EVIDENCE = 5

NODES = pa.schema([
    pa.field("node_id", pa.string(), nullable=False),
    pa.field("inventory", pa.string(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),  # type | cluster
    pa.field("type_id", pa.string(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("definition", pa.string()),
    pa.field("parent_id", pa.string()),
    pa.field("ontology", pa.string()),
    pa.field("dataset", pa.string()),
    pa.field("run_id", pa.string()),
    pa.field("n_mentions", pa.int64()),
    pa.field("evidence_mention_ids", pa.list_(pa.string())),
])


def node_id(inventory: str, type_id: str) -> str:
    return f"{inventory}::{type_id}"


@dataclass
class Inventory:
    key: str
    kind: str  # "type" (a dataset's event types) | "cluster" (a run's clusters)
    dataset: str
    dataset_dir: Path
    ontology: str | None
    fingerprint: str
    types: list[str]
    names: list[str]
    definitions: list[str | None]
    parents: list[str | None]
    mentions: dict[str, list[str]]
    run_id: str | None = None
    majority: list[str | None] = field(default_factory=list)  # clusters: the majority gold label

    def node_table(self) -> pa.Table:
        rows = [{"node_id": node_id(self.key, t), "inventory": self.key, "kind": self.kind, "type_id": t, "name": n,
                 "definition": d, "parent_id": p, "ontology": self.ontology, "dataset": self.dataset,
                 "run_id": self.run_id, "n_mentions": len(self.mentions.get(t, ())),
                 "evidence_mention_ids": list(self.mentions.get(t, ())[:N_NODE_EVIDENCE])}
                for t, n, d, p in zip(self.types, self.names, self.definitions, self.parents)]
        return pa.Table.from_pylist(rows, schema=NODES)

    def selection(self, max_per_type: int | None, seed: int) -> dict[str, list[str]]:
        """Up to ``max_per_type`` mention ids per type (a seeded sample; all when ``None``), sorted."""
        out = {}
        for i, t in enumerate(self.types):
            ids = sorted(self.mentions.get(t, ()))
            if max_per_type is not None and len(ids) > max_per_type:
                ids = sorted(random.Random(f"{seed}:{t}").sample(ids, max_per_type))
            out[t] = ids
        return out


def _read(path: Path, columns: list[str]) -> pa.Table:
    try:
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(path, "file", f"not a readable Parquet table with columns {columns} ({e})") from None


def dataset_inventory(dataset_dir: str | Path) -> Inventory:
    """A dataset's event types (and any label its mentions use that the table lacks) with their mentions."""
    from ..data import Manifest

    man = Manifest.read(dataset_dir)
    ddir = Path(dataset_dir)
    et = _read(man.table("event_types"), ["type_id", "name", "definition", "parent_id", "ontology"]).to_pylist() \
        if man.table("event_types").exists() else []
    ment = _read(man.table("mentions"), ["mention_id", "labels"]) if man.table("mentions").exists() else None
    mentions: dict[str, list[str]] = {}
    if ment is not None:
        for mid, labels in zip(ment.column("mention_id").to_pylist(), ment.column("labels").to_pylist()):
            for lab in dict.fromkeys(labels or ()):
                mentions.setdefault(lab, []).append(mid)
    rows = {r["type_id"]: r for r in et}
    types = list(rows) + sorted(set(mentions) - set(rows))
    ontology = man.ontology or next((r["ontology"] for r in et if r.get("ontology")), None)
    return Inventory(key=man.dataset, kind="type", dataset=man.dataset, dataset_dir=ddir, ontology=ontology,
                     fingerprint=man.data_fingerprint(), types=types,
                     names=[(rows.get(t) or {}).get("name") or t for t in types],
                     definitions=[(rows.get(t) or {}).get("definition") for t in types],
                     parents=[(rows.get(t) or {}).get("parent_id") for t in types], mentions=mentions)


def read_assignments(path: str | Path) -> list[tuple[str | None, list[str], list[int], list[str | None]]]:
    """The clusterings of one assignments Parquet, as ``(name, mention ids, clusters, gold labels)``, in
    either layout the project writes: one clustering per file (``mention_id``, ``cluster`` and maybe
    ``label``: the untuned method, the cluster flow; name None) or several side by side (``mention_id``,
    ``label`` and one integer column per clustering, e.g. ``attn_dot__agglomerative``: batch attention's
    ``assignments_unseen``; named by the column). Mentions without a cluster are left out."""
    path = Path(path)
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(path, "file", f"not a readable Parquet table ({e})") from None
    found = schema.names
    if "cluster" in found:
        cols = ["cluster"]
    else:
        cols = [f.name for f in schema if f.name not in ("mention_id", "label") and pa.types.is_integer(f.type)]
    if "mention_id" not in found or not cols:
        raise InputError(path, "file", "no clustering: expected columns mention_id and cluster (one clustering) or "
                                       f"mention_id and one integer column per clustering; found {found}")
    t = _read(path, ["mention_id"] + cols + (["label"] if "label" in found else []))
    ids = t.column("mention_id").to_pylist()
    labels = t.column("label").to_pylist() if "label" in found else [None] * t.num_rows
    out = []
    for c in cols:
        rows = [(m, int(k), lab) for m, k, lab in zip(ids, t.column(c).to_pylist(), labels) if k is not None]
        out.append((None if c == "cluster" else c, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))
    return out


def cluster_inventories(run_dir: str | Path) -> list[Inventory]:
    """One inventory per clustering a finished run wrote (``assignments...`` artifacts, either layout of
    :func:`read_assignments`); none for a run that wrote none or did not complete. An assignments file
    that is gone is left out with a warning (its run's other clusterings still join)."""
    from ..tracking.records import read_record

    rec = read_record(Path(run_dir) / "run.json")
    run = rec["run"]
    if run.get("status") not in (None, "completed"):
        return []
    fps = run.get("data_fingerprints") or {}
    dataset = (run.get("params") or {}).get("dataset") or (next(iter(fps)) if len(fps) == 1 else None)
    out = []
    for a in rec.get("artifacts") or []:
        kind, path = str(a.get("kind") or ""), a.get("path")
        if not kind.startswith("assignments") or not path or not str(path).endswith(".parquet") or dataset is None:
            continue
        if not Path(path).is_file():
            log.warning("%s: run %s's %s artifact is gone: its clustering is left out", path, run["run_id"], kind)
            continue
        sha = a.get("sha256") or sha256_file(path)
        base = f"{RUN_PREFIX}{run['run_id']}/{kind.split('/', 1)[1] if '/' in kind else kind}"
        for name, mids, cl, labs in read_assignments(path):
            clusters: dict[str, list[str]] = {}
            labels: dict[str, Counter] = {}
            for mid, c, lab in zip(mids, cl, labs):
                cid = f"c{c}"
                clusters.setdefault(cid, []).append(mid)
                if lab is not None:
                    labels.setdefault(cid, Counter())[str(lab)] += 1
            types = sorted(clusters, key=lambda c: int(c[1:]))
            out.append(Inventory(key=base if name is None else f"{base}/{name}", kind="cluster", dataset=dataset,
                                 dataset_dir=config.datasets_dir() / dataset, ontology=None,
                                 fingerprint=(sha[:16] if name is None else f"{sha[:16]}:{name}"), types=types,
                                 names=[f"cluster {c[1:]}" for c in types], definitions=[None] * len(types),
                                 parents=[None] * len(types), mentions=clusters, run_id=run["run_id"],
                                 majority=[labels[c].most_common(1)[0][0] if c in labels else None for c in types]))
    return out


def type_set(inv: Inventory, *, encoder: str | None = None, representation: str = "trigger",
             max_per_type: int | None = None, seed: int = 0, work_dir: str | Path | None = None,
             device: str | None = None, precision: str = "auto") -> TypeSet:
    """The inventory's (sampled) mentions embedded with ``encoder`` (cached by content, see
    :func:`eventatlas.modeling.encode.embed_mentions`); mentions the encoder rejects are left out."""
    from ..modeling.encode import embed_mentions, load_embeddings

    sel = inv.selection(max_per_type, seed)
    wanted = sorted({m for ids in sel.values() for m in ids})
    mpath = inv.dataset_dir / "mentions.parquet"
    if not mpath.exists():
        raise InputError(mpath, "file", f"inventory {inv.key}: the mentions of dataset {inv.dataset} are not ingested")
    work = Path(work_dir) if work_dir is not None else config.data_root() / "atlas" / "work"
    digest = hashlib.sha256(json.dumps([inv.fingerprint, wanted], sort_keys=True).encode()).hexdigest()[:16]
    sub = work / f"{inv.dataset}.{digest}" / "mentions.parquet"
    if not sub.exists():
        import pyarrow.compute as pc

        table = pq.read_table(mpath)
        table = table.filter(pc.is_in(table.column("mention_id"), pa.array(wanted, pa.string())))
        write_parquet(table.sort_by("mention_id"), sub)
    kw: dict[str, Any] = {"precision": precision, **({"device": device} if device else {})}
    ids, X = load_embeddings(embed_mentions(sub, encoder, representation, **kw))
    X = np.asarray(X, dtype=np.float32)
    X = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    pos = {m: r for r, m in enumerate(ids)}
    rows, owner, mids = [], [], []
    for i, t in enumerate(inv.types):
        for m in sel[t]:
            if m in pos:
                rows.append(pos[m])
                owner.append(i)
                mids.append(m)
    return TypeSet(types=list(inv.types), names=list(inv.names), X=X[rows] if rows else np.zeros((0, X.shape[1])),
                   owner=np.asarray(owner, dtype=np.int64), mention_ids=mids)
