"""The Docker executor (aiodocker): one container per step over a per-job volume at /shared."""
