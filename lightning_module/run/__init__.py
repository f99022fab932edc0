"""The probe's torch half: it trains the workload with Lightning and measures it (probe, measure,
callbacks, child), builds what is trained (builders, data, workloads) and looks at the machine
(hardware, devices, readers, peaks, run_cpu, extensions), applying the contract's rules."""
