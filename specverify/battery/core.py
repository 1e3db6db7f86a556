"""The interface-agnostic core of every battery: what the round, loop and kernel
batteries share, so that none of them re-implements it.

- **results**: ``Finding`` (one check's verdict on one case), ``BatteryResult`` (the verdict:
  ``exact`` False on a distribution or contract finding, None when a case could not be judged
  to plan, True otherwise; ``efficient`` likewise on efficiency findings), ``coverage_entry``
  (one case as the JSON's ``coverage.cases`` lists it);
- **the subject's side** (code that runs in the subject's process, ``runner.Runner.call``):
  ``time_limit`` (nested SIGALRM deadlines), ``call_subject`` (whatever a call raises becomes
  ``ContractBreach``), ``reading`` and the readers built on it (``items_of``, ``token_id``,
  ``plain_tokens``, ``as_sequence``: junk a subject returns, however hostile, is a finding, never
  a crash of ours), ``show`` / ``type_name`` / ``describe_exception`` / ``message_of`` (messages
  that survive hostile reprs, strs and lone surrogates);
- **the parent's side**: ``call_within`` (one task in the subject's process under its limit
  and the battery's deadline), ``run_in_subject`` (start, run, and turn a deadline, a death or a
  breach into the result), ``subject_process``;
- **random streams**: ``stream(seed, *path)``, the one scheme every battery draws by (below).

Random streams. Every random number a battery draws comes from one node of the tree
of ``numpy.random.SeedSequence(seed)``, the check's seed: ``stream(seed, *path)`` is the node
``SeedSequence(seed, spawn_key=path)``, which is what ``SeedSequence(seed).spawn`` hands out
(``stream(seed, 2, 1)`` is ``SeedSequence(seed).spawn(3)[2].spawn(2)[1]``: the streams drawn by
spawn before are the same nodes, their figures unchanged). ``path[0]`` names the purpose, an
index of the interface's table (``round_cases.ROUND_STREAMS``, ``loop_cases.SEED_STREAMS``,
``kernel.KERNEL_STREAMS``), the rest is what that table says (a case, a look, a replayed seed, a
chunk); the root itself (``default_rng(seed)``) is the stream of each interface's contract or
replay check, as the tables say. Nothing is made by adding offsets to the seed, so no two
purposes, cases or looks share numbers, and a node's numbers depend only on the seed and its
path: a look of a case draws the same numbers whatever else the battery runs (an independent
unit of work).

The statistics themselves (the sequential chi-square, its power, exact TV) are
``specverify.laws.stats`` and ``specverify.laws.exact``; each interface's battery (``interfaces.round`` for
round samplers, ``interfaces.loop``, ``interfaces.kernel``) decides what to run and calls these.

It is over 500 lines because the results, the subject-side guards and readers and the parent's calls
under deadlines are one contract that every battery shares: a ``ContractBreach`` raised by the
guards is what ``call_within`` turns into a ``Finding``, and each part reads the others' types.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np

from ..laws import exact, stats
from . import runner
from .budgets import CAMPAIGN_SECONDS  # noqa: F401 - a campaign's time limits, re-exported
from .environment import environment_problem

# --------------------------------------------------------------------------- random streams


def stream(seed, *path: int) -> np.random.SeedSequence:
    """The node at ``path`` of ``SeedSequence(seed)``'s tree (the module's docstring): ``seed``
    an int (the check's seed), or a ``SeedSequence`` node, whose path this extends (its child
    ``path[0]``, that one's child ``path[1]``, ...). ``stream(seed)`` is the root."""
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(
            seed.entropy, spawn_key=tuple(seed.spawn_key) + tuple(int(i) for i in path), pool_size=seed.pool_size
        )
    return np.random.SeedSequence(int(seed), spawn_key=tuple(int(i) for i in path))


# --------------------------------------------------------------------------- results

EXACT_TV_TOL = 1e-9
"""A correct sampler's exact TV is rounding noise (~1e-15); anything above 1e-9 is a bias."""

DEFAULT_FALSE_FAIL_RATE = stats.DEFAULT_FALSE_FAIL_RATE
POWER_FALSE_PASS_RATE = 0.05
"""Power statements give the smallest TV detected with probability 1 - this."""


class ContractBreach(Exception):
    """The sampler broke the interface: raised, exited, hung, returned junk or wrote its inputs."""


class OutOfTime(Exception):
    """The battery's deadline passed (``run_battery(deadline=...)``)."""


@dataclass
class Finding:
    """One thing a detector found. ``check``: exact-tv | chi-square | tokens-per-round |
    contract | rng; ``kind``: distribution | contract | efficiency | error."""

    check: str
    kind: str
    message: str
    case: str | None = None
    evidence: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A contract finding whose message shows that this machine, not the subject, is at
        fault (no CUDA, a package missing: ``environment.environment_problem``) is an
        environment finding: it makes the verdict neither EXACT nor NOT EXACT."""
        if self.kind == "contract" and environment_problem(self.message):
            self.kind = "environment"

    def to_dict(self) -> dict:
        return asdict(self)


BREAKING_KINDS = ("distribution", "contract", "error")


def stopping_kinds(stop_on_first) -> tuple[str, ...]:
    """The finding kinds that end a battery early under its ``stop_on_first``: none (False), a
    breaking finding (True), or the kinds given (a tuple: the mutant report stops an edge mutant
    at its first edge finding too)."""
    if not stop_on_first:
        return ()
    return BREAKING_KINDS if stop_on_first is True else tuple(stop_on_first)


ORIGINS = ("fixed", "generated", "sweep", "edge", "aimed", "declared")
"""Where a case of a report's ``coverage.cases`` comes from (``coverage_entry``)."""
JUDGED_BY = ("enumeration", "chi-square", "binned chi-square", "exact from uniforms", "contract")
"""How a case was judged: its law enumerated exactly; a sequential chi-square on whole outputs;
one on binned first tokens (vocabularies the enumerator cannot follow); a kernel's law computed
from its uniforms; only its contract (shapes, replay, untouched inputs)."""


def coverage_entry(
    name: str,
    origin: str,
    vocab: int,
    k,
    tokens: int,
    judged: str,
    runs: int | None = None,
    detect_tv: float | None = None,
    **shape,
) -> dict:
    """One case as the JSON's ``coverage.cases`` lists it: ``origin`` fixed | generated | edge |
    aimed (at the user's --vocab/--k/--max-tokens) | declared (by the subject: the only cases it
    can run, not the battery's standard ones); ``vocab``, ``k`` (an int, or a list for a
    loop's requests), ``tokens`` (the window judged, or a loop's largest max_tokens); ``judged``
    one of ``JUDGED_BY``; ``runs`` the samples drawn (None when enumerated); ``detect_tv`` the
    TV its statistics see with power 0.95 (None when enumerated: any TV above 1e-9); ``shape``:
    anything else that defines the case (prefix length, requests, batch)."""
    if origin not in ORIGINS:
        raise ValueError(f"origin: must be {', '.join(ORIGINS[:-1])} or {ORIGINS[-1]}, got {origin!r}")
    if judged not in JUDGED_BY:
        raise ValueError(f"judged: must be one of {', '.join(JUDGED_BY)}, got {judged!r}")
    return {
        "name": name,
        "origin": origin,
        "vocab": vocab,
        "k": k,
        "tokens": tokens,
        "judged": judged,
        "runs": runs,
        "detect_tv": detect_tv,
        **shape,
    }


@dataclass
class BatteryResult:
    """What one battery run found, in the fields every interface fills (round, loop and kernel
    alike). ``mean_tokens_per_round``: each case's (measured, expected) tokens per round, or per
    pass for a loop, or per row for a kernel. ``figures``: the figures one interface alone
    reports, a dataclass of its own package (``interfaces.round.figures.RoundFigures``: the
    optimum tokens per round over exact rules), None where it reports none; ``to_dict`` gives
    them as a dict under ``"figures"`` (empty for None)."""

    findings: list[Finding] = field(default_factory=list)
    exact_tv_max: float | None = None  # the largest exact TV over enumerated cases
    chi2_p_value_min: float | None = None  # the smallest chi-square p-value
    samples_to_detect: int | None = None  # runs the chi-square needed to flag a bias
    mean_tokens_per_round: dict = field(default_factory=dict)  # case -> (measured, expected)
    figures: object | None = None  # the interface's own figures (a dataclass), None without them
    power: list[dict] = field(default_factory=list)  # statistically judged cases: runs, min TV
    shortfalls: list[str] = field(default_factory=list)  # why the verdict cannot be True
    ran: list[str] = field(default_factory=list)  # what was run, one line each
    output: str = ""  # the tail of what the subject printed
    budget: str = ""
    timed_out: bool = False
    counterexample: dict | None = None
    seconds: float = 0.0
    cases: list[dict] = field(default_factory=list)  # every case run, one ``coverage_entry`` each
    reach: dict = field(default_factory=dict)  # dimension -> the largest value the cases run reached

    def cover(self, **entry) -> None:
        """Record one case in ``cases`` (``coverage_entry``'s fields), once per name."""
        row = coverage_entry(**entry)
        if all(c["name"] != row["name"] for c in self.cases):
            self.cases.append(row)

    def flagged(self, kinds=BREAKING_KINDS) -> list[Finding]:
        return [f for f in self.findings if f.kind in kinds and f.check != "rng"]

    @property
    def environment(self) -> str | None:
        """What this environment lacks to run the subject (the first environment finding,
        with what to do), or None."""
        found = self.flagged(("environment",))
        return f"{found[0].message}: {environment_problem(found[0].message)}" if found else None

    @property
    def exact(self) -> bool | None:
        if self.flagged():
            return False
        if self.environment:
            return None
        if self.shortfalls or self.timed_out or any(f.check == "rng" for f in self.findings):
            return None
        return True

    @property
    def efficient(self) -> bool | None:
        if self.flagged(("efficiency",)):
            return False
        if not self.mean_tokens_per_round or any(s.startswith("tokens per round") for s in self.shortfalls):
            return None
        return True

    def to_dict(self) -> dict:
        out = asdict(self)
        out["mean_tokens_per_round"] = {
            k: {"measured": a, "expected": b} for k, (a, b) in self.mean_tokens_per_round.items()
        }
        out["figures"] = out["figures"] or {}  # asdict made a dataclass of figures a dict
        out["exact"], out["efficient"], out["environment"] = self.exact, self.efficient, self.environment
        return out


# --------------------------------------------------------------------------- the subject's side
# Everything in this section runs in the subject's process (runner.Runner.call), or in-process for
# the experiments' own samplers.

_DEADLINES: list[tuple[float, str, type]] = []  # nested time limits, innermost last


REFIRE_S = 0.01
"""Seconds after which an expired limit raises again while its body is still running: Python
ignores an exception raised in a garbage-collector callback or a ``__del__`` (where the alarm
may land), so one alarm alone could let an overrunning body run to its end."""


def _arm() -> None:
    if not _DEADLINES:  # the last limit ended while the alarm was being handled
        return
    remaining = min(d for d, _, _ in _DEADLINES) - time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-4))


