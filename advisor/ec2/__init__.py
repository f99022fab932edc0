"""The EC2 side of the advisor: probing instance types on EC2 and bringing the results back.

Every module here imports boto3 inside its functions only: `advisor.cli` imports the command
modules that import these, and the offline path must not pay for (or need) boto3.
"""

# `advisor launch` defaults, here so that the probe plan can price them without importing EC2 code.
MAX_MINUTES = 45  # the watchdog: each probe instance powers off after this many minutes
MIN_MINUTES, MAX_WATCHDOG_MINUTES = 5, 24 * 60  # the range --max-minutes may take
MAX_INSTANCES = 8  # more instances than this in one launch are refused
