"""What an experiment run says and leaves behind, line by line (hand-made cells, no training)."""
from __future__ import annotations

from pathlib import Path

import pytest

from eventatlas.experiments import ExperimentError, load
from eventatlas.experiments.run import CellRun, Lock, _after_others, _reuse, check_run

BASE = Path(__file__).resolve().parents[2] / "experiments" / "untuned_baselines.yaml"


def test_a_bad_declared_seed_list_is_named_as_the_declarations(eventatlas_env):
    exp = load(str(BASE))
    exp.seeds = [3, 3]  # past the loader's own check: check_run is the last guard before any cell
    with pytest.raises(ExperimentError) as e:
        check_run(exp)
    assert str(e.value) == f"{exp.source}: seeds: a seed repeats (3, 3)"
    with pytest.raises(ExperimentError) as e:
        check_run(exp, seeds=[1, 1])
    assert str(e.value) == f"{exp.source}: --seeds: a seed repeats (1, 1)"


def test_a_lock_never_taken_is_let_go_quietly(eventatlas_env):
    lock = Lock("cells", "never-taken")
    lock.release()  # nothing held: nothing to close
    assert lock.acquire(wait=False) and lock.path.exists()
    other = Lock("cells", "never-taken")
    assert not other.acquire(wait=False)  # held (flock is per open file, so even in this process)
    lock.release()
    assert other.acquire(wait=False)  # let go: the next one takes it
    other.release()
    lock.release()


def _cells(n: int) -> list[CellRun]:
    return [CellRun(f"c{i:02d}", 0, {"method": "m", "dataset": "d", "seed": 0}, f"m-d-s0-{i:02d}",
                    lock=Lock("cells", f"m-d-s0-{i:02d}")) for i in range(n)]


@pytest.mark.parametrize("n, more", [(20, False), (21, True)])
def test_the_waiting_line_lists_twenty_cells_then_says_there_are_more(eventatlas_env, n, more):
    said: list[str] = []
    ran = _after_others(_cells(n), lambda jobs: [None] * len(jobs), "train", True, said.append, lambda recs: None)
    line = said[0]
    assert line.startswith(f"train: waiting for {n} cell run(s) that another run is running: c00 seed 0, ")
    assert line.endswith("c19 seed 0 ...") if more else line.endswith("c19 seed 0")
    assert len(ran) == n and all(c.status == "lost (no run record)" for c in ran)


def test_a_reused_cell_says_how_to_run_it_again(eventatlas_env, monkeypatch):
    from eventatlas.experiments import run as R

    monkeypatch.setattr(R, "finished_run", lambda prefix: ("m-d-s0-00-20260101T000000-aaaa", None, True))
    said: list[str] = []
    (cr,) = _cells(1)
    assert _reuse(cr, said.append, lambda recs: None)
    assert said == ["cell c00 seed 0: reused run m-d-s0-00-20260101T000000-aaaa (same method, config, data and "
                    "code version; --rerun runs it again)"]
    assert cr.reused and cr.status == "completed" and cr.run_id == "m-d-s0-00-20260101T000000-aaaa"


def test_a_ratio_goal_is_judged_against_that_multiple_of_the_other_cell():
    from pydantic import ValidationError

    from eventatlas.experiments.spec import Beat
    from eventatlas.results.experiments import judge

    def cell(row, value):
        return {"row_label": row, "col_label": "B-cubed F", "mean_shown": value, "higher_is_better": True,
                "reference": None}

    rule = {"beats": [{"cell": ["detected", "B-cubed F"], "over": ["gold", "B-cubed F"], "times": 0.9, "by": 0.0}]}
    # 0.9 x 40.0 = 36.0: 36.5 clears it by 0.5, 35.5 misses by 0.5
    met = judge({"goal_rule": rule, "cells": [cell("detected", 36.5), cell("gold", 40.0)]})
    assert met == ("met", ["detected / B-cubed F 36.5 vs 0.9 x gold / B-cubed F 36.0: +0.5 (needs +0)"])
    assert judge({"goal_rule": rule, "cells": [cell("detected", 35.5), cell("gold", 40.0)]})[0] == "not met"
    with pytest.raises(ValidationError, match="'times' needs 'over'"):
        Beat(cell=("a", "b"), at_least=1.0, times=0.9)


def test_a_quick_page_is_a_smoke_test_without_the_full_runs_prose():
    from eventatlas.results.experiments import markdown

    cell = {"row_label": "detector", "col_label": "TI F1", "metric": "ti_f1", "mean_shown": 0.0, "std_shown": None,
            "n": 1, "n_configs": 1, "reference": 67.1, "higher_is_better": True}
    e = {"experiment": "x", "title": "T", "description": "the full setup", "cells": [cell],
         "verdict": ("not met", ["detector / TI F1 0.0 vs reference 67.1"]), "sources": [("Paper", "Table 5", "")],
         "goal": "TI F1 >= 75", "diagnosis": "the full run's reasons", "plots": [], "runs": [], "spec_sha256": "s"}
    full, quick = markdown({**e, "mode": "full"}), markdown({**e, "mode": "quick"})
    for text in ("the full setup", "the full run's reasons", "[67.1]", "**Status: not met.**", "Paper, Table 5"):
        assert text in full and text not in quick, text
    assert "A smoke test" in quick and "[x.md](x.md)" in quick and "judged on the full run only" in quick
    assert "| detector | 0.0 (n=1) |" in quick