def _on_alarm(signum, frame):
    now = time.monotonic()
    for deadline, what, exc in _DEADLINES:  # the outermost expired limit wins
        if deadline <= now + 1e-3:
            signal.setitimer(signal.ITIMER_REAL, REFIRE_S)  # again, should this raise be swallowed
            raise exc(what)
    _arm()


@contextmanager
def time_limit(seconds: float, what: str, exc: type = ContractBreach):
    """Raise ``exc(f"{what} did not return within {seconds} s")`` if the body overruns.

    SIGALRM based (a Python-level loop is interrupted; a loop that swallows the exception or
    hangs in C is the runner's to kill); nests; a no-op outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _DEADLINES:
        signal.signal(signal.SIGALRM, _on_alarm)
    _DEADLINES.append((time.monotonic() + seconds, f"{what} did not return within {seconds:g} s", exc))
    _arm()
    try:
        yield
    finally:
        _DEADLINES.pop()
        if _DEADLINES:
            _arm()
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)


SHOW_CHARS = 120
"""The most characters of a subject's object (its repr) a message shows."""

MESSAGE_CHARS = 500
"""The most characters of a subject's exception message a finding shows."""


class GuardStopped(Exception):
    """A guard's clock stopped a task (``time_limit(..., exc=GuardStopped)``): not a refusal of
    the enumerator, not the subject's failure, and not evidence about the subject."""


