"""Read models: each a fold over the event log plus its queries, rebuilt by replaying the stream."""
