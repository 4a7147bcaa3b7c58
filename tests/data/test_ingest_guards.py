"""Data loss and silent acceptance: refused ingests keep the previous version, shrink needs
allow_shrink, duplicate documents are rejects, no empty directory or stale temp file stays behind."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eventatlas import config
from eventatlas.data.ingest import clean_stale_temp, ingest, list_versions, restore_version
from eventatlas.errors import InputError

SAMPLES = config.samples_dir()


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture
def maven_ds(eventatlas_env):
    m = ingest("maven", SAMPLES / "maven", dataset="mv", progress=False)
    assert m["rows"]["mentions"] > 0
    return config.datasets_dir() / "mv", m


def test_empty_maven_file_refused_previous_kept(maven_ds, tmp_path):
    out, m = maven_ds
    before = _snapshot(out)
    empty = tmp_path / "in" / "train.jsonl"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"train\.jsonl:-: this does not look like maven input: no mentions found"):
        ingest("maven", empty, dataset="mv", progress=False)
    assert _snapshot(out) == before


def test_other_format_refused_with_first_reject(maven_ds):
    out, _ = maven_ds
    before = _snapshot(out)
    # a WikiEvents file through the maven reader: every document lacks id/content
    with pytest.raises(InputError, match=r"dev\.jsonl:line 1: this does not look like maven input: missing_field "
                                         r"\(document lacks id, content\); 2 records rejected, 0 mentions kept"):
        ingest("maven", SAMPLES / "wikievents" / "dev.jsonl", dataset="mv", progress=False)
    assert _snapshot(out) == before


def test_lone_sgm_refused_for_ace(eventatlas_env, tmp_path):
    sgm = next((SAMPLES / "ace2005").rglob("*.sgm"))
    lone = tmp_path / sgm.name
    shutil.copy(sgm, lone)
    with pytest.raises(InputError, match=rf"^{lone}:-: this does not look like ace2005 input: expected an \*\.apf\.xml"):
        ingest("ace2005", lone, dataset="ace_new", progress=False)
    # a failed ingest under a new name leaves no directory
    assert not (config.datasets_dir() / "ace_new").exists()
    # an apf file without its .sgm: the only document is rejected, so nothing survives
    apf = next((SAMPLES / "ace2005").rglob("*.apf.xml"))
    (tmp_path / "apf_only").mkdir()
    shutil.copy(apf, tmp_path / "apf_only" / apf.name)
    with pytest.raises(InputError, match=r"this does not look like ace2005 input: missing_source \(no .*\.sgm beside"):
        ingest("ace2005", tmp_path / "apf_only" / apf.name, dataset="ace_new", progress=False)
    assert not (config.datasets_dir() / "ace_new").exists()


def test_shrink_needs_allow_shrink_and_old_version_restorable(maven_ds, tmp_path):
    out, m = maven_ds
    before = _snapshot(out)
    one = tmp_path / "train.jsonl"
    docs = [json.loads(x) for x in (SAMPLES / "maven" / "train.jsonl").read_text().splitlines() if x.strip()]
    # keep the document with the fewest mentions: far under half of the sample's mentions
    small = min(docs, key=lambda d: sum(len(e["mention"]) for e in d.get("events", [])))
    small["events"] = small["events"][:1]
    small["events"][0]["mention"] = small["events"][0]["mention"][:1]
    one.write_text(json.dumps(small) + "\n")
    # the refusal names the input the user passed (not the manifest it would have replaced)
    with pytest.raises(InputError, match=rf"^{one}:-: the new version has 1 mentions rows, the current one of 'mv' "
                                         rf"{m['rows']['mentions']} .*--allow-shrink"):
        ingest("maven", one, dataset="mv", progress=False)
    assert _snapshot(out) == before
    m2 = ingest("maven", one, dataset="mv", progress=False, allow_shrink=True)
    assert m2["rows"]["mentions"] == 1
    vs = list_versions("mv")
    assert [v["rows"]["mentions"] for v in vs] == [m["rows"]["mentions"]]
    restore_version("mv", vs[0]["version"])
    assert pq.read_table(out / "mentions.parquet").num_rows == m["rows"]["mentions"]
    assert json.loads((out / "manifest.json").read_text())["rows"] == m["rows"]
    with pytest.raises(InputError, match="no kept version 'nope' of 'mv'"):
        restore_version("mv", "nope")


@pytest.mark.parametrize("reader,src,idkey", [("maven", "maven/train.jsonl", "id"), ("wikievents", "wikievents/dev.jsonl", "doc_id")])
def test_duplicate_document_ids_rejected(eventatlas_env, tmp_path, reader, src, idkey):
    lines = [x for x in (SAMPLES / src).read_text().splitlines() if x.strip()]
    f = tmp_path / Path(src).name
    f.write_text("\n".join(lines + [lines[0]]) + "\n")
    m = ingest(reader, f, dataset="dup", progress=False)
    assert m["rows"]["documents"] == len(lines)
    assert m["rejects"].get("duplicate_document") == 1
    rej = pq.read_table(config.datasets_dir() / "dup" / "rejects.parquet").to_pylist()
    dup = [r for r in rej if r["reason"] == "duplicate_document"]
    assert dup[0]["location"] == f"line {len(lines) + 1}" and json.loads(lines[0])[idkey] in dup[0]["detail"]
    docs = pq.read_table(config.datasets_dir() / "dup" / "documents.parquet").column("doc_id").to_pylist()
    assert len(docs) == len(set(docs))


def test_stale_temp_files_cleaned_only_when_older(maven_ds):
    out, _ = maven_ds
    stale = out / ".mentions.parquet.abc123.tmp"
    stale.write_bytes(b"x" * 100)
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = out / ".documents.parquet.def456.tmp"  # a concurrent writer's file: newer than this process
    fresh.write_bytes(b"y")
    assert clean_stale_temp(out) == [stale]
    assert not stale.exists() and fresh.exists()
    fresh.unlink()
    stale.write_bytes(b"x")
    os.utime(stale, (old, old))
    ingest("maven", SAMPLES / "maven", dataset="mv", progress=False)  # the next run of the dataset cleans up
    assert not stale.exists()
    assert not list(out.glob(".*.tmp"))


def test_cli_datasets_versions_and_restore(maven_ds, tmp_path):
    from typer.testing import CliRunner

    from eventatlas.cli import app

    out, m = maven_ds
    one = tmp_path / "train.jsonl"
    one.write_text((SAMPLES / "maven" / "train.jsonl").read_text().splitlines()[0] + "\n")
    m2 = ingest("maven", one, dataset="mv", progress=False, allow_shrink=True)
    assert m2["rows"]["mentions"] < m["rows"]["mentions"]
    r = CliRunner().invoke(app, ["datasets", "--versions", "mv"], terminal_width=250)
    assert r.exit_code == 0, r.output
    version = list_versions("mv")[0]["version"]
    assert version in r.output and f'"mentions": {m["rows"]["mentions"]}' in r.output
    r = CliRunner().invoke(app, ["restore", "mv", version])
    assert r.exit_code == 0 and f"restored mv to {version}" in r.stdout, r.output
    assert json.loads((out / "manifest.json").read_text())["rows"] == m["rows"]
    r = CliRunner().invoke(app, ["restore", "mv", "nope"])
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and "no kept version 'nope'" in r.stderr
