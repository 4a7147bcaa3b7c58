"""Zip archives: traversal members refused, members streamed under caps, damage named."""
from __future__ import annotations

import tracemalloc
import zipfile
from pathlib import Path

import pytest

from eventatlas import config
from eventatlas.data.ingest import ingest
from eventatlas.errors import InputError
from eventatlas.readers._zip import SafeZip, unsafe_member

FN = config.samples_dir() / "framenet"


def _release_zip(path: Path, extra: dict[str, bytes] | None = None, compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for p in sorted(FN.rglob("*.xml")):
            zf.write(p, "framenet/" + str(p.relative_to(FN)))
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return path


def test_unsafe_member_names():
    assert unsafe_member("framenet/frame/Attack.xml") is None
    assert unsafe_member("../../evil/frame/Evil.xml") == "'..' in path"
    assert unsafe_member("framenet/../x.xml") == "'..' in path"
    assert unsafe_member("/etc/frame/Evil.xml") == "absolute path"
    assert unsafe_member("C:/frame/Evil.xml") == "absolute path"
    assert unsafe_member("a..b/frame.xml") is None  # dots inside a name are fine


@pytest.mark.parametrize("member", ["../../evil/frame/Evil.xml", "/abs/frame/Evil.xml"])
def test_traversal_member_refused_naming_archive_and_member(eventatlas_env, tmp_path, member):
    evil = (FN / "frame" / "Attack.xml").read_bytes().replace(b'name="Attack"', b'name="Evil"')
    z = _release_zip(tmp_path / "fn.zip", {member: evil})
    with pytest.raises(InputError) as e:
        ingest("framenet", z, dataset="fn_evil", progress=False)
    assert str(e.value).startswith(f"{z}:member {member!r}: refused archive member")
    assert not (config.datasets_dir() / "fn_evil").exists()


def test_clean_zip_still_ingests(eventatlas_env, tmp_path):
    m = ingest("framenet", _release_zip(tmp_path / "fn.zip"), dataset="fn", progress=False)
    assert m["rows"]["event_types"] == 5 and m["rows"]["mentions"] == 4


def test_expansion_ratio_and_size_caps(tmp_path):
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("framenet/frame/Bomb.xml", b"\0" * (24 << 20))  # 24 MiB of zeros -> ~24 KiB compressed
    with SafeZip(z) as s, pytest.raises(InputError, match=r"bomb\.zip:member 'framenet/frame/Bomb\.xml': member expands to over"):
        s.read("framenet/frame/Bomb.xml")
    with SafeZip(z, max_ratio=10_000, max_bytes=4 << 20) as s, pytest.raises(InputError, match="caps: 4194304 bytes"):
        s.read("framenet/frame/Bomb.xml")
    with SafeZip(z, max_ratio=10_000, max_bytes=64 << 20) as s:
        assert len(s.read("framenet/frame/Bomb.xml")) == 24 << 20  # a trusted archive with raised caps reads


def test_lying_header_is_streamed_and_capped(tmp_path):
    """A member whose header claims a small size (to pass the cap check) is inflated only to that size and
    then fails its CRC: the archive is called damaged and memory stays bounded."""
    z = tmp_path / "liar.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("framenet/frame/Big.xml", b"\0" * (32 << 20))
    s = SafeZip(z, max_ratio=1e9, max_bytes=2 << 20)
    s._infos["framenet/frame/Big.xml"].file_size = 100  # as a forged central directory would say
    tracemalloc.start()
    with pytest.raises(InputError, match=r"liar\.zip:member 'framenet/frame/Big\.xml': damaged zip archive"):
        s.read("framenet/frame/Big.xml")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    s.close()
    assert peak < 8 << 20, peak  # never the whole 32 MiB member


def test_crc_error_names_archive(eventatlas_env, tmp_path):
    z = _release_zip(tmp_path / "fn.zip", compression=zipfile.ZIP_STORED)
    data = bytearray(z.read_bytes())
    i = data.index(b"physically attacks")
    data[i] ^= 0x20  # flip one stored byte: the CRC no longer matches
    z.write_bytes(bytes(data))
    with pytest.raises(InputError) as e:
        ingest("framenet", z, dataset="fn", progress=False)
    assert str(e.value).startswith(f"{z}:member 'framenet/frame/Attack.xml': damaged zip archive (Bad CRC-32")


def test_truncated_zip_is_called_damaged(eventatlas_env, tmp_path):
    z = _release_zip(tmp_path / "fn.zip")
    z.write_bytes(z.read_bytes()[: z.stat().st_size // 2])
    with pytest.raises(InputError, match=rf"^{z}:-: damaged zip archive \(File is not a zip file\)"):
        ingest("framenet", z, dataset="fn", progress=False)
    d = tmp_path / "rel"  # a damaged frame.zip inside a release directory names that zip
    d.mkdir()
    (d / "frame.zip").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(InputError, match=r"frame\.zip:-: damaged zip archive"):
        ingest("framenet", d, dataset="fn2", progress=False)
