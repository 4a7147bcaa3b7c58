"""The README documents what a newcomer needs, and its examples are valid."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eventatlas.methods import SPECS, validate_params
from eventatlas.readers import REGISTRY

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_every_params_example_validates():
    """Every `--params` in the README's bash blocks is valid (console blocks may show refusals)."""
    from eventatlas.methods import get_spec

    bash = "\n".join(re.findall(r"```bash\n(.*?)```", README, re.S)).replace("\\\n", "")
    n = 0
    for line in bash.splitlines():
        for ex in re.findall(r"params[ =]'(\{.*?\})'", line):
            p = json.loads(ex)
            one = re.search(r"eventatlas train (\w+)", line)
            applied = re.search(r"eventatlas evaluate run:(\w+):", line)
            if one:  # `eventatlas train METHOD` takes the method's own config
                get_spec(one.group(1)).validate(p)
            elif applied:  # `eventatlas evaluate run:METHOD:...` takes the config its model is applied with
                get_spec(get_spec(applied.group(1)).apply_with).validate(p)
            else:
                validate_params(p, list(p))  # raises on an unknown method or key
            n += 1
    assert n >= 3


def test_readers_env_vars_methods_and_metrics_documented():
    for name in REGISTRY:
        assert f"| `{name}` |" in README, name
    code = "\n".join(p.read_text(encoding="utf-8") for d in ("eventatlas", "tasks", "flows", "scripts")
                     for p in (REPO / d).rglob("*") if p.suffix in (".py", ".sh"))
    for var in sorted(set(re.findall(r"EVENTATLAS_[A-Z_]+[A-Z]", code))):
        assert f"`{var}`" in README, var
    for method in SPECS:
        assert f"`{method}`" in README
    assert "eventatlas methods" in README
    for metric in ("ari", "bcubed_f", "purity_f", "naming_mean_rank", "mcnc_acc"):
        assert f"`{metric}`" in README


def test_no_duckdb_shell_assumed_and_licences():
    assert not re.search(r"^`?duckdb warehouse/", README, re.M)  # no duckdb CLI is installed
    assert "eventatlas sql" in README
    lic = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in lic and "Version 2.0" in lic and "END OF TERMS AND CONDITIONS" in lic
    for needle in ("CC BY 3.0", "non-commercial", "CC BY-SA", "CC0", "evaluation only"):
        assert needle in README, needle


# docs/results/ pages are generated from the warehouse and end, by design, with the run ids and code version
# that made them (eventatlas report --markdown); their README is written by hand and checked
DOCS = sorted(p for p in (REPO / "docs").rglob("*.md")
              if p.parent != REPO / "docs" / "results" or p.name == "README.md")
# Experiment logs do not belong in a manual: issue numbers, work rounds, run ids (a timestamp such as
# 20261123T151345, or method-dataset-sN-<8 hex>), people, and paths of the machine it was written on.
LOG_PATTERNS = {
    "issue number": re.compile(r"\bissues? #?\d+", re.I),
    "work round": re.compile(r"\bround \d", re.I),
    "run id (timestamp)": re.compile(r"\b\d{8}T\d{6}\b"),
    "run id (config hash)": re.compile(r"\b[a-z_]+-[a-z0-9_]+-s\d+-[0-9a-f]{8}\b"),
    "person": re.compile(r"\bthe lead\b(?!er)|\blead's\b", re.I),
    "machine path": re.compile(r"/wo" r"rk/|/tmp/|/home/\w"),
}


def test_readme_is_a_manual_of_bounded_length():
    n = README.count("\n")
    assert n <= 650, f"README.md has {n} lines; method internals and measurements belong in docs/methods/"


def test_no_experiment_logs_in_readme_or_docs():
    assert DOCS, "docs/ has no Markdown pages"
    found = []
    for path in [REPO / "README.md", *DOCS]:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for what, pat in LOG_PATTERNS.items():
                m = pat.search(line)
                if m:
                    found.append(f"{path.relative_to(REPO)}:{i}: {what}: {m.group(0)!r}")
    assert not found, "\n".join(found)


def test_log_patterns_catch_what_they_name():
    """The patterns above are only worth something if they match the strings they are meant to refuse."""
    bad = {"issue number": f"see issue {14}", "work round": f"after round {4}",
           "run id (timestamp)": "batch_attention-maven_subset-s0-20261123T151345-6a336b59",
           "run id (config hash)": "untuned-maven_subset-s0-0b7d5e48-*", "person": "the lead's runs",
           "machine path": "flock " + "/wo" + "rk/cpu" + ".lock"}
    for what, text in bad.items():
        assert LOG_PATTERNS[what].search(text), what
    clean = "the leaderboard of round-trip runs; issue the command; `run:<run_id>`; <data>/runs/<run_id>/"
    assert not [w for w, p in LOG_PATTERNS.items() if p.search(clean)]


