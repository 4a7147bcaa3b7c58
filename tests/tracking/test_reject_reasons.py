"""One vocabulary of reject reasons (eventatlas/reasons.py): every reason the source names is declared, and
the same problem has one name everywhere."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eventatlas.io import Rejects
from eventatlas.reasons import REJECT_REASONS

ROOT = Path(__file__).resolve().parents[2]


def _literal_reasons() -> dict[str, list[str]]:
    """reason -> where, for every ``<rejects>.add(source, location, "reason", ...)`` in the core."""
    out: dict[str, list[str]] = {}
    for p in (ROOT / "eventatlas").rglob("*.py"):
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add"
                    and len(n.args) >= 3 and isinstance(n.args[2], ast.Constant) and isinstance(n.args[2].value, str)):
                out.setdefault(n.args[2].value, []).append(f"{p.relative_to(ROOT)}:{n.lineno}")
    return out


def test_every_reason_in_the_source_is_declared():
    found = _literal_reasons()
    assert len(found) > 40  # the scan sees the readers and builders
    undeclared = {r: w for r, w in found.items() if r not in REJECT_REASONS}
    assert undeclared == {}, f"declare these in eventatlas/reasons.py: {undeclared}"


def test_one_problem_has_one_name():
    # the drifted spellings are gone: a wrong field value is bad_field, a wrong record shape bad_record
    found = _literal_reasons()
    for old in ("bad_fields", "bad_value"):
        assert old not in found and old not in REJECT_REASONS
    checks = [w for w in found["bad_field"] if "_common.py" in w or "textee.py" in w]
    assert len(checks) >= 2  # the event-type check reads the same in the shared helper and in textee
    assert all(text.strip() for text in REJECT_REASONS.values())


def test_the_suite_refuses_an_undeclared_reason():
    with pytest.raises(AssertionError, match="'no_such_reason' is not declared"):
        Rejects("d").add("f.jsonl", "line 1", "no_such_reason")
    r = Rejects("d")
    r.add("f.jsonl", "line 1", "bad_field", "x")
    assert r.counts() == {"bad_field": 1}


def test_the_shared_event_check_rejects_a_non_name_type_as_bad_field():
    from eventatlas.readers._common import join_tokens, token_event_span

    sentence, spans = join_tokens(["Troops", "attacked", "."])
    r = Rejects("d")
    event = {"text": "attacked", "start": 1, "end": 2, "event_type": 7}
    assert token_event_span(r, "f.jsonl", "line 3", event, spans, sentence) is None
    assert [(x["location"], x["reason"]) for x in r.rows] == [("line 3", "bad_field")]
    assert token_event_span(r, "f.jsonl", "line 4", {**event, "event_type": "Attack"}, spans, sentence) == (7, 15)
