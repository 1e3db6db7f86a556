"""The floor: what every layer may use and that knows nothing of speculative decoding's checks.

- ``validation``: argument checks whose errors name the argument (the one validation module),
  the default false-fail rate;
- ``files``: atomic report writing; ``network``: a TCP probe with a deadline;
- ``command_line``: one-line usage errors, exit codes, subcommand dispatch;
- ``tables``: fixed-width text tables;
- ``alarm_safe``: code a guard's interrupting alarm must not land in (``unalarmed``).

Standard library (NumPy where a check needs it); imports nothing else of specverify.
"""
