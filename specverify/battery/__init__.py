"""The checking engine, interface-agnostic: how evidence about a subject is gathered and judged.

- ``core``: the results every battery shares (findings, ``BatteryResult``, coverage entries);
  ``guards``: the subject's side (calls, time limits, readers of what it returns);
  ``subject_calls``: the parent's side (``Battery``, ``call_within``, ``run_in_subject``);
  ``seed_tree``: ``stream(seed, *path)``, the one seed tree every battery draws by;
- ``budgets``: the one budget table (quick, standard, thorough, ``tv=X``);
- ``runner``: the only place a subject's code runs (its own process and session, ended whole);
  ``process_tree``: ending its whole process tree; ``capture``: its output; ``signals``: the
  subject's signal guard and SIGTERM to the checker;
- ``executors``: local processes or Ray; ``targets``: loading ``module:function`` in the runner.

Imports ``common``, ``laws`` and ``samplers``; never an interface.
"""
