"""The engines' loader that follows a wheel's own imports (``wheel_import``), the contract a row
checks before its verdict (``engine_contract``, ``vllm_v1``), adapter-error rows and the version
table (``engine_versions``), all offline: fake wheels and tiny fixture functions built here with
the real functions' signatures (vLLM V1's ``rejection_sample`` before and after 0.24.0). No
statistics: every assertion is deterministic (the battery runs at a fixed seed)."""

from __future__ import annotations

import json
import sys
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specverify.engines import loader  # noqa: E402
from specverify.engines.engine_contract import (  # noqa: E402
    AdapterError,
    Feeds,
    check_feeds,
    check_known_answer,
    known_answer_case,
    short_signature,
)
from specverify.engines.engine_row import Built, Engine  # noqa: E402
from specverify.engines.wheel_import import load_following  # noqa: E402

# ----------------------------------------------------------------------------- fake wheels


def make_wheel(dl, package: str, version: str, files: dict) -> None:
    """A wheel ``<package>-<version>-py3-none-any.whl`` in ``dl`` holding ``files`` (path -> text)."""
    dl.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dl / f"{package}-{version}-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


FAKE_ENGINE = {
    "fakeeng/__init__.py": "raise RuntimeError('the top package is never executed')\n",
    "fakeeng/layers/__init__.py": "LAYERS = True\n",
    "fakeeng/layers/helpers.py": "VALUE = 41\n",
    "fakeeng/layers/broken.py": "raise OSError('no GPU driver')\n",
    "fakeeng/distributed/__init__.py": "raise RuntimeError('never executed: stood in by rule')\n",
    "fakeeng/_C.abi3.so": "not a real extension",
    "fakeeng/layers/verify.py": (
        "import not_installed_package_xyz\n"
        "from fakeeng import _C\n"
        "from fakeeng.distributed.state import get_world_group\n"
        "from fakeeng.layers.broken import gpu_kernel\n"
        "from fakeeng.layers.helpers import VALUE\n"
        "from fakeeng.layers import LAYERS\n"
        "class Sampler(get_world_group):\n"
        "    pass\n"
        "def later():\n"
        "    from fakeeng.layers.helpers import VALUE as again\n"
        "    return again + 1\n"
    ),
    "fakeeng/layers/fails.py": "from fakeeng.layers.helpers import VALUE\nraise ValueError('bad\\nsecond line')\n",
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVERIFY_ENGINES_DIR", str(tmp_path))
    return tmp_path


def test_the_loader_follows_the_wheels_imports_and_stands_in_by_rule(cache):
    make_wheel(cache / "dl", "fakeeng", "1.0", FAKE_ENGINE)
    wheel = loader.wheel_file("fakeeng", "1.0", download=False)
    before = set(sys.modules)
    loaded = load_following("fakeeng.layers.verify", "fakeeng", "1.0", wheel)
    mod = loaded.module
    assert (mod.VALUE, mod.LAYERS) == (41, True)  # same-wheel modules and sub-package __init__: real
    assert not mod.gpu_kernel and issubclass(mod.Sampler, mod.get_world_group)  # placeholders pass import
    why = loaded.standins
    assert why["fakeeng._C"].startswith("a compiled extension")
    assert why["fakeeng.distributed"].startswith("distributed machinery")
    assert why["fakeeng.layers.broken"] == "does not run here: OSError: no GPU driver"
    assert why["not_installed_package_xyz"] == "a third-party package not installed here"
    assert "fakeeng.layers.helpers" not in why and "fakeeng.layers.verify" not in why
    assert not {n for n in set(sys.modules) - before if n.startswith(("fakeeng", "not_installed"))}
    with loaded.active():  # an import the engine makes when it runs resolves to the same modules
        assert mod.later() == 42
    assert "fakeeng" not in sys.modules
    words = loaded.standin_words()
    assert "a compiled extension (CUDA code; cannot load here): fakeeng._C;" in words
    assert "does not run here: fakeeng.layers.broken;" in words


def test_only_the_engines_imports_get_stand_ins(cache):
    """Code outside the engine (the standard library's optional imports) still sees ImportError
    while the hook is in place."""
    make_wheel(cache / "dl", "fakeeng", "1.0", FAKE_ENGINE)
    loaded = load_following("fakeeng.layers.verify", "fakeeng", "1.0", loader.wheel_file("fakeeng", "1.0", False))
    with loaded.active(), pytest.raises(ImportError):
        import another_absent_package_xyz  # noqa: F401


def test_the_rows_own_file_failing_is_one_line_naming_it(cache):
    make_wheel(cache / "dl", "fakeeng", "1.0", FAKE_ENGINE)
    with pytest.raises(loader.Unavailable) as info:
        load_following("fakeeng.layers.fails", "fakeeng", "1.0", loader.wheel_file("fakeeng", "1.0", False))
    text = str(info.value)
    assert text == "fakeeng 1.0: fakeeng.layers.fails does not import here: ValueError: bad"
    assert "fakeeng" not in sys.modules and "fakeeng.layers.helpers" not in sys.modules


# ----------------------------------------------------------------------------- fixture functions


def rejection_sample_probs(
    draft_token_ids,
    num_draft_tokens,
    max_spec_len,
    cu_num_draft_tokens,
    draft_probs,
    target_probs,
    bonus_token_ids,
    sampling_metadata,
):
    """vLLM V1's ``rejection_sample`` as it takes probabilities (0.8.5 to 0.15.1), in torch."""
    return rule(draft_token_ids, num_draft_tokens, max_spec_len, draft_probs, target_probs, bonus_token_ids)


def rejection_sample_logits(
    draft_token_ids,
    num_draft_tokens,
    max_spec_len,
    cu_num_draft_tokens,
    draft_probs,
    target_logits,
    bonus_token_ids,
    sampling_metadata,
    synthetic_mode=False,
    synthetic_conditional_rates=None,
    use_fp64_gumbel=False,
    fly_window_size=None,
    fly_entropy_threshold=None,
    fly_entropy_top_k=3,
):
    """vLLM V1's ``rejection_sample`` as it takes logits (0.24.0 on; softmax inside), in torch."""
    probs = target_logits.softmax(dim=-1, dtype=torch.float32)
    return rule(draft_token_ids, num_draft_tokens, max_spec_len, draft_probs, probs, bonus_token_ids)


def rule(ids, counts, k, q, p, bonus):
    """V1's rule in torch: float64 coins (torch.rand), one exponential row per request, accept
    iff q > 0 and p / q >= u, recover argmax(max(p - q, 0) * (1 / E)) at the first rejection."""
    u = torch.rand((ids.shape[0],), dtype=torch.float64)
    noise = torch.empty((len(counts), p.shape[1]), dtype=torch.float32)
    noise.exponential_()
    out = torch.full((len(counts), k + 1), -1, dtype=torch.int32)
    start = 0
    for b, n in enumerate(counts):
        for j in range(n):
            i, x = start + j, int(ids[start + j])
            qx = 1.0 if q is None else float(q[i, x])
            if qx > 0 and float(p[i, x]) / qx >= float(u[i]):
                out[b, j] = x
                continue
            w = torch.clamp(p[i] - (0 if q is None else q[i]), min=0)
            out[b, j] = int(torch.argmax(w * noise[b].reciprocal()))
            break
        else:
            out[b, n] = int(bonus[b, 0])
        start += n
    return out


def fake_module(fn, greedy=0):
    from types import SimpleNamespace

    return SimpleNamespace(rejection_sample=fn, GREEDY_TEMPERATURE=greedy)


def test_the_logits_api_fed_probabilities_is_an_adapter_error():
    """A wrapper that feeds probabilities where the function takes logits is an adapter error
    row's line, from the signature, before any verdict."""
    from specverify.engines.vllm_v1 import contracted_kernel

    with pytest.raises(AdapterError) as info:
        contracted_kernel(
            fake_module(rejection_sample_logits), "vLLM 0.33.0 rejection_sample", quantity="probabilities"
        )
    assert str(info.value) == "vLLM 0.33.0 rejection_sample takes target_logits; this row feeds probabilities"
    with pytest.raises(AdapterError, match="takes target_probs; this row feeds logits"):
        contracted_kernel(fake_module(rejection_sample_probs, -1), "vLLM 0.15.1 rejection_sample", quantity="logits")


def test_the_known_answer_catches_a_wrapper_whose_feeds_lie():
    """A wrapper that states logits but feeds probabilities passes the signature and fails the
    known-answer case: V1 accepts both drafts where the rule accepts one (softmax(one-hot)(x) =
    0.21 >= the coin 0.1)."""
    from specverify.engines.vllm_v1 import v1_feeds, v1_kernel

    module = fake_module(rejection_sample_logits)
    lying = v1_kernel(module, v1_feeds(module, quantity="probabilities"))
    with pytest.raises(AdapterError, match=r"gave tokens \[0, 1, 1\] with 2 accepted, not \[0, 2, -1\] with 1"):
        check_known_answer(lying, "vLLM 0.33.0 rejection_sample")


@pytest.mark.parametrize("fn,greedy", [(rejection_sample_probs, -1), (rejection_sample_logits, 0)])
def test_the_wrapper_adapts_by_contract_and_is_the_rule_row_by_row(fn, greedy):
    """Before and after the logits change, the same wrapper reads the signature, feeds what it
    says, passes the known answer, and gives the token-wise rule's output on random rows."""
    from specverify.engines.vllm_v1 import contracted_kernel
    from specverify.samplers.reference_kernel import reference_kernel

    kernel, feeds = contracted_kernel(fake_module(fn, greedy), "fake rejection_sample")
    assert feeds.quantities[5] == ("logits" if fn is rejection_sample_logits else "probabilities")
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(4), (16, 2)).astype(np.float32)
    p = rng.dirichlet(np.ones(4), (16, 3)).astype(np.float32)
    ids = rng.integers(0, 4, (16, 2))
    u = (rng.integers(1, 2**20, (16, 3)) / 2**20).astype(np.float32)
    p[:, :2] = np.where(np.abs(p[:, :2] / np.maximum(q, 1e-30) - 0.5) < 1e-3, p[:, :2] + 0.01, p[:, :2])
    out, acc = kernel(ids, q, p, u)
    want_out, want_acc = reference_kernel(ids, q, p, u)
    np.testing.assert_array_equal(np.asarray(acc), np.asarray(want_acc))
    np.testing.assert_array_equal(np.asarray(out)[:, :2], np.asarray(want_out)[:, :2])


