"""The one budget table: what one battery run of each interface may spend, by budget name.

``TABLE[name][interface]`` is the ``interface``'s section of the budget ``name`` (``NAMES``:
quick, standard, thorough): a ``Budget`` for the round interface (a sampler's
``speculative_step``), a ``LoopBudget`` for a generation loop, a ``KernelBudget`` for a batched
verification kernel. ``section(interface, budget)`` is the one way from what a caller gives
(a name, ``tv=X``, a budget object) to the interface's budget; the interface modules' tables and
lookups (``round_cases.BUDGETS`` / ``get_budget``, ``loop_cases.LOOP_BUDGETS`` /
``get_loop_budget`` / ``campaign_loop_budget``, ``kernel.KERNEL_BUDGETS`` / ``get_budget``) are
views of this one.

``tv=X`` (0 < X < 1) is a campaign budget of every interface: the thorough section with every
statistical test sized to see a TV of X and time limits that do not cut it short
(``CAMPAIGN_SECONDS``). The loop's and the kernel's are built here; the round's needs the run
count its cases' laws call for, so ``round_cases.get_budget`` hands ``section`` its own builder
(``round_cases.campaign_budget``: ``section(..., campaign_of=)``); this module never loads an
interface.

This module imports only the standard library, so that a command line can list the budget names
and check ``--budget`` before NumPy, SciPy or a battery loads (a usage error within a second);
what a budget covers (its cases) is each interface's ``coverage(budget)``.

Every section sweeps each size dimension one at a time, the others small, so a sweep's cost stays
linear in the number of dimensions; ``sweep_corners`` (thorough, and so ``tv=X``, only) adds the
pairwise corners, the cases at the joint largest values of pairs of swept dimensions
(``interfaces.corners``), where a bug that needs both sizes at once shows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..common.validation import DEFAULT_FALSE_FAIL_RATE
from ..errors import ArgumentTypeError, InterfaceError

CAMPAIGN_SECONDS = 7 * 24 * 3600.0
"""A campaign budget's time limits (``--budget tv=X``, every interface): a week per subject,
i.e. no limit a campaign should reach (the run count, not the clock, ends it)."""

CAMPAIGN_PREFIX = "tv="

TV_RANGE = "0 < X < 1"
"""The range of X in a campaign budget ``tv=X`` (``check_tv_budget``): a TV strictly between 0
(no run count sees it) and 1 (the largest TV; nothing to see)."""


# --------------------------------------------------------------------------- the sections


@dataclass(frozen=True)
class Budget:
    """The round section: everything a round battery run may spend (``interfaces.round``).

    Every count below decides the verdict; no clock does. Each case's runs, paths and rounds are
    fixed by the budget, so the verdict, the findings and every case's run count are a function
    of (subject, seed, budget) alone. The ``*_guard_s`` fields, ``enumeration_idle_s`` (an
    enumeration is cut only when it stops progressing) and ``call_limit_s`` only stop a
    subject that hangs: what a guard stops is reported as stopped by that guard, and is not
    judged (the verdict is then inconclusive), never judged on fewer runs."""

    name: str
    cases: tuple[int, ...]  # indices into round_cases.all_cases()
    stat_cases: int  # enumerated cases drawn from the seed for the pooled cross-check (0: none)
    n_max: int  # the sequential chi-square's looks double up to this (more where detect_tv needs more)
    cross_check_tv: float = 0.2  # the pooled cross-check sees this TV averaged over its cases (w.p. 0.95)
    n_min: int = 500
    contract_calls: int = 4  # rounds per case of the contract check (each enumerated path is checked too)
    call_limit_s: float = 2.0  # guard: one sampler call
    max_paths: int = 100_000  # the most paths one case's enumeration may follow
    # guard: an enumeration is stopped (not enumerated) only when no call returned for call_limit_s + this
    enumeration_idle_s: float = 30.0
    detect_tv: float = 0.1  # a fixed or generated case judged by statistics alone sees this TV (w.p. 0.95)
    round_length_runs: int = 4000
    detect_tokens: float = 0.5  # ... and a sampled tokens-per-round shortfall of this size
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    counterexample_samples: int = 2000
    counterexample_guard_s: float = 600.0  # guard: the whole counterexample search
    generated: int = 3  # cases drawn from the check's seed besides the fixed ones (generated_cases)
    # sweeps, one dimension at a time over its boundary values (round_cases.sweep_cases), enumerated:
    sweep_context: int = 512  # context lengths 0, 1, 2, 2^j - 1, 2^j, 2^j + 1, ... up to this
    sweep_k: int = 8  # every k from 1 up to this, a window of k + 1 tokens
    sweep_runs: int = 1000  # the fewest runs of a swept case the enumerator cannot follow ...
    sweep_tv: float = 0.15  # ... sized up until it sees this TV (w.p. 0.95)
    sweep_max_paths: int = 2000  # the most paths a swept case's enumeration may follow (past it: sampled)
    sweep_corners: bool = False  # the pairwise corner: context x k at both largest values (corners.py)
    engine_vocab: int = (
        4096  # one more generated case: a dense i.i.d. pair over this many ids, k = 1, enumerated (0: none)
    )
    # engine-scale cases judged by a binned chi-square per position (specverify.laws.scale): (V, k, side);
    # thorough's (a k = 8 window is 6.7 rounds a run): at standard only the dense engine_vocab case,
    # binned where the enumerator cannot follow it, so standard covers the same box for every subject
    scale_cases: tuple[tuple[int, int, str], ...] = ()
    scale_runs: int = 1000  # the fewest runs per binned (engine-scale, engine_vocab or aimed) case (one look) ...
    scale_tv: float = 0.12  # ... sized up until each position's binned chi-square sees this binned TV
    scale_call_limit_s: float = 10.0  # guard: one call on an engine-scale case (past it: not judged there)
    scale_beside_exact: bool = False  # the binned cases run even where engine_vocab's exact law was had


@dataclass(frozen=True)
class LoopBudget:
    """The loop section: what one loop battery runs (``interfaces.loop``): the fixed cases
    (``loop_cases``, every budget), ``generated`` cases drawn from the check's seed
    (``generated_loop_cases``, each at most ``generated_paths`` paths of the reference loop),
    ``seeds`` seeds replayed alone / batched / beside a same-seed request and ``seed_law_runs``
    seeds 0..n-1 judged by their law (``seed-law``), the sweeps (``sweep_loop_cases``: one
    dimension at a time to ``sweep_context``, ``sweep_rounds``, ``sweep_seeded_rounds``,
    ``sweep_max_tokens`` and ``sweep_batch``, ``sweep_runs`` runs each where sampled) and the
    engine-scale batch.

    Every sample size is a count of this budget (paths, runs, seeds, candidates), never a time,
    so the same subject and seed get the same cases, runs and verdict on an idle machine and a
    loaded one. Clocks are hang guards only, and never cut a task that progresses:
    ``call_limit_s`` interrupts one call of the loop, and a task in the subject's process (an
    enumeration, a case's runs, the seeds) is stopped only when no loop call has returned for
    ``call_limit_s`` + ``task_idle_s`` (a hang no signal interrupts), whatever its length; what
    a guard stops is reported as such ("stopped by a guard: ... after N of M runs: why; not
    judged") and its case is not judged (inconclusive), never judged on fewer runs.

    Measured: the reference loop, 2 shared cores, one battery in a fresh process, wall time
    (``specverify check specverify.samplers.reference_loop:generate --budget B``), before the
    sweeps and counted runs -> after:

    ==========  =========  ==============  =============  ===================  =================
    budget      generated  paths per case  seed-law runs  sweep runs (context)  wall time
    ==========  =========  ==============  =============  ===================  =================
    quick       2          <= 40           200            150 (128)            3.6 -> 8.1 s
    standard    4          <= 40           400            300 (512)            10.9 -> 16.1 s
    thorough    16         <= 400          2000           1000 (2048)          77 -> 136 s
    ==========  =========  ==============  =============  ===================  =================

    Of the standard budget's 5 s more, the sampled sweeps are nearly all (max_tokens 64 and the
    batch of 64 about 2 s each); thorough's engine-scale batch now runs its 400 runs (~100 s at
    V = 33,024) where its 60 s limit cut it to 264. The reference behind its own generator (every
    case by statistics) took 27 s at standard before and 41 s after.
    """

    name: str
    max_paths: int = 60_000
    samples: int = 4000  # the fewest runs per core case the enumerator cannot follow (more where detect_tv needs)
    extra_samples: int = 500  # ... per edge, generated or sweep case (its power stated, not required)
    extra_max_paths: int = 2000  # the most paths enumerated on an edge, generated or sweep case
    detect_tv: float = 0.1  # a request judged by statistics alone must see this TV (w.p. 0.95)
    seeds: int = 12  # seeds of the reproducibility checks (alone vs batched, same-seed pairs)
    call_limit_s: float = 2.0  # hang guard: one call of the loop (past it: stopped by a guard, not judged)
    # hang guard: a task is stopped (not judged) only when no loop call returned for call_limit_s + this
    task_idle_s: float = 30.0
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    counterexample_samples: int = 1000  # runs per candidate the enumerator cannot follow
    counterexample_candidates: int = 250  # the most candidates the counterexample search judges
    generated: int = 4  # cases drawn from the seed besides the fixed ones (generated_loop_cases)
    generated_paths: int = 40  # the most paths of the reference loop a generated case may need
    seed_law_runs: int = 400  # seeds 0..n-1 of a seeded request, chi-square against its law
    # engine scale (scale_loop_cases): a context-free pair over scale_vocab ids (0: none), k =
    # scale_k, max_tokens scale_tokens, scale_runs runs (an aimed batch too)
    scale_vocab: int = 4096
    scale_k: int = 8
    scale_tokens: int = 8
    scale_runs: int = 300
    # the sweeps (sweep_loop_cases), one dimension at a time, the others small; 0 turns one off
    sweep_context: int = 512  # the longest context (prompt + output), enumerated exactly
    sweep_rounds: int = 16  # rounds of one unseeded request (max_tokens 2 x this, k = 1)
    sweep_seeded_rounds: int = 8  # rounds of one seeded request, judged over seed_law_runs seeds
    sweep_max_tokens: int = 64  # the largest max_tokens
    sweep_batch: int = 64  # the most requests in one batch
    sweep_runs: int = 300  # runs of each sampled sweep case (a sweep the enumerator cannot follow too)
    sweep_corners: bool = False  # the pairwise corners, context x rounds / max_tokens / batch (corners.py)


@dataclass(frozen=True)
class KernelBudget:
    """The kernel section: what one kernel battery runs (``interfaces.kernel``).

    The sweeps (``kernel.sweeps.sweep_cases``; ``kernel.reach`` names their largest values) go one
    dimension at a time, the others small, so their cost is linear in the dimensions:

    ==========  ===========  ================  =======  ==================================
    budget      dense V      binned V          k        batch rows
    ==========  ===========  ================  =======  ==================================
    quick       (none)       (none)            1-4      31-33, 63-65
    standard    1024, 4096   65,537, 152,064   1-8      2, 3, 2^j - 1..2^j + 1 (j 4-9), 1024
    thorough    .. 32,768    65,537, 152,064   1-16     .. 1025, 2047-2049, 4096
    ==========  ===========  ================  =======  ==================================

    Measured: the NumPy reference kernel, 2 shared cores, seed 0: ``specverify check`` at
    standard 10-11 s before the sweeps, 15-17 s with them (one battery in process 6-8 -> 15-18 s:
    dense V = 4096 3-7 s of it, binned V 4.5 s, batch rows and pairs 1-3 s, every k 1.2 s); quick
    0.8-1.1 -> 1.4-1.9 s; thorough's dense V = 32,768 alone 171 s. A generator kernel (judged by
    statistics, the dense and binned sweeps too) at standard: 229 s under a load of 7 to 17, its binned
    sweeps 36 s (V 65,537) and 40 s (V 152,064) of it.
    """

    name: str
    generated: int = 4  # cases drawn from the seed besides the fixed ones
    engine_scale: bool = True  # the dense k = 8, tile and wide-id cases, one drawn V-wide case
    dense_vocab: int = 256  # the dense case's V (its exact law costs ~V^2: 3 s at V = 1000)
    spot_rows: int = 256  # random uniform rows per instance checked against the factorization,
    spot_bytes: int = 32 << 20  # ... at most this many input bytes of them (at least 32 rows):
    # 84 rows at V = 33,024, k = 1, where 256 rows cost 2.4 s of a 6 s battery
    n_min: int = 20_000  # rows per instance at the first look of the sequential chi-square
    n_max: int = 160_000
    detect_tv: float = 0.02  # statistics must see this TV per instance (w.p. 1 - POWER_FALSE_PASS_RATE)
    large_row_bytes: int = 4 << 10  # an instance whose row is larger than this (k, V at engine scale) ...
    detect_tv_large: float = 0.1  # ... must see this TV by statistics (its exact law needs uniforms)
    chunk_bytes: int = 64 << 20  # input bytes per kernel call
    call_limit_s: float = 30.0  # one kernel call
    device: str = "cpu"  # "cuda" / "cuda:N": torch tensors on that device (the runner then spawns)
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    # the sweeps (``kernel.sweeps.sweep_cases``), one dimension at a time, the others small:
    scan_rows: int = 32  # the most rows per call of a law's scans: laws measured below the first tile
    dense_sweep: tuple[int, ...] = (1024, 4096)  # dense V (every id in p and q), k = 1: cost ~V^2
    binned_sweep: tuple[int, ...] = (65_537, 152_064)  # wide V, mass on ids past 65,535 and at the top
    k_sweep: int = 8  # one case per k = 1..k_sweep (V = 6), value edges at the last draft
    batch_sweep: tuple[int, ...] = (  # batch rows: 2^j - 1, 2^j, 2^j + 1 around the tiles 16..512, to 1024
        2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024,
    )  # fmt: skip
    batch_calls: int = 16  # calls per batch size, every row checked against its instance's function
    rescans: int = 2  # disagreeing rows a case (batch rows, edge probes) whose law is measured where they sit
    pair_calls: int = 32  # batches of identical rows (the largest batch size) in the pairwise test
    sweep_corners: bool = False  # the pairwise corners, k x batch and binned V x k (corners.py)


# --------------------------------------------------------------------------- the table

TABLE = {
    "quick": {
        "round": Budget(
            "quick",
            (0, 4, 6),
            stat_cases=2,
            n_max=4000,
            cross_check_tv=0.3,
            detect_tv=0.15,
            sweep_tv=0.25,
            scale_tv=0.2,
            generated=1,
            sweep_context=64,
            engine_vocab=0,
            scale_cases=(),
            scale_runs=1000,
        ),
        "loop": LoopBudget(
            "quick",
            samples=2000,
            extra_samples=250,
            seeds=6,
            detect_tv=0.15,
            generated=2,
            seed_law_runs=200,
            scale_vocab=1100,
            scale_k=4,
            scale_tokens=5,
            scale_runs=300,
            sweep_context=128,
            sweep_runs=150,
        ),
        "kernel": KernelBudget(
            "quick",
            generated=2,
            engine_scale=False,
            n_max=40_000,
            detect_tv=0.04,
            dense_sweep=(),
            binned_sweep=(),
            k_sweep=4,
            batch_sweep=(31, 32, 33, 63, 64, 65),
            batch_calls=8,
            pair_calls=16,
        ),
    },
    "standard": {
        "round": Budget("standard", (0, 2, 3, 4, 5, 6, 7), stat_cases=2, n_max=16_000, cross_check_tv=0.25),
        "loop": LoopBudget("standard"),
        "kernel": KernelBudget("standard"),
    },
    "thorough": {
        "round": Budget(
            "thorough",
            tuple(range(12)),
            stat_cases=12,
            n_max=64_000,
            cross_check_tv=0.1,
            detect_tv=0.05,
            sweep_tv=0.1,
            scale_tv=0.1,
            generated=12,
            sweep_context=4096,
            sweep_k=10,
            sweep_corners=True,
            engine_vocab=8192,
            scale_cases=((4096, 8, "residual"), (33024, 8, "draft"), (152064, 4, "residual")),
            scale_beside_exact=True,
        ),
        "loop": LoopBudget(
            "thorough",
            max_paths=400_000,
            samples=16_000,
            extra_samples=4000,
            extra_max_paths=20_000,
            seeds=40,
            detect_tv=0.05,
            counterexample_candidates=500,
            generated=16,
            generated_paths=400,
            seed_law_runs=2000,
            scale_vocab=33_024,
            scale_runs=400,  # ~0.24 s a run of the reference at V = 33,024: 400 runs ~100 s
            sweep_context=2048,
            sweep_rounds=32,
            sweep_seeded_rounds=16,
            sweep_max_tokens=128,
            sweep_batch=128,
            sweep_runs=1000,
            sweep_corners=True,
        ),
        "kernel": KernelBudget(
            "thorough",
            generated=24,
            dense_vocab=1000,
            n_max=1_280_000,
            detect_tv=0.006,
            dense_sweep=(1024, 4096, 32_768),
            k_sweep=16,
            batch_sweep=KernelBudget.batch_sweep + (1025, 2047, 2048, 2049, 4096),
            batch_calls=32,
            rescans=4,
            pair_calls=128,
            sweep_corners=True,
        ),
    },
}
"""Budget name -> interface -> that interface's section (every name has every interface)."""

