"""The Kubernetes executor (kubernetes-asyncio): one Pod per job attempt, the steps as its containers over an
emptyDir at /shared; and the pure builders of the Pod and ``BuildJob`` manifests that the operator reuses."""
