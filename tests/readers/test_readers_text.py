"""The text reader: a plain corpus (.txt, JSON lines, CSV, Parquet; a directory or zip of those) becomes documents
and sentences with exact character offsets, each bad record a reject with its reason, one document at a time."""
from __future__ import annotations

import json
import tracemalloc
import zipfile
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas import config
from eventatlas.data.ingest import ingest
from eventatlas.data.manifest import KINDS, Manifest
from eventatlas.data.registry import load_registry
from eventatlas.errors import InputError
from eventatlas.io import Rejects, TableWriter
from eventatlas.readers import get_reader, text
from eventatlas.schema import DOCUMENTS, TABLES

NEWS = ("Police closed the M4 near Reading on Monday. A lorry had overturned at 6 a.m., Mr. Hale said.\n\n"
        "Traffic moved again by noon!")


def collect(path, **kw):
    r, st, out = Rejects("t"), {}, defaultdict(list)
    for table, row in text.read(path, rejects=r, stats=st, **kw):
        out[table].append(row)
    return out, r, st


def check_offsets(out) -> None:
    """Every sentence is the document's text at its offsets; every token the sentence's text at its offsets."""
    docs = {d["doc_id"]: d for d in out["documents"]}
    by_doc = defaultdict(list)
    for s in out["sentences"]:
        by_doc[s["doc_id"]].append(s)
        assert docs[s["doc_id"]]["text"][s["start"]:s["end"]] == s["text"]
        assert len(s["token_starts"]) == len(s["token_ends"]) > 0
        for a, b in zip(s["token_starts"], s["token_ends"]):
            assert 0 <= a < b <= len(s["text"]) and not s["text"][a:b].isspace()
    for doc_id, sents in by_doc.items():
        assert [s["sent_idx"] for s in sents] == list(range(len(sents)))
        assert docs[doc_id]["sentences"] == [s["text"] for s in sents]


def reasons(r: Rejects) -> list[tuple[str, str, str]]:
    return [(Path(x["source"]).name, x["location"], x["reason"]) for x in r.rows]


# ----------------------------------------------------------------------------- formats
def test_txt_document_sentences_and_tokens_at_exact_offsets(tmp_path):
    (tmp_path / "m4.txt").write_text(NEWS, encoding="utf-8")
    out, r, st = collect(tmp_path / "m4.txt")
    assert len(r) == 0 and st == {"txt_files": 1, "sentences": 3, "tokens": 29}
    (doc,) = out["documents"]
    assert (doc["doc_id"], doc["text"], doc["language"], doc["title"], doc["source"]) == ("m4.txt", NEWS, "en", None, "m4.txt")
    s = out["sentences"]
    assert [(x["text"], x["start"], x["end"]) for x in s] == [
        ("Police closed the M4 near Reading on Monday.", 0, 44),
        ("A lorry had overturned at 6 a.m., Mr. Hale said.", 45, 93),
        ("Traffic moved again by noon!", 95, 123)]
    second = s[1]
    # syntok keeps an abbreviation's period a token of its own ("Mr", "."), and no sentence ends there
    assert [second["text"][a:b] for a, b in zip(second["token_starts"], second["token_ends"])] == [
        "A", "lorry", "had", "overturned", "at", "6", "a.m", ".", ",", "Mr", ".", "Hale", "said", "."]
    assert second["token_starts"][:3] == [0, 2, 8] and second["token_ends"][:3] == [1, 7, 11]
    check_offsets(out)


def test_jsonl_keeps_title_language_and_date(tmp_path):
    f = tmp_path / "news.jsonl"
    f.write_text("\n".join(json.dumps(d) for d in [
        {"id": "a1", "text": "Rain fell. Rivers rose.", "title": "Storm", "lang": "de", "date": "2026-01-02", "x": 1},
        {"id": 7, "text": "One sentence only."},
        {"text": "No id here. It gets one."}]) + "\n", encoding="utf-8")
    out, r, _ = collect(f)
    assert len(r) == 0
    d = {x["doc_id"]: x for x in out["documents"]}
    assert list(d) == ["a1", "7", "news.jsonl:3"]
    assert (d["a1"]["title"], d["a1"]["language"], json.loads(d["a1"]["extra"])) == ("Storm", "de", {"date": "2026-01-02"})
    assert (d["7"]["language"], d["7"]["extra"], d["a1"]["sentences"]) == ("en", None, ["Rain fell.", "Rivers rose."])
    check_offsets(out)


