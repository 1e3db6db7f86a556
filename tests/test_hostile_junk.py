"""Junk from a subject is a contract finding, never a crash of ours.

Loops and round samplers that return objects which raise when read (``__len__``, ``__iter__``,
``tolist``, ``__getattr__``, ``__int__``), values of the wrong type (None, strings, NaN counts),
counts that contradict the tokens, and exceptions whose ``str()`` raises: each gets verdict False
with a finding whose message says what was wrong, and the report's JSON parses. NaN logprobs are a
logprob finding only (NaN replays as NaN: not a "does not draw from rng" finding). The subject's
objects are converted to ints and floats in its own process, so only those reach the pipe.

Every subject here breaks the contract on its first call or is judged on the loop battery's small
cases: each test takes about a second (the two command-line tests a few).
"""

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import specverify
from specverify.battery import guards, runner
from specverify.interfaces.loop import battery as loop_interface
from specverify.interfaces.loop import tasks as loop_tasks
from specverify.interfaces.round import cases as round_cases
from specverify.interfaces.round import tasks as round_tasks
from specverify.laws.requests import Output

ROOT = Path(__file__).resolve().parents[1]

SUBJECTS = textwrap.dedent(
    """
    import numpy as np
    from specverify import speculative_step
    from specverify.laws.requests import Output
    from specverify.samplers.reference_loop import generate


    def _tokens(o):
        return tuple(o.tokens if isinstance(o, Output) else o)


    def _outputs(target, draft, requests, k, rng, **fields):
        return [Output(_tokens(o), **{name: make(_tokens(o)) for name, make in fields.items()})
                for o in generate(target, draft, requests, k, rng)]


    # -- loops ---------------------------------------------------------------------------------

    def loop_returns_nones(target, draft, requests, k, rng):
        return [None] * len(requests)

    def loop_string_logprobs(target, draft, requests, k, rng):
        return _outputs(target, draft, requests, k, rng, logprobs=lambda t: tuple("-0.5" for _ in t))

    def loop_none_logprobs(target, draft, requests, k, rng):
        return _outputs(target, draft, requests, k, rng, logprobs=lambda t: tuple(None for _ in t))

    def loop_nan_drafted(target, draft, requests, k, rng):
        return _outputs(target, draft, requests, k, rng, drafted=lambda t: float("nan"))

    def loop_none_tokens(target, draft, requests, k, rng):
        return [Output((None,) * len(_tokens(o))) for o in generate(target, draft, requests, k, rng)]

    class LenRaises(list):
        def __len__(self):
            raise RuntimeError("len refused")

    class IterRaises(list):
        def __iter__(self):
            raise RuntimeError("iteration refused")

    class TokensRaise(Output):
        @property
        def tokens(self):
            raise ValueError("tokens refused")

    def loop_len_raises(target, draft, requests, k, rng):
        return LenRaises(generate(target, draft, requests, k, rng))

    def loop_iter_raises(target, draft, requests, k, rng):
        return IterRaises(generate(target, draft, requests, k, rng))

    def loop_tokens_property_raises(target, draft, requests, k, rng):
        return [object.__new__(TokensRaise) for _ in requests]  # past the dataclass's __init__

    def loop_nan_logprobs(target, draft, requests, k, rng):
        return _outputs(target, draft, requests, k, rng, logprobs=lambda t: tuple(float("nan") for _ in t))

    def loop_accepted_99(target, draft, requests, k, rng):
        return _outputs(target, draft, requests, k, rng, accepted=lambda t: 99)

    def loop_negative_accepted(target, draft, requests, k, rng):
        return _outputs(target, draft, requests, k, rng, accepted=lambda t: -1)

    # -- round samplers ------------------------------------------------------------------------

    class ToListRaises:
        def tolist(self):
            raise RuntimeError("tolist refused")

    class GetattrRaises:
        def __getattr__(self, name):
            raise RuntimeError(f"no attribute {name} for you")

    class IntRaises(int):
        def __int__(self):
            raise RuntimeError("int refused")

        def __index__(self):
            raise RuntimeError("index refused")

    class StrRaises(Exception):
        def __str__(self):
            raise RuntimeError("str refused")

    class StrAndReprRaise(StrRaises):
        def __repr__(self):
            raise RuntimeError("repr refused")

    class ReprRaises:
        def __repr__(self):
            raise RuntimeError("repr refused")

    def tolist_raises(p_fn, q_fn, prefix, k, rng):
        return ToListRaises()

    def getattr_raises(p_fn, q_fn, prefix, k, rng):
        return GetattrRaises()

    def int_raises(p_fn, q_fn, prefix, k, rng):
        return [IntRaises(t) for t in speculative_step(p_fn, q_fn, prefix, k, rng)]

    def str_raises(p_fn, q_fn, prefix, k, rng):
        raise StrRaises("hidden")

    def str_and_repr_raise(p_fn, q_fn, prefix, k, rng):
        raise StrAndReprRaise("hidden")

    def surrogate_message(p_fn, q_fn, prefix, k, rng):
        raise ValueError("bad \\ud800")

    def len_raises(p_fn, q_fn, prefix, k, rng):
        return LenRaises(speculative_step(p_fn, q_fn, prefix, k, rng))

    def iter_raises(p_fn, q_fn, prefix, k, rng):
        return IterRaises(speculative_step(p_fn, q_fn, prefix, k, rng))

    def returns_a_lambda(p_fn, q_fn, prefix, k, rng):
        return [lambda: 0]

    def repr_raises_token(p_fn, q_fn, prefix, k, rng):
        return [ReprRaises()]
    """
)


