"""python -m specverify check TARGET [TARGET ...] [--json] [--seed N] [--budget quick|standard|thorough|tv=X] [--junit-xml FILE] [--executor local|ray|ray://ADDRESS]"""

import sys

COMMANDS = {
    "check": ("specverify.check_command", "is a speculative sampler, generation loop or kernel exact?"),
    "check-hf-generate": ("specverify.adapters.hf_command",
                          "is a Hugging Face model.generate(assistant_model=...) set-up exact?"),
}
PROG = "python -m specverify"


def usage() -> str:
    lines = [f"usage: {PROG} {{{','.join(COMMANDS)}}} ...", "",
             "Checks that speculative-decoding samplers are exact.", "", "commands:"]
    width = max(map(len, COMMANDS))
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    lines += ["", f"{PROG} COMMAND --help: that command's options"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        got = repr(argv[0]) if argv else "nothing"
        print(f"{PROG}: error: expected a command ({names}; --help lists them), got {got}",
              file=sys.stderr)
        return 2
    import importlib

    return importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
