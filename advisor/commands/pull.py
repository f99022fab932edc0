def register(results_sub):
    """Placeholder until the results pull command lands (advisor launch issue)."""
