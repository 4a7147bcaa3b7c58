"""Behaviours of the hardened modules that mutation testing showed (or would show) unchecked
(README "Mutation testing"): the atomic I/O helpers, the publish path and the crawler's HTTP client.
Each test states a contract of the module, not its implementation."""
from __future__ import annotations

import json
import random
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas.io import DatasetWriter, Rejects, TableWriter, atomic_write_json, stable_id, write_parquet
from eventatlas.schema import TABLES
from eventatlas.store.publishing import pending_dir, pending_runs, publish_records, queue_run
from eventatlas.store.warehouse import Warehouse
from eventatlas.tracking.records import finish_record, new_record, write_metrics, write_record
from eventatlas.wiki.http import ApiError, HttpError, PoliteClient, cache_key, parse_retry_after

# -- eventatlas.io -----------------------------------------------------------------------------


def test_stable_ids_are_32_hex_chars_and_keep_parts_apart():
    a = stable_id("maven", "doc1", 3)
    assert len(a) == 32 and int(a, 16) >= 0 and a == stable_id("maven", "doc1", 3)
    assert stable_id("ab", "c") != stable_id("a", "bc")  # parts are separated, not concatenated
    assert len(stable_id("x", length=8)) == 16


def test_json_files_are_indented_with_sorted_keys_and_a_final_newline(tmp_path):
    atomic_write_json(tmp_path / "m.json", {"b": 1, "a": {"d": 2, "c": 3}})
    text = (tmp_path / "m.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.index('"a"') < text.index('"b"') and "\n  " in text
    assert json.loads(text) == {"a": {"c": 3, "d": 2}, "b": 1}


def test_tables_are_zstd_parquet(tmp_path):
    t = pa.table({"x": list(range(100))})
    write_parquet(t, tmp_path / "a.parquet")
    with TableWriter(tmp_path / "b.parquet", t.schema, batch_rows=7) as w:
        w.write_many({"x": i} for i in range(100))
    for name in ("a", "b"):
        meta = pq.ParquetFile(tmp_path / f"{name}.parquet").metadata
        assert meta.num_rows == 100 and meta.row_group(0).column(0).compression == "ZSTD"
    assert not list(tmp_path.glob(".*.tmp"))


def test_table_writer_leaves_nothing_when_the_block_fails(tmp_path):
    target = tmp_path / "t.parquet"
    schema = pa.schema([pa.field("x", pa.int64())])
    with pytest.raises(RuntimeError):
        with TableWriter(target, schema, batch_rows=2) as w:
            w.write_many({"x": i} for i in range(5))
            raise RuntimeError("reader failed")
    assert not target.exists() and not list(tmp_path.iterdir())


def test_failed_dataset_write_keeps_the_previous_version_and_leaves_no_temp_files(tmp_path):
    doc = {"doc_id": "d1", "dataset": "ds", "split": "train", "title": "t", "text": "x"}
    with DatasetWriter(tmp_path, "ds", tables=["documents"]) as w:
        w.write("documents", doc)
        man = w.commit({"reader": "test", "dataset": "ds"})
    assert man["schema_version"] and man["rows"] == {"documents": 1} and man["reader"] == "test"
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RuntimeError):
        with DatasetWriter(tmp_path, "ds", tables=["documents"]) as w:
            w.write("documents", {**doc, "doc_id": "d2"})
            raise RuntimeError("reader failed")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing half-written
    assert pq.read_table(tmp_path / "documents.parquet").column("doc_id").to_pylist() == ["d1"]


