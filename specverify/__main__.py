"""python -m specverify check TARGET [TARGET ...] [--json] [--seed N] [--budget quick|standard|thorough|tv=X] [--junit-xml FILE] [--executor local|ray|ray://ADDRESS]"""

import sys

COMMANDS = {
    "check": "specverify.checker",
    "check-hf-generate": "specverify.adapters.hf_generate",
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        print(f"usage: python -m specverify {{{names}}} ... (got {argv[:1] or 'nothing'})",
              file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
