"""The budgets an engine row picks (``Engine.budgets``: budget name -> overrides of the kernel or
round battery's own section, see ``engine_verdict.judge``) and what a row needs besides its wheel:
fast rows run the battery's own sections, Triton rows (the CPU interpreter) smaller sweeps and
statistics sized to what it allows."""

from __future__ import annotations

from . import loader

TRITON_SWEEPS = {
    "quick": {
        "k_sweep": 2,
        "batch_sweep": (15, 16, 17, 31, 32, 33),
        "dense_sweep": (),
        "binned_sweep": (65_537,),
        "batch_calls": 4,
        "pair_calls": 8,
        "spot_rows": 32,
    },
    "standard": {
        "k_sweep": 5,
        "batch_sweep": (2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 65),
        "dense_sweep": (1024,),
        "binned_sweep": (65_537, 152_064),
        "batch_calls": 4,
        "pair_calls": 8,
        "spot_rows": 64,
    },
}
"""The sweeps of a Triton row (``KernelBudget``'s sweep fields), sized to what the CPU interpreter
allows: each row within about ten minutes at standard on 2 shared cores. Under
``TRITON_INTERPRET=1`` every row of a call is a program run in Python (measured on 2 shared cores:
SGLang's chain kernel about 24 ms a row plus 16 ms a call at V <= 4096, 0.2 s a row at V = 152,064;
vLLM V1's about 13 ms a row plus 10 ms a call), and the scans from explicit uniforms take about
22,000 rows at quick's plain sweeps (SGLang: 520 s). So the Triton rows sweep k to 2 / 5 (the
battery's own: 4 / 8), batch rows to 33 / 65 (its own: 65 / 1024, where one call of 1024 rows takes
about 13 s), dense V to none / 1024 (its own: none / 4096, whose scan needs a row per breakpoint:
about 12,500 rows), and binned V to 65,537 / 152,064 (sparse rows, about 200 rows each: within
budget); 4 uniform sets per batch size, 8 batches in the pairwise test, and 32 / 64 random rows per
instance in the spot check of the factorization (its own: 256). What a row's "exact" covers is its
reach, printed in the table's ``how`` column (``reach_text``)."""

TRITON_QUICK_CASES = ("k sweep k=2", "k sweep k=1", "binned sweep")
"""The kernel cases an interpreted Triton row judges at ``quick`` (``engine_verdict.chosen_cases``),
k = 2 first (the contract's case, and the first a lossy row can fail on: FLy and block verification
differ from the rule at k >= 2 only)."""

TRITON_KERNEL = {
    "quick": {
        "base": "quick",
        "generated": 0,
        "n_min": 2000,
        "n_max": 8000,
        "detect_tv": 0.1,
        "call_limit_s": 300.0,
        **TRITON_SWEEPS["quick"],
        "kernel_cases": TRITON_QUICK_CASES,
    },
    "standard": {
        "base": "quick",
        "generated": 1,
        "n_min": 4000,
        "n_max": 32000,
        "detect_tv": 0.05,
        "call_limit_s": 600.0,
        **TRITON_SWEEPS["standard"],
    },
}
"""A Triton row's kernel budget. Under ``TRITON_INTERPRET=1`` the cost is per kernel row, not per
launch: every row of a call is a program the interpreter runs op by op in Python (measured on 2
shared cores at a load average of 8: 70 to 110 ms a row of k = 3, V = 6 for vLLM V1, runner v2,
SGLang and LMDeploy, whether the call holds 1 row or 32; runner v2 137 ms for a call of one row),
so a row's time is its kernel rows. ``quick`` (the table's default) judges three cases exactly
from explicit uniforms, ``TRITON_QUICK_CASES``: every draft value at k = 2 and at k = 1 (V = 6,
value edges at the last draft) and one sparse row at V = 65,537, about 1,150 kernel rows (the
battery's own quick cases take about 11,200: the V = 3 chain's every draft 3,300, the ragged case
2,000, the batch rows 2,400, the adversarial inputs 1,400, one of those rows a minute and more).
Exact from uniforms is a verdict without sampling noise on the cases it covers; its reach (k <= 2,
dense V 6, binned V 65,537, no batch sweep) is printed in the row's ``how`` column. ``standard``
is the quick section with fewer generated cases, statistics sized for the interpreter and
``TRITON_SWEEPS`` (about 20,000 rows and more: an hour and more a row here)."""
CHAIN_FIRST_CASES = ("every draft of a V3 chain", *TRITON_QUICK_CASES)
"""The quick cases of the rows that differ from the token-wise rule only through what one position
does to the next (FLy, which defers a rejection; SGLang's block verification given drafts): the
battery's first fixed case first, every draft of a V = 3 chain at k = 2 (about 3,300 kernel rows;
the rows stop at their first finding). Run on ``TRITON_QUICK_CASES`` alone, both FLy rows and the
SGLang block kernel ended exact (the k-sweep cases' instances never show the difference): a
verdict that misses what the row is known to do."""


