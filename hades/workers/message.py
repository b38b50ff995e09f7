"""The delivered message as a FastStream handler parameter, without a thread hop per message.

FastStream's own ``NatsMessage`` annotation resolves through ``Context("message")``, whose ``use`` is a plain
function, so fast_depends runs it in a worker thread for every message it delivers (``run_in_threadpool``: a
queue put, a thread wake-up and the GIL handed back and forth, about a tenth of the notifier's CPU in a py-spy
profile of the control-plane bench). This one looks the message up the same way, on the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any

from faststream._internal.context.context_type import Context
from faststream.nats.message import NatsMessage as _NatsMessage


class _InlineContext(Context):
    """``Context`` whose lookup is a coroutine, so fast_depends awaits it instead of sending it to a thread."""

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


#: The message being handled: ``async def handler(msg: NatsMessage) -> None``.
NatsMessage = Annotated[_NatsMessage, _InlineContext("message")]
