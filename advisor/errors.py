"""The advisor's exit statuses and its user-error type: one home, documented in the README."""

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran, but some of its work failed (a probe, a pulled result, a launch)
EXIT_USER = 2  # bad input: an option, a file, a store, a catalog, an AWS answer; one line says which
EXIT_INTERNAL = 70  # a bug in the advisor (sysexits EX_SOFTWARE); -vv prints the traceback
EXIT_SIGINT = 130  # 128 + SIGINT
EXIT_SIGTERM = 143  # 128 + SIGTERM


class UserError(ValueError):
    """Bad input from the user: the CLI prints the message as one line and exits 2."""
