"""Mutation testing of chosen modules with mutmut (docs/testing.md "Mutation testing"; not part of CI).

Needs ``pip install -e '.[mutation]'``. What each group mutates and which test files cover it: ``GROUPS``
below (adding a group is one entry there; its files and tests must also be in ``[tool.mutmut]``
``only_mutate`` / ``pytest_add_cli_args_test_selection`` in pyproject.toml, which ``--smoke`` checks).

    python scripts/mutation.py [--sample D] [--survivors-of DIR] [--summary] [--smoke] [GROUP | FILE ...]

A GROUP is a name from ``GROUPS`` (http, io, publish, metrics, clustering, retrieval, nnchain,
sqlguard, atlas, experiments, savedmodels); a FILE
(``eventatlas/evaluation/metrics.py``) stands for the groups that mutate it. None: every group.
``--sample 1`` runs only mutants whose number ends in 1 (1, 11, 21, ...: every mutated function is in it; a
systematic ~10% sample; the same mutants every time, so before/after compare like with like).
``--survivors-of DIR`` re-runs only the mutants that survived (or had no test, or were not checked yet) in
a finished run in DIR (another checkout, after copying its results here, or ``.`` for this one): adding
tests can only kill more, so this gives the after-figures at the cost of the survivors alone.
Prints per group: mutants run, killed, timeout, survived, no tests, kill rate.
``--smoke`` checks the set-up in seconds without mutmut and without writing anything: every group's
files and functions exist and are in ``only_mutate``, and its test files exist and are selected.
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
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from eventatlas.store import benchmarking  # noqa: E402


class Group(NamedTuple):
    """``mutate``: source files (every function in them) or ``file.py::function`` /
    ``file.py::Class.method`` (only that one); ``tests``: the test files that cover them."""

    mutate: tuple[str, ...]
    tests: tuple[str, ...]


_WH = "eventatlas/store/warehouse.py::"
_EDGES = "tests/evaluation/test_evaluation_edges.py"
GROUPS: dict[str, Group] = {
    "http": Group(("eventatlas/wiki/http.py",),
                  ("tests/wiki/test_wiki_http.py", "tests/wiki/test_wiki_http_hardening.py", "tests/wiki/test_wiki_http_limits.py",
                   "tests/project/test_mutation_kills.py")),
    "io": Group(("eventatlas/io.py",),
                ("tests/readers/test_readers_common.py", "tests/data/test_ingest.py", "tests/data/test_ingest_guards.py",
                 "tests/readers/test_readers_zip.py", "tests/project/test_mutation_kills.py", "tests/training/test_crash_consistency.py")),
    # of the warehouse only the publish path: connect, transaction, publish and the row checks publish calls
    "publish": Group(("eventatlas/store/publishing.py",
                      *(_WH + f for f in ("Warehouse.connect", "Warehouse.transaction", "Warehouse.publish",
                                          "_refused_rows", "_insert_arrow", "_lock_holder", "_json")),
                      *("eventatlas/tracking/tables.py::" + f for f in ("metrics_table", "train_log_table"))),
                     ("tests/store/test_warehouse.py", "tests/store/test_busy_warehouse.py", "tests/project/test_mutation_kills.py",
                      "tests/training/test_crash_consistency.py")),
    "metrics": Group(("eventatlas/evaluation/metrics.py",), ("tests/evaluation/test_metrics.py", _EDGES)),
    "clustering": Group(("eventatlas/evaluation/clustering.py",), ("tests/evaluation/test_evaluation.py", _EDGES)),
    "retrieval": Group(("eventatlas/evaluation/retrieval.py",), ("tests/evaluation/test_evaluation.py", _EDGES)),
    "nnchain": Group(("eventatlas/cluster/nnchain.py",),
                     ("tests/cluster/test_cluster_scale.py", "tests/cluster/test_cluster_nnchain_edges.py")),
    "sqlguard": Group(("eventatlas/store/sql_session.py",), ("tests/store/test_sql_readonly.py",)),
    # of the atlas only building, part ownership, linking and reading assignments (its tests are slow)
    "atlas": Group(("eventatlas/atlas/build.py::build", "eventatlas/atlas/build.py::_link_inventory",
                    "eventatlas/atlas/build.py::write_record", "eventatlas/atlas/link.py::gold_mapping",
                    "eventatlas/atlas/link.py::link_pair", "eventatlas/atlas/links.py",
                    "eventatlas/atlas/inventory.py::read_assignments", "eventatlas/escaping.py"),
                   ("tests/atlas/test_atlas_hardening.py", "tests/atlas/test_atlas.py", "tests/atlas/test_page_escaping.py",
                    "tests/atlas/test_atlas_mutants.py")),
    # the guards: loading and checking a spec, checking and locking a run, reusing finished cells
    "experiments": Group(("eventatlas/tracking/runinfo.py::check_seeds",
                          *("eventatlas/experiments/spec.py::" + f for f in (
                              "check_plan", "_check_names", "_name", "why_bad_ref", "read_yaml", "load",
                              "_StrictLoader._refuse", "_StrictLoader.compose_node",
                              "_StrictLoader.construct_mapping", "_StrictLoader.construct_bounded_int")),
                          *("eventatlas/experiments/run.py::" + f for f in (
                              "check_run", "Lock.__init__", "Lock.acquire", "Lock.release", "_reuse",
                              "_after_others"))),
                         ("tests/experiments/test_experiment_guards.py", "tests/experiments/test_experiments.py",
                          "tests/experiments/test_experiment_messages.py", "tests/experiments/test_experiment_mutants.py")),
    # the loading path of saved models
    "savedmodels": Group(tuple("eventatlas/modeling/saved.py::" + f for f in (
                             "read_model", "_check_inside", "bad_run_ref", "resolve_ref", "_find")),
                         ("tests/modeling/test_paths_and_models.py", "tests/modeling/test_saved_models.py",
                          "tests/modeling/test_saved_model_refs.py")),
}


def _split(entry: str) -> tuple[str, str | None]:
    path, _, func = entry.partition("::")
    return path, func or None


def _module(path: str) -> str:
    return path[:-3].replace("/", ".")


def group_patterns(group: Group) -> list[str]:
    """mutmut's names for what ``group`` mutates (``pkg.mod.x_func``, ``pkg.mod.xǁClassǁmethod``, ``pkg.mod.*``)."""
    out = []
    for entry in group.mutate:
        path, func = _split(entry)
        if func is None:
            out.append(f"{_module(path)}.*")
        elif "." in func:
            cls, meth = func.split(".", 1)
            out.append(f"{_module(path)}.xǁ{cls}ǁ{meth}")
        else:
            out.append(f"{_module(path)}.x_{func}")
    return out