@pytest.fixture(scope="module")
def subjects(tmp_path_factory):
    path = tmp_path_factory.mktemp("junk") / "junk.py"
    path.write_text(SUBJECTS)
    return str(path)


def contract_messages(report: dict) -> list[str]:
    found = [f["message"] for f in report["findings"] if f["kind"] == "contract" and f["check"] != "rng"]
    assert found, report["findings"]
    return found


def checked(subjects: str, name: str) -> dict:
    """``specverify.check`` on the subject (round or loop, by its parameter names): the report as
    its JSON, which must parse."""
    report = specverify.check(f"{subjects}:{name}", budget="quick")
    assert report.exit_code == 1 and report.exact is False
    return json.loads(report.to_json())


# --------------------------------------------------------------------------- loops


@pytest.mark.parametrize(
    "name, words",
    [
        ("loop_returns_nones", "request 0: returned a NoneType (None), not an Output"),
        ("loop_string_logprobs", "logprob 0 is a str ('-0.5'), not a number"),
        ("loop_none_logprobs", "logprob 0 is a NoneType (None), not a number"),
        ("loop_nan_drafted", "drafted is nan, not a whole number"),
        ("loop_none_tokens", "returned a NoneType (None), not an int token id"),
        ("loop_len_raises", "whose len() raised RuntimeError: len refused"),
        ("loop_iter_raises", "whose iteration raised RuntimeError: iteration refused"),
        ("loop_tokens_property_raises", "raised ValueError: tokens refused"),
    ],
)
def test_loop_junk_is_a_contract_finding(subjects, name, words):
    report = checked(subjects, name)
    assert any(words in m for m in contract_messages(report)), report["findings"]


def test_nan_logprobs_are_a_logprob_finding_not_an_rng_finding(subjects):
    result = loop_interface.run_loop_battery(_load(subjects, "loop_nan_logprobs"), "quick")
    assert result.exact is False
    checks = {f.check for f in result.findings}
    assert "rng" not in checks and checks == {"logprobs"}
    assert "is nan" in result.findings[0].message
    assert any(line.startswith("sequence-law:") and "exact TV" in line for line in result.ran)  # enumerated
    json.loads(json.dumps(result.to_dict()))


@pytest.mark.parametrize(
    "name, words",
    [
        ("loop_accepted_99", "accepted 99 drafts but emitted only"),
        ("loop_negative_accepted", "accepted -1 (a count cannot be negative)"),
    ],
)
def test_counts_are_checked_without_drafted(subjects, name, words):
    result = loop_interface.run_loop_battery(_load(subjects, name), "quick")
    assert result.exact is False
    counts = [f.message for f in result.findings if f.check == "counts"]
    assert counts and words in counts[0]
    json.loads(json.dumps(result.to_dict()))


