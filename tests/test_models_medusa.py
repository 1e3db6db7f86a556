"""The Medusa-style t+2 head (specverify.models.medusa) on the tiny random Qwen2 target (CPU, seconds).

What the tiny target can and cannot show. Its text is the output of a random network: a
head's held-out top-1 on the t+2 greedy token sits at the majority-class level (1.5% on 400
held-out positions), and so does an oracle-style table from x_{t+1} = argmax p_{t+1} to the t+2
greedy token built on 4,000 training positions (1.75%); so held-out top-1 cannot separate a
trained head from an untrained one here (it is measured on the real 1.5B by ``train-head``).
What training does buy on held-out text, measurably, is the whole distribution: KL(p_{t+2} || q)
falls and alpha = sum min(p_{t+2}, q) rises, tested below with a paired test over positions;
top-1 is tested on the training text, where the head must fit it.
"""

import json

import numpy as np
import pytest
from scipy import stats as sps

INSTALL = "pip install -e '.[models]'"
torch = pytest.importorskip("torch", reason=f"the real-model stage needs torch: {INSTALL}")
pytest.importorskip("transformers", reason=f"the real-model stage needs transformers: {INSTALL}")
pytestmark = pytest.mark.usefixtures("one_thread")

from specverify.laws import stats  # noqa: E402
from specverify.models import decoding, medusa, medusa_files, medusa_training  # noqa: E402
from specverify.models.__main__ import main  # noqa: E402

GREEDY_PROMPTS = ["def f(x):\n    return x", "Hello, how are you?", "import numpy as np\n"]
NEW_TOKENS = 48


@pytest.fixture(scope="module")
def train_data(pair):
    return medusa_training.collect_training_data(
        pair.target,
        pair.tokenizer,
        medusa_training.TRAIN_PROMPTS,
        1000,
        temperature=0.7,
        seed=0,
        vocab_size=pair.vocab_size,
    )


@pytest.fixture(scope="module")
def held_data(pair):
    return medusa_training.collect_training_data(
        pair.target,
        pair.tokenizer,
        medusa_training.HELD_OUT_PROMPTS,
        300,
        temperature=0.7,
        top_k_targets=None,
        seed=1,
        vocab_size=pair.vocab_size,
    )


@pytest.fixture(scope="module")
def trained(pair, train_data):
    head = medusa.head_for(pair.target, target_name="tiny")
    history = medusa_training.train_head(head, pair.target, train_data, epochs=20, lr=3e-3, seed=0)
    return head, history


@pytest.fixture(scope="module")
def memorised_head(pair):
    """A head fitted to the greedy continuations of GREEDY_PROMPTS: it agrees with the target
    often, so the loop's acceptance path is exercised as much as its rejection path."""
    data = medusa_training.collect_training_data(
        pair.target,
        pair.tokenizer,
        GREEDY_PROMPTS,
        10**6,
        max_new_tokens=NEW_TOKENS + 2,
        temperature=0.0,
        vocab_size=pair.vocab_size,
    )
    head = medusa.head_for(pair.target, intermediate_size=512)
    medusa_training.train_head(head, pair.target, data, epochs=150, lr=3e-3, seed=0)
    fit = medusa_training.evaluate_head(
        head,
        pair.target,
        medusa_training.collect_training_data(
            pair.target,
            pair.tokenizer,
            GREEDY_PROMPTS,
            10**6,
            max_new_tokens=NEW_TOKENS + 2,
            temperature=0.0,
            top_k_targets=None,
            vocab_size=pair.vocab_size,
        ),
        temperatures=(1.0,),
    )
    assert fit["top1"] > 0.5, fit
    return head


def test_last_hidden_state_is_post_norm_and_feeds_the_lm_head(pair):
    """transformers 5.x: last_hidden_state == output_hidden_states[-1], taken after the final
    norm, and lm_head of it is the model's logits bit for bit; so the head reuses it as is."""
    ids = torch.tensor([pair.tokenizer.encode(GREEDY_PROMPTS[0])])
    with torch.no_grad():
        out = pair.target(input_ids=ids, output_hidden_states=True)
        h = pair.target.base_model(input_ids=ids).last_hidden_state
    assert torch.equal(h, out.hidden_states[-1])
    assert torch.equal(pair.target.get_output_embeddings()(h), out.logits)


