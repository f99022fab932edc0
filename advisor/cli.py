"""The `advisor` command. Importing this module must stay cheap: no torch, lightning,
torchvision, matplotlib or boto3 here; commands import those inside their handlers."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .errors import UserError

# Each module defines register(subparsers); its handlers take the parsed args and return an exit code.
COMMAND_MODULES = ("catalog", "probe", "results", "recommend", "launch", "references")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> Parser:
    parser = Parser(prog="advisor", description="Which instance type to train on, from measurements of your workload.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"advisor.commands.{name}").register(sub)
    return parser


def user_errors() -> tuple[type[BaseException], ...]:
    from catalog.io import CatalogError
    from lightning_module.result import ResultError

    from .references import ReferenceError

    return (UserError, CatalogError, ResultError, ReferenceError)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), format="advisor: %(message)s")
    try:
        return int(args.func(args) or 0)
    except user_errors() as e:
        print(f"advisor: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("advisor: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
