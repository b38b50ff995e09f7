"""A Python client for a running Hades: ``Hades`` (blocking) and ``AsyncHades`` (asyncio), both on httpx.

Every route is one ``Call`` (``calls``): the request it sends and how its answer is read. Both clients send the
same calls, and the log stream is decoded by one ``Follow`` (``stream``) for both, so the two cannot drift; only the
I/O loops differ. Answers are typed with the server's own shapes: the pydantic ``Log`` of ``hades.core.logs``, the
event models of ``hades.core.events`` (through ``hades.core.codec``), and the TypedDicts of ``hades.http.wire``.

Every refusal raises ``HadesClientError`` with the status and the server's message (the plain-text body of the Go
routes, the ``error`` of ours); ``HadesUnreachable``, a kind of it, means no answer came at all.
"""

from hades.client.aio import AsyncHades
from hades.client.blocking import Hades
from hades.client.calls import HadesClientError, HadesUnreachable, JobEnded, JobEvent

__all__ = ["AsyncHades", "Hades", "HadesClientError", "HadesUnreachable", "JobEnded", "JobEvent"]