def test_csv_and_parquet_with_named_columns(tmp_path):
    (tmp_path / "a.csv").write_text('doc,body,title\nd1,"Markets fell. Oil rose.",Prices\n,"Quoted, with a comma.\n'
                                    'And a second line.",\n', encoding="utf-8")
    out, r, _ = collect(tmp_path / "a.csv", text_column="body", id_column="doc")
    assert len(r) == 0 and [d["doc_id"] for d in out["documents"]] == ["d1", "a.csv:2"]
    assert out["documents"][0]["title"] == "Prices" and out["documents"][1]["sentences"] == [
        "Quoted, with a comma.", "And a second line."]
    check_offsets(out)
    pq.write_table(pa.table({"body": ["First one. Second one.", "Third."], "lang": ["fr", None]}), tmp_path / "b.parquet")
    out, r, _ = collect(tmp_path / "b.parquet", text_column="body")
    assert len(r) == 0 and [(d["doc_id"], d["language"]) for d in out["documents"]] == [("b.parquet:1", "fr"),
                                                                                      ("b.parquet:2", "en")]
    check_offsets(out)


def _corpus(root: Path) -> Path:
    (root / "b").mkdir(parents=True)
    (root / "b" / "two.txt").write_text("Second file. Deeper down.", encoding="utf-8")
    (root / "a.txt").write_text("First file.", encoding="utf-8")
    (root / "c.jsonl").write_text('{"id": "j1", "text": "From JSON lines."}\n', encoding="utf-8")
    (root / "notes.md").write_text("not a corpus file", encoding="utf-8")
    (root / ".hidden.txt").write_text("left out", encoding="utf-8")
    return root


def test_directory_is_read_recursively_in_sorted_order(tmp_path):
    out, r, st = collect(_corpus(tmp_path / "corpus"))
    assert len(r) == 0 and [d["doc_id"] for d in out["documents"]] == ["a.txt", "b/two.txt", "j1"]
    assert st["skipped_files"] == 1 and st["txt_files"] == 2 and st["jsonl_files"] == 1
    assert [p.name for p in text.input_paths(tmp_path / "corpus")] == ["a.txt", "two.txt", "c.jsonl"]
    check_offsets(out)


def test_zip_reads_like_the_directory_and_names_members(tmp_path):
    root = _corpus(tmp_path / "corpus")
    z = tmp_path / "corpus.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(root).as_posix())
        zf.writestr("empty.txt", b"  \n")
    out, r, _ = collect(z)
    direct, _, _ = collect(root)
    assert [(d["doc_id"], d["text"]) for d in out["documents"]] == [(d["doc_id"], d["text"]) for d in direct["documents"]]
    assert [(x["source"], x["location"], x["reason"]) for x in r.rows] == [(f"{z}:empty.txt", "-", "empty_document")]
    (tmp_path / "outer").mkdir()
    z.rename(tmp_path / "outer" / "corpus.zip")  # a zip inside a directory counts as a folder
    out, _, _ = collect(tmp_path / "outer")
    assert [d["doc_id"] for d in out["documents"]] == ["corpus.zip/a.txt", "corpus.zip/b/two.txt", "j1"]


# ----------------------------------------------------------------------------- rejects
def test_encodings_accepted_and_refused_with_byte_offsets(tmp_path):
    (tmp_path / "bom8.txt").write_bytes(b"\xef\xbb\xbfCaf\xc3\xa9 opened. Queues formed.")
    (tmp_path / "le16.txt").write_bytes(b"\xff\xfe" + "Grüße aus Köln. Es regnet.".encode("utf-16-le"))
    (tmp_path / "be16.txt").write_bytes(b"\xfe\xff" + "Big endian. Also fine.".encode("utf-16-be"))
    (tmp_path / "latin1.txt").write_bytes("Line one.\nCaf\xe9 au lait.".encode("latin-1"))
    (tmp_path / "nul.txt").write_bytes(b"GIF89a\x01\x00\x00 binary")
    (tmp_path / "empty.txt").write_bytes(b" \n\t\n")
    out, r, _ = collect(tmp_path)
    assert {d["doc_id"]: d["text"] for d in out["documents"]} == {
        "be16.txt": "Big endian. Also fine.", "bom8.txt": "Café opened. Queues formed.",
        "le16.txt": "Grüße aus Köln. Es regnet."}
    assert reasons(r) == [("empty.txt", "-", "empty_document"), ("latin1.txt", "-", "undecodable_text"),
                          ("nul.txt", "-", "binary_file")]
    assert r.rows[1]["detail"] == ("not valid UTF-8 (invalid continuation byte at byte 13); accepted: UTF-8, UTF-8 "
                                   "or UTF-16 with a byte-order mark")
    assert r.rows[2]["detail"] == "NUL byte at byte 7: not text"
    check_offsets(out)