def test_rejects_keep_source_reason_default_detail_and_truncate_raw():
    r = Rejects("ds", limit_raw=10)
    r.add(Path("/data/x.jsonl"), 3, "bad_field", raw={"é": "ü" * 20})
    r.add(None, None, "bad_field", detail="why", raw="short")
    t = r.table().to_pylist()
    assert t[0]["source"] == "/data/x.jsonl" and t[0]["location"] == "3" and t[0]["detail"] == ""
    assert t[0]["raw"] == '{"é": "üüü' and len(t[0]["raw"]) == 10  # UTF-8 kept, cut at limit_raw
    assert t[1]["source"] is None and t[1]["location"] is None and t[1]["raw"] == "short"
    assert r.counts() == {"bad_field": 2} and len(r) == 2 and set(t[0]) == set(TABLES["rejects"].names)


def test_rows_that_do_not_fit_go_to_on_bad_row_with_their_table_and_the_rest_land(tmp_path):
    bad: list[tuple] = []
    good = {"mention_id": "m1", "dataset": "ds", "doc_id": "d", "sentence": "x y", "trigger_start": 0,
            "trigger_end": 1, "trigger": "x", "labels": ["A"]}
    with DatasetWriter(tmp_path / "ds", "ds", tables=["mentions"], on_bad_row=lambda *a: bad.append(a)) as w:
        w.write("mentions", good)
        w.write("mentions", {**good, "mention_id": "m2", "trigger_start": "not a number"})
        w.write("mentions", {**good, "mention_id": "m3"})
        man = w.commit()
    assert [(t, r["mention_id"]) for t, r, _ in bad] == [("mentions", "m2")] and isinstance(bad[0][2], Exception)
    assert pq.read_table(tmp_path / "ds" / "mentions.parquet").column("mention_id").to_pylist() == ["m1", "m3"]
    assert man["rows"] == {"mentions": 2}


def test_default_batch_is_50000_rows_and_default_raw_limit_500_chars(tmp_path):
    w = TableWriter(tmp_path / "t.parquet", TABLES["documents"])
    for i in range(49_999):
        w.write({"dataset": "d", "doc_id": str(i)})
    assert w.rows == 0  # still buffered: memory is bounded by the batch, not the table
    w.write({"dataset": "d", "doc_id": "last"})
    assert w.rows == 50_000
    w.abort()
    r = Rejects("ds")
    r.add(None, None, "bad_field", raw="y" * 600)
    assert len(r.rows[0]["raw"]) == 500


def test_switch_exchanges_an_existing_directory_in_one_step(tmp_path, monkeypatch):
    from eventatlas import io

    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "old.txt").write_text("old")
    new = io.staging_dir(tmp_path / "ds")
    assert new.parent == tmp_path / ".staging" and new.name.startswith(f"ds.{__import__('os').getpid()}.")
    (new / "new.txt").write_text("new")
    io.switch_dir(new, tmp_path / "ds")
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == ["new.txt"]
    assert not (tmp_path / ".staging").exists()  # the old version went with its staging directory
    # without an atomic exchange: two renames, same result
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)
    new = io.staging_dir(tmp_path / "ds")
    (new / "newer.txt").write_text("newer")
    io.switch_dir(new, tmp_path / "ds")
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == ["newer.txt"] and not (tmp_path / ".staging").exists()


def test_clean_staging_removes_only_dead_writers_directories_of_any_name(tmp_path):
    import os
    import subprocess
    import sys

    from eventatlas import io

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    root = tmp_path / ".staging"
    for name in (f"ds.{dead_pid}.aa", f"ds.{os.getpid()}.bb", f"ds.{os.getppid()}.cc", f"other.{dead_pid}.dd", "ds.x.ee",
                 f"half.{dead_pid}.ff", f"half.{dead_pid}.ff.old"):
        (root / name).mkdir(parents=True)
    removed = io.clean_staging(tmp_path / "ds")
    assert [p.name for p in removed] == [f"ds.{dead_pid}.aa", f"other.{dead_pid}.dd"]
    # live writers' directories, a name that is no staging directory, and another name's half-done switch stay
    assert sorted(p.name for p in root.iterdir()) == sorted([f"ds.{os.getpid()}.bb", f"ds.{os.getppid()}.cc", "ds.x.ee",
                                                             f"half.{dead_pid}.ff", f"half.{dead_pid}.ff.old"])


