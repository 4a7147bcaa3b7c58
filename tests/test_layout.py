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
    # cli.py is the one entry point allowed to reach into flows/ (lazily, inside commands)
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "eventatlas").rglob("*.py")
        if p.name != "cli.py" and {"prefect", "flows", "tasks"} & _imports(p)
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
