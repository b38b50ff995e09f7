"""The web dashboard: its ``/api`` routes, sessions, redaction at the edge, the live feed and the SPA."""