def stopping_at_first(budgets: dict, quick_cases: tuple | None = None) -> dict:
    """``budgets`` for a row expected not exact: each stops at its first finding (the reach is then
    the cases run), ``quick`` judging ``quick_cases`` when given."""
    out = {name: {**spec, "stop_on_first": True} for name, spec in budgets.items()}
    if quick_cases is not None:
        out["quick"]["kernel_cases"] = quick_cases
    return out


FAST_KERNEL = {"quick": {"base": "quick"}, "standard": {"base": "standard"}}
FAST_ROUND = {"quick": {"base": "quick"}, "standard": {"base": "standard"}}
SLOW_ROUND = {
    "quick": {
        "base": "quick",
        "cases": (0,),
        "n_min": 300,
        "n_max": 2000,
        "detect_tv": 0.15,
        "call_limit_s": 30.0,
        "generated": 0,
        "engine_vocab": 0,
        "contract_calls": 10,
        "sweep_context": 0,
        "sweep_k": 0,
        "sweep_runs": 300,
        "round_length_runs": 300,
        "detect_tokens": 1.0,
    },
    "standard": {
        "base": "quick",
        "cases": (0,),
        "n_min": 300,
        "n_max": 4000,
        "detect_tv": 0.1,
        "call_limit_s": 30.0,
        "generated": 0,
        "engine_vocab": 0,
        "contract_calls": 10,
        "sweep_context": 4,
        "sweep_k": 4,
        "sweep_runs": 2400,
        "round_length_runs": 1200,
    },
}
"""The round budget of a row whose every round is one interpreted Triton call (about 0.14 s at B = 1
on 2 cores at a load average of 8) and whose coins come from ``rng.integers`` over the float32
grid, which the enumerator does not follow (2^24 outcomes a coin): every case is judged by
statistics, one round a call. The round battery's own quick section makes about 70,000 calls there
(context sweep to 128, k to 8, 1,000 runs each). ``quick`` (the table's default) judges the toy
chain (case 0) to see TV 0.15 (about 800 to 1,200 rounds) with no sweep, and measures tokens per
round on 300 rounds of each of its three cases (a shortfall of 1 token): about 2,600 calls in all
(counted with the reference sampler in the engine's place). ``standard`` sweeps context to 4 and
k to 4 at 2,400 runs each, sees TV 0.1 per case, the power the standard budget asks of a case the
enumerator cannot follow (the NumPy reference's too), and measures tokens per round on 1,200
rounds per case (a shortfall of 0.5 tokens): 24,000 windows and 3,600 rounds, shared by
``--workers``. No generated case and no V = 128 case (a chi-square over 128 ids needs more runs
than this allows)."""

NEEDS_TRITON = (
    "torch",
    f"triton with TRITON_INTERPRET=1 (triton=={loader.TRITON_VERSION} goes into the cache if missing)",
)
"""What a Triton row needs besides its wheel: torch (every row that runs needs it, the ``models``
extra; ``Engine.needs``' default) and triton on the CPU interpreter."""
MODELS_EXTRA = "python -m pip install -e '.[models]' (in a checkout) or pip install 'specverify[models]'"
"""How to install torch: the ``models`` extra."""
