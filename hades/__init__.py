"""Hades: a container job scheduler, event-sourced on NATS JetStream."""
