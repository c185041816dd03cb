"""How a test server's Triton models find the stand-ins.  The Python-backend stub ignores
PYTHONPATH but puts each model's directory on its sys.path, and the kit's install (pyproject's
packages: the product only) has no `standins`: so a rendered test repository gets links to them
in the directories of the models that import them.  Only test repositories get them: a stand-in
never shadows the real `tensorrt_llm` in an image, and no image holds one."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent  # `standins`
LLMAPI = PACKAGE / "llmapi"
# The stand-in LLM API, imported as `tensorrt_llm` through the links below only (under its own
# name here, so that nothing of the product resolves `import tensorrt_llm` to it), and the
# dist-info that makes importlib.metadata say 1.2.1, as the image's does.
LLMAPI_LINKS = {"tensorrt_llm": LLMAPI / "trtllm_llmapi",
                "tensorrt_llm-1.2.1.dist-info": LLMAPI / "tensorrt_llm-1.2.1.dist-info"}
CPU_ENGINE_VARIABLE = "TRTLLM_STANDIN_OPENVINO_ENGINE"  # the CPU engine the stand-in LLM API generates with


def link_package(model_dir: Path) -> None:
    """`standins` importable in the model's stub (its adapter is standins.trtllm.model)."""
    (model_dir / PACKAGE.name).symlink_to(PACKAGE, target_is_directory=True)


def link_llmapi(directory: Path) -> Path:
    """`tensorrt_llm` (the stand-in) importable from `directory` once it is on sys.path."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, target in LLMAPI_LINKS.items():
        (directory / name).symlink_to(target, target_is_directory=True)
    return directory


def use_standin_llmapi(repository: Path, cpu_engine: Path) -> tuple[tuple[str, str], ...]:
    """Make a rendered repository's models see the stand-in `tensorrt_llm` and return the
    server environment it needs (the CPU engine it generates with).  The stand-in package and
    its dist-info (which makes importlib.metadata say 1.2.1, as the image's does) are linked
    into the directories of the models that import it or check the runtime version."""
    from contract import names

    for model in (names.PYTORCH_ENGINE, names.LLM_BLS, names.ENGINE_RELAY):
        if (repository / model).is_dir():
            link_llmapi(repository / model)
    return ((CPU_ENGINE_VARIABLE, str(cpu_engine.resolve())),)
