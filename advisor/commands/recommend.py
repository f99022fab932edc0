def register(sub):
    """Placeholder until the recommend command lands."""