def patterns(group: str, sample: str | None) -> list[str]:
    return [f"{p}__mutmut_*{sample or ''}" for p in group_patterns(GROUPS[group])]


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


def _config() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]


def smoke() -> int:
    """The groups still match the code and ``[tool.mutmut]`` (1 when they do not), saying what is off."""
    cfg = _config()
    selected = set(cfg["pytest_add_cli_args_test_selection"])
    bad = 0
    for g, group in GROUPS.items():
        problems = []
        files = sorted({_split(e)[0] for e in group.mutate})
        problems += [f"{f} does not exist" for f in files if not (REPO / f).is_file()]
        problems += [f"{f} is not in only_mutate" for f in files
                     if (REPO / f).is_file() and not any(fnmatch.fnmatch(f, p) for p in cfg["only_mutate"])]
        names = [n for f in files if (REPO / f).is_file() for n in mutmut_names(_module(f))]
        hit = {p: [n for n in names if fnmatch.fnmatch(n, p)] for p in group_patterns(group)}
        problems += [f"pattern {p} matches no function" for p, h in hit.items() if not h]
        problems += [f"test file {t} does not exist" for t in group.tests if not (REPO / t).is_file()]
        problems += [f"test file {t} is not in pytest_add_cli_args_test_selection" for t in group.tests
                     if t not in selected]
        print(f"{g}: {sum(map(len, hit.values()))} functions to mutate" + (f"; {'; '.join(problems)}" if problems else ""))
        bad += bool(problems)
    missing = sorted(t for t in selected if not (REPO / t).exists())
    if missing:
        print(f"selected test files missing: {missing}")
    return 1 if bad or missing else 0


