"""The code version a run records: git's in a checkout, the declared one in a copy without git metadata."""
from __future__ import annotations

import pytest

from eventatlas import __version__, config
from eventatlas.tracking import runinfo


@pytest.fixture
def copied_tree(tmp_path, monkeypatch):
    """A checkout copied without .git: pyproject.toml and datasets/ beside the package, no git repository."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'eventatlas'\n")
    (tmp_path / "datasets").mkdir()
    monkeypatch.setattr(config, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # git must not find a repo above it
    runinfo.code_version.cache_clear()
    yield tmp_path
    runinfo.code_version.cache_clear()


def test_a_copy_without_git_records_the_declared_version(copied_tree, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_CODE_VERSION", "0.1.0+gabc123def456")
    assert config.in_checkout()
    assert runinfo.code_version() == "0.1.0+gabc123def456"


def test_a_copy_without_git_and_no_declaration_records_the_package_version(copied_tree, monkeypatch):
    monkeypatch.delenv("EVENTATLAS_CODE_VERSION", raising=False)
    assert runinfo.code_version() == __version__


def test_git_wins_over_the_declaration_in_a_real_checkout(monkeypatch):
    if not (config.REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: the declared version is the only one there is")
    monkeypatch.setenv("EVENTATLAS_CODE_VERSION", "declared-but-ignored")
    runinfo.code_version.cache_clear()
    try:
        assert runinfo.code_version().startswith(f"{__version__}+g")
    finally:
        runinfo.code_version.cache_clear()
