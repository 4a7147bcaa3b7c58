"""A dataset is declared once, in ``datasets/registry.yaml``: the reader table (``eventatlas.readers.REGISTRY``)
and the ``ingest/<name>`` Prefect deployments are derived from it, and a new reader needs only its module
under ``eventatlas/readers/`` plus one registry entry."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eventatlas.data.deploy import INGEST_ENTRYPOINT, ingest_deployments, prefect_base
from eventatlas.data.registry import load_registry
from eventatlas.readers import REGISTRY, get_reader, reader_modules

ROOT = Path(__file__).resolve().parents[2]

# The ingest deployments as they were written by hand in prefect.yaml before they were generated: the
# generated ones must say exactly this (``work_pool`` was prefect.yaml's shared pool, ``*pool``).
HAND_WRITTEN_NAMES = {
    "event_tuples", "ace2005", "maven", "maven_fewshot", "maven_sentences", "framenet", "framenet_jsonl",
    "framenet_grounding", "ontoevent", "wikievents", "textee", "textee_ace05", "textee_maven",
    "textee_wikievents", "hard_similarity", "transitive_similarity", "mcnc"}
DECLARED_SINCE = {"text"}  # entries given a deployment after generation began: no hand-written form to compare
HAND_WRITTEN = yaml.safe_load("""
- name: ace2005
  entrypoint: flows/ingest.py:ingest
  description: Ingest ace2005 (ACE) into the common schema (give --param path=...).
  tags: [eventatlas, ingest]
  parameters: {name: ace2005}
  schedules:
    - cron: "0 1 * * 0"
      timezone: UTC
      active: false
- name: maven
  entrypoint: flows/ingest.py:ingest
  description: Ingest maven (MAVEN) into the common schema (give --param path=... or --param download=true).
  tags: [eventatlas, ingest]
  parameters: {name: maven}
  schedules:
    - cron: "0 2 * * 0"
      timezone: UTC
      active: false
- name: framenet_grounding
  entrypoint: flows/ingest.py:ingest
  description: Build the FrameNet hierarchical grounding benchmark (FN1.7 frames + Subframe trees + full text, FN1.5 verb exemplars; zero-shot component splits) into the grounding schema.
  tags: [eventatlas, ingest, grounding]
  parameters: {name: framenet_grounding}
  schedules:
    - cron: "0 1 * * 0"
      timezone: UTC
      active: false
- name: hard_similarity
  entrypoint: flows/ingest.py:ingest
  description: Ingest hard_similarity (event data) into the common schema.
  tags: [eventatlas, ingest]
  parameters: {name: hard_similarity}
  schedules:
    - cron: "0 2 * * 0"
      timezone: UTC
      active: false
- name: textee_maven
  entrypoint: flows/ingest.py:ingest
  description: Ingest TextEE's MAVEN from TextEE's processed output into the common schema (give --param path=.../splitN).
  tags: [eventatlas, ingest]
  parameters: {name: textee_maven}
  schedules:
    - cron: "0 1 * * 0"
      timezone: UTC
      active: false
