"""The EMR protocol (what :mod:`eventatlas.methods.emr` runs; its module doc says what it measures):
the candidate pool embedded once (:func:`embed_pool`) and the extra ad-hoc rankers; the meta network
trained here on other types (with an optional dev-chosen epoch) or loaded from an earlier run
(:func:`_meta_model`); the Siamese hyper-parameters tuned on a development episode (:func:`tune_siamese`);
and :func:`evaluate_episodes`, the k-shot m-way evaluation over seeded episodes."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .. import config as paths
from ..io import write_parquet
from .rankers import embed_pool, evaluations, per_query_params, rep_label  # noqa: F401  (embed_pool: re-exported)

log = logging.getLogger(__name__)

NAME = "emr"
RANK_KS = (1, 5, 10, 50)  # 50: novel-trigger recall@50, the few-shot target


def _scores_of(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"]: float(r["value"]) for r in rows}


def evaluate_episodes(ctx: Any, result: Any) -> None:
    """The whole EMR protocol for the method context ``ctx`` (config, manifest, run directory, seed, device):
    embed the candidate pool once, add the extra ad-hoc rankers, train or load the meta network, then for
    each repetition sample an episode (tuning the Siamese network on the first one's dev mentions if
    asked) and score every model at every k; fills ``result`` (metric rows, artifacts, params)."""
    from .episodes import candidate_pool, sample_episode
    from .models import SiameseParams, siamese_rank_scores
    from ..evaluation.base import RowKey, metric_rows
    from ..evaluation.retrieval import evaluate_retrieval, evaluate_scores

    cfg, man, seed, device, out_dir, dataset_dir = ctx.config, ctx.manifest, ctx.seed, ctx.device, ctx.run_dir, \
        ctx.dataset_dir
    sp = SiameseParams(**cfg.siamese.model_dump())
    # one pool for every seed (its no-event candidate words drawn once): its embeddings are computed once and
    # cached by content; the seed draws the episodes, the training pairs and the networks
    pool = candidate_pool(dataset_dir, seed=0, no_event=cfg.no_event)
    t0 = time.perf_counter()
    pool, X, emb = embed_pool(pool, out_dir, cfg, device)
    rankers, pool, X = _adhoc_rankers(pool, X, out_dir, cfg, device)
    result.add_artifact("emr/pool", write_parquet(pool, out_dir / "pool.parquet"), pool.num_rows)
    timings: dict[str, float] = {"embed_pool": round(time.perf_counter() - t0, 2)}
    meta_model, allowed, meta_info, split, dev, ft_info = None, None, None, None, None, None
    if ({"meta", "meta_adapt"} & set(cfg.models) and not cfg.meta_run) or "contrastive" in cfg.models:
        split = _training_split(pool, cfg, seed)  # the types trained on, evaluated on and developed on
        allowed = split["allowed"]
        if split["dev_types"]:
            from .dev import dev_episode

            dev = dev_episode(pool, cfg, set(split["seen"]) | set(allowed), split["dev_types"], seed)
    writer = _model_writer(out_dir, cfg, split)
    if {"meta", "meta_adapt"} & set(cfg.models):
        t1 = time.perf_counter()
        meta_model, meta_allowed, meta_info = _meta_model(pool, X, out_dir, cfg, man, seed, device, result, split, dev,
                                                          writer)
        allowed = meta_allowed if allowed is None else allowed
        timings["meta"] = round(time.perf_counter() - t1, 2)
        rankers["meta"] = meta_model.transform(X, device=device)
    if "contrastive" in cfg.models:
        from .tuned_encoder import contrastive_ranker

        t1 = time.perf_counter()
        rankers["contrastive"], ft_info = contrastive_ranker(pool, X, out_dir, cfg, seed, device, result, split, dev,
                                                             writer)
        timings["contrastive"] = round(time.perf_counter() - t1, 2)
    per_rep: list[dict[str, Any]] = []
    per_type: list[dict[str, Any]] = []
    items_t, queries_t, episodes = [], [], []
    tuning = None
    for r in range(cfg.repetitions):
        ep = sample_episode(pool, min_mentions=cfg.min_mentions, n_corpus=cfg.n_corpus, n_query=cfg.n_query,
                            n_dev=cfg.n_dev, n_none=cfg.n_none, queries_per_type=cfg.queries_per_type, ks=cfg.ks,
                            max_types=cfg.max_types, allowed_types=allowed, seed=seed * 1000 + r)
        episodes.append(ep.record)
        if r == 0 and cfg.tune is not None and "siamese" in cfg.models:
            t1 = time.perf_counter()
            tuning = tune_siamese(ep, X, sp, cfg.tune, seed=seed, device=device)
            sp = SiameseParams(**tuning["chosen"])
            timings["tune"] = round(time.perf_counter() - t1, 2)
        items, queries = ep.tables()
        items_t.append(items.append_column("repetition", pa.array([r] * items.num_rows, pa.int32())))
        queries_t.append(queries.append_column("repetition", pa.array([r] * queries.num_rows, pa.int32())))
        for k in sorted(ep.queries):
            relevant = ep.relevant(k)
            common = dict(ks=RANK_KS, key=RowKey(dataset=man.dataset, method=NAME, seed=seed), novel=ep.novel(k))
            for model, rep, Xm in evaluations(cfg, rankers, X):
                shots = [Xm[q.shots] for q in ep.queries[k]]
                corpus = Xm[ep.corpus]
                t1 = time.perf_counter()
                per_q: list[dict[str, float]] = []
                extra: dict[str, Any] = {}
                if model in ("adhoc", "meta", "contrastive"):
                    scores = _scores_of(evaluate_retrieval(shots, corpus, relevant, per_query=per_q, **common))
                else:
                    mp = per_query_params(cfg, sp, model)
                    S, extra = siamese_rank_scores(shots, corpus, mp, seed=seed * 1000 + r, device=device,
                                                   init=meta_model.net if model == "meta_adapt" else None)
                    scores = _scores_of(evaluate_scores(S, relevant, per_query=per_q, **common))
                sec = time.perf_counter() - t1
                timings[f"r{r}/k{k}/{model}/{rep}"] = round(sec, 2)
                per_rep.append({"repetition": r, "k": k, "m": len(ep.types), "model": model, "representation": rep,
                                "seconds": sec, "queries": len(shots), **scores,
                                **{f"train_{a}": b for a, b in extra.items() if a.startswith("loss")}})
                for q, pq_ in zip(ep.queries[k], per_q):
                    per_type.append({"repetition": r, "k": k, "model": model, "representation": rep, "type": q.type,
                                     "map": pq_["map"], "r_precision": pq_["r_precision"], "p@10": pq_["p@10"]})
                log.info("emr %s rep %d k=%d m=%d %s/%s: map=%.4f (%.1fs)", man.dataset, r, k, len(ep.types), model,
                         rep, scores["map"], sec)
    _write_tables(result, out_dir, items_t, queries_t, per_rep, per_type, tuning)
    dev_choice = None
    if dev is not None:
        from .dev import score_rankers_on_dev

        t1 = time.perf_counter()
        dev_choice = score_rankers_on_dev(dev, cfg, rankers, X, sp, meta_model, seed, device, result, man)
        timings["dev_choice"] = round(time.perf_counter() - t1, 2)
    if writer is not None:
        _close_writer(writer, cfg, dev_choice, ft_info)
    m = episodes[0]["m"]
    k_max = max(row["k"] for row in per_rep)
    for model, rep in dict.fromkeys((row["model"], row["representation"]) for row in per_rep):
        key = RowKey(dataset=man.dataset, method=NAME, seed=seed, split="test", representation=rep, variant=model)
        for k in sorted({row["k"] for row in per_rep}):
            reps = [row for row in per_rep if row["model"] == model and row["representation"] == rep and row["k"] == k]
            names = dict.fromkeys(n for row in reps for n in row
                                  if n in ("map", "r_precision", "novel_queries")
                                  or n.startswith(("p@", "recall@", "novel_recall@")))
            # novel_recall is absent from a repetition whose queries had no novel-trigger mention
            mean = {n: float(np.mean([row[n] for row in reps if n in row])) for n in names}
            mean["map_std"] = float(np.std([row["map"] for row in reps], ddof=1)) if len(reps) > 1 else 0.0
            result.metrics += metric_rows(mean, task="retrieval", key=key.replace(setting=f"k={k} m={m}"))
        for t, v in _per_type_map(per_type, model, rep, k_max).items():
            result.metrics += metric_rows({"map": v}, task="retrieval",
                                          key=key.replace(setting=f"k={k_max} m={m} type={t}"))
    result.params = ctx.base_params(model_id=cfg.model_id or paths.DEFAULT_MODEL)
    result.params.update({"episodes": episodes, "embedding": emb, "timings_s": timings, "rankers": sorted(rankers),
                     "siamese_used": sp.as_dict(), "tuning": tuning, "meta": meta_info, "contrastive": ft_info,
                     "split": split and {k: v for k, v in split.items() if k != "selection"},
                     "dev_choice": dev_choice,
                     "n_pool": pool.num_rows, "pool_sources": _counts(pool["source"].to_pylist())})


def _per_type_map(per_type: list[dict[str, Any]], model: str, rep: str, k: int) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for row in per_type:
        if row["model"] == model and row["representation"] == rep and row["k"] == k:
            out.setdefault(row["type"], []).append(row["map"])
    return {t: float(np.mean(v)) for t, v in sorted(out.items())}


def _adhoc_rankers(pool: pa.Table, X: np.ndarray, out_dir: Path, cfg: Any, device: str
                   ) -> tuple[dict[str, np.ndarray], pa.Table, np.ndarray]:
    """The extra ad-hoc rankers ({representation name: features}), all aligned to one pool (an item
    any encoder rejects is dropped for every ranker, so all rank the same corpus)."""
    todo = [(rep, None, rep) for rep in dict.fromkeys(cfg.representations) if rep != cfg.representation]
    todo += [(cfg.representation, enc, f"{cfg.representation}@{Path(enc).name}") for enc in dict.fromkeys(cfg.encoders)]
    feats = {}
    for rep, enc, name in todo:
        p, Xr, _ = embed_pool(pool, out_dir, cfg, device, representation=rep, model_id=enc)
        feats[name] = dict(zip(p["mention_id"].to_pylist(), Xr))
    if not feats:
        return {}, pool, X
    ids = pool["mention_id"].to_pylist()
    keep = [i for i, m in enumerate(ids) if all(m in f for f in feats.values())]
    if len(keep) < len(ids):
        log.warning("emr: %d pool items dropped: not embeddable by every ranker", len(ids) - len(keep))
        pool, X = pool.take(pa.array(keep, pa.int64())), X[keep]
        ids = pool["mention_id"].to_pylist()
    return {name: np.stack([f[m] for m in ids]) for name, f in feats.items()}, pool, X


def _split_types(cfg: Any, name: str) -> list[str]:
    import json

    p = cfg.split_file if cfg.split_file.is_absolute() else paths.shared_data() / cfg.split_file
    try:
        split = json.loads(Path(p).read_text())
        return list(split[name])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"meta.split_file {p}: cannot read split {name!r} ({e})") from None


def _training_split(pool: pa.Table, cfg: Any, seed: int) -> dict[str, Any]:
    """The types a trained ranker (meta network, tuned encoder) learns from (``seen``), the types every
    model is evaluated on (``allowed``: never trained on; ``meta.eval_split`` narrows them) and the
    development types (``meta.dev_split``: neither), from the split file or the k_seen most frequent."""
    import pyarrow.compute as pc

    from ..data import select_labelled

    mc = cfg.meta
    labels = pool["label"].to_pylist()
    present = set(lab for lab in labels if lab is not None)
    seen_req = [t for t in _split_types(mc, mc.train_split) if t in present] if mc.split_file is not None else None
    sel = select_labelled(pool.filter(pc.is_valid(pool["label"])).select(["mention_id", "label"])
                          .append_column("labels", pa.array([[lab] for lab in labels if lab is not None],
                                                            pa.list_(pa.string()))),
                          k_seen=mc.k_seen, seen_types=seen_req, seed=seed)
    allowed = list(sel.unseen_types)
    dev_types: list[str] = []
    if mc.split_file is not None and mc.eval_split:
        wanted = set(_split_types(mc, mc.eval_split))
        allowed = [t for t in allowed if t in wanted]
    if mc.split_file is not None and mc.dev_split:
        dev_types = [t for t in _split_types(mc, mc.dev_split) if t in present and t not in set(sel.seen_types)]
        allowed = [t for t in allowed if t not in set(dev_types)]
    return {"seen": list(sel.seen_types), "allowed": allowed, "dev_types": dev_types, "selection": sel.record}


def _model_writer(out_dir: Path, cfg: Any, split: dict[str, Any] | None):
    """One saved model per run for every ranker trained here (meta network, tuned encoder): ``split`` is
    drawn exactly when one is."""
    if not (cfg.save_model and split is not None):
        return None
    from ..modeling.saved import ModelWriter

    return ModelWriter(out_dir, method="emr")


def _close_writer(writer: Any, cfg: Any, dev_choice: dict[str, Any] | None, ft_info: dict[str, Any] | None) -> None:
    inference: dict[str, Any] = {"ranker": (f"mean cosine of the {rep_label(cfg, cfg.representation)} vectors over "
                                            "the examples" + (", the tuned encoder's vectors" if ft_info else
                                                              ", in the meta network's output space"))}
    if ft_info:
        inference["contrastive"] = {"trigger_markers": bool(cfg.trigger_markers), "dev": ft_info.get("best_dev")}
    if dev_choice:
        inference["dev_choice"] = {"rule": dev_choice["rule"], "chosen": dev_choice["chosen"]}
    writer.close(representation=cfg.representation, base_model=cfg.model_id or paths.DEFAULT_MODEL,
                 precision=cfg.precision, epoch=(ft_info or {}).get("epochs_selected"), inference=inference)


def _meta_model(pool: pa.Table, X: np.ndarray, out_dir: Path, cfg: Any, man: Any, seed: int, device: str,
                result: Any, split: dict[str, Any] | None, dev: Any, writer: Any):
    """(model, allowed evaluation types, record): loaded from ``meta_run`` or trained here on the
    ``split``'s training types (their mentions, plus the no-event candidates as not-same-class partners;
    no mention of an evaluated type is ever trained on); with a ``dev`` episode the epoch is the one the
    dev rule prefers (:mod:`.dev`)."""
    from .meta import MetaError, MetaModel, load_meta, train_meta_network, unseen_types
    from ..training import TrainingArgs as Args

    labels = pool["label"].to_pylist()
    present = sorted({lab for lab in labels if lab is not None})
    mc = cfg.meta
    if cfg.meta_run:
        try:
            meta = load_meta(cfg.meta_run)
        except MetaError as e:
            raise ValueError(str(e)) from None
        want = {"d_in": int(X.shape[1]), "representation": cfg.representation,
                "model_id": cfg.model_id or paths.DEFAULT_MODEL}
        bad = {k: (meta.info.get(k), v) for k, v in want.items() if meta.info.get(k) != v}
        if bad:
            raise ValueError(f"meta_run {cfg.meta_run}: trained on other inputs than this run's "
                             + ", ".join(f"{k}={a!r} (here {b!r})" for k, (a, b) in bad.items()))
        allowed = unseen_types(present, meta.info["train_types"]) if mc.unseen_only else present
        rec = {"source": "meta_run", "run": cfg.meta_run, "train_types": meta.info["train_types"],
               "train_dataset": meta.info.get("dataset"), "unseen_only": mc.unseen_only,
               "allowed_types": allowed, "n_present_types": len(present)}
        return meta, allowed, rec
    seen_set = set(split["seen"])
    rows = [i for i, lab in enumerate(labels) if lab in seen_set or lab is None]  # evaluated types never trained on
    args = Args(**{k: getattr(mc, k) for k in Args.model_fields if k != "device"}, device=device)
    info = {"dataset": man.dataset, "model_id": cfg.model_id or paths.DEFAULT_MODEL,
            "representation": cfg.representation, "seed": seed}
    callbacks, dev_rec, fn = (), None, None
    if dev is not None:
        from ..training.callbacks import EarlyStopping, EvalCallback
        from .dev import DevCallback

        Xd = X[dev.items]
        fn = DevCallback(dev, lambda tr: MetaModel(tr.unwrapped, {}).transform(Xd, device=str(tr.accelerator.device)))
        callbacks = (EvalCallback(fn), EarlyStopping("dev_score", "max", patience=mc.patience, restore_best=True))
        dev_rec = {**dev.record, "adhoc_dev": dev.scores(Xd)["rule"]}
    meta, res = train_meta_network(X[rows], [labels[i] for i in rows], args, hidden=mc.hidden, layers=mc.layers,
                                   pairs=mc.pairs, pos_fraction=mc.pos_fraction, residual=mc.residual, seed=seed,
                                   out_dir=out_dir / "meta_training", info=info, callbacks=callbacks)
    result.add_training(res)
    if dev_rec is not None:
        dev_rec["curve"] = fn.history
        dev_rec["best_epoch"] = int(np.argmax(fn.history)) + 1 if fn.history else None
    for f in meta.save(out_dir):
        result.add_artifact("model/emr_meta", f)
    if writer is not None:  # the meta network as a saved model too: run:<run id> names it everywhere
        writer.head("meta", meta.net.state_dict(), kind="meta_network", config=dict(meta.info))
    rec = {"source": "trained", "train_types": split["seen"], "n_train_items": len(rows), "allowed_types": split["allowed"],
           "dev_selection": dev_rec, "selection": split["selection"],
           "final_loss": res.history[-1]["loss"] if res.history else None}
    return meta, split["allowed"], rec


def tune_siamese(ep: Any, X: np.ndarray, base: Any, grid: Any, *, seed: int, device: str) -> dict[str, Any]:
    """Choose the Siamese lr, negatives and epochs by MAP on a development episode of ``ep`` (its dev
    mentions only; :func:`eventatlas.emr.episodes.dev_episode`). Every (lr, negatives) trains once for
    max(epochs) epochs; the dev MAP after each epoch (a learning curve) is kept for all epochs and
    the candidates in ``grid.epochs`` are compared. Returns the grid rows, the ad-hoc dev MAP and
    the chosen parameters."""
    from .episodes import dev_episode
    from .models import SiameseParams, siamese_rank_scores
    from ..evaluation.base import RowKey
    from ..evaluation.retrieval import evaluate_retrieval, evaluate_scores

    dev = dev_episode(ep, n_query=len(next(iter(ep.query_pool.values()))), n_none=grid.n_none,
                      queries_per_type=grid.queries_per_type, ks=[grid.k], seed=seed)
    queries = dev.queries[grid.k]
    shots = [X[q.shots] for q in queries]
    corpus = X[dev.corpus]
    relevant = dev.relevant(grid.k)
    common = dict(ks=RANK_KS, key=RowKey(dataset="dev", method=NAME, seed=seed))
    adhoc = _scores_of(evaluate_retrieval(shots, corpus, relevant, **common))["map"]
    rows = []
    n_ep = max(grid.epochs)
    for lr in grid.lr:
        for neg in grid.negatives:
            p = SiameseParams(**{**base.as_dict(), "lr": lr, "negatives": neg, "epochs": n_ep})
            curves: dict[int, np.ndarray] = {}

            def keep(epoch: int, first: int, S: np.ndarray, curves=curves) -> None:
                curves.setdefault(epoch, np.zeros((len(queries), len(corpus)), np.float32))[first:first + len(S)] = S

            t = time.perf_counter()
            _, info = siamese_rank_scores(shots, corpus, p, seed=seed, device=device, epoch_scores=keep)
            sec = time.perf_counter() - t
            for e in sorted(curves):
                rows.append({"lr": lr, "negatives": neg, "epochs": e, "candidate": e in grid.epochs,
                             "dev_map": _scores_of(evaluate_scores(curves[e], relevant, **common))["map"],
                             "seconds_total": sec, "loss_last_epoch": info["loss_last_epoch"]})
    best = max((r for r in rows if r["candidate"]), key=lambda r: (r["dev_map"], -r["epochs"]))
    chosen = {**base.as_dict(), "lr": best["lr"], "negatives": best["negatives"], "epochs": best["epochs"]}
    log.info("emr tuning: dev map %.4f with lr=%g negatives=%d epochs=%d (ad-hoc %.4f)", best["dev_map"], best["lr"],
             best["negatives"], best["epochs"], adhoc)
    return {"grid": rows, "adhoc_dev_map": adhoc, "chosen": chosen, "best_dev_map": best["dev_map"],
            "dev_episode": dev.record, "dev_k": grid.k}


def _counts(xs: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def _write_tables(result: Any, out_dir: Path, items_t, queries_t, per_rep, per_type, tuning) -> None:
    items = write_parquet(pa.concat_tables(items_t), out_dir / "episodes" / "items.parquet")
    result.add_artifact("emr/episode_items", items, sum(t.num_rows for t in items_t))
    queries = write_parquet(pa.concat_tables(queries_t), out_dir / "episodes" / "queries.parquet")
    result.add_artifact("emr/episode_queries", queries, sum(t.num_rows for t in queries_t))
    keys = list(dict.fromkeys(k for row in per_rep for k in row))  # siamese rows carry training losses too
    reps = write_parquet(pa.table({k: [row.get(k) for row in per_rep] for k in keys}),
                         out_dir / "scores_per_repetition.parquet")
    result.add_artifact("emr/scores_per_repetition", reps, len(per_rep))
    types = write_parquet(pa.Table.from_pylist(per_type), out_dir / "scores_per_query.parquet")
    result.add_artifact("emr/scores_per_query", types, len(per_type))
    if tuning is not None:
        grid = write_parquet(pa.Table.from_pylist(tuning["grid"]), out_dir / "siamese_dev_grid.parquet")
        result.add_artifact("emr/siamese_dev_grid", grid, len(tuning["grid"]))