def test_fault_point_counts_its_step(monkeypatch):
    from eventatlas import io

    exits: list[int] = []
    monkeypatch.setattr(io.os, "_exit", exits.append)
    monkeypatch.setattr(io, "_FAULT_SEEN", {})
    monkeypatch.setenv("EVENTATLAS_FAULT_AT", "step_a:2")
    io.fault_point("step_b")
    io.fault_point("step_a")
    assert exits == []
    io.fault_point("step_a")
    assert exits == [137]
    monkeypatch.delenv("EVENTATLAS_FAULT_AT")
    io.fault_point("step_a")
    assert exits == [137]


# -- the publish path --------------------------------------------------------------------------


def _record(root: Path, run_id: str, **run_fields) -> Path:
    rec = new_record(run_id, flow="test", task="induction", method="m", seed=0, **run_fields)
    write_metrics(rec, [{"task": "induction", "dataset": "d", "method": "m", "metric": "ari", "value": 0.5,
                         "seed": 0}], root / run_id)
    return write_record(root / run_id, finish_record(rec))


@pytest.fixture
def wh(eventatlas_env):
    w = Warehouse()
    w.migrate()
    return w


def test_queued_run_that_can_no_longer_be_published_is_set_aside_with_a_message(wh, eventatlas_env):
    rec_path = _record(eventatlas_env / "runs", "r")
    rec = json.loads(rec_path.read_text())
    rec["train_steps_path"] = "train_steps.parquet"  # a training log that is not there (any more)
    rec_path.write_text(json.dumps(rec))
    queue_run(wh.path, rec_path, "r", "busy")
    said: list[str] = []
    out = publish_records([], warn=said.append)
    assert out.published == [] and not pending_runs(wh.path)
    assert json.loads((pending_dir(wh.path) / "r.json.bad").read_text())["error"].endswith("does not exist")
    assert len(said) == 1 and said[0].startswith("queued run r set aside")


def test_publish_stores_artifacts_params_and_default_status(wh, eventatlas_env):
    run = {"run_id": "a1", "flow": "f", "params": '{"k": 3}', "data_fingerprints": {"d": "fp"}}
    wh.publish(run, [], [{"kind": "plot/x", "path": Path("/r/x.png"), "rows": 4, "sha256": "ab" * 32},
                         {"kind": "other", "run_id": "a1", "path": "rel/y.txt"}])
    _, rows = wh.query_rows('SELECT run_id, kind, path, "rows", sha256 FROM artifacts ORDER BY kind')
    assert rows == [("a1", "other", "rel/y.txt", None, None), ("a1", "plot/x", "/r/x.png", 4, "ab" * 32)]
    _, r = wh.query_rows("SELECT status, params, data_fingerprints FROM runs")
    assert r == [("completed", '{"k": 3}', '{"d": "fp"}')]  # a JSON string is stored as given


# -- the crawler's HTTP client -----------------------------------------------------------------

API = "https://example.org/w/api.php"


def _client(handler, **kw) -> tuple[PoliteClient, list[float]]:
    slept: list[float] = []
    kw.setdefault("contact", "crawler@example.org")
    return PoliteClient(transport=httpx.MockTransport(handler), sleep=slept.append, **kw), slept


def test_backoff_follows_full_jitter_exactly():
    """uniform(0, min(cap, base * 2**k)) from the seeded RNG, k = 0, 1, 2, ... (the documented formula)."""
    n = {"i": 0}

    def handler(req):
        n["i"] += 1
        return httpx.Response(500) if n["i"] <= 6 else httpx.Response(200, json={"ok": 1})

    c, slept = _client(handler, seed=11, backoff_base=0.5, backoff_cap=10.0, maxlag=None)
    assert c.get_json(API, mediawiki=False) == {"ok": 1}
    rng = random.Random(11)
    assert slept == [rng.uniform(0.0, min(10.0, 0.5 * 2 ** k)) for k in range(6)]


