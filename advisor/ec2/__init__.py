"""The EC2 side of the advisor: probing instance types on EC2 and bringing the results back.

Every module here imports boto3 inside its functions only: `advisor.cli` imports the command
modules that import these, and the offline path must not pay for (or need) boto3.
"""