NAMES = tuple(TABLE)
"""The named budgets, smallest first: what ``--budget`` offers besides ``tv=X``."""

CLASSES = {"round": Budget, "loop": LoopBudget, "kernel": KernelBudget}
"""Each interface's section class (the interfaces of ``specverify.interfaces.NAMES``)."""


def view(interface: str) -> dict:
    """``{name: the interface's section}`` over ``NAMES``: the interface modules' tables."""
    return {name: TABLE[name][interface] for name in NAMES}


# --------------------------------------------------------------------------- names and tv=X


def words() -> str:
    """The budgets a user may name, for messages: ``quick, standard, thorough or tv=X (0 < X < 1)``."""
    return f"{', '.join(NAMES)} or {CAMPAIGN_PREFIX}X ({TV_RANGE})"


def unknown(interface: str | None, name):
    """The one error for a budget that is not in the table: an ``InterfaceError`` (a usage
    error; a ValueError) naming ``budget``, the interface (None: every interface) and the
    budgets it has."""
    where = f"the {interface} interface has" if interface else "every interface has"
    return InterfaceError(f"budget: {where} the budgets {words()}, got {name!r}")


def is_campaign(name) -> bool:
    """Whether ``name`` asks for a campaign budget (``tv=...``; its X not yet checked)."""
    return isinstance(name, str) and name.startswith(CAMPAIGN_PREFIX)


