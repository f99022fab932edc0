"""instance-advisor: which cloud instance type to train on, from measurements of your workload."""

__version__ = "0.1.0"
