"""Mutation testing of the hardened modules with mutmut (README "Mutation testing"; not part of CI).

Needs ``pip install -e '.[mutation]'``. Scope and test selection: ``[tool.mutmut]`` in
pyproject.toml; of ``eventatlas/results/warehouse.py`` only the publish path is run (connect, transaction,
publish and the row checks publish calls), with ``eventatlas/results/publishing.py``.

    python scripts/mutation.py [--sample D] [--survivors-of DIR] [--summary] [--smoke] [http|io|publish ...]

``--sample 1`` runs only mutants whose number ends in 1 (1, 11, 21, ...: every mutated function is in it; a
systematic ~10% sample; the same mutants
every time, so before/after compare like with like). ``--survivors-of DIR`` re-runs only the mutants
that survived (or had no test, or were not checked yet) in another checkout's finished run, after copying its results here:
adding tests can only kill more, so this gives the after-figures at the cost of the survivors alone.
Prints per group: mutants run, killed, timeout, survived, no tests, kill rate.
``--smoke`` checks the set-up in seconds without mutmut and without writing anything: every group's
patterns name functions that exist in the mutated modules, and the selected test files exist.
"""
from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from eventatlas.results import benchmarking  # noqa: E402
W = "eventatlas.results.warehouse."
GROUPS = {
    "http": ["eventatlas.wiki.http.*"],
    "io": ["eventatlas.io.*"],
    "publish": ["eventatlas.results.publishing.*", W + "xǁWarehouseǁconnect", W + "xǁWarehouseǁtransaction",
                W + "xǁWarehouseǁpublish", W + "x_metrics_table", W + "x_train_log_table", W + "x__insert_arrow",
                W + "x__lock_holder", W + "x__json"],
}


def patterns(group: str, sample: str | None) -> list[str]:
    return [f"{p}__mutmut_*{sample or ''}" for p in GROUPS[group]]


def mutmut_names(module: str) -> list[str]:
    """The names mutmut gives the functions of ``module`` (``pkg.mod.x_func``, ``pkg.mod.xǁClassǁmethod``)."""
    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(f"{module}.x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            out += [f"{module}.xǁ{node.name}ǁ{f.name}" for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def smoke() -> int:
    """The groups and the test selection still match the code (1 when they do not)."""
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]
    names = [n for m in cfg["only_mutate"] for n in mutmut_names(m[:-3].replace("/", "."))]
    bad = 0
    for g, pats in GROUPS.items():
        hit = {p: [n for n in names if fnmatch.fnmatch(n, p)] for p in pats}
        empty = [p for p, h in hit.items() if not h]
        print(f"{g}: {sum(map(len, hit.values()))} functions to mutate" + (f"; patterns matching nothing: {empty}" if empty else ""))
        bad += bool(empty)
    missing = [t for t in cfg["pytest_add_cli_args_test_selection"] if not (REPO / t).exists()]
    if missing:
        print(f"selected test files missing: {missing}")
    return 1 if bad or missing else 0


def results(root: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in (root / "mutants").rglob("*.py.meta"):
        codes.update(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return codes


def summary(groups: list[str], sample: str | None, root: Path = REPO) -> dict[str, dict]:
    from mutmut.stats import status_by_exit_code

    codes, out = results(root), {}
    for g in groups:
        pats = patterns(g, sample)
        mine = {k: v for k, v in codes.items() if any(fnmatch.fnmatch(k, p) for p in pats)}
        st = Counter(status_by_exit_code[v] for v in mine.values())
        run = sum(st.values()) - st["not checked"]
        dead = st["killed"] + st["timeout"]
        out[g] = {"run": run, **st, "kill_rate": round(100 * dead / max(run, 1), 1),
                  "survivors": sorted(k for k, v in mine.items() if status_by_exit_code[v] in ("survived", "no tests")),
                  "not_checked": sorted(k for k, v in mine.items() if v is None)}
        print(f"{g}: {run} mutants run, {st['killed']} killed, {st['timeout']} timeout, {st['survived']} survived, "
              f"{st['no tests']} no tests, {st['suspicious'] + st['segfault']} other; kill rate "
              f"{out[g]['kill_rate']}%" + (f" ({st['not checked']} not checked)" if st["not checked"] else ""))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # no choices=: argparse checks a nargs="*" positional's default (even []) against them and refuses it
    ap.add_argument("groups", nargs="*", default=[], metavar="GROUP", help=f"{' | '.join(GROUPS)} (default: all)")
    ap.add_argument("--sample", help="last digit of the mutant numbers to run (10%% sample)")
    ap.add_argument("--survivors-of", type=Path, help="a checkout whose finished run's survivors to re-run")
    ap.add_argument("--summary", action="store_true", help="only print the counts of the last run")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    a = benchmarking.parse_args(ap, argv, publish=False)  # --smoke: check the set-up only (seconds, no mutmut)
    unknown = [g for g in a.groups if g not in GROUPS]
    if unknown:
        ap.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    if a.smoke:
        raise SystemExit(smoke())
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    if not a.summary:
        for g in a.groups or list(GROUPS):
            names = patterns(g, a.sample)
            if a.survivors_of is not None:
                prev = summary([g], a.sample, a.survivors_of)[g]
                names = prev["survivors"] + prev["not_checked"]  # not checked: new or changed since
                if not names:
                    continue
                if not (REPO / "mutants").exists():  # the other run's results, so killed ones stay killed
                    shutil.copytree(a.survivors_of / "mutants", REPO / "mutants", symlinks=True)
            (REPO / "mutants").mkdir(exist_ok=True)
            with open(REPO / "mutants" / f"run-{g}.log", "w") as log:
                subprocess.run([mutmut, "run", "--max-children", "1", *names], cwd=REPO, stdout=log,
                               stderr=subprocess.STDOUT, check=False)
    out = summary(a.groups or list(GROUPS), a.sample)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
