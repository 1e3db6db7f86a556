"""specverify.engines without any download: the loader's stand-ins, the probes, the table, and
the round wrappers around the project's reference written in each engine's calling convention
(SGLang's chain kernel, EAGLE-1's and Medusa 0.1's ``evaluate_posterior``, vLLM V1's n-gram
mode).

The wrappers' verdicts run ``TINY`` (the quick round budget on the toy chain, at most 2,000 runs,
seed 0): a false-fail rate of 1e-6 per check (the battery's) on the exact ones, whose laws are
enumerated where the enumerator follows them; a sampled case sees TV 0.15 with probability 0.95.
The wrong wrappers (everything accepted, a reversed target) are caught at seed 0, a fixed seed,
so each verdict is deterministic."""

from __future__ import annotations

import json
import random
import sys
import zipfile
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specverify.adapters.kernels import to_sglang_chain  # noqa: E402
from specverify.engines import (
    ENGINES,
    ONE_MINUS_F32,
    describe_probes,
    kernel_probe,
    loader,
    render_findings,
    render_table,
    round_probe,
    rounds,  # noqa: E402
    run_probes,
)
from specverify.engines.__main__ import main, matches  # noqa: E402
from specverify.interfaces.round import cases as round_cases  # noqa: E402
from specverify.samplers.chain import residual  # noqa: E402
from specverify.surface import api

TINY = replace(
    round_cases.get_budget("quick"), name="tiny", cases=(0,), n_max=2000, engine_vocab=0
)  # 2,000 runs cannot judge a V = 128 case by chi-square


# ----------------------------------------------------------------------------- references


def reference_kernel(draft_ids, draft_probs, target_probs, uniforms):
    """The token-wise rule with explicit uniforms: accept iff q(x) > 0 and u q(x) < p(x); emit by
    inverse CDF of norm(max(p - q, 0)) (p when all are accepted) at the last uniform."""
    ids, q, p, u = (np.asarray(a) for a in (draft_ids, draft_probs, target_probs, uniforms))
    B, k = ids.shape
    out, nacc = np.full((B, k + 1), -1, np.int64), np.zeros(B, np.int64)
    for b in range(B):
        kb, j = int((ids[b] >= 0).sum()), 0
        while j < kb and q[b, j, ids[b, j]] > 0 and u[b, j] * q[b, j, ids[b, j]] < p[b, j, ids[b, j]]:
            out[b, j] = ids[b, j]
            j += 1
        w = residual(p[b, j].astype(np.float64), q[b, j].astype(np.float64)) if j < kb else p[b, j].astype(np.float64)
        c = np.cumsum(w)
        out[b, j] = min(int(np.searchsorted(c, u[b, k] * c[-1], side="right")), len(c) - 1)
        nacc[b] = j
    return out, nacc


def eagle_convention_reference(
    logits, candidates, logits_processor, cart_candidates_prob, op, p_indices, tree_candidates, b_indices
):
    """EAGLE-1's ``evaluate_posterior`` arguments and results, for a chain, with the token-wise
    rule and Python's global ``random`` as EAGLE draws it."""
    k = candidates.shape[1] - 1
    for i in range(1, k + 1):
        p = torch.softmax(logits_processor(None, logits[0, i - 1][None])[0], dim=0)
        x = int(candidates[0, i])
        q = float(cart_candidates_prob[0, i])
        if not (q > 0 and random.random() < float(p[x]) / q):
            r = torch.from_numpy(residual(p.numpy(), op[i - 1][0].numpy()))
            return torch.tensor(0), i - 1, r
    return torch.tensor(0), k, torch.softmax(logits[0, k], dim=0)


def medusa_convention_accept_all(logits, candidates, temperature, posterior_threshold, posterior_alpha):
    """Medusa's ``evaluate_posterior`` convention, accepting every candidate (lossy)."""
    return torch.tensor(0), candidates.shape[1] - 1


def medusa_generate_candidates(medusa_logits, logits, medusa_topk, tree_indices, temperature):
    return torch.argmax(logits[:, -1]).reshape(1), None


# ----------------------------------------------------------------------------- loader


