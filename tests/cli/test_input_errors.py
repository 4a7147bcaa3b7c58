"""Errors a person can act on: wrong-type fields and non-integer offsets become rejects
naming file and record (or one InputError), and the CLI prints one literal line on stderr with
exit 2 for bad input, 1 for an internal failure, a traceback only with --debug."""
from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from eventatlas import config
from eventatlas.cli.base import _ErrorsAsLines, _main, error_line
from eventatlas.data.ingest import ingest
from eventatlas.errors import InputError

SAMPLES = config.samples_dir()


def _rejects(ds: str) -> list[dict]:
    return pq.read_table(config.datasets_dir() / ds / "rejects.parquet").to_pylist()


def test_ace_non_integer_start_is_a_reject_naming_file_and_mention(eventatlas_env, tmp_path):
    d = tmp_path / "ace"
    shutil.copytree(SAMPLES / "ace2005" / "data", d)
    apf = next(d.rglob("*.apf.xml"))
    text = apf.read_text()
    i = text.index("<anchor>")
    j = text.index('START="', i) + len('START="')
    k = text.index('"', j)
    apf.write_text(text[:j] + "abc" + text[k:])
    full = ingest("ace2005", SAMPLES / "ace2005" / "data", dataset="ace_ok", progress=False)
    m = ingest("ace2005", d, dataset="ace_bad", progress=False)
    assert m["rejects"] == {"bad_record": 1} and m["rows"]["mentions"] == full["rows"]["mentions"] - 1
    r = _rejects("ace_bad")[0]
    assert r["source"] == str(apf) and r["location"].startswith("event_mention ")
    assert "START='abc'" in r["detail"] and "must be non-negative integers" in r["detail"]


def test_framenet_non_integer_label_start_is_a_reject(eventatlas_env, tmp_path):
    d = tmp_path / "fn"
    shutil.copytree(SAMPLES / "framenet", d)
    ft = next((d / "fulltext").glob("*.xml"))
    ft.write_text(ft.read_text().replace('start="19" name="Target"', 'start="x" name="Target"', 1))
    m = ingest("framenet", d, dataset="fn", progress=False)
    assert m["rejects"] == {"bad_record": 1} and m["rows"]["mentions"] == 3
    r = _rejects("fn")[0]
    assert r["source"].endswith(ft.name) and r["location"].startswith("sentence ") and "annotationSet" in r["location"]
    assert r["detail"] == "ValueError: invalid literal for int() with base 10: 'x'"


@pytest.mark.parametrize("reader,src,mutate,where", [
    ("maven", "maven/train.jsonl", lambda d: d["content"][0].__setitem__("tokens", 7), "line 1"),
    ("maven", "maven/train.jsonl", lambda d: d.__setitem__("content", "not a list"), "line 1"),
    ("wikievents", "wikievents/dev.jsonl", lambda d: d.__setitem__("doc_id", ["a", "list"]) or d.__setitem__("event_mentions", 3), "line 1"),
    ("framenet_jsonl", "framenet_jsonl/fulltext_sample_train.jsonl", lambda d: d.__setitem__("text", 12), "line 1"),
])
def test_wrong_type_json_field_is_a_reject_with_line(eventatlas_env, tmp_path, reader, src, mutate, where):
    lines = [json.loads(x) for x in (SAMPLES / src).read_text().splitlines() if x.strip()]
    mutate(lines[0])
    f = tmp_path / (SAMPLES / src).name
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    m = ingest(reader, f, dataset="bad", progress=False)
    assert sum(m["rejects"].values()) >= 1
    r = _rejects("bad")[0]
    assert r["source"] == str(f) and r["location"] == where and r["reason"] in {"bad_record", "bad_field", "missing_field"}


def test_error_leaking_from_a_reader_names_the_input(eventatlas_env, tmp_path, monkeypatch):
    import eventatlas.readers.maven as mv

    def broken(path, **kw):
        yield "documents", {"doc_id": "d1", "dataset": "x"}
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(mv, "read", broken)
    with pytest.raises(InputError, match=r"train\.jsonl:after 1 rows: unexpected input structure \(TypeError: 'int' object "
                                         r"is not iterable\); this does not fit the maven format"):
        ingest("maven", SAMPLES / "maven" / "train.jsonl", dataset="leak", progress=False)
    assert not (config.datasets_dir() / "leak").exists()


def _app() -> typer.Typer:
    """A small app with the CLI's error handling and --debug (the real commands start Prefect)."""
    app = typer.Typer(cls=_ErrorsAsLines, pretty_exceptions_enable=False)
    app.callback()(_main)

    @app.command()
    def bad() -> None:
        raise InputError("/data/x.json", "line 3", "expected {type: [instance, ...]}")

    @app.command()
    def missing() -> None:
        open("/nonexistent/dir/file.jsonl")

    @app.command()
    def bug() -> None:
        raise RuntimeError("boom [red]not markup[/red]")

    return app


