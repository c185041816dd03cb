"""The GPU images' Python packages as locks of this project's virtualenv (issue 46, item 1): every
version in requirements/image-<tag>.lock comes from one source (the image's package table, the GPU
install's pins, or the main lock), and where the table holds ranges both ends get an environment."""

from __future__ import annotations

import pytest
from packaging.version import Version

from build_engines.images.image_env import (
    ADDED_AT_IMAGE,
    IMAGE_ENV_WAIVERS,
    ImageEnvError,
    environment,
    image_environments,
    image_lock,
    kit_requirements,
    read_lock,
    render_lock,
    unwaived_pip_check,
    MAIN_LOCK,
)
from contract.upstream.image_packages import canonical, load_image_packages, supported_releases

ENVIRONMENTS = sorted(image_environments())


def test_every_supported_image_has_an_environment_and_26_07_both_ends_of_its_ranges():
    assert {"25.12", "26.07-low", "26.07-high"} <= set(ENVIRONMENTS)
    assert {env.release for env in image_environments().values()} == set(supported_releases())
    with pytest.raises(ImageEnvError, match="26.07-low"):
        environment("26.07")


@pytest.mark.parametrize("tag", ENVIRONMENTS)
def test_the_lock_on_disk_is_the_one_the_tables_make(tag):
    env = environment(tag)
    assert env.lock_path.read_text() == render_lock(env), "python -m build_engines.images.image_env write"


@pytest.mark.parametrize("tag", ENVIRONMENTS)
def test_each_version_is_the_images_where_the_image_carries_the_package(tag):
    env = environment(tag)
    image = load_image_packages(env.release)
    locked = {canonical(name): version for name, version in read_lock(env.lock_path).values()}
    main = {name: version for name, (_, version) in read_lock(MAIN_LOCK).items()}
    assert set(locked) == set(main), "the same packages as the project's virtualenv"
    kit = kit_requirements()
    for name, version in locked.items():
        if name in image.packages:
            assert version == image.version(name, env.end), name
        elif name in ADDED_AT_IMAGE:
            assert version == ADDED_AT_IMAGE[name][tag][0] and name in image.absent, name
        elif name in kit and str(kit[name][0].specifier).startswith("=="):
            assert f"=={version}" == str(kit[name][0].specifier), name
        else:
            assert version == main[name], name
    # the packages issue 46 names, at the image's versions, not the main lock's
    for name in ("fastapi", "starlette", "pydantic", "pydantic-core", "protobuf", "grpcio", "click", "uvicorn"):
        assert locked[name] == image.version(name, env.end) != main[name], name
    assert locked["tritonclient"] == "2.64.0" != main["tritonclient"]


def test_the_26_07_ranges_have_two_ends_each_cited():
    image = load_image_packages("26.07")
    ranges = {name: row for name, row in image.packages.items() if row.low is not None}
    assert {"protobuf", "grpcio", "click", "uvicorn"} <= set(ranges)
    for name, row in ranges.items():
        assert Version(row.low) < Version(row.version), name
        assert row.low_citation is not None and row.low_citation.source.ref == "r26.07", name
        assert row.low_how and row.bound.startswith("none read"), name
    low, high = (read_lock(environment(f"26.07-{end}").lock_path) for end in ("low", "high"))
    assert low["protobuf"][1] == image.version("protobuf", "low") and high["protobuf"][1] == image.version("protobuf")
    assert load_image_packages("25.12").ends() == ()
    with pytest.raises(ValueError, match="end must be"):
        image.version("protobuf", "middle")


@pytest.mark.parametrize("tag", ENVIRONMENTS)
def test_both_ends_meet_the_floors_the_gpu_install_asks(tag):
    """Below a floor of requirements/gpu-image.txt, the Dockerfile's constrained install would fail:
    an end of a range the kit cannot install on is no end the kit supports."""
    locked = {canonical(name): version for name, version in read_lock(environment(tag).lock_path).values()}
    for name, (requirement, _) in kit_requirements().items():
        if name in locked:
            assert requirement.specifier.contains(locked[name], prereleases=True), (name, str(requirement))


def test_kit_additions_at_the_image_are_only_where_the_main_locks_version_does_not_fit():
    main = {name: version for name, (_, version) in read_lock(MAIN_LOCK).items()}
    for name, by_tag in ADDED_AT_IMAGE.items():
        assert set(by_tag) == set(ENVIRONMENTS), name
        assert all(version != main[name] and why for version, why in by_tag.values()), name


def test_the_cpu_engine_stays_at_the_main_locks_versions():
    for tag in ENVIRONMENTS:
        sources = {p.name: (p.version, p.source) for p in image_lock(environment(tag))}
        for name in ("openvino", "openvino-genai", "openvino-tokenizers", "tokenizers", "transformers", "torch"):
            assert sources[name][1] == "main lock", (tag, name)


def test_only_packages_the_image_does_not_carry_may_leave_the_images_versions_unmet():
    """A waiver is for a main-lock package (the CPU engine's, the tooling's) against a package the
    image carries: never for a package the image or the GPU install decides."""
    for tag in ENVIRONMENTS:
        sources = {canonical(p.name): p.source for p in image_lock(environment(tag))}
        image = load_image_packages(environment(tag).release)
        for package, waived in IMAGE_ENV_WAIVERS.items():
            assert sources[package] == "main lock", (tag, package)
            assert all(why and dependency in image.packages for dependency, why in waived.items()), (tag, package)


def test_pip_check_fails_on_what_no_waiver_explains():
    output = "\n".join(
        [
            "optimum-intel 2.2.0 requires torchvision, which is not installed.",
            "tritonclient 2.64.0 has requirement protobuf<6, but you have protobuf 7.35.1.",
        "huggingface-hub 1.21.0 has requirement click>=8.4.0, but you have click 8.3.1.",
            "fastapi 0.121.2 has requirement starlette<0.50.0,>=0.40.0, but you have starlette 1.10.0.",
            # waived for the main lock's protobuf 4.25 only: every image has protobuf >= 5
            "opentelemetry-proto 1.45.2 has requirement protobuf<8.0,>=5.0, but you have protobuf 4.25.9.",
            "No broken requirements found.",
        ]
    )
    assert unwaived_pip_check(output) == [
        "fastapi 0.121.2 has requirement starlette<0.50.0,>=0.40.0, but you have starlette 1.10.0.",
        "opentelemetry-proto 1.45.2 has requirement protobuf<8.0,>=5.0, but you have protobuf 4.25.9.",
    ]
    assert unwaived_pip_check("something pip never said") == ["something pip never said"]