def test_standins_are_installed_only_while_loading(tmp_path):
    root = tmp_path / "src"
    (root / "fakeengine" / "layers").mkdir(parents=True)
    (root / "fakeengine" / "__init__.py").write_text("raise RuntimeError('never executed')\n")
    (root / "fakeengine" / "layers" / "verify.py").write_text(
        "import fakeengine.envs as envs\nfrom fakeengine.platforms import current_platform\n"
        "FLAG = envs.USE_CUDA\nDEVICE = current_platform.device_type\n"
    )
    std = {
        "fakeengine.envs": loader.standin("fakeengine.envs", "flag", USE_CUDA=False),
        "fakeengine.platforms": loader.standin(
            "fakeengine.platforms", "cpu", current_platform=type("P", (), {"device_type": "cpu"})
        ),
    }
    before = set(sys.modules)
    mod = loader.load("fakeengine.layers.verify", root, std)
    assert (mod.FLAG, mod.DEVICE) == (False, "cpu")
    assert mod.__file__ == str(root / "fakeengine" / "layers" / "verify.py")
    assert not {n for n in set(sys.modules) - before if n.startswith("fakeengine")}
    assert std["fakeengine.envs"].__specverify_standin__


def test_a_failing_import_is_one_skip_line(tmp_path):
    (tmp_path / "eng").mkdir()
    (tmp_path / "eng" / "mod.py").write_text("import some_cuda_only_extension\n")
    with pytest.raises(loader.Unavailable) as info:
        loader.load("eng.mod", tmp_path)
    assert "\n" not in str(info.value) and "ModuleNotFoundError" in str(info.value)
    assert "eng" not in sys.modules