PASSED_THROUGH = (ContractBreach, exact.NotEnumerable, GuardStopped)
"""What ``time_limit`` raises (these exact types): never swallowed while describing junk."""


def _plain(text, limit: int) -> str:
    """``text`` (a str or a subclass) as a plain str that encodes as UTF-8 (lone surrogates
    backslash-escaped), cut at ``limit`` characters."""
    out = str.__str__(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return out if len(out) <= limit else out[:limit] + "..."


def type_name(obj) -> str:
    """The name of ``obj``'s type, whatever its metaclass does."""
    try:
        name = type(obj).__name__
        if isinstance(name, str):
            return _plain(name, SHOW_CHARS)
    except BaseException as exc:  # noqa: BLE001 - a hostile metaclass
        if type(exc) in PASSED_THROUGH:
            raise
    return "object"


def show(obj, limit: int = SHOW_CHARS) -> str:
    """``repr(obj)`` for a message, cut at ``limit`` characters; a repr that raises (or an int too
    long to print) gives ``<TYPE object>``."""
    try:
        return _plain(repr(obj), limit)
    except BaseException as exc:  # noqa: BLE001 - a hostile __repr__
        if type(exc) in PASSED_THROUGH:
            raise
    return f"<{type_name(obj)} object>"


def describe_exception(exc: BaseException) -> str:
    """``"TYPE: message"`` for an exception a subject raised; when its ``str()`` raises, its repr,
    and when that raises too, the type alone (both failures said). When the exception carries a
    traceback (it was raised), `` (at FILE:LINE in FUNCTION)`` follows: the innermost frame of the
    subject's own code, i.e. neither specverify's harness (battery, interfaces, laws, common) nor
    the standard library or an installed package (NumPy raising inside a kernel is placed at the
    kernel's line that called it; specverify's own samplers and mutants are subjects' code); the
    innermost frame outside the harness where every one is a library's. FILE is a base name."""
    import os
    import sysconfig
    import traceback

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    harness = tuple(os.path.join(package, part) + os.sep for part in ("battery", "interfaces", "laws", "common"))
    paths = sysconfig.get_paths()
    libraries = tuple(
        {os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    )

    def words() -> str:
        name = type_name(exc)
        try:
            text = _plain(str(exc), MESSAGE_CHARS)
            return f"{name}: {text}" if text else name
        except BaseException as err:  # noqa: BLE001 - a hostile __str__
            if type(err) in PASSED_THROUGH:
                raise
        try:
            return f"{name} (its str() raised; repr: {_plain(repr(exc), MESSAGE_CHARS)})"
        except BaseException as err:  # noqa: BLE001 - a hostile __repr__
            if type(err) in PASSED_THROUGH:
                raise
        return f"{name} (its str() and repr() raised)"

    def frames_raised_through() -> list:
        try:
            return [
                (os.path.abspath(frame.f_code.co_filename), line, frame.f_code.co_name)
                for frame, line in traceback.walk_tb(exc.__traceback__)
            ]
        except BaseException as err:  # noqa: BLE001 - a hostile __traceback__
            if type(err) in PASSED_THROUGH:
                raise
            return []

    def is_subjects_code(path: str) -> bool:
        return path.startswith(package) or not path.startswith(libraries)

    def raise_site() -> str:
        outside = [f for f in frames_raised_through() if not f[0].startswith(harness)]
        own = [f for f in outside if is_subjects_code(f[0])]
        if not outside:
            return ""
        path, line, function = (own or outside)[-1]
        return f" (at {_plain(os.path.basename(path), SHOW_CHARS)}:{line} in {_plain(function, SHOW_CHARS)})"

    return words() + raise_site()


def message_of(exc: BaseException) -> str:
    """The message of a ContractBreach (or NotEnumerable) as a plain str, whoever raised it: a task
    sends this, never ``str(exc)``, back to the parent."""
    try:
        if type(exc) in PASSED_THROUGH:
            return _plain(str(exc), 4 * MESSAGE_CHARS)
    except BaseException:  # noqa: BLE001 - raised by the subject with a hostile argument
        pass
    try:
        return f"raised {describe_exception(exc)}"
    except BaseException:  # noqa: BLE001 - nothing may escape a task
        return "raised an exception that cannot be described"


@contextmanager
def reading(what: str):
    """Reading what a subject returned (its ``__len__``, ``__iter__``, ``__int__``, ``tolist``, a
    property, ...): whatever that raises becomes ``ContractBreach(f"{what} raised ...")``. The time
    limits' own exceptions pass; a KeyboardInterrupt passes outside the subject's process."""
    try:
        yield
    except PASSED_THROUGH:
        raise
    except KeyboardInterrupt as exc:
        if not runner.IN_SUBJECT_PROCESS:
            raise
        raise ContractBreach(f"{what} raised KeyboardInterrupt") from exc
    except BaseException as exc:  # noqa: BLE001 - the subject's junk is a finding
        raise ContractBreach(f"{what} raised {describe_exception(exc)}") from exc


def items_of(seq, what: str, limit: int) -> tuple[int, list]:
    """(``len(seq)``, its items) of a list or tuple (or a subclass) the subject returned, read
    once: its ``len()`` and its iteration must agree. Past ``limit`` items only ``limit`` + 1 are
    read (the caller refuses that many)."""
    with reading(f"{what} a {type_name(seq)} whose len()"):
        n = int.__index__(len(seq))
    with reading(f"{what} a {type_name(seq)} whose iteration"):
        items = list(itertools.islice(iter(seq), min(n, limit) + 1))
    if n <= limit and len(items) != n:
        raise ContractBreach(
            f"{what} a {type_name(seq)} whose len() is {n} but which iterates "
            f"{'more' if len(items) > n else len(items)} items"
        )
    return n, items


def token_id(t, vocab_size: int, what: str) -> int:
    """``t`` as an int in [0, vocab_size): an int or NumPy integer, not a bool; its ``int()`` is
    called once (a subclass may answer differently each time)."""
    with reading(f"{what} a {type_name(t)}; checking its type"):
        is_int = not isinstance(t, bool) and isinstance(t, (int, np.integer))
    if not is_int:
        raise ContractBreach(f"{what} a {type_name(t)} ({show(t)}), not an int token id")
    with reading(f"{what} a {type_name(t)} whose int()"):
        v = int(t)
    if not 0 <= v < vocab_size:
        raise ContractBreach(f"{what} token {show(v)}, outside the vocabulary [0, {vocab_size})")
    return v


PLAIN_INTS = frozenset({int, *(np.dtype(c).type for c in "bBhHiIlLqQ")})
"""Token types that run no code of the subject's when read (``type(t) in PLAIN_INTS``)."""


def plain_tokens(seq, vocab_size: int) -> list[int] | None:
    """The fast path: ``seq`` as a list of ints when it is a list or tuple (exactly those types)
    of plain ints in [0, vocab_size), else None (read it carefully). Runs no subject code."""
    if type(seq) is not list and type(seq) is not tuple:
        return None
    for t in seq:
        if type(t) not in PLAIN_INTS or not 0 <= t < vocab_size:
            return None
    return [int(t) for t in seq]


def as_sequence(seq, what: str) -> tuple[object, bool]:
    """(``seq``, or its ``tolist()`` for a NumPy / torch array, and whether that is a list or
    tuple), read under ``reading``: whatever the subject's object raises is ContractBreach."""
    with reading(f"{what} a {type_name(seq)}; reading it"):
        if not isinstance(seq, (list, tuple)) and hasattr(seq, "tolist"):  # NumPy / torch
            with reading(f"{what} a {type_name(seq)} whose tolist()"):
                seq = seq.tolist()
        return seq, isinstance(seq, (list, tuple))


def call_subject(fn: Callable, args: tuple, interrupt_after: float | None = None):
    """``fn(*args)``; whatever it raises (SystemExit and, in the subject's process,
    KeyboardInterrupt included) becomes ContractBreach; ``interrupt_after`` seconds interrupt it
    (SIGALRM)."""
    try:
        if interrupt_after is None:
            return fn(*args)
        with time_limit(interrupt_after, "one call"):
            return fn(*args)
    except (ContractBreach, exact.NotEnumerable, GuardStopped):
        raise  # a time limit, a guard or the enumerator's refusal (the tasks take their message safely)
    except KeyboardInterrupt as exc:
        if not runner.IN_SUBJECT_PROCESS:
            raise
        raise ContractBreach("raised KeyboardInterrupt") from exc
    except SystemExit as exc:
        raise ContractBreach(f"called sys.exit({_exit_code(exc)}) (raised SystemExit)") from exc
    except BaseException as exc:  # noqa: BLE001 - the subject's failure is a finding
        raise ContractBreach(f"raised {describe_exception(exc)}") from exc


def _exit_code(exc: SystemExit) -> str:
    try:
        return show(exc.code)
    except BaseException:  # noqa: BLE001 - a SystemExit subclass with a hostile ``code``
        return "?"


# --------------------------------------------------------------------------- the parent's side

_LISTENERS: list[Callable[[str], None]] = []


@contextmanager
def listening(listener: Callable[[str], None]):
    """Within the block, ``listener(words)`` hears every ``announce``: what a battery is about to
    do (a forecast of its runs), for a progress line; never part of a result."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)


def announce(words: str) -> None:
    """Tell the listeners (``listening``) ``words``; a listener that fails is dropped silently."""
    for listener in list(_LISTENERS):
        try:
            listener(words)
        except Exception:  # noqa: BLE001 - progress never breaks a check
            _LISTENERS.remove(listener)


class Speed:
    """Rounds and the seconds they took (a battery's first calls): the pace of a forecast,
    never an input to a verdict."""

    def __init__(self) -> None:
        self.rounds, self.tokens, self.seconds = 0, 0, 0.0

    def add(self, rounds: list, seconds: float) -> None:
        self.rounds += len(rounds)
        self.tokens += sum(len(r) for r in rounds)
        self.seconds += seconds

    def rounds_per_second(self) -> float | None:
        return self.rounds / self.seconds if self.rounds and self.seconds > 0 else None

    def tokens_per_round(self) -> float:
        return self.tokens / self.rounds if self.rounds else 1.0


class Battery:
    """What every battery holds on the parent's side, whatever its interface: the started
    subject (a ``runner.Runner``), the budget (a dataclass with a ``name``), the seed, the
    deadline (a ``time.monotonic()`` value or None) and the ``BatteryResult`` it fills.
    ``call`` runs one task in the subject's process under its limit and the deadline;
    ``breach`` records a contract finding (``run_in_subject`` calls it when the subject died
    or broke the interface mid-stage). Subclasses (``interfaces.round.RoundBattery``,
    ``interfaces.loop_checks.LoopBattery``, ``interfaces.kernel.KernelBattery``) add the checks."""

    def __init__(self, subject: runner.Runner, budget, seed: int, deadline: float | None):
        self.subject, self.budget, self.seed, self.deadline = subject, budget, seed, deadline
        self.result = BatteryResult(budget=budget.name)
        self.runs_done, self.runs_planned = 0, None  # sampled runs so far, and the budget's plan
        self.workers = 1  # processes that share independent calls (``map_calls``): the subject's and clones
        self._clones: list[runner.Runner] = []

    def map_calls(self, calls: list[tuple], seconds: list[float], stop: Callable[[object], bool]) -> list:
        """``[task(subject, *args) for task, args in calls]`` in order, each within its
        ``seconds``, shared among ``workers`` processes of the subject (the subject's own and
        clones loaded the same way, started on first use, closed by ``close``). The calls must
        be independent (each draws from its own stream); the results are cut after the first
        for which ``stop`` is true, so they are the same as one process calling them in order
        and stopping there. One process: exactly that."""
        if self.workers <= 1 or len(calls) <= 1:
            out = []
            for (task, args), limit in zip(calls, seconds):
                out.append(self.call(task, *args, seconds=limit))
                if stop(out[-1]):
                    break
            return out
        return self._map_in_parallel(calls, seconds, stop)

    def _map_in_parallel(self, calls, seconds, stop) -> list:
        import threading

        handles = [self.subject, *self._started_clones()]
        results: dict[int, tuple[bool, object]] = {}
        lock, next_call, cut = threading.Lock(), [0], [len(calls)]

        def work(handle) -> None:
            while True:
                with lock:
                    i = next_call[0]
                    if i >= cut[0]:
                        return
                    next_call[0] += 1
                task, args = calls[i]
                try:
                    value = call_within(handle, task, args, seconds[i], self.deadline, self.now)
                    done = (True, value)
                except BaseException as exc:  # noqa: BLE001 - re-raised in order below
                    done = (False, exc)
                with lock:
                    results[i] = done
                    if not done[0] or stop(done[1]):
                        cut[0] = min(cut[0], i + 1)

        threads = [threading.Thread(target=work, args=(h,), daemon=True) for h in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = []
        for i in range(cut[0]):
            ok, value = results[i]
            if not ok:
                raise value
            out.append(value)
        return out

    def _started_clones(self) -> list[runner.Runner]:
        """``workers - 1`` more processes of the subject, loaded as its own was."""
        while len(self._clones) < self.workers - 1:
            clone = self.subject.clone()
            self._clones.append(clone)
            clone.start()
        return self._clones

    def close(self) -> None:
        """End the clones ``map_calls`` started (the subject's own process is its owner's)."""
        clones, self._clones = self._clones, []
        for clone in clones:
            clone.close()

    def plan(self, runs: int, words: str = "") -> None:
        """Record the runs the budget plans from here on (the run count a time limit is
        reported against) and announce them with ``words`` (the forecast) to the listeners."""
        self.runs_planned = self.runs_done + runs
        if words:
            announce(words)

    def stopped_words(self) -> str:
        """What a time limit stopped, in those words: after how many of the planned runs."""
        if self.runs_planned:
            return f"stopped by the time limit after {self.runs_done:,} of {self.runs_planned:,} runs"
        return "stopped by the time limit before the planned runs"

    def call(self, task, *args, seconds: float):
        """The task in the subject's process, killed past ``seconds`` (or the deadline)."""
        return call_within(self.subject, task, args, seconds, self.deadline, self.now)

    def now(self) -> float:
        """The battery's clock (``time.monotonic``; a battery that served some calls from
        elsewhere adds the time they took there)."""
        return time.monotonic()

    def breach(self, message: str, case=None) -> None:
        """A contract finding on ``case`` (a case with a ``name``, a name, or None)."""
        self.result.findings.append(Finding("contract", "contract", message, getattr(case, "name", case)))


def call_within(
    subject: runner.Runner, task, args: tuple, seconds: float, deadline: float | None, now: Callable[[], float]
):
    """``task(subject, *args)`` in the subject's process, killed past ``seconds`` or the battery's
    ``deadline`` (on the clock ``now``): OutOfTime once the deadline has passed, ContractBreach
    when the subject's process failed before it. Every battery's calls go through here."""
    limit = seconds
    if deadline is not None:
        limit = min(limit, deadline - now())
        if limit <= 0:
            raise OutOfTime()
    try:
        return subject.call(task, *args, limit=limit)
    except runner.SubjectFailed as exc:
        if deadline is not None and now() >= deadline:
            raise OutOfTime() from None
        raise ContractBreach(str(exc)) from None


def run_in_subject(subject, battery_for: Callable, run: Callable) -> BatteryResult:
    """Start the subject's process (unless ``subject`` is a started Runner), ``run`` the battery
    ``battery_for(runner)`` makes, and turn a deadline, a death or a breach that ended it into the
    result; the subject's output and the seconds taken are recorded."""
    t0 = time.perf_counter()
    own = not isinstance(subject, runner.Runner)
    handle = runner.Runner.for_callable(subject) if own else subject
    battery_run = battery_for(handle)
    try:
        if own:
            handle.start()
        run(battery_run)
    except OutOfTime:
        battery_run.result.timed_out = True
        battery_run.result.ran.append(battery_run.stopped_words())
        battery_run.result.shortfalls.append(battery_run.stopped_words())
    except (runner.SubjectFailed, ContractBreach) as exc:  # it died loading, or mid-stage
        battery_run.breach(str(exc), None)
        battery_run.result.ran.append("contract: breached; the remaining detectors skipped")
    finally:
        battery_run.close()
        battery_run.result.output = handle.output_excerpt()
        if own:
            handle.close()
    battery_run.result.seconds = time.perf_counter() - t0
    return battery_run.result


@contextmanager
def subject_process(subject):
    """``subject`` as a started ``runner.Runner``: itself when it is one (left running), else a
    process of its own for the callable, closed on leaving (also when starting it failed)."""
    if isinstance(subject, runner.Runner):
        yield subject
        return
    handle = runner.Runner.for_callable(subject)
    try:
        handle.start()
        yield handle
    finally:
        handle.close()


__all__ = [
    "BREAKING_KINDS",
    "CAMPAIGN_SECONDS",
    "DEFAULT_FALSE_FAIL_RATE",
    "EXACT_TV_TOL",
    "JUDGED_BY",
    "MESSAGE_CHARS",
    "PASSED_THROUGH",
    "PLAIN_INTS",
    "POWER_FALSE_PASS_RATE",
    "SHOW_CHARS",
    "Battery",
    "BatteryResult",
    "ContractBreach",
    "Finding",
    "GuardStopped",
    "OutOfTime",
    "Speed",
    "announce",
    "as_sequence",
    "call_subject",
    "call_within",
    "coverage_entry",
    "describe_exception",
    "items_of",
    "listening",
    "message_of",
    "plain_tokens",
    "reading",
    "run_in_subject",
    "show",
    "stream",
    "subject_process",
    "time_limit",
    "token_id",
    "type_name",
]
