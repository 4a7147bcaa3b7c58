"""The experiment guards say exactly what is wrong, in one line that lists the choices (mutation-testing
survivors of the `experiments` group, docs/testing.md "Mutation testing")."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eventatlas.experiments import ExperimentError, load
from eventatlas.experiments.spec import MAX_DEPTH, parse, read_yaml
from eventatlas.tracking.runinfo import check_seeds

BASE = Path(__file__).resolve().parents[2] / "experiments" / "untuned_baselines.yaml"
ROWS = "OntoEvent trigger (ARI), OntoEvent sentence (ARI), FrameNet verbs trigger (B-cubed F), " \
       "FrameNet verbs trigger (purity F)"


def _data() -> dict:
    return yaml.safe_load(BASE.read_text(encoding="utf-8"))


def _refusal(data: dict, tmp_path) -> str:
    with pytest.raises(ExperimentError) as e:
        parse(data, tmp_path / "probe.yaml")
    return str(e.value)


@pytest.mark.parametrize("beat", [{"cell": ["nope", "agglomerative"], "at_least": 1.0},
                                  {"cell": ["OntoEvent trigger (ARI)", "manifold"], "over": ["nope", "agglomerative"]}])
def test_a_goal_naming_no_table_cell_lists_the_rows_and_columns(tmp_path, beat):
    data = _data()
    data["goal"]["beats"] = [beat]
    assert _refusal(data, tmp_path) == (f"{tmp_path / 'probe.yaml'}: goal.beats: 'nope' / 'agglomerative' is not a "
                                        f"table cell (rows: {ROWS}; columns: agglomerative, manifold)")


def test_a_cell_on_an_undeclared_dataset_lists_the_datasets(tmp_path):
    data = _data()
    data["cells"] = [{"name": "c", "method": "untuned", "dataset": "zz"}]
    assert _refusal(data, tmp_path) == f"{tmp_path / 'probe.yaml'}: cell 'c': dataset 'zz' is not one of datasets: onto, fn"


def test_a_table_filter_matching_no_cell_lists_the_cells(tmp_path):
    data = _data()
    data["table"]["columns"]["agglomerative"]["cell"] = "nope%"
    assert _refusal(data, tmp_path) == (f"{tmp_path / 'probe.yaml'}: table filter cell 'nope%' matches no cell; "
                                        "cells: untuned@onto, untuned@fn")


def test_two_reference_figures_for_one_cell_are_refused(tmp_path):
    # a cell shows one reference (a paper's or an earlier measurement): a second would double its table row
    data = _data()
    data["references"].append({"source": {"paper": "someone", "kind": "own"},
                               "values": {"OntoEvent trigger (ARI)": {"manifold": 40.0}}})
    assert _refusal(data, tmp_path) == (f"{tmp_path / 'probe.yaml'}: references: more than one figure for cell(s) "
                                        "OntoEvent trigger (ARI) / manifold")


def test_a_chosen_on_test_label_that_is_no_row_lists_the_rows(tmp_path):
    data = _data()
    data["table"]["chosen_on_test"] = ["nope"]
    assert _refusal(data, tmp_path) == f"{tmp_path / 'probe.yaml'}: table.chosen_on_test: 'nope' is not a table row " \
                                       f"(rows: {ROWS})"


def test_a_yml_declaration_is_read_as_a_path(tmp_path):
    p = tmp_path / "untuned_baselines.yml"
    p.write_bytes(BASE.read_bytes())
    exp = load(str(p))
    assert exp.name == "untuned_baselines" and exp.source == str(p)


def test_an_unknown_experiment_in_an_empty_folder_says_none_is_known(tmp_path):
    with pytest.raises(ExperimentError) as e:
        load("nope", directory=tmp_path)
    assert str(e.value) == "unknown experiment 'nope'; known: (none)"


def test_invalid_yaml_is_refused_naming_the_line_and_the_problem(tmp_path):
    p = tmp_path / "probe.yaml"
    p.write_text("name: probe\nseeds: [1, 2\ntitle: x\n", encoding="utf-8")
    with pytest.raises(ExperimentError) as e:
        read_yaml(p)
    assert str(e.value) == f"{p}:3: not valid YAML (expected ',' or ']', but got ':')"


def test_nesting_after_siblings_is_still_bounded(tmp_path):
    # the depth count goes back to where it was after each sibling: five finished siblings leave no slack
    p = tmp_path / "probe.yaml"
    p.write_text("x: [1, 2, 3, 4, 5, " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "]\n", encoding="utf-8")
    with pytest.raises(ExperimentError) as e:
        read_yaml(p)
    assert str(e.value) == f"{p}:1: nested deeper than {MAX_DEPTH} levels"
    p.write_text("x: [1, 2, 3, 4, 5, " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "]\n", encoding="utf-8")
    assert read_yaml(p)["x"][:5] == [1, 2, 3, 4, 5]


def test_check_seeds_names_the_declared_key_by_default():
    with pytest.raises(ValueError) as e:
        check_seeds([1, 1])
    assert str(e.value) == "seeds: a seed repeats (1, 1)"


@pytest.mark.parametrize("seed, shown", [(10**23, "1" + "0" * 23), (10**24, "1" + "0" * 19 + "... (25 characters)")])
def test_a_seed_past_24_characters_is_shortened(seed, shown):
    with pytest.raises(ValueError) as e:
        check_seeds([seed], "--seeds")
    assert str(e.value) == f"--seeds: {shown} is not a seed (an integer 0 <= seed < 2**31)"


def test_with_two_faults_the_parents_values_are_checked_before_a_nested_mapping(tmp_path):
    # PyYAML fills a nested mapping after its parent's other values (construct_mapping's deep=False): the
    # oversized integer on line 4 is met before the repeated key inside 'a' (a deep construction would name line 3)
    p = tmp_path / "probe.yaml"
    p.write_text("a:\n  b: 1\n  b: 2\nc: " + "1" * 31 + "\n", encoding="utf-8")
    with pytest.raises(ExperimentError) as e:
        read_yaml(p)
    assert str(e.value) == f"{p}:4: an integer of 31 characters (at most 30)"
    p.write_text("a:\n  b: 1\n  b: 2\nc: 1\n", encoding="utf-8")  # alone, the repeated key is named
    with pytest.raises(ExperimentError) as e:
        read_yaml(p)
    assert str(e.value) == f"{p}:3: key 'b' repeats (first on line 2)"