def test_fetch_unpacks_only_the_members_from_a_cached_wheel(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVERIFY_ENGINES_DIR", str(tmp_path))
    (tmp_path / "dl").mkdir()
    with zipfile.ZipFile(tmp_path / "dl" / "fake_engine-1.0-py3-none-any.whl", "w") as z:
        z.writestr("fake/a.py", "A = 1\n")
        z.writestr("fake/big.so", "x" * 100)
    root = loader.fetch("fake-engine", "1.0", ("fake/a.py",), download=False)
    assert (root / "fake" / "a.py").read_text() == "A = 1\n" and not (root / "fake" / "big.so").exists()
    with pytest.raises(loader.Unavailable, match="no fake/missing.py"):
        loader.fetch("fake-engine", "1.0", ("fake/missing.py",), download=False)
    with pytest.raises(loader.Unavailable, match="not in the cache"):
        loader.fetch("other", "2.0", ("x.py",), download=False)


# ----------------------------------------------------------------------------- probes and table


def test_probes_on_the_reference_kernel():
    facts = run_probes(kernel_probe(reference_kernel, explicit=True), ONE_MINUS_F32, n=16)
    assert facts["p0_u0"]["accept_rate"] == 0 and facts["pq_u1"]["accept_rate"] == 1
    assert facts["q0_draft"]["accept_rate"] == 0
    assert facts["empty_residual"]["zero_probability_emitted"] == []  # falls back to p
    mz, dis = describe_probes(facts, "[0, 1)")
    assert "u = 0, p(x) = 0 < q(x): rejects" in mz and "1 - 2^-24, p = q: accepts" in mz
    assert "q(x) = 0 draft (p(x) = .25): rejects" in dis


def test_probes_see_a_non_strict_kernel():
    def non_strict(draft_ids, draft_probs, target_probs, uniforms):
        u = np.asarray(uniforms).copy()
        out, nacc = reference_kernel(draft_ids, draft_probs, target_probs, u)
        ids, q, p = map(np.asarray, (draft_ids, draft_probs, target_probs))
        hit = (u[:, 0] == 0) & (q[np.arange(len(ids)), 0, ids[:, 0]] > 0)
        out[hit, 0], out[hit, 1], nacc[hit] = ids[hit, 0], 0, 1
        return out, nacc

    facts = run_probes(kernel_probe(non_strict, explicit=True), ONE_MINUS_F32, n=8)
    assert facts["p0_u0"]["accept_rate"] == 1


def test_round_wrappers_probe_eagle_convention():
    step = rounds.eagle_round(eagle_convention_reference)
    facts = run_probes(round_probe(step.verify), 1 - 2**-53, n=8)
    assert facts["p0_u0"]["accept_rate"] == 0 and facts["pq_u1"]["accept_rate"] == 1
    assert facts["q0_draft"]["accept_rate"] == 0


def _row(**kw):
    base = {
        "engine": "x",
        "package": "pkg",
        "version": "1",
        "function": "f | g",
        "interface": "kernel",
        "verdict": "exact",
        "power": "p",
        "efficiency": "e",
        "measure_zero": "m",
        "battery_edges": "",
        "disagreements": "d",
        "randomness": "r",
        "uniforms": "[0, 1)",
        "seconds": 1.0,
        "command": "python -m specverify.engines --engine x --budget quick",
        "expected": "exact",
        "exact": True,
    }
    return {**base, **kw}


def test_the_reproduce_column_gives_wall_and_cpu_seconds():
    from specverify.engines.engine_table import seconds_text

    assert seconds_text(_row()) == "1.0 s"
    assert seconds_text(_row(cpu_seconds=0.8)) == "1.0 s, CPU 0.8 s"
    assert "(1.0 s, CPU 0.8 s) |" in render_table([_row(cpu_seconds=0.8)])


def test_table_rows_skips_and_findings():
    rows = [
        _row(),
        {"engine": "t", "skipped": "t: no wheel"},
        _row(
            engine="y",
            verdict="not exact",
            exact=False,
            expected="lossy",
            findings=[{"kind": "distribution", "check": "exact-tv", "message": "TV 0.3"}],
            counterexample={"draft_ids": [0], "p": [[0.5, 0.5]]},
        ),
    ]
    table = render_table(rows)
    lines = table.splitlines()
    assert lines[0].startswith("| engine | version | function | verdict")
    assert sum(line.startswith("| x |") or line.startswith("| y |") for line in lines) == 2
    assert "f \\| g" in table and "- skipped: t: no wheel" in table
    assert "`python -m specverify.engines --engine x --budget quick` (1.0 s)" in table
    assert "### y" in render_findings(rows) and "draft_ids" in render_findings(rows)
    assert matches(rows[0]) and matches(rows[2]) and not matches(_row(exact=False))


def test_render_from_saved_json(tmp_path, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([_row()]))
    assert main(["--render", str(path)]) == 0
    assert "| x | pkg 1 |" in capsys.readouterr().out


def test_every_engine_row_is_declared():
    names = [e.name for e in ENGINES]
    assert len(names) == len(set(names))
    for wanted in (
        "vllm-v0-rejection",
        "vllm-v0-typical",
        "vllm-v1-rejection",
        "sglang-chain",
        "sglang-block-kernel",
        "sglang-block-round",
        "eagle1",
        "medusa",
        "tensorrt-llm",
        "flashinfer",
    ):
        assert wanted in names
    assert all((e.build is None) == (e.skip is not None) for e in ENGINES)


# ----------------------------------------------------------------------------- round wrappers, judged


def test_sglang_round_wrapper_around_the_reference_is_exact():
    step = rounds.sglang_chain_round(to_sglang_chain(reference_kernel))
    report = api.check(step, budget=TINY, interface="round", counterexample=False)
    assert report.exact is True, report.text()


def test_eagle_round_wrapper_around_the_reference_is_exact():
    step = rounds.eagle_round(eagle_convention_reference)
    report = api.check(step, budget=TINY, interface="round", counterexample=False)
    assert report.exact is True, report.text()


def ngram_convention_reference(draft_ids, num_draft_tokens, max_spec_len, cu, draft_probs, target_probs, bonus, meta):
    """vLLM V1's ``rejection_sample`` in n-gram mode (``draft_probs`` None) for one request, in a
    few torch lines and its two draws: ``torch.rand`` coins (accept x when p(x) >= u), then one
    exponential row, whose race argmax(w / E) over p with the rejected draft removed recovers."""
    assert draft_probs is None and len(num_draft_tokens) == 1
    k = num_draft_tokens[0]
    coins = torch.rand((k,), dtype=torch.float32)
    e = torch.empty((1, target_probs.shape[1]), dtype=torch.float32)
    e.exponential_()
    out = torch.full((1, max_spec_len + 1), -1, dtype=torch.int32)
    for i in range(k):
        x = int(draft_ids[i])
        if float(target_probs[i, x]) >= float(coins[i]):
            out[0, i] = x
            continue
        w = target_probs[i].clone()
        w[x] = 0
        out[0, i] = int((w / e[0]).argmax())
        return out
    out[0, k] = int(bonus[0, 0])
    return out


def test_vllm_v1_ngram_round_wrapper_around_the_reference_is_exact_and_its_draws_are_answered():
    from types import SimpleNamespace

    from specverify.engines import vllm as V

    assert V.greedy_drafts(
        lambda ctx: np.array([0.2, 0.5, 0.3]) if len(ctx) < 2 else np.array([0.6, 0.2, 0.2]), (0,), 3
    ) == [1, 0, 0]
    e = V.exponential_row(np.array([0.0, 0.5, 1 - 2**-24], np.float32))
    assert torch.isfinite(e).all() and (e > 0).all() and abs(float(e[1]) - np.log(2)) < 1e-6
    step = V.v1_ngram_round(SimpleNamespace(rejection_sample=ngram_convention_reference))
    report = api.check(step, budget=TINY, interface="round", counterexample=False)
    assert report.exact is True, report.text()
    wrong = V.v1_ngram_round(
        SimpleNamespace(rejection_sample=lambda *a: ngram_convention_reference(*a[:5], a[5].flip(1), *a[6:]))
    )
    assert api.check(wrong, budget=TINY, interface="round", counterexample=False).exact is False


def test_medusa_round_wrapper_calls_accepting_everything_not_exact():
    step = rounds.medusa_round(medusa_convention_accept_all, medusa_generate_candidates)
    assert step.verify([1, 0], [np.array([0.2, 0.8]), np.array([0.9, 0.1]), np.array([0.3, 0.7])]) == [1, 0, 1]
    report = api.check(step, budget=TINY, interface="round", counterexample=False)
    assert report.exact is False


def test_replay_check():
    from specverify.engines import BY_NAME, replays

    assert replays(BY_NAME["sglang-chain"], reference_kernel)
    assert replays(BY_NAME["eagle1"], rounds.eagle_round(eagle_convention_reference))

    def unseeded(draft_ids, draft_probs, target_probs, generator):  # ignores its generator
        u = np.random.default_rng().random((len(draft_ids), draft_ids.shape[1] + 1), dtype=np.float32)
        return reference_kernel(draft_ids, draft_probs, target_probs, u)

    assert not replays(BY_NAME["vllm-v0-rejection"], unseeded)


# ----------------------------------------------------------------------------- vLLM V0 round wrapper


def v0_convention_reference(
    target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None, from_p=False
):
    """vLLM V0's ``RejectionSampler.forward`` signature and randomness (B = 1): coins by
    ``torch.rand``, recovered tokens by the exponential race over clamp(p - q, min=tiny) (over p
    with ``from_p``, a mutant), the caller's bonus; [1, k + 1], -1 padded."""
    gen = seeded_seqs[0]
    _, k, vocab = draft_probs.shape
    target, ids = target_with_bonus_probs[:, :-1], draft_token_ids[0]
    rows = torch.arange(k)
    ratio = target[0, rows, ids] / draft_probs[0, rows, ids]
    accepted = torch.rand(1, k, generator=gen) < torch.clamp(ratio, max=1.0)
    f = target if from_p else torch.clamp(target - draft_probs, min=torch.finfo(torch.float32).tiny)
    probs = (f / f.sum(dim=-1, keepdim=True)).reshape(k, vocab)
    race = torch.empty_like(probs)
    race.exponential_(1.0, generator=gen)
    recovered = probs.div_(race).argmax(dim=1).view(1, k)
    n = int(accepted.int().cumprod(dim=1).sum())
    out = torch.full((1, k + 1), -1, dtype=torch.int64)
    out[0, :n] = ids[:n]
    out[0, n] = recovered[0, n] if n < k else bonus_token_ids[0, 0]
    return out


def test_vllm_v0_round_wrapper_is_exact_by_its_law_and_its_mutant_is_far():
    from specverify.laws.chains import toy_chain
    from specverify.laws.exact import exact_tv

    model = toy_chain()
    step = rounds.vllm_v0_round(v0_convention_reference)
    assert exact_tv(step, model.p_fn, model.q_fn, (0,), 2, 2) < 1e-6  # float32 rounding
    mutant = rounds.vllm_v0_round(lambda *a: v0_convention_reference(*a, from_p=True))
    assert exact_tv(mutant, model.p_fn, model.q_fn, (0,), 2, 2) > 0.01


def test_vllm_v0_round_wrapper_unread_draws_do_not_branch():
    """Every round draws a bonus token and a recovered token per draft; only the one emitted is
    decided: V = 5, k = 1 takes 5 drafts x (5 bonus + 5 recovered) = 50 paths, not 5 x 5 x 2 x 5."""
    from specverify.laws.chains import iid_model
    from specverify.laws.exact import enumerate_distribution, total_variation
    from specverify.samplers.chain import speculative_step

    model = iid_model([0.1, 0.2, 0.3, 0.15, 0.25], [0.3, 0.1, 0.2, 0.25, 0.15])
    step = rounds.vllm_v0_round(v0_convention_reference)
    law = enumerate_distribution(lambda rng: tuple(step(model.p_fn, model.q_fn, (), 1, rng)), max_paths=50)
    want = enumerate_distribution(lambda rng: tuple(speculative_step(model.p_fn, model.q_fn, (), 1, rng)))
    assert total_variation(law, want) < 1e-6


def test_vllm_v0_round_wrapper_with_no_drafts_emits_the_bonus():
    step = rounds.vllm_v0_round(v0_convention_reference)
    assert step.verify([], [np.array([0.0, 1.0, 0.0])], [], None, 3) == [1]
    assert step.verify([2], [np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])], [np.eye(3)[2]], None, 3) == [2, 0]


