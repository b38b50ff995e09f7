"""Batched direct gets (nats-server 2.11+, ADR-31): the messages of one subject filter from a sequence on, in one
request, for reading a job's history by subject when its events do not chain."""

from __future__ import annotations

import asyncio
import json

from nats import nuid
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from hades.core.errors import StoreUnavailable


class DirectBatches:
    """Batched direct gets (nats-server 2.11+, ADR-31): the messages of one subject filter from a sequence on, in
    one request. nats-py has no helper, and its request multiplexer keeps only the first answer, so this keeps one
    wildcard inbox subscription and routes each answer to its request by the inbox's last token."""

    def __init__(self, nc: Client, stream: str) -> None:
        self._nc = nc
        self._subject = f"$JS.API.DIRECT.GET.{stream}"
        self._prefix = nc.new_inbox()
        self._sub: Subscription | None = None
        self._starting: asyncio.Lock | None = None
        self._pending: dict[str, tuple[list[Msg], asyncio.Future[bool]]] = {}
        self._tokens = nuid.NUID()

    async def get(self, seq: int, subject: str, batch: int, timeout: float) -> tuple[list[Msg], bool]:
        """Up to ``batch`` messages on ``subject`` from ``seq`` on, and whether more are stored after them."""
        await self._start()
        token = self._tokens.next().decode()
        messages: list[Msg] = []
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[token] = (messages, done)
        request = json.dumps({"seq": seq, "next_by_subj": subject, "batch": batch}).encode()
        try:
            await self._nc.publish(self._subject, request, reply=f"{self._prefix}.{token}")
            more = await asyncio.wait_for(done, timeout)
        except TimeoutError as error:
            raise StoreUnavailable(f"the event log did not answer a read of {subject}") from error
        finally:
            self._pending.pop(token, None)
        return messages, more

    async def _start(self) -> None:
        if self._sub is not None:
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._sub is None:
                self._sub = await self._nc.subscribe(f"{self._prefix}.*", cb=self._on_msg)

    async def _on_msg(self, msg: Msg) -> None:
        waiting = self._pending.get(msg.subject[len(self._prefix) + 1 :])
        if waiting is None:
            return  # a late answer to a request that timed out
        messages, done = waiting
        headers = msg.headers or {}
        status = headers.get("Status")
        if not status:
            messages.append(msg)
            return
        if done.done():
            return
        if status == "204":  # end of batch: how many more match after the last one sent
            done.set_result(int(headers.get("Nats-Num-Pending") or 0) > 0)
        elif status == "404":  # nothing (more) on the subject
            done.set_result(False)
        else:
            description = next((value for key, value in headers.items() if key == "Description"), "")
            done.set_exception(StoreUnavailable(f"the event log refused a read: {status} {description}"))
