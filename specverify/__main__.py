"""``python -m specverify``: the ``specverify`` command (``specverify.cli``)."""

from .cli import run

if __name__ == "__main__":
    run()
