"""Operator mode (``hades operator``): BuildJob custom resources reconciled into Pods by one elected leader.

The executor role (``HADES_EXECUTOR=k8s-operator``) hands each queued attempt over as a ``BuildJob`` (``handoff``);
the operator admits BuildJobs by priority then age up to ``MAX_PARALLELISM`` (``admission``), runs each admitted
job's attempt through the same lifecycle as every executor (``controller``: ``started``, each step, exactly one end),
writes the BuildJob's status from the job's state and its Pod (``status``), and only the holder of the Lease
``715d8f3b.hades.tum.de`` does any of it (``lease``). docs/kubernetes.md, "Operator", has the design.
"""
