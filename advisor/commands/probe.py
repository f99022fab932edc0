def register(sub):
    """Placeholder until the probe command lands."""
