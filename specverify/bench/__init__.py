"""Benchmarks that print ratios side by side in one run (these machines are noisy):
``specverify bench`` (``suite``), ``bench kernel`` (``kernel_bench``), ``bench hot-path``
(``hot_path``) and ``bench samplers`` (``compare_samplers``). The top of the package: they may
import anything below the ``specverify`` command."""