def test_float32_rounding_is_told_from_a_bias():
    """The engines' rows judge through the one rounding policy (laws.rounding): the analytic
    bound is the kernel's tolerance per round, and a float32 law's round-length gap of 1e-8 is
    rounding while 1e-3 is not."""
    from specverify.laws import precision, rounding

    assert rounding.analytic_bound("float32", 1, 3, 2) == pytest.approx(40 * 2.0**-24)
    law = precision.ObservedLaw({1: 0.25, 2: 0.75}, {"float32", "float64"})
    assert 1e-8 <= rounding.mean_gap_allowed(law, 1) < 1e-3
    assert rounding.mean_gap_allowed(precision.ObservedLaw({1: 1.0}, {"float64"}), 1) == rounding.EXACT_TV_TOL


# ----------------------------------------------------------------------------- EAGLE-1 top-2 tree


def test_eagle_top2_tree_drafts_two_distinct_first_tokens():
    rng = np.random.default_rng(0)
    q = np.array([0.5, 0.3, 0.2])
    for _ in range(20):
        paths, rows, second = rounds.draft_top2_tree(lambda ctx: q, (), 2, rng)
        assert len(paths) == 2 and paths[0][0] != paths[1][0] and all(len(p) == 2 for p in paths)
        assert second[0] == pytest.approx(q[paths[1][0]] / (1 - q[paths[0][0]]))
    paths, _, second = rounds.draft_top2_tree(lambda ctx: np.array([0.0, 1.0, 0.0]), (), 2, rng)
    assert paths == [[1, 1]] and second == []


