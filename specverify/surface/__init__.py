"""Everything users touch, and only that:

- ``request``: one check asked once (``CheckRequest``, each field checked by one checker;
  ``CheckCommand``, the ``check`` command line's);
- ``api``: ``check`` and ``assert_exact``, the one way in (``run`` carries out a request through
  the interface registry); ``verdict``: ``Report``;
- ``check_command``: ``specverify check``'s command line, parsed into one request before
  anything heavy loads; ``check_run``: that command's run over its targets (executors, reports,
  JUnit);
- ``pytest_plugin``: the ``specverify_check`` fixture; ``strategies``: Hypothesis strategies;
- ``report_text``: how a report reads; ``junit``: JUnit XML for CI; ``progress``: the status
  line; ``plots``: ``--plot``.

Imports the interface registry (``specverify.interfaces``: ``get``, ``detect``, the ``Interface``
Protocol) and everything below it, never a named interface's modules.
"""