def test_bad_lines_and_rows_are_rejects_and_the_rest_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("EVENTATLAS_MAX_RECORD_BYTES", "200")
    f = tmp_path / "mixed.jsonl"
    f.write_bytes(b'{"id": "ok1", "text": "Fine."}\n'
                  + b'{"id": "big", "text": "' + b"word " * 100 + b'"}\n'
                  + b'{"id": "bad", "text": "caf\xe9"}\n'
                  + b'{"id": "x", "text": \n'
                  + b'[1, 2]\n'
                  + b'{"id": "nt"}\n'
                  + b'{"id": "num", "text": 5}\n'
                  + b'{"id": "ok1", "text": "Again."}\n'
                  + b'{"id": "ok2", "text": ""}\n'
                  + b'{"id": "ok3", "text": "Last one."}\n')
    out, r, _ = collect(f)
    assert [d["doc_id"] for d in out["documents"]] == ["ok1", "ok3"]
    assert [(loc, why) for _, loc, why in reasons(r)] == [
        ("line 2", "oversized_record"), ("line 3", "undecodable_text"), ("line 4", "bad_json"), ("line 5", "bad_record"),
        ("line 6", "missing_field"), ("line 7", "bad_field"), ("line 8", "duplicate_document"), ("line 9", "empty_document")]
    assert f"at byte {f.read_bytes().index(b'caf') + 3})" in r.rows[1]["detail"]  # the offset in the file
    big = tmp_path / "big.txt"
    big.write_text("Too long. " * 30, encoding="utf-8")
    _, r, _ = collect(big)
    assert reasons(r) == [("big.txt", "-", "oversized_record")] and "300 bytes" in r.rows[0]["detail"]


def test_missing_text_column_and_broken_files(tmp_path):
    (tmp_path / "a.csv").write_text("id,body\n1,Some text.\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("id,text\n1,Good row.\n2,too,many\n", encoding="utf-8")
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "c.parquet")
    (tmp_path / "d.parquet").write_bytes(b"PAR1 this is not parquet")
    (tmp_path / "e.jsonl").write_bytes(b"\xff\xfe" + '{"text": "utf-16"}\n'.encode("utf-16-le"))
    out, r, _ = collect(tmp_path)
    assert [d["doc_id"] for d in out["documents"]] == ["1"]
    assert reasons(r) == [("a.csv", "line 1", "missing_field"), ("b.csv", "row 2", "bad_record"),
                          ("c.parquet", "-", "missing_field"), ("d.parquet", "-", "unreadable_file"),
                          ("e.jsonl", "-", "undecodable_text")]
    assert "no column 'text' (columns: id, body); pass text_column=NAME" in r.rows[0]["detail"]


def test_unreadable_input_is_one_input_error(eventatlas_env, tmp_path):
    (tmp_path / "only.md").write_text("x")
    with pytest.raises(InputError, match=r":-: no \.txt, \.jsonl, \.csv, \.parquet or \.zip file under it$"):
        ingest("text", tmp_path, dataset="t", progress=False)
    with pytest.raises(InputError, match=r"only\.md:-: not a \.txt"):
        ingest("text", tmp_path / "only.md", dataset="t", progress=False)
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01\x02")
    with pytest.raises(InputError) as e:  # nothing survives: refused in one line naming the file
        ingest("text", tmp_path, dataset="t", progress=False)
    assert str(e.value).startswith(f"{tmp_path / 'bin.txt'}:-: this does not look like text input: binary_file")
    with pytest.raises(InputError, match="unknown option txt_column for the text reader"):
        ingest("text", tmp_path, dataset="t", progress=False, txt_column="body")
    assert not (config.datasets_dir() / "t").exists()


