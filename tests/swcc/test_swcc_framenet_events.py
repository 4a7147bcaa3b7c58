"""(subject, verb, object) events from FrameNet's GF layer: hand-written lexical-unit XML in the FrameNet
1.5 layout (namespaced, character offsets end-inclusive), the head rule, the counted rejects, the
same-frame documents and their co-occurring pairs, and SWCC training data built from them."""
from __future__ import annotations

import json
import zipfile

import pytest

from eventatlas.io import Rejects
from eventatlas.swcc.framenet_events import framenet_events, head_word, write_framenet_events

NS = 'xmlns="http://framenet.icsi.berkeley.edu"'


def _label(name, text, span):
    s = text.index(span)
    return f'<label name="{name}" start="{s}" end="{s + len(span) - 1}"/>'


def _aset(aid, text, target, gf=(), pt=None, status="MANUAL"):
    """One frame annotation set: ``gf`` = [(GF, span, PT)]; ``pt=False`` leaves the GF layer out."""
    layers = f'<layer rank="1" name="Target">{_label("Target", text, target)}</layer>'
    if pt is not False:
        layers += '<layer rank="1" name="GF">' + "".join(_label(g, text, sp) for g, sp, _ in gf) + "</layer>"
        layers += '<layer rank="1" name="PT">' + "".join(_label(p, text, sp) for _, sp, p in gf) + "</layer>"
    return f'<annotationSet status="{status}" ID="{aid}">{layers}</annotationSet>'


def _sentence(sid, text, *asets):
    # an UNANN set (POS layer only) precedes the frame annotation, as in the release
    pos = '<annotationSet status="UNANN" ID="9{0}"><layer rank="1" name="PENN"/></annotationSet>'.format(sid)
    return f'<sentence ID="{sid}"><text>{text}</text>{pos}{"".join(asets)}</sentence>'


def _lu(lu_id, name, frame, *sentences):
    return (f'<?xml version="1.0" encoding="UTF-8"?><lexUnit {NS} POS="V" name="{name}" ID="{lu_id}" '
            f'frame="{frame}"><subCorpus name="x">{"".join(sentences)}</subCorpus></lexUnit>')


S1 = "It chewed the bloody snow on the hill ."
S2 = "The dog 's owner chewed on a bone ."
S3 = "Chew !"
S4 = "She gulped the entrails and the gore ."
S5 = "He said that he would go ."
S6 = "They munched quietly ."


@pytest.fixture
def release(tmp_path):
    """A FrameNet release zip with two LUs of one frame and one of another (hand-made annotation)."""
    chew = _lu(1, "chew.v", "Grinding",
               _sentence(11, S1, _aset(101, S1, "chewed", [("Ext", "It", "NP"), ("Obj", "the bloody snow on the hill", "NP")])),
               _sentence(12, S2, _aset(102, S2, "chewed", [("Ext", "The dog 's owner", "NP"), ("Dep", "on a bone", "PP[on]")])),
               _sentence(13, S3, _aset(103, S3, "Chew", [])),  # imperative: no argument -> reject
               _sentence(14, S6, _aset(104, S6, "munched", [("Ext", "They", "NP")], pt=False)))  # no GF layer
    gulp = _lu(2, "gulp.v", "Grinding",
               _sentence(21, S4, _aset(201, S4, "gulped", [("Ext", "She", "NP"), ("Obj", "the entrails and the gore", "NP")])))
    say = _lu(3, "say.v", "Statement",
              _sentence(31, S5, _aset(301, S5, "said", [("Ext", "He", "NP"), ("Obj", "that he would go", "Sfin")])))
    z = tmp_path / "fn.zip"
    with zipfile.ZipFile(z, "w") as f:
        for i, x in enumerate([chew, gulp, say], 1):
            f.writestr(f"fndata-1.5/lu/lu{i}.xml", x)
    return z


