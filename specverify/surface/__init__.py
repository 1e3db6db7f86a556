"""What users touch, below the public modules at the package root (``specverify.surface.api``,
``specverify.surface.pytest_plugin``, ``specverify.surface.strategies``, the ``specverify`` command):

- ``check_command``: ``specverify check``'s command line, parsed before anything heavy loads;
- ``check_run``: that command's run over its targets (executors, reports, JUnit);
- ``report_text``: how a report reads; ``junit``: JUnit XML for CI;
- ``campaign_cost``: the runs and hours a ``tv=X`` campaign takes.

Imports the interfaces and everything below them.
"""
