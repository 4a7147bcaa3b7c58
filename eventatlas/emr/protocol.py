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

log = logging.getLogger(__name__)

NAME = "emr"
RANK_KS = (1, 5, 10)


def embed_pool(pool: pa.Table, out_dir: Path, cfg: Any, device: str, *, representation: str | None = None,
               model_id: str | None = None) -> tuple[pa.Table, np.ndarray, dict]:
    """Embed every pool item once (cached by content); items the encoder rejects are dropped (counted).
    ``representation`` / ``model_id`` default to the config's."""
    from ..modeling.encode import embed_mentions, load_embeddings

    path = write_parquet(pool, out_dir / "pool.parquet")
    npy = embed_mentions(path, model_id or cfg.model_id, representation or cfg.representation,
                         cache_dir=cfg.cache_dir, device=device, **cfg.encoder.model_dump())
    ids, X = load_embeddings(npy)
    info = {"embeddings": npy.name, "dropped": 0}
    pool_ids = pool["mention_id"].to_pylist()
    if ids != pool_ids:
        pos = {m: i for i, m in enumerate(ids)}
        keep = [i for i, m in enumerate(pool_ids) if m in pos]
        info["dropped"] = len(pool_ids) - len(keep)
        pool = pool.take(pa.array(keep, pa.int64()))
        X = X[[pos[pool_ids[i]] for i in keep]]
    return pool, np.asarray(X, dtype=np.float32), info


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
    pool = candidate_pool(dataset_dir, seed=seed, no_event=cfg.no_event)
    t0 = time.perf_counter()
    pool, X, emb = embed_pool(pool, out_dir, cfg, device)
    rankers, pool, X = _adhoc_rankers(pool, X, out_dir, cfg, device)
    result.add_artifact("emr/pool", write_parquet(pool, out_dir / "pool.parquet"), pool.num_rows)
    timings: dict[str, float] = {"embed_pool": round(time.perf_counter() - t0, 2)}
    meta_model, allowed, meta_info = None, None, None
    if {"meta", "meta_adapt"} & set(cfg.models):
        t1 = time.perf_counter()
        meta_model, allowed, meta_info = _meta_model(pool, X, out_dir, cfg, man, seed, device, result)
        timings["meta"] = round(time.perf_counter() - t1, 2)
        rankers["meta"] = meta_model.transform(X, device=device)
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
            common = dict(ks=RANK_KS, key=RowKey(dataset=man.dataset, method=NAME, seed=seed))
            for model, rep, Xm in _evaluations(cfg, rankers, X):
                shots = [Xm[q.shots] for q in ep.queries[k]]
                corpus = Xm[ep.corpus]
                t1 = time.perf_counter()
                per_q: list[dict[str, float]] = []
                extra: dict[str, Any] = {}
                if model in ("adhoc", "meta"):
                    scores = _scores_of(evaluate_retrieval(shots, corpus, relevant, per_query=per_q, **common))
                else:
                    mp = sp if model == "siamese" else SiameseParams(**{**sp.as_dict(), "epochs": cfg.meta.adapt_epochs,
                                                                        "lr": cfg.meta.adapt_lr,
                                                                        "hidden": cfg.meta.hidden,
                                                                        "layers": cfg.meta.layers})
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
    m = episodes[0]["m"]
    k_max = max(row["k"] for row in per_rep)
    for model, rep in dict.fromkeys((row["model"], row["representation"]) for row in per_rep):
        key = RowKey(dataset=man.dataset, method=NAME, seed=seed, split="test", representation=rep, variant=model)
        for k in sorted({row["k"] for row in per_rep}):
            reps = [row for row in per_rep if row["model"] == model and row["representation"] == rep and row["k"] == k]
            names = [n for n in reps[0] if n == "map" or n == "r_precision" or n.startswith(("p@", "recall@"))]
            mean = {n: float(np.mean([row[n] for row in reps])) for n in names}
            mean["map_std"] = float(np.std([row["map"] for row in reps], ddof=1)) if len(reps) > 1 else 0.0
            result.metrics += metric_rows(mean, task="retrieval", key=key.replace(setting=f"k={k} m={m}"))
        for t, v in _per_type_map(per_type, model, rep, k_max).items():
            result.metrics += metric_rows({"map": v}, task="retrieval",
                                          key=key.replace(setting=f"k={k_max} m={m} type={t}"))
    result.params = ctx.base_params(model_id=cfg.model_id or paths.DEFAULT_MODEL)
    result.params.update({"episodes": episodes, "embedding": emb, "timings_s": timings, "rankers": sorted(rankers),
                     "siamese_used": sp.as_dict(), "tuning": tuning, "meta": meta_info,
                     "n_pool": pool.num_rows, "pool_sources": _counts(pool["source"].to_pylist())})


