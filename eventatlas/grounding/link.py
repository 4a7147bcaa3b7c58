"""Ground new text with a trained ``grounding`` run (``eventatlas ground``).

``ground_text(dataset_dir, run_dir, text)``: the mention marked as ``[word]`` in ``text`` is encoded with
the run's bi-encoder (the variant best on dev unless ``variant`` is given), the dataset's candidates are
ranked by dot product against the run's stored candidate vectors, and, when the run trained a
cross-encoder over that variant, its top-k is rescored and every candidate >= tau_c is the predicted set
(empty = NULL). Without one, the bi-encoder's top ``top`` is returned. Every bad input is one
:class:`GroundError` line: no marked mention, an unknown run (or not a grounding run), a dataset without
candidates, a dataset other than the one the run was trained on.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


class GroundError(ValueError):
    """One line for the user."""


def _run_params(run_dir: Path) -> dict:
    p = run_dir / "grounding.json"
    if not run_dir.is_dir():
        raise GroundError(f"unknown run {run_dir.name!r}: no directory {run_dir} (see `eventatlas runs`)")
    if not p.exists():
        raise GroundError(f"run {run_dir.name!r} is not a finished grounding run (no {p.name} in {run_dir})")
    return json.loads(p.read_text(encoding="utf-8"))


def ground_text(dataset_dir: str | Path, run_dir: str | Path, text: str, *, variant: str | None = None, top: int = 8,
                device: str = "cpu") -> dict[str, Any]:
    """Returns ``{variant, cross, tau_c, mention, predicted: [{type_id, name, score}], ranked: [...]}``."""
    from ..emr.search import SearchError, marked_span
    from ..modeling.mention_encoder import MentionEncoder
    from .biencoder import candidate_inputs, embed_items, mention_inputs, retrieve
    from .data import Mentions, load_candidates
    from ..data.selection import NotApplicable

    try:
        sentence, a, b = marked_span(text, "--text")
    except SearchError as e:
        raise GroundError(str(e)) from None
    run_dir, dataset_dir = Path(run_dir), Path(dataset_dir)
    params = _run_params(run_dir)
    if not (dataset_dir / "manifest.json").exists():
        raise GroundError(f"dataset {dataset_dir.name!r} is not ingested (no {dataset_dir / 'manifest.json'})")
    try:
        gd = load_candidates(dataset_dir)
    except NotApplicable:
        raise GroundError(f"dataset {dataset_dir.name!r} has no candidates (no event_types rows): nothing to ground to") from None
    variant = variant or params.get("best_on_dev")
    vdir = run_dir / str(variant)
    if not (vdir / "model").exists():
        known = sorted(v for v in params.get("variants", {}) if (run_dir / v / "model").exists())
        raise GroundError(f"run {run_dir.name!r} has no saved model for variant {variant!r}; saved: {', '.join(known) or 'none'}")
    cv = np.load(vdir / "candidate_vectors.npy")
    if cv.shape[0] != len(gd.type_ids) or params.get("dataset") != _dataset_name(dataset_dir):
        raise GroundError(f"run {run_dir.name!r} was trained on dataset {params.get('dataset')!r} ({cv.shape[0]} candidates), "
                          f"not on {dataset_dir.name!r} ({len(gd.type_ids)} candidates)")
    cfg = params.get("config", {})
    enc = MentionEncoder(vdir / "model", max_length=cfg.get("max_length", 128))
    ms = Mentions(["query"], [sentence], [a], [b], [[0]])
    mv = embed_items(enc, mention_inputs(enc, ms, cache=False), device=device, pool=cfg.get("mention_pool", "sentence"))
    if cfg.get("score", "dot") == "cosine":  # the run stored unit candidate vectors
        from ..evaluation._vectors import unit_rows

        mv = unit_rows(mv, "mention vector")
    cross = params.get("cross") or {}
    k = min(max(top, int(cfg.get("cross_k", 8))), len(gd.type_ids))
    ids, scores = retrieve(mv, cv, k)
    ranked = [{"type_id": gd.type_ids[i], "name": gd.names[i], "score": float(s)} for i, s in zip(ids[0], scores[0])]
    out = {"variant": variant, "mention": sentence[a:b], "cross": False, "tau_c": None, "ranked": ranked[:top]}
    if cross.get("bi_encoder") == variant and (run_dir / "cross" / "head.pt").exists():
        import torch

        from .crossencoder import CrossEncoder, pair_input, score_pairs

        xenc = MentionEncoder(run_dir / "cross" / "model", max_length=cfg.get("cross_max_length", 160))
        model = CrossEncoder(xenc)
        model.head.load_state_dict(torch.load(run_dir / "cross" / "head.pt", map_location="cpu", weights_only=True))
        kk = min(int(cfg.get("cross_k", 8)), len(gd.type_ids))
        c_items = candidate_inputs(xenc, gd)
        m_item = mention_inputs(xenc, ms, budget=min(cfg.get("cross_mention_length", 64), xenc.max_length // 2) - 2)[0]
        pairs = [[pair_input(m_item, c_items[i], xenc.max_length) for i in ids[0][:kk]]]
        sc = score_pairs(model, pairs, device=device)[0]
        tau = float(cross["tau_c"])
        order = np.argsort(-sc, kind="stable")
        out.update(cross=True, tau_c=tau,
                   ranked=[{"type_id": gd.type_ids[ids[0][j]], "name": gd.names[ids[0][j]], "score": float(sc[j])} for j in order])
        out["predicted"] = [r for r in out["ranked"] if r["score"] >= tau]
    else:
        out["predicted"] = out["ranked"]
    return out


def _dataset_name(dataset_dir: Path) -> str:
    try:
        return json.loads((dataset_dir / "manifest.json").read_text(encoding="utf-8")).get("dataset") or dataset_dir.name
    except (OSError, ValueError):
        return dataset_dir.name
