"""Fuzz every reader with mutations of its shipped sample (datasets/samples/).

The only allowed outcomes of an ingest of a mutated sample over a good previous version are
  * a complete new version (manifest + every table, row counts matching; rejects counted), or
  * one InputError whose message is a single line starting with the file it names, with the
    previous version byte-identical;
never another exception, never a partial dataset, never a temp file left behind. The budget is
small for CI (30 examples per reader, no deadline); `EVENTATLAS_FUZZ_EXAMPLES=500` runs more.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventatlas import config
from eventatlas.data.ingest import ingest
from eventatlas.errors import InputError
from eventatlas.data.registry import load_registry
from eventatlas.schema import TABLES

# CI: 30 derandomized examples per reader; EVENTATLAS_FUZZ_EXAMPLES=500 for a longer, random run
_N = int(os.environ.get("EVENTATLAS_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=_N, deadline=None, derandomize=_N <= 30, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

READERS = sorted(n for n, e in load_registry().items() if e.get("sample"))
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**12), st.floats(allow_nan=False, allow_infinity=False),
                        st.text(max_size=8), st.just([]), st.just({}), st.lists(st.integers(-2, 50), max_size=3),
                        st.just(["x", 1]), st.just({"id": None}))
XML_VALUES = st.sampled_from(["x", "-1", "", "99999999", "1.5", "abc", "0", " 3", "[instance, ...]"])


def _sample(name: str) -> Path:
    return config.samples_dir() / load_registry()[name]["sample"]


def _files(root: Path) -> list[Path]:
    return sorted(p for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file())


def _json_paths(obj, prefix=()):  # every (container, key) in a JSON value, depth first
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _json_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield prefix + (i,)
            yield from _json_paths(v, prefix + (i,))


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def _json_lines(data: bytes) -> bool:
    """A ``.json`` file holding JSON lines (TextEE's split files): mutated record by record."""
    try:
        json.loads(data.decode("utf-8-sig"))
        return False
    except ValueError:
        return True


@st.composite
def mutation(draw, data: bytes, suffix: str):
    """(kind, mutated bytes) of one sample file: byte-level damage, or a value of the wrong type in a JSON
    record, or a bad XML attribute value (non-integer offsets, empty ids)."""
    kinds = ["flip", "delete", "insert", "truncate", "dup_line", "swap_lines"]
    if suffix in (".json", ".jsonl"):
        kinds += ["json_value"] * 4
    if suffix in (".xml",):
        kinds += ["xml_attr"] * 4
    kind = draw(st.sampled_from(kinds))
    n = len(data)
    if kind == "flip" and n:
        i = draw(st.integers(0, n - 1))
        return kind, data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1:]
    if kind == "delete" and n:
        i = draw(st.integers(0, n - 1))
        return kind, data[:i] + data[i + draw(st.integers(1, 64)):]
    if kind == "insert":
        i = draw(st.integers(0, n))
        return kind, data[:i] + draw(st.sampled_from([b"\n", b"{", b"]", b'"', b"\xff\xfe", b"<", b"&x;", b"\r\n", b"\x00"])) * draw(st.integers(1, 3)) + data[i:]
    if kind == "truncate":
        return kind, data[: draw(st.integers(0, n))]
    lines = data.split(b"\n")
    if kind == "dup_line":
        i = draw(st.integers(0, len(lines) - 1))
        return kind, b"\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1:])
    if kind == "swap_lines" and len(lines) > 1:
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return kind, b"\n".join(lines)
    if kind == "json_value":
        if suffix == ".jsonl" or _json_lines(data):
            recs = [json.loads(x) for x in data.decode("utf-8-sig").splitlines() if x.strip()]
            k = draw(st.integers(0, len(recs) - 1))
            paths = list(_json_paths(recs[k]))
            if paths:
                _set(recs[k], draw(st.sampled_from(paths)), draw(JSON_VALUES))
            else:
                recs[k] = draw(JSON_VALUES)
            return kind, "\n".join(json.dumps(r) for r in recs).encode()
        obj = json.loads(data.decode("utf-8-sig"))
        paths = list(_json_paths(obj))
        if paths:
            _set(obj, draw(st.sampled_from(paths)), draw(JSON_VALUES))
        return kind, json.dumps(obj).encode()
    if kind == "xml_attr":
        attrs = list(re.finditer(rb'(\w+)="([^"]*)"', data))
        if attrs:
            m = draw(st.sampled_from(attrs))
            return kind, data[: m.start(2)] + draw(XML_VALUES).encode() + data[m.end(2):]
    return "none", data


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def _check_complete(out: Path, man: dict) -> None:
    assert (out / "manifest.json").exists()
    for t in TABLES:
        assert pq.read_metadata(out / f"{t}.parquet").num_rows == man["rows"][t], t
    assert sum(man["rejects"].values()) == man["rows"]["rejects"]


@pytest.fixture(scope="module")
def good_versions(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-base")
    return {n: (root / n, ingest(n, _sample(n), out_dir=root / n, dataset=n, progress=False)) for n in READERS}


@pytest.mark.parametrize("name", READERS)
def test_fuzz_reader_on_mutated_sample(name, good_versions):
    base, base_man = good_versions[name]
    sample = _sample(name)
    files = _files(sample)
    assert files, name

    @FUZZ
    @given(data=st.data())
    def run(data):
        with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
            tmp = Path(tmp)
            src = tmp / "in" / sample.name
            shutil.copytree(sample, src) if sample.is_dir() else (src.parent.mkdir(), shutil.copy(sample, src))
            i = data.draw(st.integers(0, len(files) - 1), label="file")
            target = src / files[i].relative_to(sample) if sample.is_dir() else src
            kind, mutated = data.draw(mutation(target.read_bytes(), "".join(target.suffixes[-1:])), label="mutation")
            target.write_bytes(mutated)
            out = tmp / "datasets" / name
            shutil.copytree(base, out)
            before = _snapshot(out)
            try:
                man = ingest(name, src, out_dir=out, dataset=name, progress=False)
            except InputError as e:
                msg = str(e)
                assert "\n" not in msg and msg.startswith(e.source) and msg[len(e.source):].startswith(":"), msg
                assert _snapshot(out) == before, f"{kind}: a refused ingest changed the previous version"
            else:
                _check_complete(out, man)
            assert not list(out.glob(".*.tmp")), "temp files left behind"

    run()
