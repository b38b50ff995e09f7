"""The roles that react to events: scheduler, executor (and later notifier). Thin: decode, decide, act, append."""
