"""The probe's torch-free half: what a probe is asked (options) and records (result), what is known
of a builtin workload without running it (workload_facts), and the rules the probe decides by (the
ladder, step timing, reliability, contention). The advisor reads these on its fast path, so nothing
here imports torch, lightning or torchvision (tests/packages/lightning_module/test_probe_contract.py checks it)."""