def check_tv_budget(name: str) -> float:
    """X of a campaign budget named ``tv=X`` (every interface's): a number with 0 < X < 1
    (``TV_RANGE``), else an InterfaceError (a usage error, a ValueError) naming the budget, the
    range X may take, what X means and an example."""
    try:
        tv = float(name[len(CAMPAIGN_PREFIX) :])
    except ValueError:
        tv = float("nan")
    if not 0 < tv < 1:
        raise InterfaceError(
            f"budget: tv=X needs {TV_RANGE} (X: the total variation every statistical test must "
            f"see, e.g. tv=0.01), got {name!r}"
        )
    return tv


def check_name(name) -> str:
    """``name`` when it is a budget every interface has (one of ``NAMES``, or ``tv=X`` with
    0 < X < 1), checked without building anything (a command line's ``--budget``); else an
    InterfaceError naming ``budget`` (``check_tv_budget``'s, or ``unknown``'s)."""
    if is_campaign(name):
        check_tv_budget(name)
        return name
    if not isinstance(name, str) or name not in TABLE:
        raise unknown(None, name)
    return name


def check_budget(budget: object) -> object:
    """``budget`` as a caller of the API gives it, checked once without building anything: a name
    every interface has (``check_name``) or a budget object of one interface's class
    (``CLASSES``: a round ``Budget``, a ``LoopBudget``, a ``KernelBudget``), returned as it is.
    An unknown name or a bad ``tv=X`` is an InterfaceError, anything else an ArgumentTypeError,
    each naming ``budget``. The interface that runs the check resolves it (its ``budget``)."""
    if isinstance(budget, tuple(CLASSES.values())):
        return budget
    if not isinstance(budget, str):
        raise ArgumentTypeError(
            f"budget: expected a name ({words()}) or a budget object, got {budget!r} of type {type(budget).__name__}"
        )
    return check_name(budget)


