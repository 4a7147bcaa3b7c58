"""Real-data checks: trainer features == the spine's encoder; shipped FrameNet mappings are valid."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path

from eventatlas.config import REPO_ROOT
from eventatlas.evaluation.naming import read_mapping

MAPS = REPO_ROOT / "datasets" / "mappings"


def _frame_names() -> set[str]:
    with zipfile.ZipFile(shared_path("framenet17", "frame.zip")) as z:
        return {Path(n).stem for n in z.namelist() if n.endswith(".xml")}


@pytest.mark.shared_data
def test_mappings_name_real_framenet_frames():
    frames = _frame_names()
    for name in ("ace_framenet.tsv", "maven_framenet.tsv", "ontoevent_framenet.tsv"):
        m = read_mapping(MAPS / name)
        bad = sorted({f for fs in m.values() for f in fs} - frames)
        assert not bad, f"{name}: not FrameNet 1.7 frames: {bad}"
    ace = read_mapping(MAPS / "ace_framenet.tsv")
    assert len(ace) == 33 and ace["Life.Injure"] == ["Cause_harm", "Experience_bodily_harm"]
    assert ace["Contact.Meet"] == ["Make_acquaintance", "Meet_with", "Come_together"] and ace["Life.Die"] == ["Death"]
    rel = json.loads(shared_path("ontoevent_maven", "event_relation.json").read_text())
    types = {m["event_type"] for ps in rel.values() for p in ps for m in p if isinstance(m, dict)}
    onto = read_mapping(MAPS / "ontoevent_framenet.tsv")
    assert set(onto) == types  # all 50 OntoEvent-MAVEN types are linked
    maven = json.loads(shared_path("maven", "fewshot", "maven_definition.json").read_text())
    assert set(read_mapping(MAPS / "maven_framenet.tsv")) == set(maven)


@pytest.mark.shared_data
@pytest.mark.parametrize("rep", ["trigger", "sentence"])
def test_trainer_features_equal_encoder_features(tmp_path, rep):
    # the trained model's F (before any step) is the frozen Encoder's representation, L2-normalised:
    # both run the one MentionEncoder module on the one definition of the inputs
    from eventatlas.modeling.encode import Encoder
    from eventatlas.induction.model import InductionModel
    from eventatlas.induction.training import embed_fqk
    from eventatlas.io import Rejects
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.modeling.tokens import tokenize_cached
    from eventatlas.readers import ontoevent

    rows = [r for t, r in ontoevent.read(shared_path("ontoevent_maven"), rejects=Rejects("o")) if t == "mentions"][:60]
    s, a, b = [r["sentence"] for r in rows], [r["trigger_start"] for r in rows], [r["trigger_end"] for r in rows]
    enc = MentionEncoder(None, max_length=128)
    items, _ = tokenize_cached(enc, s, a, b, rep, cache_dir=tmp_path)
    got = embed_fqk(InductionModel(enc), items, rep, device="cpu", precision="fp32")["F"]
    ref = Encoder(None, precision="fp32", max_length=128).encode_mentions(s, a, b, rep, normalize=True)
    assert got.shape == ref.shape
    assert np.min(np.sum(got * ref, axis=1)) > 0.99999
