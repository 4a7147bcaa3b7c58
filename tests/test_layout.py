"""Layout rules from the design card, checked on the source tree."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    # the cli package is the one entry point allowed to reach into flows/ (lazily, inside commands)
    cli = ROOT / "eventatlas" / "cli"
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "eventatlas").rglob("*.py")
        if cli not in p.parents and {"prefect", "flows", "tasks"} & _imports(p)
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


# ----------------------------------------------------------------------------- platform layers
def _core_imports(path: Path) -> set[str]:
    """eventatlas sub-packages/modules a core file imports (absolute and relative), first level only."""
    rel = path.relative_to(ROOT / "eventatlas").with_suffix("")
    pkg = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                parts = base + (node.module.split(".") if node.module else [])
                if not parts:  # "from . import x" at the top level
                    parts = [a.name for a in node.names]
                out.add(parts[0])
                if not node.module and base == []:
                    out.update(a.name for a in node.names)
            elif node.module and node.module.startswith("eventatlas."):
                out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("eventatlas."))
    return out


# layer -> the layers it must never import (lower layers stay independent of the ones built on them)
LAYERS = {
    "data": {"training", "evaluation", "methods", "induction", "runner", "warehouse", "cli", "modeling"},
    "modeling": {"data", "training", "evaluation", "methods", "induction", "runner", "warehouse", "cli"},
    "training": {"data", "evaluation", "methods", "induction", "runner", "warehouse", "cli"},
    "evaluation": {"training", "methods", "induction", "runner", "warehouse", "cli", "data"},
    "induction": {"methods", "runner", "cli"},
    "methods": {"runner", "cli", "warehouse"},
}


def test_platform_layers_import_only_downwards():
    offenders = []
    for layer, forbidden in LAYERS.items():
        for p in (ROOT / "eventatlas" / layer).rglob("*.py"):
            bad = _core_imports(p) & forbidden
            if bad:
                offenders.append(f"{p.relative_to(ROOT)} imports {sorted(bad)}")
    assert offenders == [], offenders


def test_only_the_publish_path_writes_the_warehouse():
    # DuckDB has one writer: the publish path, i.e. eventatlas/results/publishing.py (publish_records, what the
    # publish task wraps and the CLI's Prefect-free one-shot path calls; publish_build for the wiki build's
    # record task). The core may read (cli queries) but no other module publishes or opens a write transaction.
    writers = []
    for p in [*(ROOT / "eventatlas").rglob("*.py"), *(ROOT / "flows").glob("*.py"), *(ROOT / "tasks").glob("*.py")]:
        if p.relative_to(ROOT).as_posix() in ("eventatlas/results/warehouse.py", "eventatlas/results/publishing.py"):
            continue
        src = p.read_text(encoding="utf-8")
        if ".publish(" in src or ".transaction(" in src or ".add_metrics(" in src:
            writers.append(str(p.relative_to(ROOT)))
    assert writers == [], f"warehouse writes outside tasks/publish.py: {writers}"


def test_nothing_in_the_core_imports_the_cli():
    # the CLI is the top floor: results, reports and the core never import from it (no import circle)
    cli = ROOT / "eventatlas" / "cli"
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "eventatlas").rglob("*.py")
                 if cli not in p.parents and "cli" in _core_imports(p)]
    assert offenders == [], offenders
