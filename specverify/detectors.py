"""The round battery's former home, kept so that ``specverify.detectors.X`` still works.

Everything moved into the round interface (issue 21: one module per interface):

- ``specverify.interfaces.round``: what the battery checks (its docstring), ``RoundBattery``,
  ``run_battery``, ``run_statistics`` and the interface's entry points;
- ``specverify.interfaces.round_cases``: ``Budget`` / ``BUDGETS`` / ``get_budget``, ``Case`` and
  every case list (``all_cases``, ``battery``, ``generated_cases``, ``engine_scale_cases``,
  ``round_length_cases``, ``reference_case``), the reference laws (``target_distribution``,
  ``expected_round_length``, ``looks``) and the small counterexample candidates;
- ``specverify.interfaces.round_tasks``: the subject side (``validate_round``, ``guarded``,
  ``first_tokens``, ``exact_case``, ``sample_first_tokens``, the contract / enumerate / sample
  tasks, ``enumeration_key``);
- ``specverify.interfaces.round_counterexample``: ``find_counterexample``, ``describe_case``,
  ``describe``, ``shrink_engine_scale``, ``describe_binned``;
- ``specverify.battery``: what every battery shares (``Finding``, ``BatteryResult``, the guards,
  ``run_in_subject``), re-exported here as before.

New code imports from those modules; this one only re-exports their public names.
"""

from __future__ import annotations

from .battery import (BREAKING_KINDS, CAMPAIGN_SECONDS, DEFAULT_FALSE_FAIL_RATE, EXACT_TV_TOL, JUDGED_BY,  # noqa: F401
                      MESSAGE_CHARS, PASSED_THROUGH, PLAIN_INTS, POWER_FALSE_PASS_RATE, SHOW_CHARS, Battery,
                      BatteryResult, ContractBreach, Finding, OutOfTime, as_sequence, call_subject, call_within,
                      coverage_entry, describe_exception, items_of, message_of, plain_tokens, reading,
                      run_in_subject, show, subject_process, time_limit, token_id, type_name)
from .interfaces.round import REPLAYED_CALLS, RoundBattery, run_battery, run_statistics  # noqa: F401
from .interfaces.round_cases import (BUDGETS, GENERATED_SHAPES, SCALE_STREAMS, SMALL_PAIRS, WIDE_VOCAB,  # noqa: F401
                                     Budget, Case, all_cases, battery, engine_scale_case, engine_scale_cases,
                                     expected_round_length, generated_cases, get_budget, looks,
                                     optimum_tokens_per_round, reference_case, round_length_cases, scale_stream,
                                     small_cases, small_models, target_distribution, too_slow,
                                     tree_optimum_tokens_per_round)
from .interfaces.round_counterexample import (COUNTEREXAMPLE_MAX_PATHS, describe, describe_binned,  # noqa: F401
                                              describe_case, find_counterexample, shrink_engine_scale)
from .interfaces.round_tasks import (MIN_CONTRACT_CALLS, contract_task, enumerate_task, enumeration_key,  # noqa: F401
                                     exact_case, first_tokens, guarded, round_length_run, sample_first_tokens,
                                     sample_task, validate_round)
from .samplers.chain import speculative_step  # noqa: F401  (the reference rule, as detectors.speculative_step)

__all__ = [
    "BUDGETS", "BatteryResult", "Budget", "Case", "ContractBreach", "EXACT_TV_TOL", "Finding",
    "all_cases", "as_sequence", "battery", "coverage_entry", "describe_binned", "engine_scale_case", "engine_scale_cases", "scale_stream", "shrink_engine_scale", "call_within", "describe_case", "enumeration_key", "generated_cases", "exact_case", "find_counterexample", "first_tokens", "get_budget",
    "guarded", "reference_case", "run_battery", "run_statistics", "sample_first_tokens", "time_limit",
    "validate_round",
]