# ----------------------------------------------------------------------------- memory
def _peak(path: Path) -> tuple[int, int, int]:
    """(documents read, rejects, peak traced bytes) of streaming ``path`` through the reader."""
    r, n = Rejects("t"), 0
    tracemalloc.start()
    try:
        for table, _ in text.read(path, rejects=r):
            n += table == "documents"
        return n, len(r), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reader_holds_one_document_at_a_time(tmp_path, monkeypatch):
    """Peak traced memory grows with the corpus only by the document ids kept for the duplicate check (4x the
    documents: under 5% of the added text), and a line past the cap costs a constant times the cap."""
    monkeypatch.setenv("EVENTATLAS_MAX_RECORD_BYTES", str(1 << 20))
    doc = " ".join(["x" * 199] * 9 + ["x" * 199 + "."]) * 2  # 4 KB, few tokens: cheap to split

    def corpus(name: str, n: int, huge: int = 0) -> Path:
        f = tmp_path / name
        with open(f, "w", encoding="utf-8") as out:
            for i in range(n):
                out.write(json.dumps({"id": i, "text": doc}) + "\n")
            if huge:
                out.write('{"id": "huge", "text": "' + "y" * huge + '"}\n')
        return f

    text.split("Warm up. The splitter's patterns are compiled once.")
    small, large = corpus("small.jsonl", 300), corpus("large.jsonl", 1200)
    (n1, _, p1), (n2, _, p2) = _peak(small), _peak(large)
    assert (n1, n2) == (300, 1200) and large.stat().st_size > 4 << 20
    grown = large.stat().st_size - small.stat().st_size
    assert p2 - p1 < grown / 20 and p1 < small.stat().st_size / 4, (p1, p2)  # what grows is the ids read, not text
    n, rejected, peak = _peak(corpus("huge.jsonl", 10, huge=8 << 20))  # one line of 8 MiB, skipped in pieces
    assert (n, rejected) == (10, 1) and peak < 6 << 20, peak


def test_documents_are_flushed_by_bytes_not_only_rows(tmp_path):
    w = TableWriter(tmp_path / "documents.parquet", DOCUMENTS, batch_bytes=10_000)
    for i in range(20):
        w.write({"dataset": "t", "doc_id": str(i), "text": "z" * 3000, "sentences": ["z" * 3000]})
        assert len(w._buf) <= 2  # ~6 KB a row: written every second row, never the whole corpus
    w.commit()
    assert pq.ParquetFile(tmp_path / "documents.parquet").metadata.num_rows == 20


# ----------------------------------------------------------------------------- registry, kind, warehouse
def test_registry_sample_kind_and_train_all_skip(eventatlas_env):
    from eventatlas.pipelines.train_grid import plan
    from eventatlas.store.warehouse import Warehouse

    entry = load_registry()["text"]
    assert (entry["path"], entry["labels"], entry["download"], entry["dataset"]) == (None, False, None, "text")
    assert get_reader("text") is text and "text" in KINDS and "sentences" in TABLES
    m = ingest("text", config.samples_dir() / entry["sample"], dataset="text_sample", progress=False)
    assert m["rejects"] == {} and m["rows"]["documents"] == 7 and m["rows"]["mentions"] == 0
    man = Manifest.read(config.datasets_dir() / "text_sample")
    assert man.kinds() == frozenset({"text"}) and not man.has_labels()
    brief = next(d for d in pq.read_table(man.table("documents")).to_pylist() if d["doc_id"] == "brief-001")
    assert brief["title"] and json.loads(brief["extra"])["date"] == "2026-03-02"
    check_offsets({"documents": pq.read_table(man.table("documents")).to_pylist(),
                   "sentences": pq.read_table(man.table("sentences")).to_pylist()})
    with pytest.raises(ValueError, match="no dataset under .* apply to"):  # train-all has nothing to run on it
        plan(["untuned"], None, {"text_sample": man})
    wh = Warehouse()
    wh.migrate()
    wh.refresh_views()
    assert wh.query_rows("SELECT count(*), min(sent_idx) FROM sentences")[1] == [(m["rows"]["sentences"], 0)]


def test_cli_ingest_passes_reader_options(eventatlas_env, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from eventatlas.cli import app

    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("key,body\nk1,Ships docked. Cranes worked.\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["ingest", "text", "--path", str(tmp_path / "in"), "--dataset", "mine",
                                 "-o", "text_column=body", "--option", "id_column=key"])
    assert r.exit_code == 0, r.output
    man = Manifest.read(config.datasets_dir() / "mine")
    assert man.rows["sentences"] == 2 and man.options == {"text_column": "body", "id_column": "key"}
    assert pq.read_table(man.table("documents")).column("doc_id").to_pylist() == ["k1"]
    r = CliRunner().invoke(app, ["ingest", "text", "--path", str(tmp_path / "in"), "-o", "dataset=x"])
    assert r.exit_code == 2 and "--option 'dataset=x': expected KEY=VALUE with a reader option" in r.output
