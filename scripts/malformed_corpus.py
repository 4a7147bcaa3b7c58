"""A generated corpus of malformed inputs over every reader, each ingested in its own forked process
(core ingest, the CLI's error mapping), with a summary of how each ended.

    python scripts/malformed_corpus.py [--smoke] [--data-root DIR] [--per-file N] [--json OUT] [--cases]

Inputs are mutations of the shipped samples (datasets/samples/): every JSON leaf kind replaced by a
wrong type (7, "x", [], {}, null), a 5000-digit integer or a 200,000-deep nesting; XML numeric
attributes set to "abc", "-1" or 5000 digits, elements removed; text-format lines with a field
dropped or added, a score made "x" or a 1 MiB token; byte damage (invalid UTF-8, truncation, empty,
a BOM) on every reader's main file; plus hand-written cases (another reader's format, XXE, zip
member traversal, CRC error, truncation, a bomb member, a shrinking version).

Each case ends as one of:
  refused     one-line InputError naming file and line/record (exit 2)
  vague       refused, but located "after N rows" (a wrong-type field refused the whole file)
  rejects     ingested with more counted rejects than the clean sample
  unchanged   ingested, same rows and rejects as the clean sample (the mutated field is not read)
  changed     ingested, other rows, rejects counted where rows were lost
  silent_loss ingested with fewer rows and no more rejects than the clean sample
  traceback   any other exception (exit 1, internal failure)
  damage      the previous version changed by a refused ingest, or temp/staging files left behind
The summary also reports the largest peak RSS of a case (the forked child's own maximum, which
includes the parent's resident pages it inherits; the baseline is printed beside it).
``--smoke``: one case a reader, seconds. Inputs and datasets go under ``<data root>/scratch/`` (a temporary
data root unless ``--data-root`` names one: the script never writes into the repository or the user's data).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shutil
import sys
import tempfile
import traceback
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from eventatlas import config  # noqa: E402
from eventatlas.data.registry import load_registry  # noqa: E402
from eventatlas.store import benchmarking  # noqa: E402

S = config.samples_dir()
HUGE, DEEP = "__HUGE_INT__", "__DEEP_NEST__"
DEEP_N = 200_000
WRONG: list[Any] = [7, "x", [], {}, None, HUGE, DEEP]
WRONG_FOR_CONTAINER = [7, "x", HUGE, DEEP]  # an empty list/dict/null in place of a list is no data, not bad data

# reader -> (sample directory or file, the files in it that hold records, their format)
JSON_READERS = {
    "maven": ("maven", ["train.jsonl", "valid.jsonl"], "jsonl"),
    "maven_fewshot": ("maven_fewshot", ["dev.json", "event_split.json"], "json"),
    "maven_sentences": ("maven_sentences", ["maven_sentences_sample.json"], "json"),
    "ontoevent": ("ontoevent", ["event_relation.json"], "json"),
    "wikievents": ("wikievents", ["dev.jsonl", "meta.json"], "jsonl"),
    "framenet_jsonl": ("framenet_jsonl", ["fulltext_sample_dev.jsonl"], "jsonl"),
}
TEXT_READERS = {
    "event_tuples": ("event_tuples", "tuples_sample.txt"),
    "hard_similarity": ("event_similarity/hard_similarity", "hard_sim_sample.txt"),
    "transitive_similarity": ("event_similarity/transitive_similarity", "transitive_sample.txt"),
    "mcnc": ("event_similarity/mcnc", "cmcnc_sample.txt"),
}
XML_READERS = {"ace2005": ("ace2005", "*.apf.xml"), "framenet": ("framenet", "*.xml")}


def _leaves(obj: Any, path: tuple = ()) -> Iterator[tuple]:
    """Paths to every value (containers too, so a list can become a string)."""
    if path:
        yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))


def _wrong(obj: Any, path: tuple) -> list[Any]:
    for k in path:
        obj = obj[k]
    return WRONG_FOR_CONTAINER if isinstance(obj, (list, dict)) else WRONG


def _set(obj: Any, path: tuple, value: Any) -> Any:
    obj = copy.deepcopy(obj)
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return obj


def _dump(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    return text.replace(f'"{HUGE}"', "9" * 5000).replace(f'"{DEEP}"', "[" * DEEP_N + "]" * DEEP_N)


def _spread(items: list, n: int) -> list:
    """``n`` items spread evenly over ``items`` (deterministic)."""
    if len(items) <= n:
        return items
    return [items[round(i * (len(items) - 1) / max(1, n - 1))] for i in range(n)]


def _copy_sample(rel: str, dest: Path) -> Path:
    src = S / rel
    if src.is_dir():
        shutil.copytree(src, dest)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    return dest


def cases(work: Path, per_file: int, per_reader: int | None = None) -> Iterator[tuple[str, str, Path]]:
    """(label, reader, input path) for every generated case; ``per_reader``: at most that many a reader
    (inputs are only written for the cases kept), and no hand-written cases."""
    n = 0
    taken: Counter = Counter()

    def want(reader: str) -> bool:
        taken[reader] += 1
        return per_reader is None or taken[reader] <= per_reader

    def fresh(rel: str) -> Path:
        nonlocal n
        n += 1
        return _copy_sample(rel, work / f"c{n:04d}")

    for reader, (rel, files, fmt) in JSON_READERS.items():
        for fname in files:
            text = (S / rel / fname).read_text(encoding="utf-8")
            if fmt == "jsonl" and fname.endswith(".jsonl"):
                lines = text.splitlines()
                records = [(i, json.loads(x)) for i, x in enumerate(lines) if x.strip()]
                sites = [(i, p) for i, rec in records[:2] for p in _leaves(rec)]
                for (li, p), wrong in ((s, w) for s in _spread(sites, per_file) for w in _wrong(dict(records)[s[0]], s[1])):
                    if not want(reader):
                        continue
                    d = fresh(rel)
                    new = list(lines)
                    new[li] = _dump(_set(dict(records)[li], p, wrong))
                    (d / fname).write_text("\n".join(new) + "\n", encoding="utf-8")
                    yield f"{fname} line {li + 1} {'/'.join(map(str, p))} = {str(wrong)[:12]}", reader, d
            else:
                obj = json.loads(text)
                for p, wrong in ((s, w) for s in _spread(list(_leaves(obj)), per_file) for w in _wrong(obj, s)):
                    if not want(reader):
                        continue
                    d = fresh(rel)
                    (d / fname).write_text(_dump(_set(obj, p, wrong)), encoding="utf-8")
                    yield f"{fname} {'/'.join(map(str, p))} = {str(wrong)[:12]}", reader, d
    for reader, (rel, fname) in TEXT_READERS.items():
        lines = (S / rel / fname).read_text(encoding="utf-8").splitlines()
        sep = " | " if " | " in lines[0] else (" <TUP> " if "<TUP>" in lines[0] else ("|" if "|" in lines[0] else " "))
        # a tuple file's "field" is a word of its last tuple (dropping a whole tuple is less data, not bad data)
        drop = (lambda f: f[:-1] + [f[-1].rsplit(" ", 1)[0]]) if sep == " <TUP> " else (lambda f: f[:-1])
        muts = {"field dropped": drop, "field added": lambda f: f + ["extra"],
                "last field x": lambda f: f[:-1] + ["x"], "last field 5000 digits": lambda f: f[:-1] + ["9" * 5000],
                "first field 1 MiB": lambda f: ["a" * (1 << 20)] + f[1:], "empty fields": lambda f: [""] * len(f)}
        for li in _spread(list(range(len(lines))), max(1, per_file // 2)):
            for what, fn in muts.items():
                if not want(reader):
                    continue
                d = fresh(rel)
                new = list(lines)
                new[li] = sep.join(fn(lines[li].split(sep)))
                (d / fname).write_text("\n".join(new) + "\n", encoding="utf-8")
                yield f"{fname} line {li + 1} {what}", reader, d
    for reader, (rel, glob) in XML_READERS.items():
        import re

        for fpath in _spread(sorted((S / rel).rglob(glob)), max(1, per_file // 2)):
            sub = fpath.relative_to(S / rel)
            text = fpath.read_text(encoding="utf-8")
            attrs = _spread([m for m in re.finditer(r' (START|END|start|end|ID)="(\d+)"', text)], per_file)
            for m in attrs:
                for bad in ("abc", "-1", "9" * 5000, ""):
                    if not want(reader):
                        continue
                    d = fresh(rel)
                    (d / sub).write_text(text[: m.start(2)] + bad + text[m.end(2):], encoding="utf-8")
                    yield f"{sub} {m.group(1)}={bad[:8]!r} at {m.start()}", reader, d
            elems = _spread([m for m in re.finditer(r"<(charseq|label|anchor|text|definition)\b", text)], per_file)
            for m in elems:
                if not want(reader):
                    continue
                d = fresh(rel)
                (d / sub).write_text(text[: m.start()] + "<!-- cut -->" + text[m.start():].replace(f"<{m.group(1)}", "<removed", 1)
                                     .replace(f"</{m.group(1)}>", "</removed>", 1), encoding="utf-8")
                yield f"{sub} <{m.group(1)}> at {m.start()} renamed", reader, d
    # byte damage on each reader's main file
    main = {r: (rel, files[0]) for r, (rel, files, _) in JSON_READERS.items()}
    main |= {r: v for r, v in TEXT_READERS.items()}
    main["ace2005"] = ("ace2005", str(next((S / "ace2005").rglob("*.apf.xml")).relative_to(S / "ace2005")))
    main["framenet"] = ("framenet", "frame/Attack.xml")
    for reader, (rel, fname) in main.items():
        raw = (S / rel / fname).read_bytes()
        for what, data in (("invalid UTF-8 byte", raw[: len(raw) // 2] + b"\xff\xfe" + raw[len(raw) // 2:]),
                           ("truncated at half", raw[: len(raw) // 2]), ("empty file", b""),
                           ("UTF-8 BOM", b"\xef\xbb\xbf" + raw)):
            if not want(reader):
                continue
            d = fresh(rel)
            (d / fname).write_bytes(data)
            yield f"{fname} {what}", reader, d
    yield from text_corpus_cases(fresh, want)
    if per_reader is None:
        yield from handwritten_cases(work / "handwritten")


def text_corpus_cases(fresh: Any, want: Any) -> Iterator[tuple[str, str, Path]]:
    """The plain-text reader on a copy of its sample corpus (datasets/samples/text) with one file damaged or
    one added: empty, binary, a line over the record cap, other encodings, bad JSON lines, a CSV without its
    text column, a zip with a traversal member."""
    brief = (S / "text" / "briefs.jsonl").read_text(encoding="utf-8").splitlines()
    cap = int(os.environ.get("EVENTATLAS_MAX_RECORD_BYTES", 64 << 20))
    latin = "Grève des dockers à Saint-Nazaire: le trafic reprend lundi, selon la capitainerie.\n"
    changes: dict[str, tuple[str, bytes | None]] = {
        "harbour_fire.txt emptied": ("harbour_fire.txt", b""),
        "a binary file named .txt": ("photo.txt", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64),
        "a line over the record cap": ("huge.txt", b"word " * (cap // 5 + 2)),
        "a Latin-1 file": ("latin1.txt", latin.encode("latin-1")),
        "a UTF-16 file with its BOM": ("utf16.txt", latin.encode("utf-16")),
        "an invalid byte mid-file": ("rail_strike.txt", (S / "text" / "rail_strike.txt").read_bytes()[:40] + b"\xff"
                                     + (S / "text" / "rail_strike.txt").read_bytes()[40:]),
        "a JSON line that is a list": ("briefs.jsonl", "\n".join(brief[:1] + ["[1, 2]"] + brief[1:]).encode()),
        "a JSON line without text": ("briefs.jsonl", "\n".join(brief[:1] + ['{"id": "x"}'] + brief[1:]).encode()),
        "a JSON line whose text is a number": ("briefs.jsonl", "\n".join(brief[:1] + ['{"id": "x", "text": 7}']
                                                                         + brief[1:]).encode()),
        "a JSON line cut in half": ("briefs.jsonl", "\n".join(brief[:1] + [brief[1][: len(brief[1]) // 2]]
                                                               + brief[2:]).encode()),
        "a CSV without the text column": ("notes.csv", b"id,body\n1,Flooding closed the ring road.\n"),
        "a file named .txt in another encoding and a NUL": ("mixed.txt", "caf\u00e9\x00".encode("utf-8")),
    }
    for what, (fname, data) in changes.items():
        if not want("text"):
            continue
        d = fresh("text")
        (d / fname).write_bytes(data)
        yield f"text corpus: {what}", "text", d
    if want("text"):
        d = fresh("text")
        with zipfile.ZipFile(d / "corpus.zip", "w") as zf:
            zf.writestr("../../escape.txt", "The river burst its banks overnight.")
            zf.writestr("inside.txt", "Crews cleared the debris by noon.")
        yield "text corpus: a zip with a ../ member", "text", d


def _fn_zip(path: Path, extra: dict[str, bytes] | None = None, stored: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((S / "framenet").rglob("*.xml")):
            zf.write(p, "framenet/" + str(p.relative_to(S / "framenet")))
        for k, v in (extra or {}).items():
            zf.writestr(k, v)
    return path


def handwritten_cases(w: Path) -> Iterator[tuple[str, str, Path]]:
    """The hand-written cases (empty file, another reader's format, XXE, zip traversal / CRC / truncation / bomb, ...)."""
    def f(name, data):
        p = w / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        return p

    mv = (S / "maven" / "train.jsonl").read_text().splitlines()
    yield "empty train.jsonl", "maven", f("empty/train.jsonl", b"")
    sgm = next((S / "ace2005").rglob("*.sgm"))
    yield "lone .sgm", "ace2005", f("lone/" + sgm.name, sgm.read_bytes())
    yield "WikiEvents JSONL", "maven", S / "wikievents" / "dev.jsonl"
    yield "MAVEN JSONL", "wikievents", S / "maven" / "train.jsonl"
    yield "MAVEN sentence list", "maven", next((S / "maven_sentences").glob("*.json"))
    yield "invalid UTF-8 byte", "maven", f("utf8/train.jsonl", mv[0].encode()[:50] + b"\xff" + mv[0].encode()[50:])
    d = json.loads(mv[0]); d["content"][0]["tokens"] = 7
    yield "tokens: 7 (wrong type)", "maven", f("type/train.jsonl", "\n".join([json.dumps(d)] + mv[1:]))
    yield "same doc id twice", "maven", f("dup/train.jsonl", "\n".join(mv + [mv[0]]))
    yield "1 of 2 docs (shrink)", "maven", f("shrink/train.jsonl", mv[0])
    ace = w / "ace_abc"
    shutil.copytree(S / "ace2005" / "data", ace)
    apf = next(ace.rglob("*.apf.xml"))
    t = apf.read_text(); j = t.index('START="', t.index("<anchor>")) + 7
    apf.write_text(t[:j] + "abc" + t[t.index('"', j):])
    yield 'ACE START="abc"', "ace2005", ace
    fn = w / "fn_x"
    shutil.copytree(S / "framenet", fn)
    ft = next((fn / "fulltext").glob("*.xml"))
    ft.write_text(ft.read_text().replace('start="19" name="Target"', 'start="x" name="Target"', 1))
    yield 'FrameNet start="x"', "framenet", fn
    fx = w / "fn_xxe"
    shutil.copytree(S / "framenet", fx)
    a = fx / "frame" / "Attack.xml"
    a.write_text(a.read_text().replace('<?xml-stylesheet', '<!DOCTYPE f [<!ENTITY x SYSTEM "file:///etc/passwd">]><?xml-stylesheet', 1))
    yield "XXE entity in frame", "framenet", fx
    evil = (S / "framenet" / "frame" / "Attack.xml").read_bytes().replace(b'name="Attack"', b'name="Evil"')
    yield "zip member ../../evil/frame/Evil.xml", "framenet", _fn_zip(w / "evil.zip", {"../../evil/frame/Evil.xml": evil})
    z = _fn_zip(w / "crc.zip", stored=True)
    b = bytearray(z.read_bytes()); b[b.index(b"physically attacks")] ^= 0x20; z.write_bytes(bytes(b))
    yield "zip CRC error", "framenet", z
    z = _fn_zip(w / "trunc.zip"); z.write_bytes(z.read_bytes()[: z.stat().st_size // 2])
    yield "truncated zip", "framenet", z
    yield "zip bomb member (24 MiB zeros)", "framenet", _fn_zip(w / "bomb.zip", {"framenet/frame/Bomb.xml": b"\0" * (24 << 20)})
    yield "a directory for a file reader", "ontoevent", f("adir/x.txt", "x").parent


def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()} if d.is_dir() else {}


def _run_one(reader: str, path: Path, data: Path, previous: Path | None) -> dict:
    """Ingest ``path`` over a copy of the clean sample's version (so the shrink guard and the "previous
    version intact" property are exercised too)."""
    from eventatlas.cli.base import _bad_input_types, error_line
    from eventatlas.data.ingest import ingest

    out = data / "ds"
    if previous is not None:
        shutil.copytree(previous, out)
    before = _snapshot(out)
    try:
        m = ingest(reader, path, out_dir=out, dataset="ds", progress=False)
        rows = {k: v for k, v in m["rows"].items() if k != "rejects"}
        res = {"status": "ok", "rows": sum(rows.values()), "rejects": sum(m["rejects"].values())}
    except BaseException as e:  # noqa: BLE001 - the corpus records how every case ends
        bad = isinstance(e, _bad_input_types())
        res = {"status": "refused" if bad else "traceback", "message": error_line(e) if bad else
               "".join(traceback.format_exception_only(type(e), e)).strip()[:300],
               "previous_intact": _snapshot(out) == before}
    res["stray"] = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.name.endswith((".tmp", ".partial"))
                          or p.name == ".staging")
    return res


def run_forked(reader: str, path: Path, data: Path, previous: Path | None = None) -> dict:
    """One case in a forked child: its result and its own peak RSS (os.wait4 gives the child's rusage)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            res = _run_one(reader, path, data, previous)
        except BaseException as e:  # noqa: BLE001
            res = {"status": "traceback", "message": repr(e)[:300]}
        with os.fdopen(w, "w") as f:
            f.write(json.dumps(res))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status, usage = os.wait4(pid, 0)
    res = json.loads(text) if text else {"status": "traceback", "message": f"child died (wait status {status})"}
    res["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    return res


def classify(res: dict, base: dict) -> str:
    if res.get("stray") or res.get("previous_intact") is False:
        return "damage"
    if res["status"] == "refused":
        return "vague" if " rows: unexpected input structure" in res["message"] or ":after " in res["message"] else "refused"
    if res["status"] != "ok":
        return "traceback"
    if res["rejects"] > base["rejects"]:
        return "rejects"
    if res["rows"] == base["rows"] and res["rejects"] == base["rejects"]:
        return "unchanged"
    return "silent_loss" if res["rows"] < base["rows"] else "changed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-file", type=int, default=6, help="mutation sites per file (default 6)")
    ap.add_argument("--json", type=Path, default=None, help="also write every case's result as JSON")
    ap.add_argument("--cases", action="store_true", help="print one line per case that did not end well")
    a = benchmarking.parse_args(ap, argv, publish=False, smoke={"per_file": 1})
    tmp = Path(tempfile.mkdtemp(prefix="malformed-corpus-", dir=benchmarking.scratch_dir(a, "malformed_corpus")))
    per_file = a.per_file
    try:
        import eventatlas.data.ingest  # noqa: F401 - imported once in the parent; the children fork from it

        base_rss = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        reg = load_registry()
        bases: dict[str, dict] = {}
        results = []
        all_cases = list(cases(tmp / "inputs", per_file, 1 if a.smoke else None))  # smoke: one case a reader
        for i, (label, reader, path) in enumerate(all_cases):
            if reader not in bases:
                bases[reader] = run_forked(reader, S / reg[reader]["sample"], tmp / "base" / reader)
            res = run_forked(reader, path, tmp / "runs" / str(i), tmp / "base" / reader / "ds")
            res.update(label=label, reader=reader, outcome=classify(res, bases[reader]))
            results.append(res)
            shutil.rmtree(tmp / "runs" / str(i), ignore_errors=True)
        counts = Counter(r["outcome"] for r in results)
        per_reader = {rd: dict(Counter(r["outcome"] for r in results if r["reader"] == rd)) for rd in sorted(bases)}
        worst = max(results, key=lambda r: r["peak_rss_mb"])
        summary = {"cases": len(results), "readers": len(bases), "outcomes": dict(sorted(counts.items())),
                   "peak_rss_mb_max": worst["peak_rss_mb"], "peak_rss_case": f"{worst['reader']}: {worst['label']}",
                   "parent_rss_mb": base_rss}
        if a.cases:
            for r in results:
                if r["outcome"] in ("vague", "traceback", "silent_loss", "damage"):
                    print(f"{r['outcome']:11} {r['reader']:16} {r['label'][:70]:70} {r.get('message', '')[:160]}")
        for rd, c in per_reader.items():
            print(f"{rd:22} {json.dumps(c, sort_keys=True)}")
        print(json.dumps(summary, indent=1))
        if a.json:
            a.json.write_text(json.dumps({"summary": summary, "cases": results}, indent=1))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
