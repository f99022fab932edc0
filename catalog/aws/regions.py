"""The regions `advisor catalog refresh` fetches when told none: its own module so the CLI's
help can say them without importing the AWS refresh code."""

DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1")
