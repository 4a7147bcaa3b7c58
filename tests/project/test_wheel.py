"""The built wheel works outside a checkout: it carries the registry, samples, mappings, SQL and declared
experiments inside the package, and an installed copy runs `eventatlas demo` and `eventatlas experiment list`
from anywhere, writing only under the per-user data directory.

The wheel is built from a copy of the checkout's source files in a temporary directory (no `build/` left in
the repository) and installed with --no-deps into a fresh venv outside the checkout; the dependencies come
from the running venv through a .pth path line, so nothing is downloaded.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from eventatlas import config, resources
from eventatlas.tracking import runinfo

REPO = Path(__file__).resolve().parents[2]
# the wheel tests build and install it (seconds) and run the demo from an empty cache: 1.5-3 min on 2 loaded cores
slow = pytest.mark.slow


def _source_files() -> list[str]:
    """The checkout's tracked and untracked, not ignored, files: what an sdist of it would hold."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                             capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("needs a git checkout to list the source files the wheel is built from")
    return [f for f in out.stdout.decode().split("\0") if f]


def _clean_env(home: Path) -> dict[str, str]:
    """The environment a user's shell would give: no EVENTATLAS_* or Prefect settings, no PYTHONPATH
    reaching the checkout, HOME / XDG dirs in the test's temporary directory."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EVENTATLAS_", "PREFECT_", "PYTHON", "XDG_"))}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "xdg-data"), XDG_CACHE_HOME=str(home / "xdg-cache"),
               XDG_CONFIG_HOME=str(home / "xdg-config"), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel, venv, site-packages) of the wheel installed into a fresh venv outside the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    assert not tmp.resolve().is_relative_to(REPO)
    src, dist, venv = tmp / "src", tmp / "dist", tmp / "venv"
    for rel in _source_files():
        if (REPO / rel).is_file():  # a tracked file deleted in the working tree is skipped
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(dist)],
                   check=True, timeout=300, cwd=tmp)
    (wheel,) = dist.glob("eventatlas-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    subprocess.run(pip + ["--python", str(vpy), "install", "--no-deps", str(wheel)], check=True, timeout=300)
    site = Path(subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert (site / "eventatlas").is_dir()
    # A path line only appends the directory to sys.path: that directory's own .pth files (the checkout's
    # editable finder among them) are not run, so the wheel's copy is the one imported.
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "_eventatlas_test_deps.pth").write_text("".join(f"{d}\n" for d in deps), encoding="utf-8")
    return wheel, venv, site


@slow
def test_wheel_carries_the_resources_and_no_local_state(installed):
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    res = "eventatlas/_resources/"
    for need in ("datasets/registry.yaml", "datasets/mappings/maven_framenet.tsv", "warehouse/views.sql",
                 "warehouse/migrations/001_core.sql", "experiments/untuned_baselines.yaml"):
        assert res + need in names, need
    assert any(n.startswith(res + "datasets/samples/") for n in names)
    assert not [n for n in names if n.endswith((".duckdb", ".duckdb.wal", ".pyc")) or "__pycache__" in n]
    assert not [n for n in names if n.split("/")[0] in ("data", "datasets", "warehouse", "experiments")]


@slow
def test_installed_copy_is_imported_and_defaults_to_the_user_dir(installed, tmp_path):
    _, venv, site = installed
    home = tmp_path / "home"
    probe = ("import eventatlas; from eventatlas import config; from eventatlas.tracking.runinfo import code_version;"
             "from eventatlas.data.registry import REGISTRY_YAML; from eventatlas.store.warehouse import "
             "MIGRATIONS_DIR; from eventatlas.experiments.spec import EXPERIMENTS_DIR;"
             "print(eventatlas.__file__, config.in_checkout(), config.data_root(), config.warehouse_path(),"
             " code_version(), REGISTRY_YAML, MIGRATIONS_DIR, EXPERIMENTS_DIR, config.samples_dir(), sep='\\n')")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path, env=_clean_env(home),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    module, checkout, data, wh, version, *resources = r.stdout.splitlines()
    assert Path(module).resolve().is_relative_to(site.resolve())  # not the checkout's editable install
    assert checkout == "False"
    user = home / "xdg-data" / "eventatlas"
    assert (Path(data), Path(wh)) == (user, user / "eventatlas.duckdb")
    assert version.startswith("pkg-0.")
    for p in resources:
        assert Path(p).resolve().is_relative_to((site / "eventatlas" / "_resources").resolve()) and Path(p).exists()


@slow
def test_demo_and_experiment_list_from_the_installed_wheel(installed, tmp_path):
    _, venv, site = installed
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    env = _clean_env(home)
    before = _files(site)
    exe = str(venv / "bin" / "eventatlas")

    r = subprocess.run([exe, "experiment", "list"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    declared = sorted(p.stem for p in (REPO / "experiments").glob("*.yaml"))
    assert declared and all(name in r.stdout for name in declared), r.stdout

    r = subprocess.run([exe, "demo"], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    demo = home / "xdg-data" / "eventatlas" / "demo"
    assert "method" in out and "task" in out and "metric" in out, out
    # the leaderboard table: its header, then a line per method family (each has a quick form on the samples)
    rows = [line.split() for line in out.splitlines()]
    assert ["method", "task", "dataset", "metric", "value", "best", "of"] in rows, out
    for fam in ("untuned", "batch_attention", "emr", "frame_dml", "swcc", "grounding"):
        assert any(len(row) == 6 and row[0] == fam for row in rows), (fam, out)
    assert any(line.startswith("report: ") for line in out.splitlines()), out
    assert (demo / "eventatlas.duckdb").is_file() and (demo / "report.html").is_file()
    assert str(REPO) not in out
    # nothing written into site-packages, neither the wheel's venv nor the one lending the dependencies
    assert _files(site) == before
    for d in dict.fromkeys([site, *(Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib"))]):
        assert not (d / "data").exists() and not (d / "warehouse").exists()


def test_checkout_defaults_unchanged(monkeypatch):
    for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE"):
        monkeypatch.delenv(k, raising=False)
    assert config.in_checkout()
    assert config.data_root() == REPO / "data"
    assert config.warehouse_path() == REPO / "warehouse" / "eventatlas.duckdb"
    assert config.samples_dir() == REPO / "datasets" / "samples"
    assert resources.resource_dir("experiments") == REPO / "experiments"
    with pytest.raises(ValueError):
        resources.resource_dir("data")  # user data is never a shipped resource


def test_outside_a_checkout_defaults_to_the_user_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "REPO_ROOT", tmp_path / "site-packages")  # no pyproject.toml, no datasets/
    for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert not config.in_checkout()
    assert config.data_root() == tmp_path / "xdg" / "eventatlas"
    assert config.warehouse_path() == tmp_path / "xdg" / "eventatlas" / "eventatlas.duckdb"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert config.data_root() == tmp_path / "home" / ".local" / "share" / "eventatlas"
    monkeypatch.setenv("EVENTATLAS_DATA", str(tmp_path / "mine"))
    monkeypatch.setenv("EVENTATLAS_WAREHOUSE", str(tmp_path / "w.duckdb"))
    assert (config.data_root(), config.warehouse_path()) == (tmp_path / "mine", tmp_path / "w.duckdb")
    runinfo.code_version.cache_clear()
    try:
        assert runinfo.code_version().startswith("pkg-")  # no git describe of whatever repo holds site-packages
    finally:
        runinfo.code_version.cache_clear()


def test_packaged_copy_wins(monkeypatch, tmp_path):
    (tmp_path / "_resources" / "warehouse").mkdir(parents=True)
    monkeypatch.setattr(resources, "files", lambda package: tmp_path)
    assert resources.resource_dir("warehouse") == tmp_path / "_resources" / "warehouse"
    assert resources.resource_dir("datasets") == REPO / "datasets"  # no packaged copy: the checkout's