def _evaluations(cfg: Any, rankers: dict[str, np.ndarray], X: np.ndarray):
    """(model, representation, features) of every evaluation: ad-hoc over each ranker, the trained
    models over the main representation, ``meta`` over the meta network's output space."""
    for model in cfg.models:
        if model == "adhoc":
            yield "adhoc", cfg.representation, X
            for name, Xr in rankers.items():
                if name != "meta":
                    yield "adhoc", name, Xr
        elif model == "meta":
            yield "meta", cfg.representation, rankers["meta"]
        else:
            yield model, cfg.representation, X


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


def _meta_model(pool: pa.Table, X: np.ndarray, out_dir: Path, cfg: Any, man: Any, seed: int, device: str,
                result: Any):
    """(model, allowed evaluation types, record): loaded from ``meta_run`` or trained here on the
    training types (their mentions, plus the no-event candidates as not-same-class partners; no
    mention of an evaluated type is ever trained on)."""
    from ..data import select_labelled
    from .meta import MetaError, load_meta, train_meta_network, unseen_types
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
    seen_req = None
    if mc.split_file is not None:
        seen_req = [t for t in _split_types(mc, mc.train_split) if t in set(present)]
    import pyarrow.compute as pc

    sel = select_labelled(pool.filter(pc.is_valid(pool["label"])).select(["mention_id", "label"])
                          .append_column("labels", pa.array([[lab] for lab in labels if lab is not None],
                                                            pa.list_(pa.string()))),
                          k_seen=mc.k_seen, seen_types=seen_req, seed=seed)
    seen = list(sel.seen_types)
    allowed = list(sel.unseen_types)
    if mc.split_file is not None and mc.eval_split:
        wanted = set(_split_types(mc, mc.eval_split))
        allowed = [t for t in allowed if t in wanted]
    seen_set = set(seen)
    rows = [i for i, lab in enumerate(labels) if lab in seen_set or lab is None]  # evaluated types never trained on
    args = Args(**{k: getattr(mc, k) for k in Args.model_fields if k != "device"}, device=device)
    info = {"dataset": man.dataset, "model_id": cfg.model_id or paths.DEFAULT_MODEL,
            "representation": cfg.representation, "seed": seed}
    callbacks, dev_rec, dev_fn = (), None, None
    if mc.split_file is not None and mc.dev_split:
        callbacks, dev_rec, dev_fn = _meta_dev_selection(pool, X, cfg, seen_set | set(allowed),
                                                 _split_types(mc, mc.dev_split), seed)
    meta, res = train_meta_network(X[rows], [labels[i] for i in rows], args, hidden=mc.hidden, layers=mc.layers,
                                   pairs=mc.pairs, pos_fraction=mc.pos_fraction, residual=mc.residual, seed=seed,
                                   out_dir=out_dir / "meta_training", info=info, callbacks=callbacks)
    result.add_training(res)
    if dev_rec is not None:
        dev_rec["curve"] = dev_fn.history
        dev_rec["best_epoch"] = int(np.argmax(dev_rec["curve"])) + 1 if dev_rec["curve"] else None
    for f in meta.save(out_dir):
        result.add_artifact("model/emr_meta", f)
    if cfg.save_model:  # the meta network as a saved model too: run:<run id> names it everywhere
        from ..modeling.saved import ModelWriter

        w = ModelWriter(out_dir, method="emr")
        w.head("meta", meta.net.state_dict(), kind="meta_network", config=dict(meta.info))
        w.close(representation=cfg.representation, base_model=cfg.model_id or paths.DEFAULT_MODEL,
                precision=cfg.precision,
                inference={"ranker": "mean cosine in the meta network's output space over the frozen "
                                     f"{cfg.representation} vectors of the base model"})
    rec = {"source": "trained", "train_types": seen, "n_train_items": len(rows), "allowed_types": allowed,
           "dev_selection": dev_rec,
           "selection": sel.record, "final_loss": res.history[-1]["loss"] if res.history else None}
    return meta, allowed, rec