""")


def _registry_file(tmp_path: Path, datasets: dict) -> Path:
    p = tmp_path / "registry.yaml"
    p.write_text(yaml.safe_dump({"datasets": datasets}, sort_keys=False), encoding="utf-8")
    return p


# ----------------------------------------------------------------------------- deployments
def test_generated_ingest_deployments_equal_the_hand_written_ones():
    base = prefect_base()
    generated = {d["name"]: d for d in ingest_deployments(base=base)}
    declared = {n for n, e in load_registry().items() if e.get("deployment") is not None}
    assert set(generated) == declared == HAND_WRITTEN_NAMES | DECLARED_SINCE
    for want in HAND_WRITTEN:
        assert generated[want["name"]] == {**want, "work_pool": base["definitions"]["work_pool"]}, want["name"]
    # prefect.yaml keeps only what is not derived from a declaration
    assert not [d for d in base["deployments"] if d["entrypoint"] == INGEST_ENTRYPOINT]
    flow = importlib.import_module("flows.ingest").ingest
    for d in generated.values():
        flow.validate_parameters(d["parameters"])


def test_one_generated_file_holds_experiments_and_ingests(tmp_path):
    from eventatlas.experiments.deploy import ENTRYPOINT, write_prefect_file

    doc = yaml.safe_load(write_prefect_file(tmp_path / "gen.yaml").read_text(encoding="utf-8"))
    base = prefect_base()
    assert doc["pull"] == base["pull"] and doc["name"] == base["name"]
    by_entry = {}
    for d in doc["deployments"]:
        by_entry.setdefault(d["entrypoint"], set()).add(d["name"])
    assert by_entry[INGEST_ENTRYPOINT] == HAND_WRITTEN_NAMES | DECLARED_SINCE
    assert by_entry[ENTRYPOINT] == {p.stem for p in (ROOT / "experiments").glob("*.yaml")}


def test_deployment_fields(tmp_path):
    reg = load_registry(_registry_file(tmp_path, {
        "quiet": {"dataset": "quiet"},  # no deployment key: no deployment
        "mine": {"reader": "mcnc", "ontology": None, "path": None,
                 "deployment": {"tags": ["x"], "parameters": {"download": True}}},
    }))
    (dep,) = ingest_deployments(reg)
    assert dep["name"] == "mine" and dep["tags"] == ["eventatlas", "ingest", "x"]
    assert dep["parameters"] == {"name": "mine", "download": True}
    assert dep["schedules"] == [] and dep["description"] == (
        "Ingest mine (event data) into the common schema (give --param path=...).")
    with pytest.raises(ValueError, match="'bad': `deployment` takes cron"):
        ingest_deployments({"bad": {"deployment": {"crontab": "0 1 * * 0"}}})


# ----------------------------------------------------------------------------- readers
def test_reader_table_is_the_registry_and_the_modules_under_readers():
    reg = load_registry()
    assert list(REGISTRY) == list(reg) and len(REGISTRY) == len(reg)
    modules = {p.stem for p in (ROOT / "eventatlas" / "readers").glob("*.py")
               if not p.name.startswith("_")}
    readers = set()
    for m in sorted(modules):
        mod = importlib.import_module(f"eventatlas.readers.{m}")
        if callable(getattr(mod, "read", None)):
            readers.add(m)
        else:  # a module without `read` is a helper shared by readers, never a reader
            assert not hasattr(mod, "DEFAULT_DATASET"), m
    assert {REGISTRY[n].rsplit(".", 1)[1] for n in REGISTRY} == readers
    for name in REGISTRY:
        mod = get_reader(name)  # what ingest calls: read(path, *, dataset, rejects, ...)
        assert callable(mod.read) and isinstance(mod.DEFAULT_DATASET, str), name


def test_a_new_reader_is_a_module_plus_one_entry(tmp_path):
    entries = {"mcnc_dev": {"reader": "mcnc", "deployment": {"cron": "0 3 * * 0"}}, "mcnc": {}}
    table = reader_modules(_registry_file(tmp_path, entries))
    assert dict(table) == {"mcnc_dev": "eventatlas.readers.mcnc", "mcnc": "eventatlas.readers.mcnc"}
    assert get_reader("mcnc_dev", table) is importlib.import_module("eventatlas.readers.mcnc")
    assert [d["name"] for d in ingest_deployments(load_registry(tmp_path / "registry.yaml"))] == ["mcnc_dev"]


def test_an_entry_naming_a_missing_module_fails_clearly(tmp_path):
    table = reader_modules(_registry_file(tmp_path, {"nope": {"dataset": "nope"}}))
    with pytest.raises(ModuleNotFoundError, match=r"dataset 'nope' of the registry .* names reader module "
                                                  r"eventatlas\.readers\.nope, which does not exist"):
        get_reader("nope", table)
    with pytest.raises(KeyError, match="unknown reader 'other'; known: nope"):
        get_reader("other", table)
    (tmp_path / "bad").mkdir()
    with pytest.raises(ValueError, match=r"dataset 'x': reader '\.\./x' is not a module name"):
        reader_modules(_registry_file(tmp_path / "bad", {"x": {"reader": "../x"}}))


def test_importing_readers_reads_no_registry():
    code = ("import sys, eventatlas.readers as r; print(r._reader_table.cache_info().currsize, 'yaml' in sys.modules); "
            "print('ace2005' in r.REGISTRY, r._reader_table.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["0", "False", "True", "1"]
