"""The pure domain: job spec, events, lifecycle, ports. Standard library and pydantic only."""