def test_signature_checks_name_what_is_wrong():
    feeds = Feeds("rejection_sample", {5: "probabilities"}, positional=8, passes=("synthetic_mode",))
    with pytest.raises(AdapterError, match="has no parameter synthetic_mode, which this row passes"):
        check_feeds(rejection_sample_probs, feeds, "vLLM 0.8.5 rejection_sample")
    with pytest.raises(AdapterError, match="requires sampling_metadata, which this row does not feed"):
        check_feeds(rejection_sample_probs, Feeds("rejection_sample", positional=7), "f")
    sentinel = Feeds("rejection_sample", positional=8, temperature_value=0.0, sentinel_value=0.0)
    with pytest.raises(AdapterError, match="treats temperature 0 as greedy; this row feeds temperature 0"):
        check_feeds(rejection_sample_probs, sentinel, "f")
    assert short_signature(rejection_sample_logits).startswith(
        "rejection_sample_logits(8: …, draft_probs, target_logits, …; synthetic_mode"
    )


def test_the_known_answer_case_is_the_rules_answer():
    from specverify.samplers.reference_kernel import reference_kernel

    ids, q, p, u, tokens, accepted = known_answer_case()
    out, acc = reference_kernel(ids, q, p, u)
    assert [int(t) for t in np.asarray(out)[0]] == tokens and int(np.asarray(acc)[0]) == accepted


