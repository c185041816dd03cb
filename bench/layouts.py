"""The repository layouts the product serves, rendered for a test or a load run: the CPU engine,
the GPU wiring in front of it (engine relay), the GPU layout on the stand-in of the C++
backend, and the PyTorch-backend layout on the stand-in LLM API.  One place, so the tests'
fixtures and the soak load (bench/soak.py) serve the same repositories.

The two stand-in layouts need the test doubles in `standins/` (imported here only when one is
asked for), which are in a checkout and in no image: there, only the CPU and relay layouts
render."""

from __future__ import annotations

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