def test_every_method_has_a_page_linked_from_the_readme():
    for method in SPECS:
        page = REPO / "docs" / "methods" / f"{method}.md"
        assert page.is_file(), page
        text = page.read_text(encoding="utf-8")
        assert f"`{method}`" in text and "## How to run it" in text and "## Measured results" in text, page
        assert f"(docs/methods/{method}.md)" in README, method
    for page in ("clustering", "wiki_builder"):
        assert (REPO / "docs" / "methods" / f"{page}.md").is_file()
        assert f"(docs/methods/{page}.md)" in README
    # relative links between pages resolve
    for path in [REPO / "README.md", *DOCS]:
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", path.read_text(encoding="utf-8")):
            assert (path.parent / target).is_file(), f"{path.relative_to(REPO)} links to missing {target}"


def test_params_examples_in_method_pages_validate():
    """The method pages' `eventatlas train METHOD ... --params '{...}'` lines are valid configs of that method."""
    from eventatlas.methods import get_spec

    n = 0
    for page in sorted((REPO / "docs" / "methods").glob("*.md")):
        bash = "\n".join(re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S)).replace("\\\n", "")
        for line in bash.splitlines():
            if not re.search(r"eventatlas train(-all)? ", line):  # e.g. build-wikievents takes builder params
                continue
            for ex in re.findall(r"params[ =]'(\{.*?\})'", line):
                p = json.loads(ex)
                one = re.search(r"eventatlas train (\w+)", line)
                if one:
                    get_spec(one.group(1)).validate(p)
                else:
                    validate_params(p, list(p))
                n += 1
    assert n >= 8


def test_readme_sql_examples_run(eventatlas_env):
    """Every ```sql example of the README runs against a migrated warehouse with views over an ingested
    sample, and the leaderboard examples give the hand-computed answer on published rows."""
    import duckdb

    from eventatlas.data.ingest import ingest_dataset
    from eventatlas.store.warehouse import Warehouse

    ingest_dataset("ontoevent", str(REPO / "datasets" / "samples" / "ontoevent" / "event_relation.json"))
    wh = Warehouse()
    wh.migrate()
    wh.refresh_views(eventatlas_env / "data")

    def run(run_id, seed, status="completed"):
        return {"run_id": run_id, "flow": "train-all", "task": "train", "method": "untuned",
                "params": {"n_clusters": 3, "model_id": "m"}, "code_version": "t", "data_fingerprints": {"d": "x"},
                "seed": seed, "started_at": f"2026-01-0{seed + 1} 00:00:00",
                "finished_at": f"2026-01-0{seed + 1} 00:00:00", "status": status, "device": "cpu"}

    def row(metric, value, seed):
        return {"task": "induction", "dataset": "ontoevent_maven", "split": "train", "method": "untuned",
                "representation": "trigger", "clustering": "agglomerative", "variant": None, "metric": metric,
                "value": value, "seed": seed}

    wh.publish(run("r0", 0), [row("ari", 0.40, 0), row("bcubed_f", 0.50, 0)])
    wh.publish(run("r1", 1), [row("ari", 0.60, 1), row("bcubed_f", 0.70, 1)])
    wh.publish(run("r2", 2, status="failed"))
    statements = [s for block in re.findall(r"```sql\n(.*?)```", README, re.S) for s in block.split(";")]
    statements = ["\n".join(x for x in s.splitlines() if not x.strip().startswith("--")).strip() for s in statements]
    statements = [s for s in statements if s]
    assert len(statements) >= 6
    con = duckdb.connect(str(wh.path), read_only=True)
    try:
        results = {s: con.sql(s).fetchall() for s in statements}
    finally:
        con.close()
    best = next(r for s, r in results.items() if "AS best_ari" in s)
    assert best == [("ontoevent_maven", "trigger", None, 60.0)]  # max over seeds of 0.40, 0.60, x100
    bf = next(r for s, r in results.items() if "metric = 'bcubed_f'" in s)
    assert len(bf) == 1 and bf[0][2] == pytest.approx(0.6) and bf[0][3] == pytest.approx(0.1414, abs=1e-4)
    assert bf[0][4] == 2  # mean 0.6, sample std of (0.5, 0.7), two seeds
    failed = next(r for s, r in results.items() if "status <> 'completed'" in s)
    assert [r[0] for r in failed] == ["r2"]
    types = next(r for s, r in results.items() if "FROM mentions" in s)
    assert types and all(r[0] == "ontoevent_maven" and r[2] >= 1 for r in types)