def test_positions_pair_h_t_with_p_t_plus_2(pair):
    """Greedy data: hidden[i] is h at position n_prompt - 1 + i, logp[i] is log p of the token two
    further (the teacher-forced row at n_prompt + i), greedy[i] the greedy token there."""
    ids = pair.tokenizer.encode(GREEDY_PROMPTS[0])
    data = medusa_training.collect_training_data(
        pair.target,
        pair.tokenizer,
        [ids],
        100,
        max_new_tokens=10,
        temperature=0.0,
        top_k_targets=None,
        vocab_size=pair.vocab_size,
    )
    ref = decoding.target_only_generate(pair.target, ids, 10, vocab_size=pair.vocab_size)
    n = len(ids)
    assert len(data) == 9 and data.full and data.idx is None and data.n_sequences == 1
    assert data.greedy.tolist() == ref.ids[n + 1 :]
    with torch.no_grad():
        h = pair.target.base_model(input_ids=torch.tensor([ref.ids])).last_hidden_state[0]
    torch.testing.assert_close(data.hidden, h[n - 1 : n + 8], rtol=1e-4, atol=1e-4)
    logits = torch.from_numpy(decoding.teacher_forced_logits(pair.target, ref.ids, pair.vocab_size))
    torch.testing.assert_close(
        data.logp, torch.log_softmax(logits[n : n + 9].double(), -1).float(), rtol=1e-4, atol=1e-4
    )
    top = medusa_training.collect_training_data(
        pair.target,
        pair.tokenizer,
        [ids],
        100,
        max_new_tokens=10,
        temperature=0.0,
        top_k_targets=5,
        vocab_size=pair.vocab_size,
    )
    assert top.idx.shape == (9, 5) and top.idx[:, 0].tolist() == data.greedy.tolist()
    assert 0 < top.target_mass < 1 and data.target_mass == pytest.approx(1.0)


def test_untrained_head_is_the_identity(pair, held_data):
    head = medusa.head_for(pair.target)
    h = held_data.hidden[:5]
    with torch.no_grad():
        assert torch.equal(head(h), h)
        assert torch.equal(head.logits(pair.target, h), pair.target.get_output_embeddings()(h))


def test_training_lowers_the_loss_and_raises_held_out_alpha(pair, train_data, held_data, trained):
    head, history = trained
    losses = [history["loss_before"]] + history["loss_per_epoch"]
    assert losses[-1] < 0.75 * losses[0], losses
    assert all(b <= a * 1.02 for a, b in zip(losses, losses[1:])), losses  # Adam wobbles a little at most
    untrained = medusa.head_for(pair.target)
    before = medusa_training.evaluate_head(untrained, pair.target, held_data, per_position=True)
    after = medusa_training.evaluate_head(head, pair.target, held_data, per_position=True)
    print(
        f"held-out: top-1 {before['top1']:.4f} -> {after['top1']:.4f}, alpha(T=1) "
        f"{before['alpha'][1.0]:.3f} -> {after['alpha'][1.0]:.3f}, KL {before['loss']:.3f} -> {after['loss']:.3f}"
    )
    assert after["loss"] < 0.8 * before["loss"]
    for t in (1.0, 0.7):  # paired over positions, one-sided; false-fail rate 1e-3 each
        assert sps.wilcoxon(after["alphas"][t], before["alphas"][t], alternative="greater").pvalue < 1e-3
    fit_before = medusa_training.evaluate_head(untrained, pair.target, train_data, temperatures=())
    fit_after = medusa_training.evaluate_head(head, pair.target, train_data, temperatures=())
    print(f"training text: top-1 {fit_before['top1']:.4f} -> {fit_after['top1']:.4f}")
    assert fit_after["top1"] > fit_before["top1"] + 0.05, (fit_before["top1"], fit_after["top1"])


def test_evaluate_needs_full_rows(pair, train_data, trained):
    with pytest.raises(ValueError, match="top_k_targets=None"):
        medusa_training.evaluate_head(trained[0], pair.target, train_data, temperatures=(1.0,))


# ---------------------------------------------------------------------------- save / load


