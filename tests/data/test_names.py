"""A user-given name never becomes a path outside its root: one check (eventatlas.names) in every core
function that turns a dataset name, kept version, run id or run prefix into a directory."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eventatlas import config
from eventatlas.errors import InputError
from eventatlas.io import DatasetWriter

SAMPLES = config.samples_dir()
BAD = ["../../escaped", "..", "a/b", "a\\b", ".hidden", "", "x" * 101, "a..b", "sp ace", "semi;colon", "nul\x00"]
GOOD = ["maven", "maven_sample", "ace2005-dev", "untuned-maven_sample-s0-1a2b3c4d-20260101T000000-abcdef01", "v1.2", "k=3+x"]


@pytest.mark.parametrize("value", BAD)
def test_bad_names_refused_in_one_line_naming_the_option(value):
    from eventatlas.names import BadName, check_name

    with pytest.raises(BadName) as e:
        check_name(value, "--dataset")
    msg = str(e.value)
    assert msg.startswith(f"--dataset {value!r}: ") and "\n" not in msg
    assert isinstance(e.value, InputError)  # the CLI's exit-2 one-line path


@pytest.mark.parametrize("value", GOOD)
def test_good_names_pass(value):
    from eventatlas.names import check_name

    assert check_name(value) == value


def _files_outside(root: Path, inside: Path) -> list[Path]:
    return [p for p in root.rglob("*") if not p.is_relative_to(inside)]


def test_core_ingest_refuses_escaping_dataset_name(eventatlas_env):
    from eventatlas.data.ingest import ingest

    with pytest.raises(InputError, match=r"^--dataset '\.\./\.\./escaped': holds a path separator"):
        ingest("maven", SAMPLES / "maven", dataset="../../escaped", progress=False)
    assert not (eventatlas_env / "escaped").exists() and not (eventatlas_env.parent / "escaped").exists()
    assert not list(eventatlas_env.rglob("manifest.json"))


def test_every_core_function_checks(eventatlas_env, tmp_path):
    from eventatlas.data.ingest import list_versions, restore_version
    from eventatlas.run.runner import claim_run
    from eventatlas.tracking.records import failed_ingest_record

    with pytest.raises(InputError, match=r"^dataset '\.\./x'"):
        list_versions("../x")
    with pytest.raises(InputError, match=r"^version '\.\./\.\./x'"):
        restore_version("maven", "../../x")
    with pytest.raises(InputError, match=r"^dataset '\.\./x'"):
        DatasetWriter(tmp_path / "out", "../x")
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match=r"^run prefix 'untuned-\.\./x-s0'"):
        claim_run("untuned-../x-s0", reuse_unfinished=False)
    # the record of an ingest that failed because of its name still lands under runs/
    p = failed_ingest_record({"dataset": "../../escaped"}, ValueError("x"), "2026-01-01T00:00:00")
    assert p.parent.parent == config.runs_dir() and p.parent.name.startswith("ingest-badname-")


def test_cli_ingest_escape_refused_exit_2(tmp_path):
    root = tmp_path / "data"
    env = {**os.environ, "EVENTATLAS_DATA": str(root), "EVENTATLAS_WAREHOUSE": str(tmp_path / "wh.duckdb"),
           "EVENTATLAS_PREFECT": "never", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "eventatlas.cli", "ingest", "maven", "--path", str(SAMPLES / "maven"),
                        "--dataset", "../../escaped"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == ["error: --dataset '../../escaped': holds a path separator; a name is 1-100 "
                                             "letters, digits, '.', '_', '-', '=' or '+', starting with a letter or digit"]
    assert not (tmp_path / "escaped").exists() and not (root.parent.parent / "escaped").exists()
    assert _files_outside(tmp_path, tmp_path) == []
    assert not list(root.rglob("manifest.json"))
