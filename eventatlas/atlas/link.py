"""Learned links between two inventories: every scorer on the same mentions, calibrated, scored
against the gold when the pair has one.

:func:`link_pair` embeds both inventories' (sampled) mentions with one encoder, runs each scorer,
keeps each source type's ``top`` targets per scorer as link rows, and, when the source inventory's
ontology has a hand mapping to FrameNet and the target is a FrameNet inventory, scores every scorer
(plus the combined one) with :mod:`eventatlas.atlas.gold`. Calibration: the isotonic map of the
scorer fitted on the dev part of the gold when there is one, else the rank normalisation
(:mod:`eventatlas.atlas.calibrate`); the row says which.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..evaluation.base import RowKey, metric_rows
from . import gold as G
from .calibrate import IsotonicMap, rank_normalise
from .inventory import Inventory, node_id, type_set
from .links import LINKS, RELATIONS, link_row
from .scorers import EVIDENCE_SCORERS, SCORERS, score
from .scorers.base import TypeSet, pair_evidence

log = logging.getLogger(__name__)


@dataclass
class LinkConfig:
    methods: tuple[str, ...] = SCORERS
    representation: str = "trigger"
    k: int = 10                       # the vote's neighbours per mention
    top: int = 5                      # link rows kept per source type and scorer
    max_per_type: int | None = None   # mentions sampled per type (None: all)
    seed: int = 0                     # the mention sample and the dev/test split of the gold
    dev_fraction: float = 0.3
    device: str | None = None
    precision: str = "auto"           # the encoder's (auto: what eventatlas.modeling.device measured faster)

    def as_dict(self) -> dict[str, Any]:
        return {"methods": list(self.methods), "representation": self.representation, "k": self.k, "top": self.top,
                "max_per_type": self.max_per_type, "seed": self.seed, "dev_fraction": self.dev_fraction}


@dataclass
class PairResult:
    links: pa.Table
    metrics: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def encoder_label(encoder: str | None) -> str:
    from ..modeling.mention_encoder import model_name

    return model_name(encoder)


def gold_mapping(A: Inventory, B: Inventory) -> dict[str, list[str]] | None:
    """The hand mapping that scores A -> B (A's ontology, or its run's dataset's for clusters; B FrameNet)."""
    if (B.ontology or "") != "FrameNet":
        return None
    ontology = A.ontology
    if A.kind == "cluster":
        from ..data import Manifest

        try:
            ontology = Manifest.read(A.dataset_dir).ontology
        except Exception:  # noqa: BLE001 - the run's dataset is gone: no gold, the links still stand
            return None
    mp = G.mapping_path(ontology)
    if mp is None or not mp.exists():
        return None
    from ..evaluation.naming import read_mapping

    return read_mapping(mp)


def link_pair(A: Inventory, B: Inventory, cfg: LinkConfig | None = None, *, encoder: str | None = None,
              work_dir=None, sets: tuple[TypeSet, TypeSet] | None = None) -> PairResult:
    cfg = cfg or LinkConfig()
    enc = encoder_label(encoder)
    t0 = time.perf_counter()
    if sets is None:
        kw = dict(encoder=encoder, representation=cfg.representation, max_per_type=cfg.max_per_type, seed=cfg.seed,
                  work_dir=work_dir, device=cfg.device, precision=cfg.precision)
        sets = (type_set(A, **kw), type_set(B, **kw))
    TA, TB = sets
    t_embed = time.perf_counter() - t0
    methods = [m for m in cfg.methods if not (m == "name" and A.kind == "cluster")]  # clusters have no names
    raw = {m: score(m, TA, TB, **({"k": cfg.k} if m == "vote" else {})) for m in methods}
    t_score = time.perf_counter() - t0 - t_embed
    mapping = gold_mapping(A, B)
    has_b = TB.counts() > 0
    info: dict[str, Any] = {"source": A.key, "target": B.key, "encoder": enc, "source_mentions": len(TA.mention_ids),
                            "target_mentions": len(TB.mention_ids), "seconds_embed": round(t_embed, 2),
                            "seconds_score": round(t_score, 2)}
    metrics: list[dict[str, Any]] = []
    calib: dict[str, tuple[np.ndarray, str]] = {}
    matrices = {m: s.matrix for m, s in raw.items()}
    row_key = RowKey(dataset=A.dataset, method="atlas", seed=cfg.seed, setting=f"{A.key} -> {B.key}")
    if mapping is not None and A.kind == "type":
        gold = G.gold_for(A.types, mapping)
        has_a = TA.counts() > 0
        cols = {i: c for i, c in G.gold_columns(gold, B.types, has_b).items() if has_a[i]}
        dev, test = G.split_queries(cols, cfg.seed, cfg.dev_fraction)
        renamed = G.renamed(A.types, A.names, gold) & set(cols)
        info.update(queries=len(cols), dev=len(dev), test=len(test), renamed=len(renamed),
                    unreachable=len(gold) - len(cols), split_seed=cfg.seed, dev_fraction=cfg.dev_fraction)
        ev = {m: rank_normalise(matrices[m]) for m in EVIDENCE_SCORERS if m in matrices}
        if "name" in matrices and ev and dev:
            names = {"name": matrices["name"], "name_exact": G.exact_only(matrices["name"])}
            w, name_var, ev_name, dev_mrr = G.choose_weight(names, ev, cols, dev)
            matrices["combined"] = G.combine(names[name_var], ev[ev_name], w)
            info["combined"] = {"weight_name": w, "name": name_var, "evidence": ev_name, "dev_mrr": round(dev_mrr, 4)}
        for m, S in matrices.items():
            variant = m if m == "name" else f"{m}:{enc}"
            rep = None if m == "name" else cfg.representation
            for split, qs in (("test", test), ("all", sorted(cols))):
                if split == "all" and m == "combined":
                    continue  # its weight was chosen on dev: only the test part is fair
                for subset, q in (("", qs), ("_renamed", [i for i in qs if i in renamed])):
                    scores = {f"{k}{subset}": v for k, v in G.link_metrics(S, cols, q).items()}
                    metrics += metric_rows(scores, task="atlas",
                                           key=row_key.replace(split=split, representation=rep, variant=variant))
            if m != "combined" and dev:
                try:
                    iso = IsotonicMap.from_gold(S, dev, cols)
                    calib[m] = (iso(S), f"isotonic:dev(seed={cfg.seed},fraction={cfg.dev_fraction})")
                except ValueError:
                    pass
    elif mapping is not None and A.kind == "cluster":
        for m, S in matrices.items():
            share, n = G.cluster_frame_share(S, A.majority, B.types, mapping)
            metrics += metric_rows({"cluster_frame_share": share, "n_clusters": float(n)}, task="atlas",
                                   key=row_key.replace(split="all", representation=cfg.representation,
                                                       variant=f"clusters:{m}:{enc}"))
    rows = []
    for m, S in matrices.items():
        C, how = calib.get(m) or (S if m == "combined" else rank_normalise(S), "weighted" if m == "combined" else "rank")
        ev = raw[m].evidence if m in raw else {}
        for i in range(len(A.types)):
            row = S[i]
            if np.all(np.isnan(row)):
                continue
            order = np.argsort(-np.where(np.isnan(row), -np.inf, row), kind="stable")[: cfg.top]
            for r, j in enumerate(order, 1):
                if np.isnan(row[j]):
                    break
                evidence = ev.get((i, int(j))) or (pair_evidence(TA, TB, i, int(j)) if m != "name" else [])
                rows.append(link_row(node_id(A.key, A.types[i]), node_id(B.key, B.types[j]), RELATIONS[m],
                                     kind="learned", method=m, score=float(C[i, j]), raw_score=float(row[j]), rank=r,
                                     calibration=how, encoder=None if m == "name" else enc, run_id=A.run_id,
                                     provenance=f"atlas {m} ({cfg.representation}, k={cfg.k})", evidence=evidence))
    info["seconds"] = round(time.perf_counter() - t0, 2)
    return PairResult(pa.Table.from_pylist(rows, schema=LINKS), metrics, info)