def test_the_second_siblings_probability_is_clamped_to_one_as_eagles_sample_clamps_it():
    """Where two first drafts share all of q's mass, q(second) / (1 - q(first)) rounds above 1 in
    float64; EAGLE-1's ``sample`` clamps it to 1 (cnets.py), and so must the wrapper: unclamped,
    EAGLE's acceptance ratio falls below 1 by a rounding and the enumerator follows a rejection
    that EAGLE's own drafts never make (an empty residual, then nan in ``sample_p``)."""
    q = np.array([0.43484648584183183, 0.5651535141581683])
    assert q[0] / (1.0 - q[1]) > 1.0  # the rounding this guards against
    assert rounds.conditional_draft_probability(q, 1, 0) == 1.0
    assert rounds.conditional_draft_probability(np.array([0.5, 0.3, 0.2]), 0, 2) == pytest.approx(0.4)


def test_eagle_tree_inputs_mask_the_first_sibling():
    q = np.array([0.5, 0.3, 0.2])
    p = np.array([0.2, 0.2, 0.6])
    args = rounds.eagle_tree_inputs([[0, 1], [2, 0]], [[p, p, p], [p, p, p]], [[q, q], [q, q]], [0.4])
    assert args["candidates"].tolist() == [[0, 0, 1], [0, 2, 0]]
    assert args["cart_candidates_prob"][1, 1].item() == pytest.approx(0.4)
    assert args["b_indices"][1][1] == [1] and args["tree_candidates"][0, 1].item() == 0
    assert args["p_indices"] == [[0, 0, 0], [0, 0, 1]] and args["logits"].shape == (2, 3, 3)


