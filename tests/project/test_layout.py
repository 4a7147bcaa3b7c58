"""Layout rules from the design card, checked on the source tree."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_prefect():
    # the CLI too: it finds the flows through the entry points flows/ declares (pyproject.toml)
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "eventatlas").rglob("*.py")
        if {"prefect", "flows", "tasks"} & _imports(p)
    ]
    assert offenders == [], f"core modules must not import Prefect/flows/tasks: {offenders}"


def test_no_top_level_package_shadows_well_known_ones():
    for name in ("datasets", "transformers", "torch", "tokenizers", "prefect"):
        assert not (ROOT / name / "__init__.py").exists(), f"{name}/ would shadow the real '{name}' package"


def test_tasks_are_thin_and_flows_use_tasks():
    # tasks/ wrap core calls; they must not grow algorithms of their own
    for p in (ROOT / "tasks").glob("*.py"):
        if p.name == "__init__.py":
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        n_lines = len(p.read_text(encoding="utf-8").splitlines())
        assert n_lines < 400, f"{p.name} has {n_lines} lines: move the algorithm into eventatlas/"
        assert any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in tree.body), p.name


# ----------------------------------------------------------------------------- layers and the import graph
# The layer order of the core, bottom first: a unit (a package of eventatlas, or a base module) may import
# only units of a LOWER row (and itself); units of one row are independent of each other. Every package and
# every top-level module of eventatlas must appear here, so a new one has to be placed.
LAYER_ORDER: list[tuple[str, ...]] = [
    # base: no eventatlas imports but the package's version (escaping: HTML, script JSON, Markdown, CSV cells)
    # (metric_specs: the table of every metric's direction, scale and headline place)
    ("errors", "resources", "schema", "verbosity", "escaping", "reasons", "metric_specs"),
    ("config",),  # base: where things are (the package's files through resources)
    ("names",),  # base: the name check (raises errors.InputError)
    ("io",),  # base: atomic writes, the dataset writer (checks names)
    ("wiki", "cluster"),  # Wikidata/Wikinews builder; clustering algorithms
    ("readers",),  # dataset readers (the wikievents reader builds on wiki)
    ("data",),  # registry, download, ingest, manifests, protocols, selection
    ("modeling", "evaluation"),  # encoder, embeddings, device | evaluators and metrics
    # the shared training loop | run bookkeeping: run records, seeds, code version, the tables a run writes, plots
    ("training", "tracking"),
    # method families (event detection among them); the atlas (its build, page, exports)
    ("swcc", "emr", "induction", "framedml", "detection", "atlas"),
    ("store",),  # the warehouse and its one writer: lands runs, wiki builds, atlas builds; benchmark runs
    ("grounding",),  # builds on emr's rankers
    ("discover",),  # the event types of a corpus: induced, described, linked (builds on the atlas and clustering)
    ("methods",),  # method specs, the method contract, ensembles
    ("run",),  # one run of a method (runner), scale-out planning
    ("experiments",),  # declared experiments over runs
    ("results",),  # presentation: leaderboards, reports, experiment pages, atlas queries
    ("pipelines",),  # each command's body once, run through an injected engine (in-process, Dask, Prefect)
    ("cli",),  # the top floor
]
RANK = {unit: i for i, row in enumerate(LAYER_ORDER) for unit in row}


def _module_names() -> dict[str, Path]:
    """Dotted name -> file of every module of eventatlas (packages by their __init__)."""
    out = {}
    for p in (ROOT / "eventatlas").rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _import_graph() -> dict[str, set[str]]:
    """module -> the eventatlas modules it imports, at module level or inside functions alike (a lazy import
    is still an arrow). ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``."""
    mods = _module_names()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                subs = [f"{src}.{a.name}" for a in node.names if f"{src}.{a.name}" in mods]
                targets.update(subs or [src])
        graph[mod] = {o for t in targets if t.split(".")[0] == "eventatlas" and (o := owner(t)) and o != mod}
    return graph


def _unit(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "errors"  # the package root (its version) sits at the bottom


def test_every_package_and_module_has_a_layer():
    units = {p.stem for p in (ROOT / "eventatlas").glob("*.py") if p.name != "__init__.py"}
    units |= {p.parent.name for p in (ROOT / "eventatlas").glob("*/__init__.py")}
    assert sorted(units - set(RANK)) == [], "place the new package or module in LAYER_ORDER"
    assert sorted(set(RANK) - units) == [], "LAYER_ORDER names a unit that no longer exists"


def test_imports_point_only_downwards():
    offenders = []
    for mod, targets in _import_graph().items():
        for t in sorted(targets):
            a, b = _unit(mod), _unit(t)
            if a != b and RANK[b] >= RANK[a]:
                offenders.append(f"{mod} -> {t} ({a} is not above {b})")
    assert offenders == [], "\n".join(offenders)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle():
    # the check below must be able to fail: a -> b -> c -> a is one circle, d hangs off it
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules():
    assert _cycles(_import_graph()) == []


def test_no_core_file_over_600_lines():
    long = [f"{p.relative_to(ROOT)}: {n}" for p in (ROOT / "eventatlas").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600]
    assert long == [], long


def test_only_the_publish_path_writes_the_warehouse():
    # DuckDB has one writer: the publish path, i.e. eventatlas/store/publishing.py (publish_records, what the
    # publish task wraps and the CLI's Prefect-free one-shot path calls; publish_build for the wiki build's
    # record task). The core may read (cli queries) but no other module publishes or opens a write transaction.
    writers = []
    for p in [*(ROOT / "eventatlas").rglob("*.py"), *(ROOT / "flows").glob("*.py"), *(ROOT / "tasks").glob("*.py")]:
        if p.relative_to(ROOT).as_posix() in ("eventatlas/store/warehouse.py", "eventatlas/store/publishing.py"):
            continue
        src = p.read_text(encoding="utf-8")
        # engine.publish is the publisher a pipeline is handed: the publish task or publish_records
        if re.search(r"(?<!engine)\.publish\(", src) or ".transaction(" in src or ".add_metrics(" in src:
            writers.append(str(p.relative_to(ROOT)))
    assert writers == [], f"warehouse writes outside tasks/publish.py: {writers}"


def test_nothing_in_the_core_imports_the_cli():
    # the CLI is the top floor: results, reports and the core never import from it (no import circle)
    offenders = [f"{m} -> {sorted(ts)}" for m, ts in _import_graph().items()
                 if _unit(m) != "cli" and any(_unit(x) == "cli" for x in ts)]
    assert offenders == [], offenders


def test_tests_sit_in_folders_that_mirror_the_packages():
    # a test file belongs to the package it tests; project/ holds the repo-wide checks, support/ the helpers
    packages = {p.parent.name for p in (ROOT / "eventatlas").glob("*/__init__.py")}
    misplaced = []
    for p in sorted((ROOT / "tests").rglob("test_*.py")):
        folder = p.relative_to(ROOT / "tests").parts[0]
        if folder == p.name or (folder not in packages and folder != "project"):
            misplaced.append(str(p.relative_to(ROOT)))
    assert misplaced == [], f"tests outside a package's folder: {misplaced}"
    assert not [p for p in (ROOT / "tests" / "support").rglob("test_*.py")], "support/ holds helpers, not tests"
