"""The recommend pipeline: the job, the plan, the ranking, the spot model, the probe plan, the rows and how they are shown."""