@pytest.mark.parametrize("status", [501, 505, 599])
def test_every_5xx_is_retried(status):
    n = {"i": 0}

    def handler(req):
        n["i"] += 1
        return httpx.Response(status) if n["i"] == 1 else httpx.Response(200, json={"ok": 1})

    c, _ = _client(handler, maxlag=None)
    assert c.get_json(API, mediawiki=False) == {"ok": 1} and n["i"] == 2


def test_giving_up_keeps_the_last_status_and_4xx_is_final():
    c, _ = _client(lambda req: httpx.Response(502), max_attempts=3, maxlag=None)
    with pytest.raises(HttpError) as e:
        c.get_json(API, mediawiki=False)
    assert e.value.status == 502 and e.value.attempts == 3 and "giving up: http 502" in str(e.value)
    n = {"i": 0}

    def forbidden(req):
        n["i"] += 1
        return httpx.Response(403, text="nope")

    c, _ = _client(forbidden, maxlag=None)
    with pytest.raises(HttpError, match=r"HTTP 403: b'nope'") as e:
        c.get_json(API, mediawiki=False)
    assert n["i"] == 1 and e.value.status == 403


def test_mediawiki_requests_ask_for_json_v2_and_api_errors_name_code_and_info():
    seen = []

    def handler(req):
        seen.append(dict(req.url.params))
        return httpx.Response(200, json={"error": {"code": "badtitle", "info": "Bad title \"x\"."}})

    c, _ = _client(handler)
    with pytest.raises(ApiError) as e:
        c.get_json(API, {"action": "query"})
    assert seen == [{"action": "query", "format": "json", "formatversion": "2", "maxlag": "5"}]
    assert (e.value.code, e.value.info) == ("badtitle", 'Bad title "x".')
    assert str(e.value) == f'{API}: API error badtitle: Bad title "x".'


def test_retry_after_in_the_past_means_now():
    past = format_datetime(datetime.now(timezone.utc) - timedelta(minutes=5), usegmt=True)
    assert parse_retry_after(past) == 0.0
    assert parse_retry_after("-3") == 0.0


def test_cache_key_depends_on_method_url_params_and_body_but_not_maxlag_or_order():
    k = cache_key("GET", API, {"a": 1, "b": 2})
    assert k == cache_key("get", API, {"b": 2, "a": 1, "maxlag": 5})
    assert k != cache_key("GET", API, {"a": 1, "b": 3})
    assert k != cache_key("POST", API, {"a": 1, "b": 2})
    assert k != cache_key("GET", API, {"a": 1, "b": 2}, {"q": "x"})
    assert k != cache_key("GET", API + "?x", {"a": 1, "b": 2})


def test_user_agent_names_the_tool_and_the_contact(monkeypatch):
    from eventatlas.wiki.http import VERSION, default_user_agent

    monkeypatch.delenv("EVENTATLAS_CONTACT", raising=False)
    assert default_user_agent("ops@example.org").startswith(f"eventatlas/{VERSION} (ops@example.org; ")
    assert "set EVENTATLAS_CONTACT" in default_user_agent(None)  # says how to fix it


def test_refusal_without_contact_names_the_url(monkeypatch):
    monkeypatch.delenv("EVENTATLAS_CONTACT", raising=False)
    monkeypatch.delenv("EVENTATLAS_USER_AGENT", raising=False)
    c = PoliteClient(transport=httpx.MockTransport(lambda req: httpx.Response(200, json={})))
    with pytest.raises(HttpError, match=rf"^{API}: refusing to crawl without contact") as e:
        c.get_json(API)
    assert e.value.url == API


