"""How a test server's Triton models find the stand-ins.  The Python-backend stub ignores
PYTHONPATH but puts each model's directory on its sys.path, and the kit's install (pyproject's
packages: the product only) has no `standins`: so a rendered test repository gets links to them
in the directories of the models that import them.  Only test repositories get them: a stand-in
never shadows the real `tensorrt_llm` in an image, and no image holds one."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # `standins`
LLMAPI = PACKAGE / "llmapi"  # the stand-in `tensorrt_llm` (LLM API) and its dist-info
CPU_ENGINE_VARIABLE = "TRTLLM_STANDIN_OPENVINO_ENGINE"  # the CPU engine the stand-in LLM API generates with


def link_package(model_dir: Path) -> None:
    """`standins` importable in the model's stub (its adapter is standins.trtllm.model)."""
    (model_dir / PACKAGE.name).symlink_to(PACKAGE, target_is_directory=True)


def use_standin_llmapi(repository: Path, cpu_engine: Path) -> tuple[tuple[str, str], ...]:
    """Make a rendered repository's models see the stand-in `tensorrt_llm` and return the
    server environment it needs (the CPU engine it generates with).  The stand-in package and
    its dist-info (which makes importlib.metadata say 1.2.1, as the image's does) are linked
    into the directories of the models that import it or check the runtime version."""
    from contract import names

    for model in (names.PYTORCH_ENGINE, names.LLM_BLS, names.ENGINE_RELAY):
        if (repository / model).is_dir():
            for item in LLMAPI.iterdir():
                if item.name.startswith("tensorrt_llm"):
                    (repository / model / item.name).symlink_to(item)
    return ((CPU_ENGINE_VARIABLE, str(cpu_engine.resolve())),)
