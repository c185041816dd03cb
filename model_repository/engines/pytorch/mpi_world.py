"""How the PyTorch engine model takes part in Triton's MPI world (upstream rows
triton.mpi_world, triton.mpi_env, triton.launch, doc.llmapi_workflow).

- One rank (the kit's launcher: one tritonserver, `python -m serving gpu-up`): the LLM starts
  its tensor_parallel_size x pipeline_parallel_size GPU workers itself through mpi4py.  The
  stub must then be a fresh MPI singleton, so the MPI job variables a launcher may have left
  in the environment (`mpirun -n 1 tritonserver`, as NVIDIA's launch_triton_server.py does)
  are removed before tensorrt_llm is imported - what NVIDIA's newer llmapi model does.
- N ranks (`mpirun -n N tritonserver ...`, every rank loading this model): rank 0 leads,
  handing COMM_WORLD to the LLM as its MPI session; every other rank serves as a worker
  (mpi4py's MPICommExecutor) until the leader shuts down - NVIDIA's llmapi model's branch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping, MutableMapping

# The MPI job variables NVIDIA's llmapi model removes (row triton.mpi_env: `cleared`,
# `cleared_prefixes`); configuration (OMPI_MCA_*, PMIX_MCA_*) stays.
JOB_VARIABLES = frozenset(
    {
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_NODE_RANK",
        "OMPI_UNIVERSE_SIZE",
        "OMPI_FIRST_RANKS",
        "OMPI_APP_CTX_NUM_PROCS",
        "PMIX_RANK",
        "PMIX_NAMESPACE",
        "PMIX_SERVER_URI",
        "PMIX_SERVER_URI2",
        "PMIX_SERVER_URI21",
        "PMIX_SERVER_URI3",
        "PMIX_SERVER_TMPDIR",
        "PMIX_SYSTEM_TMPDIR",
        "PMIX_SECURITY_MODE",
        "PMIX_GDS_MODULE",
        "PMIX_BFROPS_MODULE",
        "PMIX_PTL_MODULE",
        "PMIX_VERSION",
        "PMIX_HOSTNAME",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_FD",
        "PMI_SPAWNED",
        "PMI_APPNUM",
    }
)
JOB_PREFIXES = ("OMPI_MCA_orte_", "ORTE_")


class Role(enum.Enum):
    SINGLE = "single"  # the only rank: the LLM spawns its workers
    LEADER = "leader"  # rank 0 of N: owns the LLM, COMM_WORLD is its MPI session
    WORKER = "worker"  # rank > 0 of N: an MPI worker of the leader's LLM


@dataclass(frozen=True)
class World:
    role: Role
    rank: int
    size: int


def world(environ: Mapping[str, str]) -> World:
    """This process's place, from the variables mpirun (Open MPI) sets."""
    size = int(environ.get("OMPI_COMM_WORLD_SIZE", "1") or 1)
    rank = int(environ.get("OMPI_COMM_WORLD_RANK", "0") or 0)
    if size <= 1:
        return World(Role.SINGLE, 0, 1)
    return World(Role.LEADER if rank == 0 else Role.WORKER, rank, size)


def clear_job_variables(environ: MutableMapping[str, str]) -> list[str]:
    """Remove a one-rank job's MPI variables (before tensorrt_llm is imported); returns their names."""
    names = sorted(k for k in environ if k in JOB_VARIABLES or k.startswith(JOB_PREFIXES))
    for name in names:
        del environ[name]
    return names


def serve_as_worker() -> None:
    """Rank > 0 of N: lend this rank's GPU to the leader's LLM until it shuts down (NVIDIA's
    llmapi model, row triton.mpi_world).  GPU image only (mpi4py)."""
    from mpi4py.futures import MPICommExecutor
    from mpi4py.MPI import COMM_WORLD

    with MPICommExecutor(COMM_WORLD) as executor:
        if executor is not None:
            raise RuntimeError(f"rank {COMM_WORLD.rank} got the leader's executor; only rank 0 leads")


def leader_session(size: int):
    """Rank 0 of N: COMM_WORLD as the LLM's MPI session (passed as LLM(_mpi_session=...))."""
    from mpi4py.MPI import COMM_WORLD
    from tensorrt_llm.llmapi import MpiCommSession

    return MpiCommSession(comm=COMM_WORLD, n_workers=size)
