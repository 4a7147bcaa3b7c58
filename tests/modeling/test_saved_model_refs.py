"""Saved-model references and cards: each refusal names what is wrong, and each accepted form finds the model
(hand-made model directories, no training)."""
from __future__ import annotations

import json
import re

import pytest

from eventatlas.modeling.saved import CARD_NAME, MODEL_DIRNAME, ModelError, bad_run_ref, read_model, resolve_ref

FORMS = "run:<run id> | run:<unique prefix of one> | run:<method>:<dataset>:latest"


def _model(run_dir, **card):
    d = run_dir / MODEL_DIRNAME
    (d / "encoders" / "trigger").mkdir(parents=True)
    (d / "encoders" / "trigger" / "weights.bin").write_bytes(b"w")
    (d / CARD_NAME).write_text(json.dumps({"method": "untuned", "run_id": run_dir.name, "trained_on": "mv",
                                           "encoder": "trigger", "encoders": {"trigger": "encoders/trigger"},
                                           **card}))
    return d


def test_a_directory_without_a_card_is_named_as_not_a_saved_model(tmp_path):
    with pytest.raises(ModelError) as e:
        read_model(tmp_path)
    assert str(e.value) == f"{tmp_path}: not a saved model (no {CARD_NAME})"


def test_an_invalid_card_names_its_first_error(tmp_path):
    d = _model(tmp_path / "run1", seed="not a number")
    with pytest.raises(ModelError) as e:
        read_model(d)
    msg = str(e.value)
    assert msg.startswith(f"{d / CARD_NAME}: invalid model card (1 validation error for ModelCard seed ")
    assert "\n" not in msg


def test_a_part_leaving_the_model_directory_is_refused_with_the_rule(tmp_path):
    d = _model(tmp_path / "run1", encoders={"trigger": "../elsewhere"})
    (tmp_path / "run1" / "elsewhere").mkdir()
    with pytest.raises(ModelError) as e:
        read_model(d)
    assert str(e.value).endswith("leaves it through '..', outside the model directory "
                                 f"{d}; a saved model loads only files inside its model directory")


def test_a_run_directory_and_an_encoder_suffix_resolve(tmp_path):
    run = tmp_path / "runs" / "untuned-mv-s0-abc"
    d = _model(run)
    assert resolve_ref(run).path == d  # a run directory: its model/
    assert resolve_ref(d).path == d
    m = resolve_ref("run:untuned-mv-s0-abc@trigger", runs_dir=tmp_path / "runs")
    assert m.path == d and m.encoder_path == d / "encoders" / "trigger"
    with pytest.raises(ModelError, match=r"no encoder 'sentence' \(saved: trigger\)"):
        resolve_ref("run:untuned-mv-s0-abc@sentence", runs_dir=tmp_path / "runs")


@pytest.mark.parametrize("key, why", [
    ("a/b", "holds a path separator"), ("a\\b", "holds a path separator"), ("Run*7", "holds '*'"),
    ("ABC?", "holds '?'"), ("Z[1]", "holds '[]'"), ("..x", "holds '..'"), ("-x", "does not start with a letter or digit"),
    ("Untuned-MV_s0.a=b+c", None),
])
def test_bad_run_ref_says_why(key, why):
    assert bad_run_ref(key) == why


def test_refusals_of_run_references_list_the_accepted_forms(tmp_path):
    root = tmp_path / "runs"
    (root / "untuned-mv-s0-nomodel").mkdir(parents=True)
    for ref in ("run:", "run:a/b", "run:x:y/z:latest"):
        with pytest.raises(ModelError) as e:
            resolve_ref(ref, runs_dir=root)
        assert str(e.value).endswith(f"({FORMS})"), str(e.value)
    with pytest.raises(ModelError) as e:
        resolve_ref("run:untuned-mv-s0-nomodel", runs_dir=root)
    assert str(e.value) == ("run:untuned-mv-s0-nomodel: run untuned-mv-s0-nomodel saved no model (it may predate "
                            "saved models, have been run with save_model=false, or be of a method that trains "
                            "nothing)")
    assert re.search(r"no saved model of a run 'zzz'", str(pytest.raises(ModelError, resolve_ref, "run:zzz",
                                                                         runs_dir=root).value))
