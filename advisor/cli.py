"""The `advisor` command. Importing this module must stay cheap: no torch, lightning,
torchvision, matplotlib or boto3 here; commands import those inside their handlers."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from . import __version__
from .errors import UserError

# Each module defines register(subparsers); its handlers take the parsed args and return an exit code.
COMMAND_MODULES = ("catalog", "probe", "results", "recommend", "launch", "references")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not usage + message
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        # argparse reports options no parser knew from the top-level parser, which would point
        # to 'advisor --help'; the subcommand that was chosen is the one whose help lists them.
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen_subcommand(self, ns).error(f"unrecognized arguments: {' '.join(extras)}")
        return ns


def chosen_subcommand(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost parser the parsed arguments went through (advisor -> catalog -> show)."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(ns, sub.dest, None) if sub is not None else None
        if name not in (sub.choices if sub is not None else {}):
            return parser
        parser = sub.choices[name]


def build_parser() -> Parser:
    parser = Parser(prog="advisor", description="Which instance type to train on, from measurements of your workload.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics on stderr")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"advisor.commands.{name}").register(sub)
    return parser


def user_errors() -> tuple[type[BaseException], ...]:
    from catalog.filters import FilterError
    from catalog.io import CatalogError
    from lightning_module.result import ResultError

    from .references import ReferenceError

    return (UserError, CatalogError, FilterError, ResultError, ReferenceError)


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
