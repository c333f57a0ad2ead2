"""The `meshemu` command line: one module per group of commands, each
registering its commands with `register(command)`; `GROUPS` lists them in
the order `meshemu --help` shows them. A new command goes into the group it
belongs to (or a new module listed here)."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import ConfigError, MeshemuError
from . import cluster, experiments, files, labs, vm
from .common import Handler

GROUPS = [labs, files, experiments, cluster, vm]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    # Everything after the first "--" is the command of `exec` or `vm`, options included.
    command = argv[argv.index("--") + 1:] if "--" in argv else None
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    args.command_line = argv
    if command is not None:
        if not hasattr(args, "argv"):  # the commands that take one have an `argv`
            parser.error("only exec and vm take a command after --")
        args.argv += command
    try:
        return args.handler(args) or 0
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    except MeshemuError as exc:
        print(f"meshemu: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `meshemu sim x.yaml --json | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="meshemu", description="Emulated 802.11 ad hoc multi-hop networks: "
                                                                 "labs of Linux namespaces over a modelled radio medium.")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    for group in GROUPS:
        group.register(command)
    return parser