def test_same_outcomes_takes_nan_as_nan():
    a = (((0, 1), (float("nan"), -0.5), None, 2),)
    b = (((0, 1), (float("nan"), -0.5), None, 2),)
    assert a != b and loop_tasks.same_outcomes(a, b)
    assert not loop_tasks.same_outcomes(a, (((0, 1), (-0.1, -0.5), None, 2),))
    assert not loop_tasks.same_outcomes(a, (((0, 2), (float("nan"), -0.5), None, 2),))


def test_outcome_sends_back_plain_ints_and_floats():
    class Tok(int):
        def __reduce__(self):
            raise TypeError("not picklable")

    rows = loop_tasks.read_outcome([Output((Tok(1), np.int64(2)), np.array([-0.5, -1.0]), np.int64(3), 2.0)], 1, 3)
    assert rows == (((1, 2), (-0.5, -1.0), 3, 2),)
    assert [type(t) for t in rows[0][0]] == [int, int] and type(rows[0][2]) is int
    pickle.loads(pickle.dumps(rows))


# --------------------------------------------------------------------------- round samplers


@pytest.mark.parametrize(
    "name, words",
    [
        ("tolist_raises", "returned a ToListRaises whose tolist() raised RuntimeError: tolist refused"),
        ("getattr_raises", "returned a GetattrRaises; reading it raised RuntimeError: no attribute tolist"),
        ("int_raises", "returned an IntRaises whose int() raised RuntimeError: int refused"),
        ("str_raises", "raised StrRaises (its str() raised; repr: StrRaises('hidden'))"),
        ("str_and_repr_raise", "raised StrAndReprRaise (its str() and repr() raised)"),
        ("surrogate_message", "raised ValueError: bad \\ud800"),
        ("len_raises", "whose len() raised RuntimeError: len refused"),
        ("iter_raises", "whose iteration raised RuntimeError: iteration refused"),
        ("returns_a_lambda", "returned a function (<function returns_a_lambda.<locals>.<lambda>"),
        ("repr_raises_token", "returned a ReprRaises (<ReprRaises object>), not an int token id"),
    ],
)
def test_round_junk_is_a_contract_finding(subjects, name, words):
    report = checked(subjects, name)
    assert words in contract_messages(report)[0]


def test_only_ints_reach_the_pipe(subjects):
    """A round of int subclasses that cannot be pickled: the subject's process converts them, so
    the parent receives plain ints (and the contract holds)."""

    class Tok(int):
        def __reduce__(self):
            raise TypeError("not picklable")

    def unpicklable_ints(p_fn, q_fn, prefix, k, rng):
        return [Tok(t) for t in specverify.speculative_step(p_fn, q_fn, prefix, k, rng)]

    case, budget = round_cases.reference_case(), round_cases.get_budget("quick")
    with runner.Runner.for_callable(unpicklable_ints) as handle:
        out, _ = handle.call(round_tasks.contract_task, case, budget, np.random.default_rng(0), 5, limit=30)
    assert out["breach"] is None and len(out["rounds"]) == 5
    assert all(type(t) is int for r in out["rounds"] for t in r)


def test_messages_of_hostile_exceptions_are_plain_strings():
    class Name(str):
        pass

    class Weird(Exception):
        def __str__(self):
            return Name("sub \ud800 class")

    assert guards.describe_exception(Weird()) == "Weird: sub \\ud800 class"
    assert type(guards.message_of(guards.ContractBreach(Weird()))) is str
    big = guards.show(10**5000)  # too long to print: a placeholder, never a crash
    assert big == "<int object>"


# --------------------------------------------------------------------------- the command line


def cli(target: str):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "specverify", "check", target, "--json", "--budget", "quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    "name, words",
    [
        ("loop_returns_nones", "not an Output or a list of token ids"),
        ("str_and_repr_raise", "its str() and repr() raised"),
        ("int_raises", "whose int() raised"),
    ],
)
def test_command_line_exits_1_with_json(subjects, name, words):
    proc = cli(f"{subjects}:{name}")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["exact"] is False and words in contract_messages(report)[0]


def _load(path: str, name: str):
    """A subject of the module file, loaded here (handed to its process by fork)."""
    from specverify.surface.api import load_target

    return load_target(f"{path}:{name}")
