"""The probe: it trains the user's workload with PyTorch Lightning and measures samples/s.

Two halves: contract/ is torch-free (the result schema, options, workload facts and the rules the
probe decides by) and is what the advisor imports; run/ is the torch side that applies them."""
