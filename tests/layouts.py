"""The repository layouts the tests serve: the CPU engine, the GPU wiring in front of it (engine
relay), the GPU layout on the stand-in of the C++ backend, and the PyTorch-backend layout on the
stand-in LLM API.  One place for the integration fixtures (tests/integration/conftest.py,
test_tracing.py) and for a soak of a stand-in layout: the test doubles in `standins/` are in a
checkout and in no image, so this lives in the test tree and bench/ never imports them.

    python -m tests.layouts standin_server build/soak/standin_server/repository

renders a layout and prints the `python -m bench soak` arguments that serve it (the repository
and the server environment it needs): `python -m bench soak $(python -m tests.layouts ...)`."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Layout(str, Enum):
    CPU = "server"
    RELAY = "relay_server"
    STANDIN = "standin_server"
    PYTORCH = "pytorch_server"


@dataclass(frozen=True)
class RenderedLayout:
    layout: Layout
    repository: Path
    environment: tuple[tuple[str, str], ...] = ()  # what the server's environment needs


def pytorch_engine(checkpoint: Path) -> Path:
    """`build --backend tensorrt_llm_pytorch --image 26.07 --no-kv-cache-reuse` of the checkpoint
    (a copy and build.json: no compile), rebuilt only when missing or built from another spec.
    Without KV-cache reuse: the stand-in maps reuse onto OpenVINO's prefix caching, kept off so
    an answer of this layout never depends on what earlier requests left cached."""
    from build_engines.cli import default_engine_dir, reuse_engine
    from build_engines.cli_options import make_spec
    from build_engines.pytorch.build import build_pytorch_engine, engine_is_built

    spec = make_spec(
        checkpoint,
        backend="tensorrt_llm_pytorch",
        precision=None,
        max_batch_size=32,
        max_input_len=1536,
        max_seq_len=2048,
        max_num_tokens=512,
        default_max_tokens=256,
        kv_cache_size_gb=0,
        prefix_caching=False,
        inference_threads=0,
        triton_image="26.07",
        kv_cache_reuse=False,
        detect=lambda: None,
    )
    engine_dir = ROOT / default_engine_dir(spec)
    if not (engine_is_built(engine_dir) and reuse_engine(engine_dir, spec)):
        build_pytorch_engine(spec, engine_dir)
    return engine_dir


def render_layout(layout: Layout, cpu_engine: Path, out: Path, torch_engine: Path | None = None) -> RenderedLayout:
    """Render `layout` into `out` (a new directory) for the default CPU engine (and, for the
    PyTorch-backend layout, `torch_engine`, the pytorch_engine() build)."""
    from build_engines.repository import render_repository

    if layout is Layout.CPU:
        render_repository(cpu_engine, out)
    elif layout is Layout.RELAY:
        render_repository(cpu_engine, out, relay=True)
    elif layout is Layout.STANDIN:
        from standins.trtllm.repository import render_standin_repository

        render_standin_repository(cpu_engine, out)
    else:
        from standins.links import use_standin_llmapi

        if torch_engine is None:
            raise ValueError("the PyTorch-backend layout needs the pytorch_engine() build")
        render_repository(torch_engine, out)
        return RenderedLayout(layout, out, use_standin_llmapi(out, cpu_engine))
    return RenderedLayout(layout, out)


def render_default(layout: Layout, out: Path) -> RenderedLayout:
    """`layout` of the default model (build/engines' default engine; the PyTorch-backend layout
    also builds pytorch_engine() of the default checkpoint), into `out`, replaced if it exists."""
    from bench.environments import DEFAULT_ENGINE
    from build_engines.default_model import prepare_default_checkpoint

    if out.exists():
        shutil.rmtree(out)
    torch_engine = (
        pytorch_engine(prepare_default_checkpoint(ROOT / "build" / "checkpoints" / "SmolLM2-135M-Instruct"))
        if layout is Layout.PYTORCH
        else None
    )
    return render_layout(layout, ROOT / DEFAULT_ENGINE, out, torch_engine)


def soak_arguments(rendered: RenderedLayout) -> list[str]:
    """The `python -m bench soak` arguments that serve a rendered layout."""
    return ["--repository", str(rendered.repository)] + [
        arg for name, value in rendered.environment for arg in ("--server-env", f"{name}={value}")
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in {layout.value for layout in Layout}:
        print(f"usage: python -m tests.layouts {{{','.join(layout.value for layout in Layout)}}} OUT", file=sys.stderr)
        return 2
    print(" ".join(soak_arguments(render_default(Layout(argv[0]), Path(argv[1])))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
