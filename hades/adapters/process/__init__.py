"""The process executor (Nomad raw_exec): steps run in the host shell, for trusted fleets and benchmarks."""