def test_head_rule_hand_cases():
    assert head_word("the bloody snow on the hill") == "snow"  # cut at the preposition
    assert head_word("The dog 's owner") == "owner"
    assert head_word("the man who came") == "man"  # cut at the relative word
    assert head_word("the entrails and the gore") == "gore"  # coordination: the last conjunct (no cut word)
    assert head_word("Paris , France") == "paris"  # cut at punctuation
    assert head_word("on a bone", drop_preposition=True) == "bone"
    assert head_word("John 's") == "john"  # a trailing possessive marker is not the head
    assert head_word("23,000") is None and head_word("") is None  # no letter: no head


def test_events_rejects_and_same_frame_documents(release):
    rejects = Rejects("fn")
    st = {}
    rows = list(framenet_events(release, dataset="fn", chunk=2, rejects=rejects, stats=st))
    ments = [r for t, r in rows if t == "mentions"]
    svo = [tuple(json.loads(m["extra"])["svo"][k] for k in ("subj", "verb", "obj")) for m in ments]
    # Grinding: LUs chew.v, gulp.v round-robin (chew 1, gulp 1, chew 2), chunks of 2; then Statement
    assert svo == [("it", "chewed", "snow"), ("she", "gulped", "gore"), ("owner", "chewed", "bone"),
                   ("he", "said", None)]
    assert [m["doc_id"] for m in ments] == ["Grinding#0", "Grinding#0", "Grinding#1", "Statement#0"]
    assert json.loads(ments[0]["extra"])["source_sentence"] == S1
    # the clause object (PT Sfin) fills no slot; "Chew !" has no argument; the munched set has no GF layer
    assert rejects.counts() == {"no_subject_or_object": 1, "no_gf_layer": 1}
    assert st["slot_not_nominal"] == 1 and st["annotation_sets"] == 6 and st["events"] == 4
    pairs = [(p["event_a"]["verb"], p["event_b"]["verb"]) for t, p in rows if t == "event_pairs"]
    assert sorted(map(sorted, pairs)) == [["chewed", "gulped"]]  # one pair: the only 2-event document
    assert st["documents"] == 3 and st["cooccurring_pairs"] == 1 and st["frames"] == 2


def test_written_dataset_trains_beside_another(release, tmp_path, eventatlas_env):
    from eventatlas.config import samples_dir
    from eventatlas.data import Manifest
    from eventatlas.data.ingest import ingest
    from eventatlas.swcc.data import load_events

    man = write_framenet_events(release, tmp_path / "fn_svo", dataset="fn_svo", chunk=4)
    assert Manifest.read(tmp_path / "fn_svo").kinds() == {"mentions", "event_cooccurrence"}
    assert man["rows"]["mentions"] == 4 and man["rows"]["rejects"] == 2
    assert man["rejects"] == {"no_subject_or_object": 1, "no_gf_layer": 1}
    fn = load_events(tmp_path / "fn_svo")
    # chunk 4: Grinding is one document of 3 events -> 3 pairs; Statement has one event
    assert len(fn) == 4 and fn.record["n_pairs"] == 3
    nyt = tmp_path / "tuples"
    ingest("event_tuples", samples_dir() / "event_tuples" / "tuples_sample.txt", out_dir=nyt, dataset="tuples")
    base = load_events(nyt)
    both = load_events(nyt, extra_dirs=[tmp_path / "fn_svo"])
    assert len(both) == len(base) + 4 and both.texts[:len(base)] == base.texts
    assert both.record["n_pairs"] == base.record["n_pairs"] + 3
    assert [s["events_new"] for s in both.record["sources"]] == [len(base), 4]
    i, j = both.texts.index("it chewed snow"), both.texts.index("she gulped gore")
    assert j in both.indices[both.indptr[i]:both.indptr[i + 1]].tolist()
    capped = load_events(nyt, extra_dirs=[tmp_path / "fn_svo"], extra_max_events=2)
    assert len(capped) == len(base) + 2 and capped.record["sources"][1]["events"] == 2


def test_no_annotation_files_is_one_clear_error(tmp_path):
    z = tmp_path / "empty.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("fndata-1.5/frame/Grinding.xml", "<frame/>")
    with pytest.raises(ValueError, match="no lu/\\*.xml or fulltext"):
        list(framenet_events(z, rejects=Rejects("x")))
