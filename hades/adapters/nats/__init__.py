"""NATS JetStream: the event store, the log store, topology and the embedded server."""
