"""``specverify models`` against a hostile user: usage errors are one line on stderr,
exit 2, within 5 s; a full disk under --out loses nothing; a suffixless train-head --out is refused
before training; a broken head file, an unreachable hub and a bad source are one clear line; the
human table fits in 100 columns (``specverify.common.tables``)."""

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import pytest

INSTALL = "pip install -e '.[models]'"
torch = pytest.importorskip("torch", reason=f"the real-model stage needs torch: {INSTALL}")
pytest.importorskip("transformers", reason=f"the real-model stage needs transformers: {INSTALL}")
pytestmark = pytest.mark.usefixtures("one_thread")

from specverify.common import tables  # noqa: E402
from specverify.models import __main__ as cli  # noqa: E402
from specverify.models import loading, measure, measure_report, medusa, medusa_files  # noqa: E402

TINY_RUN = [
    "--tiny",
    "--workload",
    "edit",
    "--mode",
    "greedy",
    "--max-new-tokens",
    "8",
    "--n-prompts",
    "1",
    "--repeats",
    "2",
]


def run_main(argv):
    """(exit code, seconds) of ``main(argv)``; a usage error's SystemExit is its code."""
    start = time.perf_counter()
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, time.perf_counter() - start


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------------- usage errors


USAGE_CASES = {
    "bad subcommand": (["bogus"], "invalid choice: 'bogus'"),
    "bad option": (["measure", "--bogus"], "unrecognized arguments: --bogus"),
    "no --out of train-head": (["train-head", "--tiny"], "--out"),
    "bad count": (["measure", "--tiny", "--k", "0"], "argument --k: must be >= 1"),
    "--out in a missing folder": (["measure", "--tiny", "--out", "{tmp}/missing/x.json"], "argument --out: folder"),
    "--out a folder": (["measure", "--tiny", "--out", "{tmp}"], "argument --out: "),
    "--out a device": (["measure", "--tiny", "--out", "/dev/full"], "argument --out: '/dev/full' is a device"),
    "train-head --out without suffix": (
        ["train-head", "--tiny", "--out", "{tmp}/myhead"],
        "argument --out: '{tmp}/myhead' has no suffix",
    ),
    "train-head --out in a missing folder": (
        ["train-head", "--tiny", "--out", "{tmp}/no/h.pt"],
        "argument --out: folder",
    ),
    "missing --head": (
        ["measure", "--tiny", "--drafter", "medusa", "--head", "{tmp}/nope.pt"],
        "--head: '{tmp}/nope.pt' does not exist",
    ),
    "--out is --head": (
        ["measure", "--tiny", "--drafter", "medusa", "--head", "{tmp}/h.pt", "--out", "{tmp}/h.pt"],
        "--out and --head: both name",
    ),
    "too many prompts": (
        ["measure", "--tiny", "--workload", "edit", "--n-prompts", "9"],
        "--n-prompts: at most 6 built-in edit prompts, got 9",
    ),
    "bad --device": (["measure", "--tiny", "--device", "gpu"], "--device: expected cpu, cuda or cuda:N"),
    "missing local --target": (
        ["measure", "--target", "./no/such/folder", "--draft", "x"],
        "--target: './no/such/folder' is not a local folder",
    ),
    "bad hub id": (["measure", "--target", "bad id!", "--draft", "x"], "--target: 'bad id!' is not a local folder"),
}


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_usage_errors_are_one_line_exit_2_within_5_s(case, tmp_path, capsys):
    argv, expected = USAGE_CASES[case]
    if "/dev/full" in argv and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    (tmp_path / "h.pt").write_bytes(b"")  # an existing --head for "--out is --head"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, seconds = run_main(argv)
    captured = capsys.readouterr()
    assert code == 2
    err = one_line(captured.err)
    assert expected.replace("{tmp}", str(tmp_path)) in err
    assert err.startswith("specverify models")
    assert captured.out == ""
    assert seconds < 5, seconds


