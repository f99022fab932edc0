"""What to measure next: a plan of probes ranked by the value of what each would tell (value.py),
fed from a ranked plan by inputs.py."""
