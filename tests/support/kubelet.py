"""A kubelet for the test API server (``tests.support.k8s_api``): it plays a Pod's containers as a node would, each
to the ``Outcome`` a test gives it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.support.k8s_api import KubeApi


@dataclass(frozen=True)
class Outcome:
    """What one container does: print ``lines`` and exit with ``exit_code``; or sit waiting with ``waiting``."""

    lines: tuple[str, ...] = ()
    exit_code: int = 0
    waiting: str | None = None
    message: str = ""  # the termination message (a tolerated step's wrapper writes the real exit code there)
    hold: asyncio.Event | None = None  # keep running until this is set


class Kubelet:
    """Runs a Pod's containers as a node would: init containers one after the other, each only after the previous
    one exited 0 (restartPolicy Never: a failure fails the Pod), then the app containers; statuses, phases and logs
    as the real kubelet reports them."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    async def run(self, name: str, outcomes: dict[str, Outcome] | None = None) -> str:
        """Wait for the Pod, play it to its end; returns its final phase ('' if it was deleted meanwhile)."""
        outcomes = outcomes or {}
        pod = await self.api.wait_for(lambda: self.api.get(self.namespace, "pods", name))
        init = [c["name"] for c in pod["spec"].get("initContainers", [])]
        app = [c["name"] for c in pod["spec"]["containers"]]
        statuses = {c: _status(c, {"waiting": {"reason": "PodInitializing"}}) for c in init + app}
        try:
            for container in [*init, *app]:
                outcome = outcomes.get(container, Outcome())
                code = await self._play(name, container, outcome, statuses, init, app)
                if code is None:
                    return "Pending"
                if code != 0 and container in init:
                    return self._phase(name, "Failed", statuses, init, app)
            failed = any(statuses[c]["state"]["terminated"]["exitCode"] for c in app)
            return self._phase(name, "Failed" if failed else "Succeeded", statuses, init, app)
        except KeyError:
            return ""  # the Pod was deleted while it ran

    async def _play(
        self, name: str, container: str, outcome: Outcome, statuses: dict[str, Any], init: list[str], app: list[str]
    ) -> int | None:
        if outcome.waiting:
            statuses[container] = _status(container, {"waiting": {"reason": outcome.waiting, "message": "..."}})
            self._phase(name, "Pending", statuses, init, app)
            return None
        statuses[container] = _status(container, {"running": {"startedAt": _now()}})
        self._phase(name, "Pending" if container in init else "Running", statuses, init, app)
        self.api.feed_log(self.namespace, name, container, *outcome.lines)
        if outcome.hold is not None:
            await outcome.hold.wait()
        terminated = {
            "exitCode": outcome.exit_code,
            "reason": "Completed" if outcome.exit_code == 0 else "Error",
            "startedAt": _now(),
            "finishedAt": _now(),
        }
        if outcome.message:
            terminated["message"] = outcome.message
        statuses[container] = _status(container, {"terminated": terminated})
        self.api.end_log(self.namespace, name, container)
        self._phase(name, "Pending" if container in init else "Running", statuses, init, app)
        return outcome.exit_code

    def _phase(self, name: str, phase: str, statuses: dict[str, Any], init: list[str], app: list[str]) -> str:
        status = {
            "phase": phase,
            "initContainerStatuses": [statuses[c] for c in init],
            "containerStatuses": [statuses[c] for c in app],
        }
        self.api.set_status(self.namespace, "pods", name, status)
        return phase

    def deadline(self, name: str) -> None:
        """The Pod ran out of activeDeadlineSeconds: Failed with DeadlineExceeded, its containers killed."""
        pod = self.api.get(self.namespace, "pods", name)
        assert pod is not None
        status = pod.get("status") or {}
        for entry in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            if "running" in entry["state"]:
                entry["state"] = {"terminated": {"exitCode": 137, "reason": "Error"}}
                self.api.end_log(self.namespace, name, entry["name"])
        message = "Pod was active on the node longer than the specified deadline"
        self.api.set_status(
            self.namespace,
            "pods",
            name,
            {**status, "phase": "Failed", "reason": "DeadlineExceeded", "message": message},
        )


def _status(container: str, state: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": container,
        "state": state,
        "ready": "running" in state,
        "restartCount": 0,
        "image": "",
        "imageID": "",
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
