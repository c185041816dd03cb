"""What a cluster's processes agree on (the worker imports only this of the launcher's side)."""

ENDPOINT = "kit.triton.generate"  # namespace.component.endpoint every replica's worker serves
NAMESPACE = ENDPOINT.split(".")[0]
REPLICA_GONE_EXIT = 3  # the worker's status when its replica stopped answering (restart it)
