"""frame_dml's protocol (Yamada et al. 2023): verb-split folds, dev selection, test once.

:func:`cross_validate` is the whole multi-stage protocol :mod:`eventatlas.methods.frame_dml` runs (its module
doc says what it measures): the FrameNet verb mentions are split by verb into ``n_sets``; per fold, train
on the rest (capped per LU if asked), pick every loss's margin and alpha (and epoch, with ``select_epoch``)
by dev B-cubed F of the one-step and two-step clusterings (:func:`_dev_grid`, :func:`_choose`), then
cluster test once with the cuts transferred from dev (:func:`_test_scores`), and average over folds.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..data.selection import NotApplicable
from ..io import atomic_write_json

log = logging.getLogger(__name__)

DEFAULT_MARGINS = {"contrastive": [0.1, 0.2, 0.5, 1.0], "triplet": [0.1, 0.2, 0.5, 1.0],
                   "arcface": [0.01, 0.02, 0.05, 0.1]}


def _margins(cfg: Any, loss: str) -> list[float | None]:
    if loss in DEFAULT_MARGINS:
        ms = cfg.margins.get(loss) or DEFAULT_MARGINS[loss]
        return [float(m) for m in ms]
    return [None]


def _dev_grid(emb: dict[str, np.ndarray], verbs, frames, alphas) -> list[dict[str, Any]]:
    """Dev scores of both clusterings for every α, with the cut each transfers to test."""
    from ..cluster.frames import gold_pair_fraction, height_for_k, linkage, tune_group_threshold, two_step
    from ..cluster.nnchain import cut
    from ..evaluation.frames import frame_cluster_scores
    from .represent import mix

    k_dev = len(set(frames))
    n_pairs = len(set(zip(verbs, frames)))
    frac = gold_pair_fraction(verbs, frames)
    rows = []
    for a in alphas:
        V = mix(emb["word"], emb["mask"], a)
        Z = linkage(V)
        t = height_for_k(Z, k_dev)
        one = frame_cluster_scores(frames, cut(Z, distance_threshold=t))
        tau = tune_group_threshold(V, verbs, n_pairs)
        lab, info = two_step(V, verbs, tau, frac)
        two = frame_cluster_scores(frames, lab)
        rows.append({"alpha": float(a), "one_step_threshold": t, "one_step_bcubed_f": one["bcubed_f"],
                     "one_step_purity_f": one["purity_f"], "one_step_n_clusters": one["n_clusters"],
                     "group_threshold": tau, "pair_fraction": frac, "two_step_bcubed_f": two["bcubed_f"],
                     "two_step_purity_f": two["purity_f"], "two_step_n_clusters": two["n_clusters"],
                     "n_pseudo_lus": info.n_pseudo_lus, "dev_verb_frame_pairs": n_pairs, "dev_frames": k_dev})
    return rows


def _dev_epoch_eval(module, items, dev: np.ndarray, fm, cfg: Any, device: str):
    """``select_epoch``'s per-epoch dev score: the best dev B-cubed F over α of both clusterings (the
    same grid and the same one-step criterion that choose the margin after training)."""
    from .represent import embed

    verbs, frames = fm.verbs[dev].tolist(), fm.frames[dev].tolist()

    def score(trainer) -> dict[str, float]:
        emb = embed(module, items, dev, device=device, precision=cfg.precision, batch_size=cfg.eval_batch_size)
        grid = _dev_grid(emb, verbs, frames, cfg.alphas)
        return {"dev_one_step_bcubed_f": max(r["one_step_bcubed_f"] for r in grid),
                "dev_two_step_bcubed_f": max(r["two_step_bcubed_f"] for r in grid)}

    return score


def _test_scores(emb: dict[str, np.ndarray], verbs, frames, choice: dict[str, dict[str, Any]],
                 ranking: bool, seconds: dict[str, float] | None = None) -> dict[tuple[str, str], dict[str, float]]:
    """(representation, clustering) -> test scores, cuts transferred from dev (test touched once).
    ``seconds`` (if given) receives the wall time of each clustering, keyed ``"<rep> <clustering>"``
    (the one-step entries are the average linkage over the whole test set plus its cut)."""
    from ..cluster.frames import one_step, two_step
    from ..evaluation.frames import frame_cluster_scores, ranking_recall
    from .represent import mix

    out: dict[tuple[str, str], dict[str, float]] = {}
    for rep in ("word", "mask", "w+m"):
        for clu in ("one_step", "two_step"):
            row = choice[clu][rep]
            V = mix(emb["word"], emb["mask"], row["alpha"])
            t0 = time.perf_counter()
            if clu == "one_step":
                lab = one_step(V, row["one_step_threshold"])
            else:
                lab, _ = two_step(V, verbs, row["group_threshold"], row["pair_fraction"])
            if seconds is not None:
                seconds[f"{rep} {clu}"] = round(time.perf_counter() - t0, 2)
            s = frame_cluster_scores(frames, lab)
            s["alpha"] = row["alpha"]
            if ranking and clu == "one_step":
                s.update(ranking_recall(V, frames, verbs))
            out[(rep, clu)] = s
    return out


def _choose(grid: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per clustering: the dev rows used for word (α 0), mask (α 1) and w+m (best dev B-cubed F)."""
    by_alpha = {r["alpha"]: r for r in grid}
    out = {}
    for clu in ("one_step", "two_step"):
        best = max(grid, key=lambda r: (r[f"{clu}_bcubed_f"], -abs(r["alpha"] - 0.5)))
        out[clu] = {"word": by_alpha.get(0.0, best), "mask": by_alpha.get(1.0, best), "w+m": best}
    return out


