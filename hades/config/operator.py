"""`hades operator`: the Kubernetes operator that reconciles BuildJobs."""

from __future__ import annotations

from pydantic import BaseModel, Field


class OperatorSettings(BaseModel):
    """Which BuildJobs the operator reconciles, and how it runs beside its replicas."""

    # operator (`hades operator`): BuildJobs reconciled into Pods in K8S_NAMESPACE; MAX_PARALLELISM 0 means 100
    watch_namespace: str | None = Field(
        default=None,
        validation_alias="WATCH_NAMESPACE",
        description="the operator: whose BuildJobs it reconciles; empty: every namespace",
    )
    delete_on_complete: bool = Field(
        default=True,
        validation_alias="DELETE_ON_COMPLETE",
        description="the operator: delete a BuildJob once its job ended (its Pods go either way)",
    )
    pod_name: str | None = Field(
        default=None, validation_alias="POD_NAME", description="the operator's leader-election identity"
    )
    health_probe_bind_address: str = Field(
        default=":8081",
        validation_alias="HEALTH_PROBE_BIND_ADDRESS",
        description="the operator's /healthz and /readyz ([HOST]:PORT)",
    )
    leader_elect: bool = Field(
        default=True,
        validation_alias="LEADER_ELECT",
        description="the operator campaigns for a Lease so that only one replica reconciles",
    )
