"""The version table's release list and its hashing without downloading (``engine_versions``),
offline: a local zip served through a fake range reader stands in for the package index's wheel,
and the index's listing is a dict built here. Deterministic (no statistics)."""

from __future__ import annotations

import io
import os
import zipfile

import pytest

from specverify.engines import engine_versions as ev
from specverify.engines import loader

MEMBER = "fakeeng/v1/sample/rejection_sampler.py"


def wheel_bytes(files: dict) -> bytes:
    """A zip holding ``files`` (path -> bytes), with 1 MiB of incompressible padding stored
    before them, as a wheel's compiled extensions are."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("fakeeng/_C.abi3.so"), os.urandom(1 << 20))
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()


def fake_range(data: bytes, log: list):
    def read_range(start: int, stop: int) -> bytes:
        log.append((start, stop))
        return data[start:stop]

    return read_range


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVERIFY_ENGINES_DIR", str(tmp_path))
    return tmp_path


def test_a_range_file_reads_members_without_the_whole_zip():
    data = wheel_bytes({MEMBER: b"def rejection_sample(): ...\n" * 50})
    log: list = []
    got = ev.zip_members(ev.range_reader(fake_range(data, log), len(data)), (MEMBER, "fakeeng/absent.py"))
    assert got == {MEMBER: b"def rejection_sample(): ...\n" * 50, "fakeeng/absent.py": None}
    fetched = sum(stop - start for start, stop in log)
    assert len(log) <= 6 and fetched < len(data) // 4, (len(log), fetched, len(data))


def serve(monkeypatch, version: str, data: bytes, log: list, filename: str = "fakeeng-{v}-py3-none-any.whl"):
    """The index lists ``data`` as the wheel of fakeeng ``version``; its range reads are logged."""
    entry = {"filename": filename.format(v=version), "url": f"https://index.test/{version}.whl", "size": len(data)}
    monkeypatch.setattr(ev, "index_files", lambda package: {version: [entry]})
    monkeypatch.setattr(ev, "http_range", lambda url: fake_range(data, log))


def test_files_digest_reads_remotely_keeps_the_files_and_matches_the_whole_wheel(cache, monkeypatch):
    data = wheel_bytes({MEMBER: b"v = 1\n"})
    log: list = []
    serve(monkeypatch, "1.0", data, log)
    monkeypatch.setattr(loader, "wheel_file", lambda *a: pytest.fail("the whole wheel was downloaded"))
    remote = ev.files_digest("fakeeng", "1.0", (MEMBER,), download=True)
    assert log and (cache / "src" / "fakeeng-1.0" / MEMBER).read_bytes() == b"v = 1\n"
    log.clear()
    assert ev.files_digest("fakeeng", "1.0", (MEMBER,), download=False) == remote and not log  # kept
    (cache / "dl").mkdir()
    (cache / "dl" / "fakeeng-1.0-py3-none-any.whl").write_bytes(data)
    (cache / "src" / "fakeeng-1.0" / MEMBER).unlink()
    assert ev.files_digest("fakeeng", "1.0", (MEMBER,), download=False) == remote  # from the wheel


def test_files_digest_downloads_the_wheel_when_range_reads_fail(cache, monkeypatch):
    data = wheel_bytes({MEMBER: b"v = 2\n"})
    (cache / "whole").mkdir()
    whole = cache / "whole" / "fakeeng-2.0-py3-none-any.whl"
    whole.write_bytes(data)
    serve(monkeypatch, "2.0", data, [])

    def refused(url):
        def read_range(start, stop):
            raise loader.Unavailable(f"{url}: no range requests (HTTP 200)")

        return read_range

    monkeypatch.setattr(ev, "http_range", refused)
    downloads: list = []
    monkeypatch.setattr(loader, "wheel_file", lambda package, version, download: downloads.append(version) or whole)
    expected = ev.digest_of((MEMBER,), {MEMBER: b"v = 2\n"})
    assert ev.files_digest("fakeeng", "2.0", (MEMBER,), download=True) == expected and downloads == ["2.0"]


def test_pip_choice_takes_the_most_preferred_tag_then_the_highest_build():
    from packaging.tags import sys_tags

    tags = [str(t) for t in sys_tags()]
    best, worse = tags[0], tags[-1]
    files = [
        {"filename": f"fakeeng-1.0-{worse}.whl"},
        {"filename": f"fakeeng-1.0-{best}.whl"},
        {"filename": f"fakeeng-1.0-1-{best}.whl"},
        {"filename": f"fakeeng-1.0-2-{best}.whl", "yanked": True},
        {"filename": "fakeeng-1.0-cp38-abi3-no_such_platform.whl"},
        {"filename": "fakeeng-1.0.tar.gz"},
    ]
    assert ev.pip_choice(files)["filename"] == f"fakeeng-1.0-1-{best}.whl"
    assert ev.pip_choice(files[:1])["filename"] == f"fakeeng-1.0-{worse}.whl"
    assert ev.pip_choice(files[3:]) is None


def test_all_releases_are_final_or_post_releases_never_yanked(monkeypatch):
    listed = ["0.8.4", "0.8.5", "0.8.5.post1", "0.9.0rc1", "0.9.0.dev3", "0.9.0.1", "0.10.0", "0.11.0+cu118"]
    monkeypatch.setattr(ev, "index_versions", lambda package: listed)
    yanked = {"0.10.0": [{"filename": "a.whl", "yanked": True}], "0.9.0.1": [{"filename": "b.whl", "yanked": False}]}
    monkeypatch.setattr(ev, "index_files", lambda package: yanked)
    assert ev.releases("fakeeng", "0.8.5") == ["0.8.5", "0.8.5.post1", "0.9.0.1"]


def test_a_module_the_wheel_lacks_is_one_line_naming_it(cache):
    from specverify.engines.wheel_import import Loaded, load_following

    (cache / "dl").mkdir()
    wheel = cache / "dl" / "fakeeng-3.0-py3-none-any.whl"
    wheel.write_bytes(wheel_bytes({"fakeeng/v1/other.py": b"X = 1\n"}))
    with pytest.raises(loader.Unavailable) as caught:
        load_following("fakeeng.v1.sample.rejection_sampler", "fakeeng", "3.0", wheel)
    assert str(caught.value) == "fakeeng 3.0: the wheel has no module fakeeng.v1.sample.rejection_sampler"
    loaded = Loaded(None, standins={"a.x": "does not run here: OSError: no GPU", "a.y": "does not run here: KeyError: k",
                                    "a.config": "config machinery (a.config: cannot run here)"})  # fmt: skip
    assert loaded.standin_words() == (
        "config machinery (a.config: cannot run here): a.config; does not run here: a.x, a.y"
    )
