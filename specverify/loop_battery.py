"""Compatibility module: the loop battery moved into ``specverify.interfaces`` (issue 21).

- ``interfaces.loop``: the interface (``NAME``, ``run``, ``counterexample``, ...),
  ``run_loop_battery`` and what the loop battery checks (its docstring);
- ``interfaces.loop_cases``: ``LoopBudget``, ``LOOP_BUDGETS``, ``get_loop_budget``,
  ``campaign_loop_budget``, ``LoopCase``, the fixed / edge / generated / engine-scale cases,
  ``SEED_STREAMS`` / ``seed_stream``, ``drawn_params`` / ``drawn_grammar``, the reference loop's
  tokens per pass;
- ``interfaces.loop_tasks``: what runs in the subject's process (``read_outcome``, the
  ``loop_*_task`` tasks, ``same_outcomes``) and ``contract_problem``;
- ``interfaces.loop_checks``: ``LoopBattery``;
- ``interfaces.loop_counterexample``: ``find_loop_counterexample``, ``small_loop_cases``,
  ``shrink_binned_loop``, ``describe_loop``, ``counterexample_checks``, ``LAW_CHECKS``,
  ``SEED_CHECKS``.

The public names are re-exported here, so ``from specverify.loop_battery import
run_loop_battery`` keeps working; code inside specverify imports from the modules above.
"""

from __future__ import annotations

from .interfaces.loop import run_loop_battery  # noqa: F401
from .interfaces.loop_cases import (GENERATED_ATTEMPTS, LOOP_BUDGETS, SCALE_KINDS, SEED_STREAMS,  # noqa: F401
                                    LoopBudget, LoopCase, campaign_loop_budget, drawn_grammar, drawn_params,
                                    edge_cases, generated_loop_cases, get_loop_budget, loop_cases, reference_rates,
                                    scale_loop_case, scale_loop_cases, seed_stream, seeded_logits,
                                    tokens_per_pass_rates)
from .interfaces.loop_checks import LoopBattery  # noqa: F401
from .interfaces.loop_counterexample import (LAW_CHECKS, SEED_CHECKS, counterexample_checks,  # noqa: F401
                                             describe_binned_loop, describe_loop, find_loop_counterexample,
                                             params_text, shrink_binned_loop, small_loop_cases)
from .interfaces.loop_tasks import (COUNT_LIMIT, LOGPROB_TOL, READ_LIMIT, contract_problem,  # noqa: F401
                                    loop_enumerate_task, loop_sample_task, loop_seed_law_task, loop_seed_task,
                                    read_outcome, same_outcomes)

__all__ = ["LOOP_BUDGETS", "LoopBudget", "LoopCase", "SEED_CHECKS", "SEED_STREAMS", "contract_problem",
           "counterexample_checks", "describe_loop", "drawn_grammar", "drawn_params", "edge_cases",
           "find_loop_counterexample", "generated_loop_cases", "loop_cases", "run_loop_battery", "seed_stream",
           "shrink_binned_loop", "small_loop_cases"]
