def register(sub):
    """Placeholder until the results command lands."""
