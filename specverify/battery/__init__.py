"""The checking engine, interface-agnostic: how evidence about a subject is gathered and judged.

- ``core``: what every battery shares (findings, results, guards, the seed tree of streams,
  ``run_in_subject``);
- ``budgets``: the one budget table (quick, standard, thorough, ``tv=X``);
- ``runner``: the only place a subject's code runs (its own process and session, ended whole);
- ``executors``: local processes or Ray; ``targets``: loading ``module:function`` in the runner.

Imports ``common``, ``laws`` and ``samplers``; never an interface.
"""