def resolve(names: list[str]) -> list[str]:
    """Group names for the command line's GROUP and FILE arguments, in order, without repeats
    (ValueError naming an argument that is neither)."""
    out: list[str] = []
    for name in names:
        if name in GROUPS:
            found = [name]
        else:
            p = Path(name)
            rel = (p.resolve().relative_to(REPO) if p.resolve().is_relative_to(REPO) else p).as_posix()
            found = [g for g, group in GROUPS.items() if rel in {_split(e)[0] for e in group.mutate}]
            if not found:
                why = "no group mutates it" if name.endswith(".py") else "not a group"
                raise ValueError(f"{name}: {why}; choose a group ({', '.join(GROUPS)}) or a file one of them mutates")
        out += [g for g in found if g not in out]
    return out


def results(root: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in (root / "mutants").rglob("*.py.meta"):
        codes.update(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return codes


def summary(groups: list[str], sample: str | None, root: Path = REPO, quiet: bool = False) -> dict[str, dict]:
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
        if quiet:
            continue
        print(f"{g}: {run} mutants run, {st['killed']} killed, {st['timeout']} timeout, {st['survived']} survived, "
              f"{st['no tests']} no tests, {st['suspicious'] + st['segfault']} other; kill rate "
              f"{out[g]['kill_rate']}%" + (f" ({st['not checked']} not checked)" if st["not checked"] else ""))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # no choices=: argparse checks a nargs="*" positional's default (even []) against them and refuses it
    ap.add_argument("groups", nargs="*", default=[], metavar="GROUP|FILE",
                    help=f"{' | '.join(GROUPS)} or a file a group mutates (default: all groups)")
    ap.add_argument("--sample", help="last digit of the mutant numbers to run (10%% sample)")
    ap.add_argument("--survivors-of", type=Path, help="a checkout whose finished run's survivors to re-run")
    ap.add_argument("--summary", action="store_true", help="only print the counts of the last run")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    a = benchmarking.parse_args(ap, argv, publish=False)  # --smoke: check the set-up only (seconds, no mutmut)
    try:
        a.groups = resolve(a.groups)
    except ValueError as e:
        ap.error(str(e))
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    if a.smoke:
        raise SystemExit(smoke())
    mutmut = str(Path(sys.executable).with_name("mutmut"))

    def run(g: str, names: list[str], mode: str = "w") -> None:
        (REPO / "mutants").mkdir(exist_ok=True)
        with open(REPO / "mutants" / f"run-{g}.log", mode) as log:
            subprocess.run([mutmut, "run", "--max-children", "1", *names], cwd=REPO, stdout=log,
                           stderr=subprocess.STDOUT, check=False)

    if not a.summary:
        for g in a.groups or list(GROUPS):
            if a.survivors_of is None:
                run(g, patterns(g, a.sample))
                continue
            prev = summary([g], a.sample, a.survivors_of, quiet=True)[g]
            if not (REPO / "mutants").exists():  # the other run's results, so killed ones stay killed
                shutil.copytree(a.survivors_of / "mutants", REPO / "mutants", symlinks=True)
            if prev["survivors"] + prev["not_checked"]:
                run(g, prev["survivors"] + prev["not_checked"])
            # code changed or added since that run has mutants with no result yet (mutmut made them above)
            new = summary([g], a.sample, quiet=True)[g]["not_checked"]
            if new:
                run(g, new, "a")
    out = summary(a.groups or list(GROUPS), a.sample)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