class _MetaDevMap:
    """Per-epoch dev MAP of the network being meta-trained (an ``EvalCallback`` function)."""

    def __init__(self, shots: list[np.ndarray], corpus: np.ndarray, relevant: list[np.ndarray]):
        self.shots, self.corpus, self.relevant, self.history = shots, corpus, relevant, []

    def __call__(self, trainer) -> dict[str, float]:
        from .meta import MetaModel
        from ..evaluation.base import RowKey
        from ..evaluation.retrieval import evaluate_retrieval

        net = trainer.unwrapped
        was = net.training
        mm = MetaModel(net, {"hidden": net.weights[-1].shape[2]})
        Z = mm.transform(np.concatenate([self.corpus, *self.shots]), device=str(trainer.accelerator.device))
        net.train(was)
        n, shots = len(self.corpus), []
        for s in self.shots:
            shots.append(Z[n:n + len(s)])
            n += len(s)
        v = _scores_of(evaluate_retrieval(shots, Z[:len(self.corpus)], self.relevant, ks=RANK_KS,
                                          key=RowKey(dataset="dev", method=NAME, seed=0)))["map"]
        self.history.append(v)
        return {"dev_map": v}


def _meta_dev_selection(pool: pa.Table, X: np.ndarray, cfg: Any, excluded: set[str], dev_types: list[str],
                        seed: int):
    """(EvalCallback + EarlyStopping on the dev MAP, record, the MAP function): a k=5 episode of the dev split's types,
    built from a pool without the training and evaluated types' mentions (so neither shapes the choice)."""
    from .episodes import sample_episode
    from ..training.callbacks import EarlyStopping, EvalCallback

    labels = pool["label"].to_pylist()
    keep = np.asarray([i for i, lab in enumerate(labels) if lab not in excluded], dtype=np.int64)
    sub, Xs = pool.take(pa.array(keep)), X[keep]
    k = min(5, cfg.n_query)
    ep = sample_episode(sub, min_mentions=cfg.min_mentions, n_corpus=cfg.n_corpus, n_query=cfg.n_query, n_dev=0,
                        n_none=cfg.n_none, queries_per_type=2, ks=[k], allowed_types=dev_types, seed=seed * 1000 + 999)
    fn = _MetaDevMap([Xs[q.shots] for q in ep.queries[k]], Xs[ep.corpus], ep.relevant(k))
    from ..evaluation.base import RowKey
    from ..evaluation.retrieval import evaluate_retrieval

    adhoc = _scores_of(evaluate_retrieval([Xs[q.shots] for q in ep.queries[k]], Xs[ep.corpus], ep.relevant(k),
                                          ks=RANK_KS, key=RowKey(dataset="dev", method=NAME, seed=0)))["map"]
    cbs = (EvalCallback(fn), EarlyStopping("dev_map", "max", patience=cfg.meta.patience, restore_best=True))
    return cbs, {"types": ep.types, "k": k, "queries": len(ep.queries[k]), "corpus_size": len(ep.corpus),
                 "adhoc_dev_map": adhoc}, fn


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