def test_maxlag_until_giving_up_reports_the_servers_reason():
    body = {"error": {"code": "maxlag", "info": "Waiting for db1: 7 seconds lagged"}}
    c, slept = _client(lambda req: httpx.Response(200, json=body), max_attempts=2, default_retry_after=0.5)
    with pytest.raises(HttpError, match=r"giving up: maxlag \(Waiting for db1: 7 seconds lagged\)"):
        c.get_json(API)
    assert slept and max(slept) == pytest.approx(0.5, abs=0.01)  # the default wait, through the shared gate


def test_publish_records_lands_logs_artifacts_statuses_and_calls_back(wh, eventatlas_env):
    from eventatlas.tracking.records import attach_train_logs
    from eventatlas.tracking.tables import TRAIN_EVALS_SCHEMA

    root = eventatlas_env / "runs"
    rec = new_record("s1", flow="test", task="induction", method="m", seed=0)
    (root / "s1").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"step": 5, "epoch": 1, "metric": "silhouette", "value": 0.25}],
                                        schema=TRAIN_EVALS_SCHEMA), root / "s1" / "train_evals.parquet")
    attach_train_logs(rec, root / "s1")
    rec["artifacts"] = [{"kind": "model", "path": "model", "rows": None, "sha256": None}]
    skipped = write_record(root / "s1", finish_record(rec, status="skipped", error="not applicable"))
    seen = []
    out = publish_records([skipped], on_record=lambda r, rows: seen.append((r["run"]["run_id"], rows)))
    assert out.skipped == ["s1"] and out.published == [] and seen == [("s1", [])]
    d = out.as_dict()
    assert d["skipped"] == ["s1"] and d["metric_rows"] == 0 and d["published"] == [] and d["warehouse"] == str(wh.path)
    _, ev = wh.query_rows("SELECT run_id, step, metric, value FROM train_evals")
    assert ev == [("s1", 5, "silhouette", 0.25)]
    _, arts = wh.query_rows("SELECT kind, path FROM artifacts WHERE run_id = 's1'")
    assert arts == [("model", str(root / "s1" / "model"))]


def test_client_defaults_headers_and_the_no_contact_user_agent(monkeypatch):
    monkeypatch.delenv("EVENTATLAS_CONTACT", raising=False)
    monkeypatch.delenv("EVENTATLAS_USER_AGENT", raising=False)
    seen: list[httpx.Headers] = []
    c, _ = _client(lambda req: seen.append(req.headers) or httpx.Response(200, json={}), maxlag=None)
    c.get_json(API, mediawiki=False)
    assert seen[0]["Accept-Encoding"] == "gzip" and seen[0]["Accept"] == "application/json"
    assert c.timeout == 30.0 and c._client.timeout == httpx.Timeout(30.0)
    anon = PoliteClient()
    assert "(no contact configured; set EVENTATLAS_CONTACT; event-grounding dataset builder)" in anon.user_agent
    anon.close()


def test_503_with_retry_after_waits_that_long_and_the_retry_is_logged(caplog):
    import logging

    n = {"i": 0}

    def handler(req):
        n["i"] += 1
        return httpx.Response(503, headers={"Retry-After": "7"}) if n["i"] == 1 else httpx.Response(200, json={"ok": 1})

    c, slept = _client(handler, maxlag=None)
    with caplog.at_level(logging.INFO, logger="eventatlas.wiki.http"):
        assert c.get_json(API, mediawiki=False) == {"ok": 1}
    assert any(abs(s - 7.0) < 0.5 for s in slept), slept  # the server's wait, not the jittered backoff
    assert f"retrying {API}: http 503" in caplog.messages


def test_a_wait_past_max_retry_after_names_the_url():
    c, _ = _client(lambda req: httpx.Response(429, headers={"Retry-After": "3600"}), maxlag=None, max_retry_after=60)
    with pytest.raises(HttpError) as e:
        c.get_json(API, mediawiki=False)
    assert e.value.url == API and str(e.value).startswith(f"{API}: server asks to wait 3600s")


