from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict

import pytest

from eventatlas.config import samples_dir
from eventatlas.errors import InputError
from eventatlas.io import Rejects
from eventatlas.readers import ace2005

SAMPLE = samples_dir() / "ace2005"
NW = "data/English/nw/timex2norm/SAMPLE_NW_20260114.0001"


def collect(path, **kw):
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for t, row in ace2005.read(path, rejects=r, stats=st, **kw):
        out[t].append(row)
    return out, r, st


def test_sample_mentions_offsets_types_arguments():
    out, r, st = collect(SAMPLE)
    ms = out["mentions"]
    assert len(ms) == 13 and len(out["documents"]) == 2 and len(r) == 0
    assert st["offset_basis_raw"] == 2
    for m in ms:
        assert m["sentence"][m["trigger_start"] : m["trigger_end"]] == m["trigger"]
        assert 0 <= m["scope_start"] <= m["trigger_start"] and m["trigger_end"] <= m["scope_end"] <= len(m["sentence"])
        for a in m["arguments"]:
            assert m["sentence"][a["start"] : a["end"]] == a["text"]
    att = next(m for m in ms if m["trigger"] == "attacked")
    assert att["labels"] == ["Conflict.Attack"] and att["sentence"].startswith("Rebels attacked an army border post")
    assert {(a["role"], a["text"]) for a in att["arguments"]} == {("Attacker", "Rebels"), ("Target", "an army border post near the town of Karsa"), ("Time-Within", "Tuesday")}
    # the apf offsets are inclusive and index the raw .sgm (tags included): check one by hand
    raw = (SAMPLE / f"{NW}.sgm").read_text()
    apf = (SAMPLE / f"{NW}.apf.xml").read_text()
    s, e = map(int, re.search(r'<anchor><charseq START="(\d+)" END="(\d+)">attacked<', apf).groups())
    assert raw[s : e + 1] == "attacked" and json.loads(att["extra"])["doc_offset"] == s
    types = {t["type_id"]: t for t in out["event_types"]}
    assert len(types) == 33 + 8 and types["Conflict.Attack"]["parent_id"] == "Conflict" and types["Justice.Fine"]["definition"]
    assert {m["split"] for m in ms} == {"all"}


def test_split_lists():
    out, _, _ = collect(SAMPLE, splits=SAMPLE / "splits")
    assert {d["doc_id"]: d["split"] for d in out["documents"]} == {"SAMPLE_NW_20260114.0001": "train", "SAMPLE_BN_20260203.1800.0042": "test"}


def test_tag_stripped_offsets_are_detected(tmp_path):
    """LDC counts characters without SGML tags: the auto basis must find that too."""
    d = tmp_path / "ace"
    shutil.copytree(SAMPLE, d)
    apf = d / f"{NW}.apf.xml"
    raw = (d / f"{NW}.sgm").read_text()
    stripped_pos, inside, k = {}, False, 0  # raw position -> position once the tags are removed
    for i, ch in enumerate(raw):
        if ch == "<":
            inside = True
        if not inside:
            stripped_pos[i] = k
            k += 1
        if ch == ">":
            inside = False
    text = re.sub(r'(START|END)="(\d+)"', lambda m: f'{m.group(1)}="{stripped_pos[int(m.group(2))]}"', apf.read_text())
    apf.write_text(text)
    out, r, st = collect(d)
    assert st == {"offset_basis_raw": 1, "offset_basis_stripped": 1, "duplicate_mentions": 0} and len(r) == 0
    assert len(out["mentions"]) == 13


def test_offset_mismatch_is_rejected_not_kept(tmp_path):
    d = tmp_path / "ace"
    shutil.copytree(SAMPLE, d)
    apf = d / f"{NW}.apf.xml"
    text = apf.read_text()
    s = re.search(r'<anchor><charseq START="(\d+)" END="(\d+)">killing<', text)
    text = text.replace(s.group(0), f'<anchor><charseq START="{int(s.group(1)) + 1}" END="{int(s.group(2)) + 1}">killing<')
    apf.write_text(text)
    out, r, _ = collect(d)
    assert r.counts() == {"offset_mismatch": 1} and "killing" in r.rows[0]["detail"]
    assert len(out["mentions"]) == 12 and not any(m["trigger"] == "killing" for m in out["mentions"])


@pytest.mark.parametrize("doctype", [
    '<!DOCTYPE source_file [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>',
    '<!DOCTYPE source_file [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>',
])
def test_entities_in_apf_are_refused(tmp_path, doctype):
    d = tmp_path / "ace"
    shutil.copytree(SAMPLE, d)
    apf = d / f"{NW}.apf.xml"
    apf.write_text(apf.read_text().replace('<!DOCTYPE source_file SYSTEM "apf.v5.1.1.dtd">', doctype))
    with pytest.raises(InputError, match="refused unsafe XML") as e:
        collect(d)
    assert "SAMPLE_NW_20260114.0001.apf.xml" in str(e.value)


def test_broken_apf_and_missing_sgm(tmp_path):
    d = tmp_path / "ace"
    shutil.copytree(SAMPLE, d)
    (d / f"{NW}.sgm").unlink()
    out, r, _ = collect(d)
    assert r.counts() == {"missing_source": 1} and len(out["documents"]) == 1
    apf = d / "data/English/bn/timex2norm/SAMPLE_BN_20260203.1800.0042.apf.xml"
    lines = apf.read_text().splitlines()
    lines[6] = lines[6].replace("</charseq>", "")
    apf.write_text("\n".join(lines))
    with pytest.raises(InputError, match=r"SAMPLE_BN_20260203.1800.0042.apf.xml:line \d+: malformed XML"):
        collect(d)
