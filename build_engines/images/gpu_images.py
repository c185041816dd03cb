"""Every setting a GPU image needs, derived from one Triton release (`GPU_IMAGE=26.07`).

The kit's GPU image is built from four settings (docker-compose.yml's build args and image tag,
.env's variables): TRITON_IMAGE, TRTLLM_VERSION, KIT_GPU_IMAGE and MODELOPT_EXAMPLES_REF.  None
is written here; each comes from the conformance data:

- the NGC image and its TensorRT-LLM version: the release's `image` row of
  contract/upstream/data/trtllm_build_<version>.json;
- the ModelOpt examples ref: the ModelOpt table that TensorRT-LLM version pins
  (modelopt_hf_ptq_<version>.json), for the images the PyTorch flow targets, empty otherwise
  (the engine flow quantizes with the image's own quantize.py);
- the driver: the release's row of ngc_containers.json (the server's compatibility matrix);
- the flow `--backend gpu` takes on it (build_engines/gpu/path.py).

`make gpu-check` checks, by default, the recommended path first (the newest supported release
whose flow is the PyTorch backend), then the engine flow on the newest release that has it and
whose package set the resolver test replays (image_packages_<release>.json).  .env is checked
against this table by tests/unit/test_gpu_check_host.py.

Standard library only (the host runs it before anything is installed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from build_engines.gpu.path import choose_gpu_backend
from build_engines.pytorch.spec import pytorch_versions
from build_engines.spec_base import EngineBackend
from build_engines.trtllm.versions import release_of_image
from contract.upstream.image_packages import supported_releases as package_releases
from contract.upstream.modelopt import modelopt_for_trtllm
from contract.upstream.ngc_containers import DriverRequirement, load_ngc_containers
from contract.upstream.trtllm_build import load_build_table, supported_versions, version_of_release

KIT_IMAGE_REPOSITORY = "llama-triton-kit-trtllm"  # the kit's GPU image is <this>:<release>
SETTINGS = ("TRITON_IMAGE", "TRTLLM_VERSION", "KIT_GPU_IMAGE", "MODELOPT_EXAMPLES_REF")


class GpuImageError(ValueError):
    pass


@dataclass(frozen=True)
class GpuImage:
    release: str  # "26.07"
    triton_image: str
    trtllm_version: str
    tensorrt_version: str
    kit_image: str
    modelopt_examples_ref: str  # "" where the flow does not quantize with hf_ptq.py
    backend: EngineBackend  # the flow `--backend gpu` takes on this image
    why: str  # and why (build_engines/gpu/path.py)
    driver: DriverRequirement

    def compose_env(self) -> dict[str, str]:
        """The variables docker compose reads (the shell environment wins over .env)."""
        return dict(zip(SETTINGS, (self.triton_image, self.trtllm_version, self.kit_image, self.modelopt_examples_ref)))


def supported_releases() -> list[str]:
    return sorted(
        (pin.release for v in supported_versions() for pin in load_build_table(v).images),
        key=lambda r: tuple(int(p) for p in r.split(".")),
    )


@lru_cache(maxsize=None)
def gpu_image(release_or_image: str) -> GpuImage:
    """The settings of a release ('26.07') or an NGC image reference naming one."""
    try:
        release = release_of_image(release_or_image)
        version = version_of_release(release)
    except ValueError as e:  # TrtllmTargetError, UpstreamTableError
        raise GpuImageError(f"'GPU_IMAGE' {release_or_image!r}: {e}; supported: {supported_releases()}") from None
    pin = load_build_table(version).image(release)
    pytorch = version in pytorch_versions()
    backend, why = choose_gpu_backend({"triton_image": pin.image})
    return GpuImage(
        release=release,
        triton_image=pin.image,
        trtllm_version=version,
        tensorrt_version=pin.tensorrt_version,
        kit_image=f"{KIT_IMAGE_REPOSITORY}:{release}",
        modelopt_examples_ref=modelopt_for_trtllm(version).version if pytorch else "",
        backend=backend,
        why=why,
        driver=load_ngc_containers().driver(release),
    )


def check_order() -> tuple[GpuImage, ...]:
    """What `make gpu-check` checks with no GPU_IMAGE: the recommended path, then the engine flow."""
    images = [gpu_image(r) for r in supported_releases()]
    recommended = [i for i in images if i.backend == EngineBackend.TENSORRT_LLM_PYTORCH]
    replayed = set(package_releases())
    engine = [i for i in images if i.backend == EngineBackend.TENSORRT_LLM and i.release in replayed]
    if not recommended or not engine:
        raise GpuImageError(f"no PyTorch-backend image ({recommended}) or engine-flow image ({engine}) to check")
    return recommended[-1], engine[-1]


def env_file_problems(settings: dict[str, str]) -> list[str]:
    """Where .env (or another set of compose variables) disagrees with the table for its release."""
    image = settings.get("TRITON_IMAGE", "")
    try:
        expected = gpu_image(image).compose_env()
    except GpuImageError as e:
        return [str(e)]
    return [
        f"{name}={settings.get(name, '')!r}: Triton {release_of_image(image)} needs {name}={value!r}"
        for name, value in expected.items()
        if settings.get(name, "") != value
    ]


def main(argv: list[str]) -> int:
    """`python3 -m build_engines.images.gpu_images 26.07`: the release's compose settings, KEY=value."""
    if len(argv) != 1:
        print(f"usage: python3 -m build_engines.images.gpu_images RELEASE (one of {supported_releases()})")
        return 2
    try:
        image = gpu_image(argv[0])
    except GpuImageError as e:
        print(e)
        return 2
    print("\n".join(f"{k}={v}" for k, v in image.compose_env().items()))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
