"""How the C++ `tensorrt_llm` backend's models get their GPUs: leader mode or orchestrator mode
(one rule for `plan` and for `serving gpu-up`, with where upstream says it).

Leader mode (one tritonserver per GPU under mpirun) serves one TensorRT-LLM model: its ranks
> 0 never return from TRITONBACKEND_ModelInstanceInitialize (the worker's executor waits for the
leader), so a second TensorRT-LLM model - draft-target's tensorrt_llm_draft, built with the
target's TP x PP - never gets its other ranks, and its rank 0 waits for them: the load hangs.
NVIDIA's draft-target workflow serves TP engines in orchestrator mode instead: one tritonserver
(MPI world size 1) with TRTLLM_ORCHESTRATOR=1, whose backend spawns each model's TP x PP workers
(MPI_Comm_spawn, so one node), with Triton's own pinned and CUDA memory pools off.
"""

from __future__ import annotations

from contract.upstream.citation import Citation, Source

ORCHESTRATOR_ENV = {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"}
# launch_triton_server.py --multi-model (spawning processes, Triton > 24.06): the orchestrator
# process keeps no memory pools of its own on any GPU.
ORCHESTRATOR_FLAGS = ("--pinned-memory-pool-byte-size=0", "--enable-peer-access=false")
CUDA_POOL_OFF = "--cuda-memory-pool-byte-size={gpu}:0"

_UNNAMED = "read at the commit given, which the code index does not identify as a release; not stored at the pins"
CITATIONS = {
    "draft-target with TP serves in orchestrator mode (`--multi-model` is necessary if TP mode is used; "
    "--world_size=1)": Citation(
        Source(
            "NVIDIA/TensorRT-LLM",
            "v1.1.0",
            "examples/draft_target_model/README.md",
            "11925f626a4d41f75abd5c32d1a10f2c85b6ce22",
        ),
        "",
        False,
        "the same stored copy the table row draft_target_readme cites; " + _UNNAMED,
    ),
    "orchestrator mode: MPI world size 1, the backend spawns each model's workers (MPI_Comm_spawn: one node)": Citation(
        Source(
            "triton-inference-server/tensorrtllm_backend",
            "r25.12",
            "README.md",
            "5419275f0e9830ca7083ddab1651eaa10c66636f",
        ),
        "503-518",
    ),
    "leader mode: ranks > 0 do not return from TRITONBACKEND_ModelInstanceInitialize": Citation(
        Source(
            "triton-inference-server/tensorrtllm_backend",
            "r25.12",
            "README.md",
            "5419275f0e9830ca7083ddab1651eaa10c66636f",
        ),
        "488-501",
    ),
    "--multi-model or TRTLLM_ORCHESTRATOR=1 selects orchestrator mode": Citation(
        Source(
            "triton-inference-server/tensorrtllm_backend",
            "r25.12",
            "docs/llama_multi_instance.md",
            "5419275f0e9830ca7083ddab1651eaa10c66636f",
        ),
        "314-326",
    ),
    "--multi-model: TRTLLM_ORCHESTRATOR=1, TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES=1, world size 1, "
    "--pinned-memory-pool-byte-size=0 --enable-peer-access=false --cuda-memory-pool-byte-size=<gpu>:0 per GPU; "
    "leader-mode ranks > 0 load every name of --tensorrt_llm_model_name": Citation(
        Source(
            "NVIDIA/TensorRT-LLM",
            "v1.1.0",
            "triton_backend/scripts/launch_triton_server.py",
            "0a2e2c1f1268b34586393794045691b666ba28be",
        ),
        "",
        False,
        _UNNAMED + " (the script left tensorrtllm_backend for TensorRT-LLM's triton_backend/ after v0.19.0)",
    ),
    "orchestrator mode: each tensorrt_llm model's gpu_device_ids names its GPUs (commas: one instance's GPUs, "
    "semicolons: one set per instance of instance_group)": Citation(
        Source(
            "triton-inference-server/tensorrtllm_backend",
            "r25.12",
            "docs/llama_multi_instance.md",
            "5419275f0e9830ca7083ddab1651eaa10c66636f",
        ),
        "221-229",
        True,
        "and lines 278-302 (the same at r26.07 3bc11537: lines 223, 282, 295)",
    ),
    "ModelState reads gpu_device_ids optionally: split at ';' (one set per instance), each set a comma list; "
    "absent: 'gpu_device_ids is not specified, will be automatically set'": Citation(
        Source("NVIDIA/TensorRT-LLM", "v1.1.0", "triton_backend/inflight_batcher_llm/src/model_state.cc", ""),
        "",
        False,
        "read through the code index in a copy whose commit the index does not name; not at a tag",
    ),
    "worker ranks shut their executor down and wait for the leader or orchestrator inside initialize": Citation(
        Source(
            "NVIDIA/TensorRT-LLM",
            "v1.1.0",
            "triton_backend/inflight_batcher_llm/src/model_instance_state.cc",
            "0c8de69a1ca6213eebb20a51873890ff128666c2",
        ),
        "",
        False,
        _UNNAMED,
    ),
}
README = CITATIONS[
    "draft-target with TP serves in orchestrator mode (`--multi-model` is necessary if TP mode is used; --world_size=1)"
].source


def uses_orchestrator(world_size: int, trtllm_models: int) -> bool:
    """More than one TensorRT-LLM model on more than one GPU: orchestrator mode."""
    return world_size > 1 and trtllm_models > 1


def gpu_device_ids(world_size: int, trtllm_models: int) -> str:
    """The `gpu_device_ids` each TensorRT-LLM model's config carries: in orchestrator mode every
    model's workers on GPUs 0..world_size-1 (draft-target builds the draft with the target's
    TP x PP, and the capacity plan puts both on the same GPUs); "" elsewhere (leader mode: one
    rank per GPU under mpirun, the parameter unused)."""
    return ",".join(str(gpu) for gpu in range(world_size)) if uses_orchestrator(world_size, trtllm_models) else ""


def serve_line(world_size: int, trtllm_models: int) -> str:
    """What `plan` says of how `serving gpu-up` will start the engine flow's server."""
    if uses_orchestrator(world_size, trtllm_models):
        env = " ".join(f"{k}={v}" for k, v in ORCHESTRATOR_ENV.items())
        return (
            f"serve: python -m serving gpu-up runs one tritonserver in orchestrator mode ({env}, mpirun -n 1): "
            f"its backend spawns the {world_size} workers of each of the {trtllm_models} TensorRT-LLM models "
            "(leader mode would hang at load: its ranks > 0 serve one model), each model's config placing it "
            f"with gpu_device_ids={gpu_device_ids(world_size, trtllm_models)} (the draft on the target's GPUs); "
            f"NVIDIA's draft-target workflow ({README.repo} {README.path}: `--multi-model` is necessary if TP mode "
            "is used)"
        )
    if world_size > 1:
        return (
            f"serve: python -m serving gpu-up runs {world_size} tritonservers under mpirun (leader mode: rank 0 "
            "serves, ranks > 0 load the TensorRT-LLM model)"
        )
    return "serve: python -m serving gpu-up runs one tritonserver"
