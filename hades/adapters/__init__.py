"""The outside world: NATS, Docker, HTTP delivery."""
