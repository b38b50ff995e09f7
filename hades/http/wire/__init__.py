"""The shapes on the wire, for the OpenAPI document: what each route reads and every answer it gives.

The handlers read their bodies themselves (``POST /build`` decodes as Go's encoding/json does, field by field, so
litestar must not parse it first), so the request bodies are described here rather than inferred from a ``data``
parameter. The answers are TypedDicts that the handlers' dicts match key for key; the contract tests check the
handlers, the schema tests check these against the handlers' real answers.

By area: ``answers`` (what every route shares), ``jobs``, ``pipelines`` (stages and artifacts), ``dashboard``, and
``bodies`` (the request bodies).
"""
