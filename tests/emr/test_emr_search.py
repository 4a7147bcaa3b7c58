"""`eventatlas search` end to end on the self-written EMR sample corpus, and its one-line refusals."""
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.cli import app
from eventatlas.emr.search import SearchError, marked_span, read_examples
from eventatlas.data.ingest import ingest

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "samples" / "emr" / "emr_sample.json"
runner = CliRunner()


@pytest.fixture
def corpus(eventatlas_env):
    ingest("maven_sentences", SAMPLE, out_dir=eventatlas_env / "data" / "datasets" / "emr_sample", dataset="emr_sample")
    return eventatlas_env


def _examples(tmp_path, lines, name="ex.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def test_marked_span():
    assert marked_span("The rebels [stormed] the city.", "f:1") == ("The rebels stormed the city.", 11, 18)
    assert marked_span("A [took over] B", "f:1") == ("A took over B", 2, 11)
    with pytest.raises(SearchError, match=r"f:3: no trigger marked"):
        marked_span("The rebels stormed the city.", "f:3")
    with pytest.raises(SearchError, match="exactly one"):
        marked_span("[a] and [b]", "f:1")


def test_search_ranks_the_examples_kind_first(corpus, tmp_path):
    pq_mentions = pq.read_table(corpus / "data" / "datasets" / "emr_sample" / "mentions.parquet").to_pylist()
    bought = next(m for m in pq_mentions if "brewer" in m["sentence"])
    ex = _examples(tmp_path, ["The conglomerate [bought] a chain of hotels .",
                              {"text": "Google agreed to [acquire] the phone maker ."},
                              {"mention_id": bought["mention_id"]}])
    out = tmp_path / "res.parquet"
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--top", "5", "--output",
                            str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    res = pq.read_table(out).to_pylist()
    assert [x["rank"] for x in res] == [1, 2, 3, 4, 5]
    assert bought["mention_id"] not in {x["mention_id"] for x in res}  # an example is not its own result
    assert all(a["score"] >= b["score"] for a, b in zip(res, res[1:]))
    # the acquisitions come first: at least 4 of the top 5 (7 left in the corpus)
    assert sum(x["labels"] == ["Acquisition"] for x in res) >= 4, [(x["trigger"], x["labels"]) for x in res]
    assert "top 5" in r.output and "Acquisition" in r.output
    # which ranker ranked it, and the matched trigger in plain text (not only in colour)
    assert "ranked by adhoc over the trigger representation of all-MiniLM-L6-v2" in r.output
    assert f"[{res[0]['trigger']}]" in r.output
    # the same search again hits the embedding cache and gives the same ranking; CSV output
    csv = tmp_path / "res.csv"
    r2 = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--top", "5", "-o", str(csv)])
    assert r2.exit_code == 0, r2.output
    lines = csv.read_text().splitlines()
    assert len(lines) == 6 and lines[0].startswith('"rank","score","mention_id"')
    assert [ln.split(",")[2].strip('"') for ln in lines[1:]] == [x["mention_id"] for x in res]


def test_query_examples_on_the_command_line_rank_as_a_file_of_them_does(corpus, tmp_path):
    ex = _examples(tmp_path, ["The conglomerate [bought] a chain of hotels .",
                              "Google agreed to [acquire] the phone maker ."])
    by_file, by_query = tmp_path / "f.parquet", tmp_path / "q.parquet"
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--top", "5", "-o", str(by_file)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--query", "The conglomerate [bought] a chain of hotels .",
                            "-q", "Google agreed to [acquire] the phone maker .", "--top", "5", "-o", str(by_query)],
                      terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "for 2 --query" in r.output
    assert pq.read_table(by_query).to_pylist() == pq.read_table(by_file).to_pylist()
    # file and queries together; a query without its [trigger] and no examples at all are one-line refusals
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "-q", "A firm [purchased] a rival ."])
    assert r.exit_code == 0 and f"for {ex} + 1 --query" in " ".join(r.output.split()), r.output
    for args, msg in ((["-q", "no trigger here"], "--query 1: no trigger marked"),
                      ([], "no examples: give --examples FILE or --query"),
                      (["--examples", str(tmp_path / "absent.jsonl")], "absent.jsonl: examples file not found")):
        r = runner.invoke(app, ["search", "--dataset", "emr_sample", *args], terminal_width=300)
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and msg in r.output, r.output


def test_search_siamese_trains_on_the_examples(corpus, tmp_path):
    ex = _examples(tmp_path, ["Rebels [stormed] the town hall .", "Gunmen [attacked] the embassy ."])
    out = tmp_path / "s.parquet"
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--model", "siamese",
                            "--epochs", "3", "--top", "8", "-o", str(out)])
    assert r.exit_code == 0, r.output
    res = pq.read_table(out).to_pylist()
    assert len(res) == 8 and len({x["mention_id"] for x in res}) == 8


@pytest.mark.parametrize("lines, message", [
    (["The rebels stormed the city ."], "ex.jsonl:1: no trigger marked with [brackets]"),
    (["A [b] c", {"mention_id": "nope"}], "ex.jsonl:2: mention id 'nope' is not in dataset 'emr_sample'"),
    ([{"foo": 1}], "ex.jsonl:1: expected a marked sentence"),
])
def test_bad_examples_get_one_line_errors(corpus, tmp_path, lines, message):
    ex = _examples(tmp_path, lines)
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex)], terminal_width=400)
    assert r.exit_code == 2  # bad input (README: exit 2)
    assert message in r.output and len(r.output.strip().splitlines()) == 1


def test_output_suffix_is_bad_input(eventatlas_env, tmp_path):
    ex = _examples(tmp_path, ["The rebels [stormed] the city ."])
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "-o", str(tmp_path / "r.txt")],
                      terminal_width=400)
    assert r.exit_code == 2 and "give a .csv or .parquet path" in r.output and len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "r.txt").exists()


def test_empty_corpus_and_one_shot_siamese_are_refused(eventatlas_env, tmp_path):
    # a dataset with documents but no mentions (the ingest itself refuses such input; written directly here)
    from eventatlas.io import DatasetWriter

    with DatasetWriter(eventatlas_env / "data" / "datasets" / "empty", "empty") as w:
        w.write("documents", {"dataset": "empty", "doc_id": "1", "sentences": ["Nothing happened ."]})
        w.commit({"reader": "maven_sentences"})
    ex = _examples(tmp_path, ["The rebels [stormed] the city ."])
    r = runner.invoke(app, ["search", "--dataset", "empty", "--examples", str(ex)], terminal_width=400)
    assert r.exit_code == 2 and "has no mentions to search (empty corpus" in r.output
    ingest("maven_sentences", SAMPLE, out_dir=eventatlas_env / "data" / "datasets" / "emr_sample", dataset="emr_sample")
    r = runner.invoke(app, ["search", "--dataset", "emr_sample", "--examples", str(ex), "--model", "siamese"],
                      terminal_width=400)
    assert r.exit_code == 2 and "needs at least 2 examples" in r.output
    r = runner.invoke(app, ["search", "--dataset", "nothere", "--examples", str(ex)], terminal_width=400)
    assert r.exit_code == 2 and "'nothere' is not ingested" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(SearchError, match=r"bad.jsonl:1: not valid JSON"):
        read_examples(bad)
