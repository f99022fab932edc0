"""The `advisor` command. Importing this module must stay cheap: no torch, lightning,
torchvision, matplotlib or boto3 here; commands import those inside their handlers."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading

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


class _Signals:
    """For the command's whole life (parsing included: importing the commands takes a second),
    the first SIGINT or SIGTERM raises (KeyboardInterrupt, Terminated) and so ends the command in
    its documented status, 130 or 143, whatever a library (Lightning, a child's set-up) left
    installed. Every later one is ignored: a second SIGTERM 0.3 s after the first, or a SIGINT
    after a SIGTERM, must not cut short the unwinding the first began (temporary files removed,
    nothing half-written) nor change its status. Signals reach the main thread only."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.first: int | None = None
        self.old: dict = {}

    def _handler(self, signum, frame):
        if self.first is not None:
            return  # the first one's stop goes on, to its status
        self.first = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.old = {s: signal.signal(s, self._handler) for s in self.SIGNALS}

    def uninstall(self, status: int, keep_ignoring: bool) -> None:
        """Put the handlers back; a process ending by a signal (status 130 or 143, from here or
        from the probe's own handler) instead ignores both until it has exited, when `keep_ignoring`
        (the process's own command line: a test calling main() gets its handlers back)."""
        ending = status in (EXIT_SIGINT, EXIT_SIGTERM)
        for s, h in self.old.items():
            signal.signal(s, signal.SIG_IGN if ending and keep_ignoring else (h if h is not None else signal.SIG_DFL))


def main(argv: list[str] | None = None) -> int:
    signals = _Signals()
    signals.install()
    status = EXIT_INTERNAL
    try:
        status = _main(argv)
    except KeyboardInterrupt:  # raised outside the command's own handling (while parsing, printing an error)
        print("advisor: interrupted", file=sys.stderr)
        status = EXIT_SIGINT
    except Terminated:
        print("advisor: terminated", file=sys.stderr)
        status = EXIT_SIGTERM
    finally:
        signals.uninstall(status, keep_ignoring=argv is None)
    return status


def _main(argv: list[str] | None) -> int:
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