# --------------------------------------------------------------------------- the resolver


def campaign(interface: str, name: str):
    """The ``interface``'s section of the campaign budget ``name`` (``tv=X``, X checked by
    ``check_tv_budget``):

    - loop: the thorough section with every request the enumerator cannot follow (fixed, edge or
      generated case) sampled until its chi-square sees TV X (``samples`` and ``extra_samples``
      0: sized per request from its law), named ``tv={X:g}``; the seed law and the engine-scale
      batch keep the thorough counts, run to the end (their power is stated in the result);
    - kernel: the thorough section with statistics sized to see TV X (``n_max`` unbounded),
      named ``name`` as given;
    - round: not here: its run count comes from its cases' laws, so ``round_cases.get_budget``
      passes ``section`` its own builder (``campaign_of``); asked here, a KeyError (a caller's bug).

    No time limit cuts a campaign short: the loop's guards stop only a hang (no loop call
    returned for ``call_limit_s`` + ``task_idle_s``), never a task that progresses."""
    tv = check_tv_budget(name)
    thorough = TABLE["thorough"][interface]
    if interface == "loop":
        assert isinstance(thorough, LoopBudget), "TABLE's loop sections are LoopBudgets"
        return replace(
            thorough,
            name=f"tv={tv:g}",
            detect_tv=tv,
            samples=0,
            extra_samples=0,
        )
    if interface == "kernel":
        assert isinstance(thorough, KernelBudget), "TABLE's kernel sections are KernelBudgets"
        return replace(thorough, name=name, detect_tv=tv, n_max=1 << 40)
    raise KeyError(f"{interface}: its tv=X section is built by the interface (section's campaign_of)")


