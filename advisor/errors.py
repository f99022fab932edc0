"""The advisor library's error type: one home. Library code raises it (or the catalog's and the
probe result's own types); only the CLI (advisor/cli.py) turns errors into exit codes."""


class AdvisorError(ValueError):
    """Bad input to the advisor: an option, a job, a file, a store, a catalog, an AWS answer. Its
    message is one line that says what was wrong and how to fix it."""


class Terminated(BaseException):
    """SIGTERM, raised like Python raises KeyboardInterrupt for SIGINT, so that a terminated command
    unwinds (temporary files removed, nothing half-written) and exits 143, not by the signal itself.
    A BaseException, so that no `except Exception` in the library swallows it."""