# ----------------------------------------------------------------------------- rows and versions


def adapter_error_engine(name="fake-adapter"):
    def build(download=True):
        raise AdapterError("fake 1.0 f takes target_logits; this row feeds probabilities")

    return Engine(name, "fake", "1.0", "f", "kernel", "exact", "", build)


def test_an_adapter_error_is_a_row_with_its_line_never_a_verdict():
    from specverify.engines.engine_run import run_engine
    from specverify.engines.engine_table import render_table

    row = run_engine(adapter_error_engine())
    assert row["error"] == "fake-adapter: adapter error: fake 1.0 f takes target_logits; this row feeds probabilities"
    assert (row["verdict"], row["exact"], row["power"], row["expected"]) == ("adapter error", None, None, "exact")
    assert {"engine", "package", "version", "interface"} <= set(row)
    assert "- error: fake-adapter: adapter error" in render_table([row])


SMALL = {"quick": {"base": "quick", "generated": 0, "k_sweep": 2, "batch_sweep": (3,)}}


def versioned_engine(version: str) -> Engine:
    from specverify.samplers.reference_kernel import reference_kernel

    def build(download=True):
        return Built(reference_kernel, None, "", function=rejection_sample_probs)

    return Engine(
        "fake-versions", "fakeeng", version, "f", "kernel", "exact", "", build, SMALL,
        files=("fakeeng/layers/helpers.py",), since="1.0", at=versioned_engine,
    )  # fmt: skip


