"""scripts/mutation.py: the README's commands parse as written (no group = all groups; it exited 2 with
"invalid choice" before), and --smoke checks the set-up in seconds without mutmut, writing nothing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_commands_parse():
    m = _script()
    assert m.parse_args([]).groups == []  # README: `scripts/mutation.py` = all three groups
    a = m.parse_args(["--sample", "1", "io"])
    assert a.groups == ["io"] and a.sample == "1"
    with pytest.raises(SystemExit) as e:
        m.parse_args(["bogus"])
    assert e.value.code == 2


def test_smoke_checks_groups_and_writes_nothing():
    before = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True).stdout
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutation.py"), "--smoke"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = {line.split(":")[0]: int(line.split()[1]) for line in r.stdout.splitlines()}
    assert set(counts) == {"http", "io", "publish"} and all(n > 0 for n in counts.values())
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True).stdout
    assert after == before


def test_smoke_fails_when_a_pattern_names_nothing(monkeypatch):
    m = _script()
    monkeypatch.setitem(m.GROUPS, "io", ["eventatlas.io.x_no_such_function"])
    assert m.smoke() == 1