def section(interface: str, budget, campaign_of=None):
    """The ``interface``'s budget for ``budget``, which may be:

    - a budget object of the interface's own class (``CLASSES``): returned as it is;
    - a name of ``NAMES``: ``TABLE[name][interface]``;
    - ``tv=X``: the interface's campaign budget: ``campaign_of(X)`` where the interface gives its
      builder (the round's needs its cases), else ``campaign``; a bad X is a ValueError naming
      the budget;
    - a budget object of another interface's class (anything with a ``name``): by its name, as
      above (a round ``Budget("quick", ...)`` gives the loop's quick section).

    Anything else (an unknown name, a name the table lacks) is ``unknown``'s InterfaceError.
    An unknown ``interface`` is a KeyError (a caller's bug, not a user's)."""
    own = CLASSES[interface]
    if isinstance(budget, own):
        return budget
    name = getattr(budget, "name", budget)
    if is_campaign(name):
        return campaign_of(check_tv_budget(name)) if campaign_of else campaign(interface, name)
    if not isinstance(name, str) or name not in TABLE:
        raise unknown(interface, name)
    return TABLE[name][interface]


__all__ = [
    "Budget",
    "CAMPAIGN_PREFIX",
    "CAMPAIGN_SECONDS",
    "CLASSES",
    "DEFAULT_FALSE_FAIL_RATE",
    "KernelBudget",
    "LoopBudget",
    "NAMES",
    "TABLE",
    "TV_RANGE",
    "campaign",
    "check_budget",
    "check_name",
    "check_tv_budget",
    "is_campaign",
    "section",
    "unknown",
    "view",
    "words",
]
