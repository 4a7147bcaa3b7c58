"""Shared reader machinery: strict UTF-8, JSON lines, token alignment, safe XML, registry."""
from __future__ import annotations

import pytest

from eventatlas.errors import InputError
from eventatlas.io import Rejects
from eventatlas.readers import REGISTRY, get_reader
from eventatlas.readers._common import align_tokens, check_span, iter_jsonl, join_tokens
from eventatlas.readers._xml import parse_bytes


def test_registry_modules_expose_read_and_default_dataset():
    for name in REGISTRY:
        mod = get_reader(name)
        assert callable(mod.read) and isinstance(mod.DEFAULT_DATASET, str), name
    with pytest.raises(KeyError, match="unknown reader 'nope'"):
        get_reader("nope")


def test_latin1_bytes_in_utf8_jsonl_name_file_and_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": "caf\xe9"}\n')
    with pytest.raises(InputError) as e:
        list(iter_jsonl(p))
    assert e.value.location == "line 2" and "x.jsonl" in str(e.value) and "UTF-8" in str(e.value)


def test_malformed_json_line_is_fatal_with_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{"a": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"x.jsonl:line 3: invalid JSON"):
        list(iter_jsonl(p))


def test_align_tokens_handles_case_ptb_quotes_and_unk():
    s = 'He said "Fearless" was UNK-42, then left.'
    toks = ["he", "said", "``", "fearless", "''", "was", "unk", ",", "then", "left", "."]
    spans = align_tokens(s, toks, ignore_case=True)
    assert [s[a:b] for a, b in spans] == ["He", "said", '"', "Fearless", '"', "was", "UNK-42", ",", "then", "left", "."]
    assert align_tokens("a b", ["a", "c"]) is None
    sent, sp = join_tokens(["Hello", ",", "world"])
    assert sent == "Hello , world" and [sent[a:b] for a, b in sp] == ["Hello", ",", "world"]


def test_check_span_records_offset_mismatch():
    r = Rejects("t")
    assert check_span(r, "f", "rec 1", "abc def", 4, 7, "def")
    assert not check_span(r, "f", "rec 2", "abc def", 3, 7, "def")
    assert r.counts() == {"offset_mismatch": 1} and r.rows[0]["location"] == "rec 2"


@pytest.mark.parametrize(
    "xml, match",
    [
        (b"<a>\n<b></a>", r"line 2: malformed XML"),
        (b'<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;</a>', "refused unsafe XML"),
        (b'<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><l>&c;</l>', "refused unsafe XML"),
        (b"<a>\ncaf\xe9</a>", r"line 2: not valid UTF-8"),
    ],
)
def test_unsafe_or_broken_xml_is_refused_with_location(xml, match):
    with pytest.raises(InputError, match=match):
        parse_bytes(xml, "f.xml", allow_doctype=True)


def test_doctype_refused_unless_allowed():
    xml = b'<!DOCTYPE source_file SYSTEM "apf.v5.1.1.dtd"><source_file/>'
    assert parse_bytes(xml, "f.xml", allow_doctype=True).tag == "source_file"
    with pytest.raises(InputError):
        parse_bytes(xml, "f.xml")


def test_records_is_the_one_record_loop_with_uniform_rejects(tmp_path):
    from eventatlas.io import Rejects
    from eventatlas.readers._common import jsonl_items, list_items, records

    f = tmp_path / "d.jsonl"
    f.write_text('{"id": 1, "text": "a"}\n[1, 2]\n{"id": 2}\n{"id": 3, "text": null}\n{"id": 4, "text": "b"}\n')
    rej = Rejects("x")
    got = list(records(rej, f, jsonl_items(f), "document", ("id", "text")))
    assert got == [("line 1", {"id": 1, "text": "a"}), ("line 5", {"id": 4, "text": "b"})]
    assert [(r["location"], r["reason"], r["detail"]) for r in rej.rows] == [
        ("line 2", "bad_record", "document is list, expected an object"),
        ("line 3", "missing_field", "document lacks text"),
        ("line 4", "missing_field", "document lacks text")]
    assert {r["source"] for r in rej.rows} == {str(f)}
    rej = Rejects("x")
    got = list(records(rej, "f.json", list_items([{"id": 1}, "s"], "T1"), "instance", ("id",)))
    assert got == [("T1[0]", {"id": 1})] and [(r["location"], r["reason"]) for r in rej.rows] == [("T1[1]", "bad_record")]