def test_usage_error_of_the_command_is_one_line(tmp_path):
    """The whole command (interpreter start and imports included): one line, exit 2."""
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run(
        [sys.executable, "-m", "specverify.models", "train-head", "--tiny", "--out", str(tmp_path / "myhead")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "argument --out:" in one_line(proc.stderr) and "no suffix" in proc.stderr
    assert proc.stdout == ""


def test_a_head_saves_under_any_file_name(pair, tmp_path):
    """torch.save refuses the temporary name ".tmp-XXXX" that a suffixless path gives; save_head
    serialises in memory first, so the library call works for every name."""
    head = medusa.head_for(pair.target, seed=1)
    medusa_files.save_head(head, tmp_path / "myhead")
    loaded = medusa_files.load_head(tmp_path / "myhead", pair.target)
    for name, tensor in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor)
    assert [p.name for p in tmp_path.iterdir()] == ["myhead"]  # no temporary file left


# ---------------------------------------------------------------------------- broken head files


def _broken_heads():
    drop = lambda key: lambda p: {k: v for k, v in p.items() if k != key}  # noqa: E731
    return {
        "no state_dict": (drop("state_dict"), "has no 'state_dict' entry"),
        "no meta": (drop("meta"), "has no 'meta' entry"),
        "no meta, no state_dict": (lambda p: {"format": p["format"]}, "has no 'meta' and no 'state_dict' entry"),
        "meta without hidden_size": (
            lambda p: dict(p, meta={k: v for k, v in p["meta"].items() if k != "hidden_size"}),
            "has no 'hidden_size' in its 'meta' entry",
        ),
        "meta a list": (lambda p: dict(p, meta=[1, 2]), "'meta' entry of type list"),
        "state_dict a list": (lambda p: dict(p, state_dict=[1]), "'state_dict' entry that is not a dict of tensors"),
        "hidden_size zero": (lambda p: dict(p, meta=dict(p["meta"], hidden_size=0)), "bad head metadata"),
    }


@pytest.mark.parametrize("case", sorted(_broken_heads()))
def test_a_head_file_missing_an_entry_is_named(case, pair, tmp_path):
    mutate, expected = _broken_heads()[case]
    good = tmp_path / "good.pt"
    medusa_files.save_head(medusa.head_for(pair.target), good)
    bad = tmp_path / "bad.pt"
    torch.save(mutate(torch.load(good, weights_only=True)), bad)
    with pytest.raises(ValueError) as exc:
        medusa_files.load_head(bad, pair.target)
    message = str(exc.value)
    assert message.startswith(f"path: {str(bad)!r}") and expected in message, message


def test_measure_with_a_head_without_state_dict_is_one_line(pair, tmp_path, capsys):
    good = tmp_path / "good.pt"
    medusa_files.save_head(medusa.head_for(pair.target), good)
    bad = tmp_path / "bad.pt"
    payload = torch.load(good, weights_only=True)
    del payload["state_dict"]
    torch.save(payload, bad)
    code, _ = run_main(["measure", *TINY_RUN, "--drafter", "medusa", "--head", str(bad)])
    captured = capsys.readouterr()
    assert code == 2
    assert f"error: --head: {str(bad)!r} has no 'state_dict' entry" in one_line(captured.err)
    assert captured.out == ""


# ---------------------------------------------------------------------------- an unreachable hub


@pytest.fixture
def closed_hub(monkeypatch, tmp_path):
    """HF_ENDPOINT at a local port nothing listens on (refused at once, no network needed), an
    empty Hugging Face cache, HF_HUB_OFFLINE unset, and no remembered probe."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", loading.ENV_DIR):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setattr(loading, "_PROBED", {})
    return endpoint, port


def test_unreachable_hub_is_one_line_naming_the_argument(closed_hub, capsys):
    endpoint, port = closed_hub
    code, seconds = run_main(["measure", "--device", "cpu", "--target", "no-such-org/x", "--draft", "no-such-org/y"])
    err = one_line(capsys.readouterr().err)
    assert code == 2
    assert (
        "error: --target: no-such-org/x is not a local folder or a cached model, and 127.0.0.1 cannot be reached"
    ) in err
    assert f"127.0.0.1:{port}" in err and endpoint in err
    assert seconds < 5, seconds


def test_unreachable_hub_command_is_quick_and_one_line(closed_hub, tmp_path):
    """The whole command; before, it retried for about a minute and printed 24 lines."""
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"))
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specverify.models",
            "measure",
            "--device",
            "cpu",
            "--target",
            "no-such-org/x",
            "--draft",
            "no-such-org/y",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 2
    assert "--target: no-such-org/x is not a local folder or a cached model" in one_line(proc.stderr)
    assert seconds < 40, seconds  # importing torch and transformers is most of it


def test_offline_means_no_probe(closed_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loading, "hub_unreachable", lambda *a: pytest.fail("probed the hub while offline"))
    with pytest.raises(loading.LoadError) as exc:
        loading.load_tokenizer("no-such-org/x", role="target tokenizer")
    assert exc.value.argument == "target" and "offline" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_local_folder_loads_with_the_hub_unreachable(closed_hub, pair, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "hub_unreachable", lambda *a: pytest.fail("probed the hub for a local folder"))
    pair.draft.save_pretrained(tmp_path / "draft")
    model = loading.load_model(str(tmp_path / "draft"), device="cpu", role="draft")
    assert model.config.num_hidden_layers == pair.draft.config.num_hidden_layers


def test_hub_probe_of_a_closed_port(closed_hub):
    endpoint, port = closed_hub
    assert loading.hub_endpoint() == (endpoint, "127.0.0.1", port)
    why = loading.hub_unreachable(timeout=2.0)
    assert why is not None and why.endswith(f"at 127.0.0.1:{port}")


# ---------------------------------------------------------------------------- --out on a full disk


def _fail_on(path):
    """A stand-in for files.write_atomically that fails with ENOSPC at ``path`` only."""
    real = measure_report.write_atomically

    def write(target, text):
        if os.fspath(target) == os.fspath(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(target))
        return real(target, text)

    return write


def test_full_disk_under_out_keeps_the_measurement(tmp_path, monkeypatch, capsys):
    """A real tiny run: the table is printed before --out is written; the write fails (ENOSPC),
    the JSON is saved to a fallback file named in one stderr line, exit 2."""
    out = tmp_path / "out.json"
    fallback_dir = tmp_path / "tmp"
    fallback_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback_dir))
    monkeypatch.setattr(measure_report, "write_atomically", _fail_on(out))
    code, _ = run_main(["measure", *TINY_RUN, "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    ours = [line for line in captured.err.splitlines() if line.startswith("specverify models")]
    assert len(ours) == 1 and "Traceback" not in captured.err, captured.err  # (transformers may warn too)
    err = ours[0]
    assert f"error: --out: could not write {str(out)!r} (No space left on device); saved to " in err
    assert not out.exists()
    [saved] = fallback_dir.iterdir()
    assert repr(str(saved)) in err and saved.name.startswith("specverify-measure-")
    result = json.loads(saved.read_text())
    assert [r["drafter"] for r in result["rows"]] == ["model", "model k=4"]
    # the human table: readable at 100 columns, no polars frame
    lines = captured.out.splitlines()
    assert lines and all(len(line) <= 100 for line in lines), max(map(len, lines))
    assert "shape:" not in captured.out and "┌" not in captured.out and "│" not in captured.out
    assert lines[0].startswith("pair: tiny-qwen2") and lines[2].split()[:3] == ["workload", "mode", "drafter"]
    assert [line.split()[2] for line in lines if line.startswith("edit")] == ["model", "model"]


def _canned_result():
    rows = []
    for workload in measure.WORKLOADS:
        for mode in ("greedy", "T=0.7"):
            for drafter in [*measure.DRAFTERS, "model k=12", "a-very-long-drafter-name/with-parts"]:
                rows.append(
                    {f: None for f in measure.REQUIRED_FIELDS}
                    | {
                        "workload": workload,
                        "mode": mode,
                        "drafter": drafter,
                        "k": 12,
                        "alpha_predicted": 0.61234,
                        "alpha_measured": float("nan"),
                        "c": 12.345,
                        "tokens_per_pass_measured": 12.5,
                        "speedup_predicted": 123.456,
                        "speedup_measured": 1234.5,
                        "tokens_per_s": 123456.7,
                        "vs_hf_assisted": 12.25,
                        "greedy_identical": mode == "greedy",
                    }
                )
    return {
        "pair": "/a/very/long/local/path/to/some/model/folder/Qwen2.5-Coder-1.5B-Instruct-GGUF/"
        "qwen2.5-coder-1.5b-instruct-q8_0.gguf <- qwen2.5-coder-0.5b-instruct-q8_0.gguf",
        "device": "cuda:0",
        "dtype": "torch.bfloat16",
        "vocab_size": 151665,
        "max_new_tokens": 64,
        "rows": rows,
    }


def test_human_table_fits_100_columns_with_wide_values():
    text = measure_report.human_report(_canned_result())
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), max(map(len, lines))
    assert "shape:" not in text and "a-very-long-" in text and "with-parts" in text
    assert "123456.7" in text and "yes" in text


@pytest.mark.parametrize("json_flag", [False, True])
def test_out_and_fallback_both_failing_still_prints_everything(json_flag, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out.json"
    monkeypatch.setattr(cli, "run_measure", lambda args: _canned_result())
    monkeypatch.setattr(measure_report, "write_atomically", _fail_on(out))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))  # no such folder: the fallback fails
    code, _ = run_main(["measure", "--tiny", "--out", str(out), *(["--json"] if json_flag else [])])
    captured = capsys.readouterr()
    assert code == 2
    err = one_line(captured.err)
    assert f"--out: could not write {str(out)!r} (" in err
    assert "nothing saved" in err and err.startswith("specverify models measure: error: --out:")
    printed = json.loads(captured.out.strip().splitlines()[-1])  # every field, on stdout
    assert printed == measure_report.json_safe(_canned_result())
    assert not out.exists()


def test_out_written_after_printing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out.json"
    monkeypatch.setattr(cli, "run_measure", lambda args: _canned_result())
    code, _ = run_main(["measure", "--tiny", "--json", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    assert json.loads(out.read_text()) == json.loads(captured.out) == measure_report.json_safe(_canned_result())


# ---------------------------------------------------------------------------- specverify.common.tables


def test_tables_render_is_the_mutant_table():
    """``tables.render`` generalises ``mutants.mutant_table.table``; the same cells give the same text."""
    from specverify.mutants import mutant_table, report

    rows = [
        report.Row(
            id=f"round/{'very-long-' * n}mutant-{n}",
            effect="wrong-law",
            status="killed",
            killed_by=",".join(f"detector-{i}" for i in range(n)),
            exact_tv=0.25 if n else None,
            chi2_p_value=None,
            samples_to_detect=None,
            seconds=1.5 * n,
            description="",
            reference="",
        )
        for n in range(6)
    ]
    heads = ("id", "effect", "status", "killed_by", "exact_tv", "seconds")
    cells = [
        (
            r.id,
            r.effect,
            str(r.status),
            r.killed_by.replace(",", ", "),
            "" if r.exact_tv is None else f"{r.exact_tv:.3g}",
            f"{r.seconds:.1f}",
        )
        for r in rows
    ]
    killed_by = len("detector-0,")  # the killed_by column: as wide as its longest word
    for width in (40, 80, 100, 200):
        assert tables.render(
            heads, cells, width, right={4, 5}, shrink=(3,), min_widths={3: killed_by}
        ) == mutant_table.table(rows, width)


def test_tables_wrap_keeps_every_character():
    text = "speedup over target only, per-round / measured"
    pieces = tables.wrap(text, 7)
    assert all(len(p) <= 7 for p in pieces)
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    assert tables.wrap("two\nlines", 10) == ["two", "lines"]
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 heads"):
        tables.render(["a", "b"], [["x"]])