# ----------------------------------------------------------------------------- Triton rows: sweeps and controlled uniforms


def test_triton_rows_state_their_sweeps_and_the_table_prints_the_reach():
    """Every Triton row's kernel budget carries ``TRITON_SWEEPS`` (fields of the kernel budget),
    and the reach those give is what the table's ``how`` column prints."""
    from specverify.engines import TRITON_SWEEPS, reach_text
    from specverify.interfaces.kernel import battery as KI

    triton = [e for e in ENGINES if e.interface == "kernel" and "TRITON_INTERPRET" in " ".join(e.needs)]
    assert {e.name for e in triton} == {
        "vllm-v1-rejection",
        "sglang-chain",
        "sglang-block-kernel",
        "lmdeploy-rejection-triton",
        "vllm-v2-rejection",
        "vllm-v2-synthetic",
        "vllm-v2-fly",
        "vllm-v1-synthetic",
        "vllm-v1-fly",
    }
    for engine in triton:
        for budget, sweeps in TRITON_SWEEPS.items():
            spec = engine.budgets[budget]
            assert all(spec[key] == value for key, value in sweeps.items())
    standard = replace(KI.get_budget("quick"), **TRITON_SWEEPS["standard"])
    reach = KI.reach(standard)
    assert reach == {"dense V": 1024, "binned V": 152_064, "k": 5, "batch": 65}
    assert reach_text(reach) == "reach: dense V <= 1,024, binned V <= 152,064, k <= 5, batch <= 65"
    assert "reach: k <= 6" in render_table([_row(reach={"k": 6})])
    round_row = next(e for e in ENGINES if e.name == "sglang-block-round")
    for spec in round_row.budgets.values():  # fields of the round budget (judge() replaces them)
        rb = replace(round_cases.get_budget(spec["base"]), **{k: v for k, v in spec.items() if k != "base"})
        assert rb.sweep_k <= 4 and rb.sweep_context <= 4 and rb.generated == 0


def test_quick_triton_rows_judge_their_chosen_cases_in_about_1200_kernel_rows(tmp_path):
    """At ``quick`` every interpreted Triton kernel row judges ``TRITON_QUICK_CASES`` (k = 2 first),
    exactly from uniforms: the reference kernel in the engine's place passes them in at most 1,300
    kernel rows (the interpreter's cost is per row; the battery's own quick cases take about
    11,200), and the reach printed is those cases'. A prefix no case has is a ValueError."""
    from specverify.engines import BY_NAME
    from specverify.engines.engine_verdict import chosen_cases, judge
    from specverify.engines.row_budgets import CHAIN_FIRST_CASES, TRITON_KERNEL, TRITON_QUICK_CASES
    from specverify.interfaces.kernel import battery as KI

    triton = [e for e in ENGINES if e.interface == "kernel" and "TRITON_INTERPRET" in " ".join(e.needs)]
    fly = {"vllm-v1-fly", "vllm-v2-fly", "sglang-block-kernel"}  # start with the V = 3 chain (CHAIN_FIRST_CASES)
    assert all(e.budgets["quick"]["kernel_cases"] == TRITON_QUICK_CASES for e in triton if e.name not in fly)
    assert all(BY_NAME[name].budgets["quick"]["kernel_cases"] == CHAIN_FIRST_CASES for name in fly)
    fields = {k: v for k, v in TRITON_KERNEL["quick"].items() if k not in ("base", "kernel_cases")}
    kb = replace(KI.get_budget("quick"), **fields)
    names = [c.name for c in chosen_cases(kb, 0, TRITON_QUICK_CASES)]
    assert names == ["k sweep k=2, V6", "k sweep k=1, V6", "binned sweep V65537, k=1"]
    with pytest.raises(ValueError, match="no kernel case"):
        chosen_cases(kb, 0, ("no such case",))
    log = tmp_path / "rows.log"

    def counted(draft_ids, draft_probs, target_probs, uniforms):  # the subject runs in its own process
        with open(log, "a") as f:
            f.write(f"{len(draft_ids)}\n")
        return reference_kernel(draft_ids, draft_probs, target_probs, uniforms)

    report = judge(BY_NAME["vllm-v2-rejection"], counted, "quick")
    assert report.exact is True
    assert sum(int(n) for n in log.read_text().split()) <= 1300
    assert report.result.reach == {"dense V": 6, "binned V": 65_537, "k": 2, "batch": 0}