def test_cli_bad_input_is_one_literal_line_on_stderr_exit_2():
    r = CliRunner().invoke(_app(), ["bad"])
    assert r.exit_code == 2
    assert r.stderr == "error: /data/x.json:line 3: expected {type: [instance, ...]}\n"
    assert r.stdout == ""
    r = CliRunner().invoke(_app(), ["missing"])
    assert r.exit_code == 2 and r.stderr == "error: /nonexistent/dir/file.jsonl: No such file or directory\n"


def test_cli_internal_failure_exit_1_traceback_only_with_debug():
    r = CliRunner().invoke(_app(), ["bug"])
    assert r.exit_code == 1
    assert r.stderr == "error: internal failure: RuntimeError: boom [red]not markup[/red] (rerun with --debug for the traceback)\n"
    r = CliRunner().invoke(_app(), ["--debug", "bug"])
    assert r.exit_code == 1 and "Traceback (most recent call last)" in r.stderr and r.stderr.rstrip().endswith("(rerun with --debug for the traceback)")
    r = CliRunner().invoke(_app(), ["--debug", "bad"])
    assert r.exit_code == 2 and "Traceback" in r.stderr


def test_error_line_forms():
    assert error_line(IsADirectoryError(21, "Is a directory", "/d")) == "/d: Is a directory"
    assert error_line(InputError("f.xml", "DTD/entity", "refused")) == "f.xml:DTD/entity: refused"


def test_prefect_filter_drops_handled_errors_only(monkeypatch):
    import logging

    from eventatlas.cli.base import _DEBUG, _FILTER

    monkeypatch.setitem(_DEBUG, "on", False)

    mk = lambda msg, exc=None: logging.LogRecord("prefect.task_runs", logging.ERROR, __file__, 1, msg, (),  # noqa: E731
                                                 (type(exc), exc, None) if exc else None)
    assert not _FILTER.filter(mk("Task run failed with exception: InputError('x')", InputError("f", 1, "m")))
    assert not _FILTER.filter(mk("Finished in state Failed('Task run encountered an exception InputError: f:1: m')"))
    assert _FILTER.filter(mk("Task run failed with exception: RuntimeError('x')", RuntimeError("x")))
    assert _FILTER.filter(mk("Beginning flow run"))
    monkeypatch.setitem(_DEBUG, "on", True)  # --debug shows Prefect's own logs of the failure
    assert _FILTER.filter(mk("Task run failed with exception: InputError('x')", InputError("f", 1, "m")))


def _run_cli(tmp_path, *args):
    import os
    import subprocess
    import sys

    env = {**os.environ, "EVENTATLAS_DATA": str(tmp_path / "data"), "EVENTATLAS_WAREHOUSE": str(tmp_path / "wh.duckdb"),
           "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    env.pop("EVENTATLAS_CONTACT", None)
    env.pop("EVENTATLAS_USER_AGENT", None)
    return subprocess.run([sys.executable, "-m", "eventatlas.cli", *args], env=env, capture_output=True, text=True, timeout=300)


def test_cli_ingest_of_bad_input_end_to_end(tmp_path):
    """The real command (the direct one-shot path: no Prefect API here): one error line on stderr, exit 2, no traceback
    (neither ours nor Prefect's task/flow dumps), nothing written."""
    empty = tmp_path / "train.jsonl"
    empty.write_bytes(b"")
    r = _run_cli(tmp_path, "ingest", "maven", "--path", str(empty), "--dataset", "mv")
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {empty}:-: this does not look like maven input: no mentions found (empty or another format); "
                      "nothing was written (check the reader name and the file)"], r.stderr
    assert "Traceback" not in r.stderr and "InputError" not in r.stderr and "error:" not in r.stdout
    assert not (tmp_path / "data" / "datasets" / "mv").exists()
    r = _run_cli(tmp_path, "build-wikievents", "--backend", "api", "--root", "Q362")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: build-wikievents --backend api needs a contact")
    assert "Traceback" not in r.stderr


def test_table_cells_are_printed_literally(capsys):
    from eventatlas.cli.tables import print_rows

    print_rows(["detail"], [("expected {type: [instance, ...]} [red]x[/red]",)])
    out = capsys.readouterr().out
    assert "[instance, ...]" in out and "[red]x[/red]" in out


def test_value_of_wrong_type_in_a_row_is_a_bad_field_reject(eventatlas_env, tmp_path):
    """Found by the fuzz test: a frame element named by a number reached the Arrow writer and failed the
    whole ingest at commit; now the row is dropped with a reject naming the mention."""
    lines = [json.loads(x) for x in (SAMPLES / "framenet_jsonl" / "fulltext_sample_train.jsonl").read_text().splitlines()]
    lines[0]["fe"][0][0] = 0  # role 0 instead of "Theme"
    f = tmp_path / "fulltext_train.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    m = ingest("framenet_jsonl", f, dataset="fj", progress=False)
    assert m["rejects"] == {"bad_field": 1} and m["rows"]["mentions"] == len(lines) - 1
    r = _rejects("fj")[0]
    assert r["source"] == str(f) and r["location"].startswith("mentions mention_id ") and "ArrowTypeError" in r["detail"]
