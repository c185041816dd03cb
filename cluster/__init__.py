"""Many Triton replicas behind NVIDIA Dynamo: the Dynamo worker that fronts one replica's engine
model, and the launcher of a multi-replica deployment on one host (docs/cluster.md)."""