def test_controlled_draws_answer_v1s_two_draws_and_refuse_any_other():
    from specverify.engines.vllm import ControlledDraws

    coins, noise = torch.tensor([0.25, 0.5]), torch.tensor([[1.0, 2.0, 3.0]])
    with ControlledDraws(coins, noise) as mode:
        got = torch.rand((2,), dtype=torch.float32)
        q = torch.empty((1, 3))
        q.exponential_()
        with pytest.raises(RuntimeError, match="randn"):
            torch.randn(3)
    assert torch.equal(got, coins) and torch.equal(q, noise) and mode.answered == ["rand", "exponential_"]


def test_race_noise_makes_the_race_pick_the_inverse_cdf_token():
    """argmax(w / E) with E = ``race_noise`` is the inverse-CDF token of w at the final uniform,
    at every uniform of a fine grid and at each piece's edges; an empty residual keeps E = 1 but at
    the id the final uniform selects uniformly over the vocabulary."""
    from specverify.adapters.kernels import check_canonical_inputs
    from specverify.engines.vllm import RACE_MARGIN, inverse_cdf, race_noise

    q = np.array([[[0.5, 0.1, 0.0, 0.4]], [[0.25, 0.25, 0.25, 0.25]]], np.float32)
    p = np.array([[[0.1, 0.3, 0.2, 0.4], [1, 0, 0, 0]], [[0.25, 0.25, 0.25, 0.25], [1, 0, 0, 0]]], np.float32)
    ids = np.zeros((2, 1), np.int64)
    w = np.clip(p[0, 0] - q[0, 0], 0, None)  # [0, 0.2, 0.2, 0]: tokens 1 and 2, half each
    edge = np.float32(np.cumsum(w.astype(np.float64))[1] / w.sum())
    grid = [*np.linspace(0, 1, 257, dtype=np.float32)[:-1], np.nextafter(edge, np.float32(0)), edge]
    for u in grid:
        batch = check_canonical_inputs(ids, q, p, np.array([[0.9, u], [0.9, u]], np.float32))
        noise = race_noise(batch, torch.zeros(2, dtype=torch.int64), batch.uniforms[:, -1])
        want = int(inverse_cdf(torch.from_numpy(w)[None], torch.tensor([u]))[0])
        assert int(torch.argmax(torch.from_numpy(w) / noise[0])) == want
        assert want == 1 if u < 0.49 else want == 2 if u > 0.51 else want in (1, 2)
        lowered = torch.ones(4)  # p = q: the residual is empty; E is 1 but at the id u selects uniformly
        lowered[min(int(float(u) * 4), 3)] = 1 / (1 + RACE_MARGIN)
        assert torch.equal(noise[1], lowered)
    assert RACE_MARGIN == 2.0**-8


def v1_module():
    """vLLM V1's rejection_sampler module from the cache (skip when its wheel or triton is not)."""
    from specverify.engines import vllm as V

    if not loader.is_cached(V.PACKAGE, V.VERSION, V.V1_FILES):
        pytest.skip("vllm 0.8.5 is not cached (python -m specverify.engines --engine vllm-v0-rejection fetches it)")
    try:
        return V.load_v1(download=False)
    except loader.Unavailable as exc:
        pytest.skip(str(exc))


