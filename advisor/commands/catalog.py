def register(sub):
    """Placeholder until the catalog command lands."""
