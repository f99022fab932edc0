"""The `advisor` command. Importing this module must stay cheap: no torch, lightning,
torchvision, matplotlib or boto3 here; commands import those inside their handlers."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from contextlib import contextmanager

from . import __version__
from .errors import AdvisorError, Terminated

# The exit statuses, documented in docs/exit-codes.md; only this edge turns errors into them.
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran, but some of its work failed (a probe, a pulled result, a launch)
EXIT_USER = 2  # bad input: an option, a file, a store, a catalog, an AWS answer; one line says which
EXIT_INTERNAL = 70  # a bug in the advisor (sysexits EX_SOFTWARE); -vv prints the traceback
EXIT_SIGINT = 130  # 128 + SIGINT
EXIT_SIGTERM = 143  # 128 + SIGTERM

# Each module defines register(subparsers); its handlers take the parsed args and return an exit code.
COMMAND_MODULES = ("catalog", "probe", "results", "recommend", "launch", "references", "schema")


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
    """The library errors that mean bad input: exit 2 with their one line."""
    from catalog.filters import FilterError
    from catalog.io import CatalogError
    from lightning_module.contract.result import ResultError
    from safeio import FileError

    return (AdvisorError, CatalogError, FileError, FilterError, ResultError)


def _raise_terminated(signum, frame):
    raise Terminated(signum)


@contextmanager
def _signals_raise():
    """For the command's whole run, SIGINT and SIGTERM raise (KeyboardInterrupt, Terminated) and
    so end in their documented statuses, 130 and 143, whatever a library (Lightning, a child's
    set-up) left installed; the handlers before are put back after. Signals reach the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    from .output import error, set_wide

    for stream in (sys.stdout, sys.stderr):
        # A path or id given as non-UTF-8 bytes must print as \xff, not stop the command.
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    # What made a command's output, for output that says so (the --format html page's footer).
    args.argv, args.advisor_version = list(sys.argv[1:] if argv is None else argv), __version__
    set_wide(getattr(args, "wide", False))
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), format="advisor: %(message)s")
    try:
        with _signals_raise():
            return int(args.func(args) or EXIT_OK)
    except user_errors() as e:
        error(str(e))
        return EXIT_USER
    except KeyboardInterrupt:
        print("advisor: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print("advisor: terminated", file=sys.stderr)
        return EXIT_SIGTERM
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug: one line and its own status, never a traceback
        if args.verbose >= 2:
            logging.getLogger("advisor").exception("internal error")
        error(f"internal error ({type(e).__name__}: {e}); please report it with the command you ran "
              "(-vv prints the traceback)")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