def random_batch(seed: int, B: int, k: int, vocab: int):
    """(draft_ids, q, p, u) of B random rows: Dirichlet q and p rows, drafts drawn from q, uniforms."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(vocab), (B, k)).astype(np.float32)
    p = rng.dirichlet(np.ones(vocab), (B, k + 1)).astype(np.float32)
    ids = np.array([[rng.choice(vocab, p=q[b, i] / q[b, i].sum()) for i in range(k)] for b in range(B)])
    return ids, q, p, rng.random((B, k + 1), dtype=np.float32)


def assert_the_rule_row_by_row(kernel, ids, q, p, u):
    """The kernel's output is the token-wise rule's (``reference_kernel``) on every row, and the
    same again: a function of the uniforms alone."""
    out, nacc = kernel(ids, q, p, u)
    want_out, want_nacc = reference_kernel(ids, q, p, u)
    np.testing.assert_array_equal(nacc, want_nacc)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(kernel(ids, q, p, u)[0], out)


def test_v1_with_controlled_uniforms_is_the_rule_row_by_row():
    """V1's own code with its draws answered from the uniforms (``v1_uniforms_kernel``) gives the
    token-wise rule's output on random rows (ragged too), as a function of the uniforms alone."""
    from specverify.engines import vllm as V

    ids, q, p, u = random_batch(3, 24, 2, 5)
    ids[:3, 1] = -1
    u[u == 0] = 0.5  # V1 accepts p(x) = 0 at u = 0 (p / q >= u), the rule does not: a probe's business
    assert_the_rule_row_by_row(V.v1_uniforms_kernel(v1_module()), ids, q, p, u)


def test_v0_with_controlled_uniforms_is_the_rule_row_by_row():
    """V0's own ``RejectionSampler.forward`` with its draws answered from the uniforms
    (``v0_uniforms_kernel``) gives the token-wise rule's output on random rows, ragged ones
    included, as a function of the uniforms alone."""
    from specverify.engines import BY_NAME, is_cached
    from specverify.engines import vllm as V

    if not is_cached(BY_NAME["vllm-v0-rejection"]):
        pytest.skip("vllm 0.8.5 is not cached (python -m specverify.engines --engine vllm-v0-rejection fetches it)")
    rs, _ = V.load_v0(download=False)
    ids, q, p, u = random_batch(4, 24, 3, 5)
    ids[:4, 2] = -1
    ids[4:6, 1:] = -1
    assert_the_rule_row_by_row(V.v0_uniforms_kernel(rs), ids, q, p, u)


def test_v1_row_probes_from_explicit_uniforms():
    """The V1 row's probes force the coin through the uniforms: V1 accepts a p(x) = 0 draft at
    u = 0 (``p / q >= u``, rejection_sampler.py:524) and emits token 0 from an empty residual."""
    from specverify.engines import vllm as V

    kernel = V.v1_uniforms_kernel(v1_module())
    facts = run_probes(kernel_probe(kernel, explicit=True), ONE_MINUS_F32, n=8)
    assert facts["p0_u0"]["accept_rate"] == 1.0
    assert facts["pq_u1"]["accept_rate"] == 1.0
    assert facts["empty_residual"]["emitted_after_rejection"] == [0]


def test_a_row_that_stops_at_its_first_finding_claims_only_the_cases_it_ran():
    """A stop-on-first row's reach is the box of the cases run, with a note; a row that runs its
    budget through prints the battery's reach (its budget's sweeps)."""
    from specverify.engines import Engine, judge, reach_text, row_reach

    def coins_always_zero(draft_ids, draft_probs, target_probs, uniforms):
        """Accepts every draft with p(x) > 0: not the rule's law."""
        return reference_kernel(draft_ids, draft_probs, target_probs, np.zeros_like(uniforms))

    spec = {"base": "quick", "generated": 0, "k_sweep": 2, "batch_sweep": (3,)}
    stopping = Engine(
        "t", "pkg", "1", "f", "kernel", "different-rule", "", budgets={"quick": {**spec, "stop_on_first": True}}
    )
    report = judge(stopping, coins_always_zero, "quick")
    box, note = row_reach(stopping, "quick", report)
    assert report.exact is False and note == "run until its first finding: 1 case"
    assert box == {"k": 2, "V": 3, "batch": 0}
    assert reach_text(box, note) == "reach (run until its first finding: 1 case): k <= 2, V <= 3"
    through = Engine("t", "pkg", "1", "f", "kernel", "exact", "", budgets={"quick": spec})
    report = judge(through, reference_kernel, "quick")
    assert row_reach(through, "quick", report) == ({"dense V": 0, "binned V": 0, "k": 2, "batch": 3}, "")