def test_corrupt_cache_entry_is_logged(tmp_path, caplog):
    import logging

    c, _ = _client(lambda req: httpx.Response(200, json={"n": 1}), maxlag=None, cache_dir=tmp_path / "cache")
    c.get_json(API, {"q": 1}, mediawiki=False)
    (entry,) = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    entry.write_bytes(b"not json")
    with caplog.at_level(logging.WARNING, logger="eventatlas.wiki.http"):
        assert c.get_json(API, {"q": 1}, mediawiki=False) == {"n": 1}
    assert any(m.startswith("corrupt cache entry ") and m.endswith(" removed") for m in caplog.messages)


def test_exchange_swaps_relative_paths_refuses_missing_ones_and_is_off_elsewhere(tmp_path, monkeypatch):
    import errno
    import sys

    from eventatlas import io

    monkeypatch.chdir(tmp_path)
    Path("a").mkdir()
    Path("b").mkdir()
    (Path("a") / "x").write_text("a")
    assert io._exchange(Path("a"), Path("b")) is True  # relative to the working directory (AT_FDCWD)
    assert (tmp_path / "b" / "x").read_text() == "a" and not (tmp_path / "a" / "x").exists()
    with pytest.raises(OSError) as e:
        io._exchange(Path("a"), Path("missing"))
    assert e.value.errno == errno.ENOENT and e.value.strerror == __import__("os").strerror(errno.ENOENT)
    assert e.value.filename == "a" and e.value.filename2 == "missing"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert io._exchange(Path("a"), Path("b")) is False


def test_failed_or_aborted_writer_leaves_no_staging_and_carries_files_by_copy_where_links_fail(tmp_path, monkeypatch):
    from eventatlas import io

    doc = {"doc_id": "d1", "dataset": "ds", "title": "t"}
    with pytest.raises(RuntimeError):
        with DatasetWriter(tmp_path / "ds", "ds", tables=["documents"]) as w:
            w.write("documents", doc)
            raise RuntimeError("reader failed")
    assert not (tmp_path / ".staging").exists() and not (tmp_path / "ds").exists()
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "extra.parquet").write_bytes(b"builder's own file")

    def no_links(*a):
        raise OSError("cross-device link")

    monkeypatch.setattr(io.os, "link", no_links)
    with DatasetWriter(tmp_path / "ds", "ds", tables=["documents"]) as w:
        w.write("documents", doc)
        w.commit()
    assert (tmp_path / "ds" / "extra.parquet").read_bytes() == b"builder's own file"
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == ["documents.parquet", "extra.parquet", "manifest.json"]


def test_clean_staging_reads_dotted_dataset_names(tmp_path):
    import subprocess
    import sys

    from eventatlas import io

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)
    (tmp_path / ".staging" / f"v1.2.{dead}.ab").mkdir(parents=True)
    assert [p.name for p in io.clean_staging(tmp_path / "v1.2")] == [f"v1.2.{dead}.ab"]


@pytest.mark.parametrize("err", ["ENOSYS", "EINVAL", "EOPNOTSUPP"])
def test_a_filesystem_without_the_exchange_falls_back_to_two_renames(tmp_path, monkeypatch, err):
    import errno
    import types

    from eventatlas import io

    fake = types.SimpleNamespace(renameat2=lambda *a: -1)  # the call fails as an unsupporting kernel/fs makes it
    monkeypatch.setattr(io.ctypes, "CDLL", lambda *a, **k: fake)
    monkeypatch.setattr(io.ctypes, "get_errno", lambda: getattr(errno, err))
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "old.txt").write_text("old")
    assert io._exchange(tmp_path / "x", tmp_path / "ds") is False
    new = io.staging_dir(tmp_path / "ds")
    (new / "new.txt").write_text("new")
    io.switch_dir(new, tmp_path / "ds")
    assert [p.name for p in (tmp_path / "ds").iterdir()] == ["new.txt"] and not (tmp_path / ".staging").exists()