def test_save_load_round_trips_bit_identically(pair, trained, held_data, tmp_path):
    head = trained[0]
    path = tmp_path / "head.pt"
    medusa_files.save_head(head, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head.pt"], "a temporary file was left behind"
    loaded = medusa_files.load_head(path, pair.target)
    saved, back = head.state_dict(), loaded.state_dict()
    assert saved.keys() == back.keys()
    assert all(torch.equal(saved[k], back[k]) for k in saved)
    assert loaded.meta["target_name"] == "tiny" and loaded.meta["hidden_size"] == 64
    assert loaded.meta["positions"] == 1000 and loaded.meta["epochs"] == 20
    with torch.no_grad():
        h = held_data.hidden[:16]
        assert torch.equal(loaded.logits(pair.target, h), head.logits(pair.target, h))
    medusa_files.save_head(loaded, path)  # overwriting goes through os.replace as well
    assert sorted(p.name for p in tmp_path.iterdir()) == ["head.pt"]


def test_mismatched_heads_are_refused(pair, tmp_path):
    narrow = medusa.MedusaHead(32, 320, meta={"target_name": "other"})
    medusa_files.save_head(narrow, tmp_path / "narrow.pt")
    medusa_files.load_head(tmp_path / "narrow.pt")  # without a target, only the file itself is checked
    with pytest.raises(ValueError, match=r"^head: hidden size 32 does not match the target's 64"):
        medusa_files.load_head(tmp_path / "narrow.pt", pair.target)
    wide_vocab = medusa.MedusaHead(64, 999)
    with pytest.raises(ValueError, match=r"^head: vocabulary .*999 does not match the target's 320"):
        medusa.medusa_generate(pair.target, wide_vocab, [1, 2, 3], 4)
    (tmp_path / "junk.pt").write_bytes(b"not a head")
    with pytest.raises(ValueError, match=r"^path: "):
        medusa_files.load_head(tmp_path / "junk.pt")
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a saved Medusa head"):
        medusa_files.load_head(tmp_path / "other.pt")


# ---------------------------------------------------------------------------- decoding


def test_greedy_medusa_is_target_only_greedy(pair, memorised_head):
    totals = decoding.DecodeStats()
    for text in GREEDY_PROMPTS + ["x"]:  # a one-token prompt: the first round has no draft
        ids = pair.tokenizer.encode(text)
        ref = decoding.target_only_generate(pair.target, ids, NEW_TOKENS, vocab_size=pair.vocab_size)
        gen = medusa.medusa_generate(pair.target, memorised_head, ids, NEW_TOKENS, vocab_size=pair.vocab_size)
        assert gen.ids == ref.ids, decoding.compare_greedy(
            gen.ids, ref.ids, decoding.teacher_forced_logits(pair.target, ref.ids, pair.vocab_size), ref.n_prompt
        )
        s = gen.stats
        assert s.emitted == s.rounds + s.accepted and s.drafted == s.accepted + s.rejections
        assert s.drafted == s.rounds - (len(ids) == 1)
        for name in ("rounds", "drafted", "accepted", "rejections", "emitted"):
            setattr(totals, name, getattr(totals, name) + getattr(s, name))
    print(totals.as_dict())
    assert totals.accepted > 0.3 * totals.drafted and totals.rejections > 0, totals
    assert totals.tokens_per_pass > 1.3


def test_medusa_checks_its_arguments(pair, memorised_head):
    with pytest.raises(ValueError, match="^temperature"):
        medusa.medusa_generate(pair.target, memorised_head, [1, 2], 4, temperature=-1)
    with pytest.raises(ValueError, match="^input_ids"):
        medusa.medusa_generate(pair.target, memorised_head, [], 4)
    with pytest.raises(ValueError, match="^vocab_size"):
        medusa.medusa_generate(pair.target, memorised_head, [1, 2], 4, vocab_size=10**6)
    gen = medusa.medusa_generate(
        pair.target, memorised_head, [1, 2], 5, temperature=0.7, rng=3, eos_token_id=7, vocab_size=pair.vocab_size
    )
    assert 1 <= len(gen.new_ids) <= 5 and (7 not in gen.new_ids[:-1])


SAMPLED = {"temperature": 0.7, "top_k": 4}
N_RUNS = 700
FALSE_FAIL = 1e-3


def _target_law_of_two(pair, ids) -> dict:
    """Exact P(x1, x2) of the target's first two tokens after ``ids`` (processed as SAMPLED)."""
    p1 = decoding.process_logits(decoding.teacher_forced_logits(pair.target, ids, pair.vocab_size)[-1], **SAMPLED)
    law = {}
    for x1 in np.flatnonzero(p1):
        row = decoding.teacher_forced_logits(pair.target, ids + [int(x1)], pair.vocab_size)[-1]
        p2 = decoding.process_logits(row, **SAMPLED)
        law.update({(int(x1), int(x2)): p1[x1] * p2[x2] for x2 in np.flatnonzero(p2)})
    return law


def _first_alpha(pair, head, ids) -> float:
    """alpha of the first round: p at ids' end against the head's q on h at ids[-2]."""
    with torch.no_grad():
        h = pair.target.base_model(input_ids=torch.tensor([ids[:-1]])).last_hidden_state[0, -1]
        q = decoding.process_logits(head.logits(pair.target, h[None])[0, : pair.vocab_size].numpy(), **SAMPLED)
    p = decoding.process_logits(decoding.teacher_forced_logits(pair.target, ids, pair.vocab_size)[-1], **SAMPLED)
    return float(np.minimum(p, q).sum())


def test_sampled_first_two_tokens_follow_the_target(pair, memorised_head):
    """At T = 0.7, top-k = 4, the first two emitted tokens (16 cells: the draft's accept/reject
    and the bonus token or the next round's) follow the target's exact law.

    Pearson chi-square with cells of expected count < 5 pooled (``stats.chi_square_test``) at
    false-fail rate 1e-3; the seed is fixed, so the outcome is deterministic. The prompt is the
    candidate (a prompt plus a few of its greedy tokens) whose first-round alpha is nearest 1/2,
    so acceptances and rejections both occur often. Power: ``stats.min_discrepancy_chi_square``
    at n = 700 says any law at TV >= 0.17 from the target's is detected with probability >= 0.95
    (asserted below); skipping verification (emitting the draft) moves the law by about 1 - alpha,
    a bonus token drawn from the wrong row by P(accept) * TV(rows).
    """
    candidates = []  # each prompt followed by j of its greedy tokens, where the head was fitted
    for text in GREEDY_PROMPTS:
        ref = decoding.target_only_generate(pair.target, pair.tokenizer.encode(text), 8, vocab_size=pair.vocab_size)
        candidates += [ref.ids[: ref.n_prompt + j] for j in range(2, 9)]
    alphas = [_first_alpha(pair, memorised_head, ids) for ids in candidates]
    ids = candidates[int(np.argmin([abs(a - 0.5) for a in alphas]))]
    alpha = min(alphas, key=lambda a: abs(a - 0.5))
    assert 0.2 < alpha < 0.8, alphas
    law = _target_law_of_two(pair, ids)
    rng = np.random.default_rng(11)
    samples, accepted = [], 0
    for _ in range(N_RUNS):
        gen = medusa.medusa_generate(
            pair.target, memorised_head, ids, 2, rng=rng, vocab_size=pair.vocab_size, **SAMPLED
        )
        samples.append(tuple(gen.new_ids))
        accepted += gen.stats.accepted > 0
    assert 0.1 * N_RUNS < accepted < 0.9 * N_RUNS, accepted
    result = stats.chi_square_test(samples, law, false_fail_rate=FALSE_FAIL)
    print(f"first-round alpha {alpha:.3f}, accepted {accepted}/{N_RUNS}; {result.detail}")
    detectable = stats.min_discrepancy_chi_square(N_RUNS, law, FALSE_FAIL, 0.05)
    assert detectable <= 0.17, detectable
    assert 1 - alpha > detectable  # a loop that emitted the draft unverified would be caught w.p. >= 0.95
    assert result.passed, result.detail


# ---------------------------------------------------------------------------- the command


def test_train_head_command_end_to_end(pair, tmp_path, capsys):
    out = tmp_path / "head.pt"
    rc = main(
        [
            "train-head",
            "--tiny",
            "--out",
            str(out),
            "--positions",
            "150",
            "--epochs",
            "2",
            "--seed",
            "3",
            "--eval-positions",
            "40",
            "--max-new-tokens",
            "24",
            "--generate-prompts",
            "1",
            "--json",
        ]
    )
    assert rc == 0
    result = json.loads(capsys.readouterr().out)
    assert result["train_positions"] == 150 and result["eval_positions"] == 40
    assert result["loss_per_epoch"][-1] < result["loss_before"]
    assert set(result["trained"]) >= {"top1", "alpha", "loss"}
    assert result["greedy_generation"]["identical"] == 1
    head = medusa_files.load_head(out, pair.target)
    assert head.meta["seed"] == 3 and head.meta["positions"] == 150


def test_train_head_command_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train-head", "--tiny", "--out", str(tmp_path / "h.pt"), "--positions", "0"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["train-head", "--tiny", "--out", str(tmp_path / "missing" / "h.pt")])
    assert main(["train-head", "--tiny", "--target", "x", "--out", str(tmp_path / "h.pt")]) == 2
    assert "--tiny: cannot be combined" in capsys.readouterr().err
