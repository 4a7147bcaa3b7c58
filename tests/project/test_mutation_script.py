"""scripts/mutation.py: the documented commands parse as written (no group = all groups; it exited 2 with
"invalid choice" before; a file stands for its groups), and --smoke checks the set-up in seconds without
mutmut, writing nothing, and names what is off."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GROUPS = {"http", "io", "publish", "metrics", "clustering", "retrieval", "nnchain", "sqlguard", "atlas", "experiments",
          "savedmodels"}


def test_readme_commands_parse():
    m = _script()
    assert m.parse_args([]).groups == []  # docs/testing.md: `scripts/mutation.py` = every group
    a = m.parse_args(["--sample", "1", "io"])
    assert a.groups == ["io"] and a.sample == "1"
    for bad in (["bogus"], ["eventatlas/cli/base.py"]):  # not a group, a file no group mutates
        with pytest.raises(SystemExit) as e:
            m.parse_args(bad)
        assert e.value.code == 2


def test_a_file_stands_for_the_groups_that_mutate_it():
    m = _script()
    assert m.parse_args(["eventatlas/evaluation/metrics.py"]).groups == ["metrics"]
    assert m.parse_args([str(ROOT / "eventatlas/cluster/nnchain.py"), "metrics"]).groups == ["nnchain", "metrics"]
    # the warehouse is mutated only on its publish path; a group named twice runs once
    assert m.parse_args(["eventatlas/store/warehouse.py", "publish"]).groups == ["publish"]
    assert m.patterns("metrics", "1") == ["eventatlas.evaluation.metrics.*__mutmut_*1"]
    assert "eventatlas.store.warehouse.xǁWarehouseǁpublish__mutmut_*" in m.patterns("publish", None)
    assert "eventatlas.store.warehouse.x__json__mutmut_*" in m.patterns("publish", None)


def test_smoke_checks_groups_and_writes_nothing():
    before = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True).stdout
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutation.py"), "--smoke"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = {line.split(":")[0]: int(line.split()[1]) for line in r.stdout.splitlines()}
    assert set(counts) == set(_script().GROUPS) >= GROUPS and all(n > 0 for n in counts.values())
    after = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True).stdout
    assert after == before


def test_smoke_fails_when_a_pattern_names_nothing(monkeypatch, capsys):
    m = _script()
    monkeypatch.setitem(m.GROUPS, "io", m.Group(("eventatlas/io.py::no_such_function",), m.GROUPS["io"].tests))
    assert m.smoke() == 1
    assert "io: 0 functions to mutate; pattern eventatlas.io.x_no_such_function matches no function" in capsys.readouterr().out


def test_smoke_fails_when_pyproject_lacks_a_groups_file_or_test(monkeypatch, capsys):
    m = _script()
    monkeypatch.setitem(m.GROUPS, "extra", m.Group(("eventatlas/cli/base.py",), ("tests/cli/test_cli.py", "tests/nope.py")))
    assert m.smoke() == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("extra:"))
    assert "eventatlas/cli/base.py is not in only_mutate" in line
    assert "test file tests/cli/test_cli.py is not in pytest_add_cli_args_test_selection" in line
    assert "test file tests/nope.py does not exist" in line