def projection_png(panels: list[tuple[str, np.ndarray]], frames: np.ndarray, path: Path, *, top: int,
                   max_points: int, seed: int, title: str) -> Path:
    """Side-by-side 2-D t-SNE (cosine) of the same test instances, the ``top`` most frequent frames coloured."""
    from ..tracking.plots import project_2d, pyplot, save_png

    names, counts = np.unique(frames, return_counts=True)
    keep_frames = [n for _, n in sorted(zip(-counts, names))][:top]
    idx = np.flatnonzero(np.isin(frames, keep_frames))
    if len(idx) > max_points:
        idx = np.sort(np.random.default_rng(seed).choice(idx, size=max_points, replace=False))
    color = {f: i for i, f in enumerate(keep_frames)}
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 6))
    axes = np.atleast_1d(axes)
    for ax, (name, X) in zip(axes, panels):
        xy, _ = project_2d(X[idx], method="tsne", seed=seed)
        for f in keep_frames:
            m = frames[idx] == f
            ax.scatter(xy[m, 0], xy[m, 1], s=5, color=plt.cm.tab10(color[f] % 10), label=f)
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[-1].legend(markerscale=3, fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return save_png(fig, path)


def _save_fold_model(writer, base, fold: int, keep: dict[str, Any], train_frames: list[str]) -> None:
    """The fold's dev-best fine-tuned encoder (``encoders/fold<k>``) and its loss head (the proxies of
    softmax / ArcFace / AdaCos: one row per training frame, named in the head's config), plus what
    clustering new mentions needs: the dev-chosen word/mask mixing weights."""
    base.load_state_dict(keep["weights"])
    name = f"fold{fold}"
    writer.encoder(base, name=name)
    if keep["head"]:
        writer.head(f"{name}_{keep['loss']}", keep["head"], kind=f"{keep['loss']}_head",
                    config={"loss": keep["loss"], "margin": keep["margin"], "classes": list(train_frames)})
    writer.card.inference[name] = {k: keep[k] for k in ("loss", "margin", "dev", "alpha_one_step", "alpha_two_step")}


def model_verbs(ref: str) -> set[str]:
    """The verbs a saved frame_dml model trained on or chose its epoch by: its fold's train and dev sets of
    its own dataset's verb split (recomputed from the card's config; that dataset must be ingested)."""
    from .. import config as paths
    from ..data.verbsplit import fold_roles, frame_mentions, split_verbs
    from ..modeling.saved import resolve_ref

    model = resolve_ref(ref)
    card, c = model.card, model.card.config
    name = model.selected or card.encoder
    if card.method != "frame_dml" or not name.startswith("fold"):
        raise ValueError(f"exclude_verbs_of {ref}: not a frame_dml model with a fold encoder ({card.method}, {name})")
    src = paths.datasets_dir() / card.trained_on
    if not (src / "mentions.parquet").exists():
        raise FileNotFoundError(f"exclude_verbs_of {ref}: its training dataset {card.trained_on!r} is not ingested "
                                f"here ({src}); its verb split cannot be recomputed")
    n_sets = int(c.get("n_sets", 3))
    sets = split_verbs(frame_mentions(src, lu_pos=c.get("lu_pos", "v")).verb_frames(), n_sets=n_sets,
                       seed=int(c.get("split_seed", 0)))
    roles = fold_roles(int(name[len("fold"):]), n_sets)
    return {v for r in ("train", "dev") for i in roles[r] for v in sets[i]}


def drop_verbs(fm: Any, verbs: set[str], why: str) -> Any:
    """``fm`` without the mentions of ``verbs`` (recorded in its selection record)."""
    import pyarrow as pa

    from ..data.verbsplit import FrameMentions

    keep = np.flatnonzero(~np.isin(fm.verbs, np.array(sorted(verbs), dtype=object)))
    record = dict(fm.selection)
    record["excluded_verbs"] = {"of": why, "n_verbs_listed": len(verbs),
                                "n_verbs_dropped": len(set(fm.verbs.tolist()) & verbs),
                                "n_verbs_kept": len(set(fm.verbs[keep].tolist())),
                                "n_mentions_dropped": int(len(fm) - len(keep)), "n_mentions_kept": int(len(keep))}
    return FrameMentions(fm.table.take(pa.array(keep, pa.int64())), fm.verbs[keep], fm.lus[keep], fm.frames[keep],
                         record)


def cross_validate(ctx: Any, result: Any) -> None:
    """Run the protocol for the method context ``ctx`` (config, manifest, run directory, seed, device) and
    fill ``result`` (metric rows, artifacts, training logs, params)."""
    import pyarrow as pa

    from ..cluster.dense import max_dense_n
    from ..data.verbsplit import (assign, cap_per_lu, check_fold, dataset_table, fold_roles, frame_mentions,
                                  role_index, split_verbs, subsample)
    from ..evaluation.base import RowKey, metric_rows
    from ..evaluation.frames import frame_rows
    from ..io import write_parquet
    from ..modeling.mention_encoder import MentionEncoder
    from ..modeling.tokens import tokenize_cached
    from ..tracking.runinfo import set_seeds
    from ..training import Trainer
    from ..training.callbacks import EarlyStopping, EvalCallback
    from .represent import embed, mix
    from .training import DMLModel, DMLTask

    cfg, man, seed, device, out_dir, resume = ctx.config, ctx.manifest, ctx.seed, ctx.device, ctx.run_dir, ctx.resume
    dataset_dir = ctx.dataset_dir
    fm = frame_mentions(dataset_dir, lu_pos=cfg.lu_pos, seed=seed)
    if cfg.exclude_verbs_of:
        fm = drop_verbs(fm, model_verbs(cfg.exclude_verbs_of), cfg.exclude_verbs_of)
    sets = split_verbs(fm.verb_frames(), n_sets=cfg.n_sets, seed=cfg.split_seed)
    set_of = assign(fm.verbs, sets)
    table = dataset_table(fm, set_of)
    atomic_write_json(out_dir / "dataset_table.json", table)
    result.add_artifact("frame_dml/dataset_table", out_dir / "dataset_table.json", len(table))

    plans = {}
    for fold in cfg.folds:  # every fold checked before any model loads (NotApplicable is cheap)
        idx = role_index(set_of, fold, cfg.n_sets)
        plans[fold] = {"idx": idx, "train": cap_per_lu(idx["train"], fm.lus, cfg.train_cap_per_lu, seed=seed),
                       "dev": subsample(idx["dev"], cfg.max_dev, seed=seed, salt=21),
                       "test": subsample(idx["test"], cfg.max_test, seed=seed, salt=22)}
        check_fold(fm, plans[fold])
        if len(set(fm.frames[plans[fold]["train"]])) < 2:
            raise NotApplicable(f"fold {fold}: fewer than 2 training frames")

    set_seeds(seed)
    base = MentionEncoder(cfg.model_id, max_length=cfg.max_length)
    sentences, starts, ends = fm.column("sentence"), [int(x) for x in fm.column("trigger_start")], \
        [int(x) for x in fm.column("trigger_end")]
    t0 = time.perf_counter()
    items, hits = {}, {}
    for name, rep in (("word", "trigger"), ("mask", "mask")):
        items[name], hits[name] = tokenize_cached(base, sentences, starts, ends, rep)
    train_items = items["word"] if cfg.train_representation == "trigger" else items["mask"]
    timings: dict[str, float] = {"tokenize": round(time.perf_counter() - t0, 2)}
    base_state = {k: v.detach().clone() for k, v in base.state_dict().items()}
    setting_extra = "".join([f", cap {cfg.train_cap_per_lu}/LU" if cfg.train_cap_per_lu else "",
                             f", dev<= {cfg.max_dev}" if cfg.max_dev else "", f", test<= {cfg.max_test}" if cfg.max_test else ""])
    folds_info: dict[str, Any] = {}
    per_fold: dict[tuple, list[dict[str, float]]] = {}
    projection_done = False
    writer = None
    if cfg.save_model:
        from ..modeling.saved import ModelWriter

        writer = ModelWriter(out_dir, method=ctx.method)
    for fold in cfg.folds:
        idx = plans[fold]["idx"]
        tr, dev, test = plans[fold]["train"], plans[fold]["dev"], plans[fold]["test"]
        setting = f"fold {fold}{setting_extra}"
        train_frames = sorted(set(fm.frames[tr]))
        cls = {f: i for i, f in enumerate(train_frames)}
        y_train = np.array([cls[f] for f in fm.frames[tr]], dtype=np.int64)
        info = {"roles": fold_roles(fold, cfg.n_sets), "n_train": len(tr), "n_train_uncapped": len(idx["train"]),
                "n_dev": len(dev), "n_dev_full": len(idx["dev"]), "n_test": len(test), "n_test_full": len(idx["test"]),
                "train_frames": len(train_frames), "models": {}}
        folds_info[str(fold)] = info
        fdir = out_dir / f"fold{fold}"
        best_ft: tuple[float, str, np.ndarray] | None = None  # (dev score, loss, test v_w+m)
        keep: dict[str, Any] | None = None  # the dev-best fine-tuned model of the fold, for the saved model
        vanilla_test = None
        for loss in cfg.losses:
            candidates, best = [], None  # best: (score, margin, tag, grid, choice, train_info, weights)
            for margin in ([None] if loss == "vanilla" else _margins(cfg, loss)):
                tag = loss if margin is None else f"{loss}_m{margin:g}"
                base.load_state_dict(base_state)
                train_info: dict[str, Any] = {}
                if loss != "vanilla":
                    set_seeds(seed)
                    model = DMLModel(base, loss, n_classes=len(train_frames), margin=margin or 0.0,
                                     scale=cfg.arcface_scale)
                    task = DMLTask(model, [train_items[int(i)] for i in tr], y_train,
                                   representation=cfg.train_representation, p_positive=cfg.p_positive)
                    callbacks, stopper = [], None
                    if cfg.select_epoch:
                        stopper = EarlyStopping("dev_one_step_bcubed_f", mode="max", patience=cfg.train.epochs + 1,
                                                restore_best=True)
                        callbacks = [EvalCallback(_dev_epoch_eval(base, items, dev, fm, cfg, device)), stopper]
                    res = Trainer(model, task, cfg.train, fdir / tag, seed=seed,
                                  phase=f"fold{fold}/{tag}", callbacks=callbacks).fit(resume=resume)
                    result.add_training(res)
                    train_info = {"seconds": res.seconds, "seconds_per_epoch":
                                  float(np.mean([h["seconds"] for h in res.history])) if res.history else 0.0,
                                  "examples_per_s": res.examples_per_s, "padding_fraction": res.padding_fraction,
                                  "final_loss": res.history[-1]["loss"] if res.history else None,
                                  "precision": res.precision}
                    if stopper is not None and stopper.best_epoch is not None:
                        train_info["epochs_selected"] = stopper.best_epoch + 1
                        train_info["dev_curve"] = [{k[5:]: v for k, v in h.items() if k.startswith("eval/")}
                                                   for h in res.history]
                t1 = time.perf_counter()  # the model trains the shared `base` encoder in place
                emb_dev = embed(base, items, dev, device=device, precision=cfg.precision, batch_size=cfg.eval_batch_size)
                train_info["embed_dev_s"] = round(time.perf_counter() - t1, 2)
                t1 = time.perf_counter()
                grid = _dev_grid(emb_dev, fm.verbs[dev].tolist(), fm.frames[dev].tolist(), cfg.alphas)
                train_info["dev_grid_s"] = round(time.perf_counter() - t1, 2)
                choice = _choose(grid)
                score = choice["one_step"]["w+m"]["one_step_bcubed_f"]
                candidates.append((margin, grid, score))
                if best is None or score > best[0]:  # the margin dev prefers (weights kept in memory)
                    weights = None if loss == "vanilla" else {k: v.detach().clone() for k, v in base.state_dict().items()}
                    head = None if loss == "vanilla" else {k: v.detach().clone()
                                                          for k, v in model.criterion.state_dict().items()}
                    best = (score, margin, tag, grid, choice, train_info, weights, head)
            score, margin, tag, grid, choice, train_info, weights, head = best
            base.load_state_dict(weights if weights is not None else base_state)
            enc = base
            t1 = time.perf_counter()
            emb_test = embed(enc, items, test, device=device, precision=cfg.precision, batch_size=cfg.eval_batch_size)
            train_info["embed_test_s"] = round(time.perf_counter() - t1, 2)
            t1 = time.perf_counter()
            clustering_s: dict[str, float] = {}
            scores = _test_scores(emb_test, fm.verbs[test].tolist(), fm.frames[test].tolist(), choice, cfg.ranking,
                                  seconds=clustering_s)
            train_info["test_eval_s"] = round(time.perf_counter() - t1, 2)
            train_info["test_clustering_s"] = clustering_s  # per representation and clustering (cost of a full fold)
            # the path the clustering module's memory ceiling picks for a test fold of this size
            train_info["test_linkage"] = "dense" if len(test) <= max_dense_n() else "nnchain"
            write_parquet(pa.Table.from_pylist([{"margin": m, **r} for m, g, _ in candidates for r in g]),
                          fdir / f"dev_grid_{loss}.parquet")
            result.add_artifact(f"frame_dml/dev_grid/fold{fold}/{loss}", fdir / f"dev_grid_{loss}.parquet",
                                sum(len(g) for _, g, _ in candidates))
            info["models"][loss] = {"margin": margin, "dev_one_step_bcubed_f": score,
                                    "alpha_one_step": choice["one_step"]["w+m"]["alpha"],
                                    "alpha_two_step": choice["two_step"]["w+m"]["alpha"],
                                    "dev_margins": {str(m): sc for m, _, sc in candidates}, **train_info}
            key = RowKey(dataset=man.dataset, method=ctx.method, seed=seed, setting=setting, variant=loss)
            for (rep, clu), s in scores.items():
                s = {k: v for k, v in s.items() if k != "alpha"}
                result.metrics += frame_rows(s, key=key.replace(split="test", representation=rep, clustering=clu))
                per_fold.setdefault((loss, rep, clu), []).append(s)
            for clu in ("one_step", "two_step"):
                d = choice[clu]["w+m"]
                result.metrics += metric_rows({"bcubed_f": d[f"{clu}_bcubed_f"], "purity_f": d[f"{clu}_purity_f"],
                                               "n_clusters": d[f"{clu}_n_clusters"]}, task="induction",
                                              key=key.replace(split="dev", representation="w+m", clustering=clu))
            facts = {"alpha_one_step": choice["one_step"]["w+m"]["alpha"],
                     "alpha_two_step": choice["two_step"]["w+m"]["alpha"]}
            if margin is not None:
                facts["margin"] = margin
            if "epochs_selected" in train_info:
                facts["epochs_selected"] = train_info["epochs_selected"]
            if "seconds_per_epoch" in train_info:
                facts["seconds_per_epoch"] = train_info["seconds_per_epoch"]
                facts["train_seconds"] = train_info["seconds"]
            result.metrics += metric_rows(facts, task="training", key=key.replace(split="train"))
            V_test = mix(emb_test["word"], emb_test["mask"], choice["one_step"]["w+m"]["alpha"])
            if loss == "vanilla":
                vanilla_test = V_test
            elif best_ft is None or score > best_ft[0]:
                best_ft = (score, loss, V_test)
                if writer is not None:
                    keep = {"weights": weights, "head": head, "loss": loss, "margin": margin, "dev": score,
                            "alpha_one_step": choice["one_step"]["w+m"]["alpha"],
                            "alpha_two_step": choice["two_step"]["w+m"]["alpha"]}
            log.info("frame_dml %s fold %d %s: dev one-step BCF %.4f, test one-step BCF %.4f two-step BCF %.4f",
                     man.dataset, fold, tag, score, scores[("w+m", "one_step")]["bcubed_f"],
                     scores[("w+m", "two_step")]["bcubed_f"])
        if keep is not None:
            _save_fold_model(writer, base, fold, keep, train_frames)
            base.load_state_dict(base_state)
        if cfg.projection and not projection_done and vanilla_test is not None and best_ft is not None:
            p = projection_png([("vanilla", vanilla_test), (f"fine-tuned: {best_ft[1]}", best_ft[2])],
                               fm.frames[test], fdir / "projection_test.png", top=cfg.projection_frames,
                               max_points=cfg.projection_max_points, seed=seed,
                               title=f"{man.dataset} fold {fold} test: top-{cfg.projection_frames} frames (t-SNE, v_w+m)")
            result.add_artifact("plot/projection/vanilla_vs_finetuned", p)
            projection_done = True
    if len(cfg.folds) > 1:
        for (loss, rep, clu), ss in per_fold.items():
            mean = {k: float(np.mean([s[k] for s in ss])) for k in ss[0]}
            result.metrics += frame_rows(mean, key=RowKey(
                dataset=man.dataset, method=ctx.method, seed=seed, split="test",
                setting=f"mean of {len(ss)} folds{setting_extra}", representation=rep, clustering=clu, variant=loss))
    timings["total"] = round(time.perf_counter() - t0, 2)
    result.params = ctx.base_params(selection=fm.selection, dataset_table=table, token_cache_hit=hits, folds=folds_info,
                                    timings_s=timings)
    atomic_write_json(out_dir / "frame_dml_params.json", result.params)
    if writer is not None and writer.card.encoders:
        writer.close(representation=cfg.train_representation, precision=ctx.precision,
                     inference=dict(writer.card.inference, default=writer.card.encoder,
                                    mix="v = alpha * word + (1 - alpha) * mask"))
