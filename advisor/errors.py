class UserError(ValueError):
    """Bad input from the user: the CLI prints the message as one line and exits 2."""