def test_a_version_table_reuses_the_verdict_of_unchanged_files(cache, capsys):
    from specverify.engines.engine_versions import chosen_versions, render_versions, version_rows

    make_wheel(cache / "dl", "fakeeng", "1.0", FAKE_ENGINE)
    make_wheel(cache / "dl", "fakeeng", "1.1", FAKE_ENGINE)
    make_wheel(cache / "dl", "fakeeng", "2.0", {**FAKE_ENGINE, "fakeeng/layers/helpers.py": "VALUE = 7\n"})
    make_wheel(cache / "dl", "fakeeng", "0.9", FAKE_ENGINE)
    gone = {k: v for k, v in FAKE_ENGINE.items() if k != "fakeeng/layers/helpers.py"}
    make_wheel(cache / "dl", "fakeeng", "4.0", gone)
    engine = versioned_engine("2.0")
    assert chosen_versions(engine, "all", download=False) == ["1.0", "1.1", "2.0", "4.0"]
    rows = version_rows(engine, ["1.0", "1.1", "2.0", "3.0", "4.0"], download=False)
    assert [r["version"] for r in rows] == ["1.0", "1.1", "2.0", "3.0", "4.0"]
    assert rows[4]["verdict"] == "skipped" and rows[4]["skipped"] == (
        "fake-versions: fakeeng 4.0: the wheel has no fakeeng/layers/helpers.py "
        "(the row's verification files: not in this release)"
    )
    assert rows[0]["verdict"] == "exact" and "reused_from" not in rows[0]
    assert rows[1]["reused_from"] == "1.0" and rows[1]["files_hash"] == rows[0]["files_hash"]
    assert rows[1]["cpu_seconds"] < rows[0]["cpu_seconds"]  # the hashing's cost, not 1.0's judgement
    assert rows[1]["command"] == "specverify engines --engine fake-versions --versions 1.1 --budget quick"
    assert rows[2]["files_hash"] != rows[0]["files_hash"] and "reused_from" not in rows[2]
    assert rows[3]["verdict"] == "skipped" and "not cached" in rows[3]["skipped"]
    assert rows[0]["signature"].startswith("rejection_sample_probs(8: …, draft_probs, target_probs")
    table = render_versions(rows)
    assert "verification files unchanged since 1.0: its verdict reused" in table
    lines = table.splitlines()
    assert "rejection_sample_probs(8:" in lines[2] and lines[3].split(" | ")[2] == "same"  # 1.1: unchanged
    saved = cache / "versions.json"
    saved.write_text(json.dumps(rows, default=str))
    from specverify.engines.__main__ import main

    assert main(["--render", str(saved)]) == 0
    assert table in capsys.readouterr().out  # --render prints the version table of saved --versions rows


def test_versions_needs_one_row_with_a_version_table(capsys):
    from specverify.engines.__main__ import main

    assert main(["--versions", "0.8.5"]) == 2
    assert "name exactly one row with --engine" in capsys.readouterr().err
    assert main(["--engine", "vllm-v0-rejection", "--versions", "0.8.5"]) == 2
    assert "is judged at one release only (0.8.5)" in capsys.readouterr().err


def test_every_vllm_v1_row_declares_its_contract_modes_and_versions():
    from specverify.engines import BY_NAME, pins

    v1 = BY_NAME["vllm-v1-rejection"]
    assert v1.version == pins.VLLM[1] and v1.since == pins.VLLM_V1_SINCE
    assert v1.at("0.10.2").version == "0.10.2" and v1.at("0.10.2").name == v1.name
    assert BY_NAME["vllm-v1-fly"].expected == BY_NAME["vllm-v1-synthetic"].expected == "lossy"
    assert all(BY_NAME[n].version == pins.VLLM_V0[1] for n in ("vllm-v0-rejection", "vllm-v0-typical"))


# ----------------------------------------------------------------------------- the real wheel (cached)


def test_vllm_current_wheel_takes_logits_and_the_probabilities_wrapper_is_an_adapter_error():
    """vLLM's current V1 ``rejection_sample``, loaded for real: the wrapper feeds logits as its
    signature says; forcing probabilities is an adapter error naming the release. (The known
    answer on the real kernels runs in the row itself: ``specverify engines``.)"""
    from specverify.engines import pins, vllm_rows
    from specverify.engines.vllm_v1 import contracted_kernel, v1_feeds

    version = pins.VLLM[1]
    if loader.cached_wheel("vllm", version) is None:
        pytest.skip(f"vllm {version} is not cached (specverify engines --engine vllm-v1-rejection fetches it)")
    try:
        loaded = vllm_rows.load_v1_release(version, download=False)
    except loader.Unavailable as exc:
        pytest.skip(str(exc))
    label = f"vLLM {version} rejection_sample"
    assert v1_feeds(loaded.module).quantities[5] == "logits"
    check_feeds(loaded.module.rejection_sample, v1_feeds(loaded.module), label)
    with pytest.raises(AdapterError, match=f"^{label} takes target_logits; this row feeds probabilities$"):
        contracted_kernel(loaded.module, label, "strict", loaded.active, quantity="probabilities")
