def register(sub):
    """Placeholder until the launch command lands."""
