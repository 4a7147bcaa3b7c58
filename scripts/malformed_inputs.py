"""Rerun the issue-16 table of malformed inputs against the readers (core ingest + the CLI's error
mapping, no Prefect server): input, reader, exit code, message, partial output, previous version
intact, rejects. ``python scripts/malformed_inputs.py [workdir]`` prints a Markdown table; ``--smoke`` runs
the first four cases in a temporary directory."""
from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from eventatlas import benchmarking, config  # noqa: E402
from eventatlas.cli import _bad_input_types, error_line  # noqa: E402
from eventatlas.ingest import ingest  # noqa: E402

S = config.samples_dir()


def _fn_zip(path: Path, extra: dict[str, bytes] | None = None, stored: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as zf:
        for p in sorted((S / "framenet").rglob("*.xml")):
            zf.write(p, "framenet/" + str(p.relative_to(S / "framenet")))
        for k, v in (extra or {}).items():
            zf.writestr(k, v)
    return path


def cases(w: Path):
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


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", nargs="?", type=Path, help="where the inputs and datasets go (default: a new temp dir)")
    a = benchmarking.parse_args(ap, argv, publish=False)
    work = a.workdir or (benchmarking.scratch_dir(a, "malformed_inputs") if a.smoke
                         else Path(tempfile.mkdtemp(prefix="malformed-")))
    data = work / "datasets"
    print("| input | reader | exit | message | partial output | previous intact | rejects |")
    print("|---|---|---|---|---|---|---|")
    for label, reader, path in itertools.islice(cases(work / "inputs"), 4 if a.smoke else None):
        ds = f"prev_{reader}"
        out = data / ds
        if not out.exists():
            ingest(reader, S / __import__("eventatlas.registry", fromlist=["x"]).load_registry()[reader]["sample"],
                   out_dir=out, dataset=ds, progress=False)
        before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
        try:
            m = ingest(reader, path, out_dir=out, dataset=ds, progress=False)
            code, msg, rej = 0, "", json.dumps(m["rejects"])
            intact = "replaced (accepted)"
        except Exception as e:  # noqa: BLE001 - the table records what the CLI would do
            code = 2 if isinstance(e, _bad_input_types()) else 1
            msg, rej = "error: " + error_line(e).replace(str(work) + "/", ""), "-"
            after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
            intact = "yes" if after == before else "NO"
        partial = [p.name for p in out.glob(".*.tmp")]
        msg = msg.replace("|", "\\|")
        print(f"| {label} | {reader} | {code} | {msg[:230]}{'...' if len(msg) > 230 else ''} | {partial or 'none'} | {intact} | {rej} |")
        if code == 0:  # put the good version back for the next case of this reader
            shutil.rmtree(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
