"""Test doubles stay out of the product (issue 36): no product module imports `standins` or
`tests`, the Triton models' source imports nothing above it (no `build_engines`), `contract/`
is the ground floor (the standard library and numpy), and neither image nor the package
carries a stand-in.  Read from the source with ast and from the Dockerfiles' COPY/ADD lines;
nothing is imported or built."""

from __future__ import annotations

import ast
import fnmatch
import sys
import tomllib
from pathlib import Path

import pytest

from build_engines.images.install_lines import context_copies

ROOT = Path(__file__).resolve().parents[2]
# The product: what the images and the package carry.
PRODUCT = ("contract", "model_repository", "build_engines", "serving", "cluster", "client", "openai_front", "deploy")
KIT = PRODUCT + ("bench", "standins", "tests")
TEST_ONLY = ("standins", "tests")
DOCKERFILES = sorted((ROOT / "docker").glob("*.Dockerfile"))
# contract/ imports the standard library and numpy; the one lazy exception, named so a new one
# is seen: guided.py compiles a grammar with xgrammar when a schema is checked (inside a function).
CONTRACT_LAZY = {"contract/guided.py": {"xgrammar"}}
# ... and the one optional one: telemetry.py takes OpenTelemetry where it is installed and its
# own no-op stand-in (contract/otel_fallback.py, standard library only) where it is not (the GPU
# images' package set), so the span and attribute names stay one table for every hop.
CONTRACT_OPTIONAL = {"contract/telemetry.py": {"opentelemetry"}}


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level) for every absolute import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) not in nested) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, id(node) not in nested))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.append((node.args[0].value, id(node) not in nested))
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_product_never_imports_a_stand_in_or_the_tests():
    bad = [f"{_rel(p)}: {m}" for p in _modules(*PRODUCT) for m, _ in _imports(p) if _top(m) in TEST_ONLY]
    assert not bad, "the product imports test code:\n" + "\n".join(bad)


def test_bench_imports_no_stand_in_and_no_test():
    """bench/ is in both images, standins/ and tests/ in neither: bench renders only the layouts
    the product can (the CPU engine, the relay); the stand-in layouts are the tests'
    (tests/layouts.py), and a soak of one serves its rendered repository.  No import at all, at
    module level or inside a function."""
    bad = [f"{_rel(p)}: {m}" for p in _modules("bench") for m, _ in _imports(p) if _top(m) in TEST_ONLY]
    assert not bad, "\n".join(bad)


def test_the_triton_models_source_imports_nothing_above_it():
    """model_repository/ runs in every Triton model's stub: of the kit it imports contract/ and
    itself only (build_engines loaded 19 modules into a stub for one constant)."""
    allowed = {"contract", "model_repository"}
    bad = [f"{_rel(p)}: {m}" for p in _modules("model_repository") for m, _ in _imports(p)
           if _top(m) in KIT and _top(m) not in allowed]
    assert not bad, "\n".join(bad)


def test_contract_is_the_ground_floor():
    allowed = set(sys.stdlib_module_names) | {"numpy", "contract"}
    bad = [f"{_rel(p)}: {m}" for p in _modules("contract") for m, top_level in _imports(p)
           if _top(m) not in allowed | CONTRACT_OPTIONAL.get(_rel(p), set())
           and (top_level or _top(m) not in CONTRACT_LAZY.get(_rel(p), set()))]
    assert not bad, "\n".join(bad)


def test_only_the_adapters_of_the_stand_in_import_triton():
    """As in model_repository (only models/ and triton/): the stand-in's engine modules take
    what they need from Triton handed in by its adapter, standins/trtllm/model.py."""
    bad = [_rel(p) for p in _modules("standins") for m, _ in _imports(p)
           if _top(m) == "triton_python_backend_utils" and _rel(p) != "standins/trtllm/model.py"]
    assert not bad, bad


def test_the_block_size_has_one_source():
    from build_engines.gpu import capacity
    from build_engines.trtllm import plan as trtllm_plan
    from contract.kv_cache import TOKENS_PER_BLOCK
    from standins.trtllm import engine

    assert capacity.TOKENS_PER_BLOCK is TOKENS_PER_BLOCK and trtllm_plan.TOKENS_PER_BLOCK is TOKENS_PER_BLOCK
    assert engine.TOKENS_PER_BLOCK is TOKENS_PER_BLOCK
    defined = [_rel(p) for p in _modules(*KIT) for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TOKENS_PER_BLOCK" for t in node.targets)]
    assert defined == ["contract/kv_cache.py"]


# --- the images and the package ------------------------------------------------------------
def copied_sources(dockerfile: Path) -> list[str]:
    """The build-context paths a Dockerfile's COPY and ADD lines take (not --from=<stage>)."""
    return [s.rstrip("/") or "." for c in context_copies(dockerfile.read_text()) for s in c.sources]


def _dockerignored(pattern_target: str) -> bool:
    ignore = ROOT / ".dockerignore"
    if not ignore.exists():
        return False
    patterns = [p.strip() for p in ignore.read_text().splitlines() if p.strip() and not p.startswith("#")]
    excluded = False
    for p in patterns:  # the last matching pattern wins; "!" re-includes
        negate = p.startswith("!")
        if fnmatch.fnmatch(pattern_target, p.lstrip("!").strip("/")):
            excluded = not negate
    return excluded


def _outside_the_context(path: str) -> bool:
    """Docker leaves out a file that .dockerignore excludes, or that lies in an excluded folder."""
    parts = path.split("/")
    return any(_dockerignored("/".join(parts[:i])) for i in range(1, len(parts) + 1))


def test_dockerignore_keeps_bytecode_caches_out_of_the_context():
    assert _outside_the_context("model_repository/engines/gone/__pycache__/engine.cpython-311.pyc")
    assert not _outside_the_context("model_repository/engines/openvino/engine.py")


def test_the_dockerfile_parser_reads_copy_lines(tmp_path):
    dockerfile = tmp_path / "x.Dockerfile"
    dockerfile.write_text('FROM a AS b\n# COPY tests tests\nCOPY --chown=1:1 contract \\\n  serving /opt/\n'
                          'COPY --from=b /x /y\nADD ["bench", "/opt/bench"]\nRUN echo COPY standins\n')
    assert copied_sources(dockerfile) == ["contract", "serving", "bench"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_no_image_copies_a_stand_in_or_the_tests(dockerfile):
    sources = copied_sources(dockerfile)
    assert sources, f"{dockerfile.name}: no COPY lines read"
    for source in sources:
        top = Path(source).parts[0] if source not in (".", "*") else source
        if top in (".", "*"):  # the whole context: .dockerignore must keep the test code out
            assert all(_dockerignored(t) for t in TEST_ONLY), f"{dockerfile.name} copies {source!r} with test code"
        else:
            assert top not in TEST_ONLY, f"{dockerfile.name} copies {source}"
            assert "*" not in top or not any(fnmatch.fnmatch(t, top) for t in TEST_ONLY), source


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_what_the_images_copy_holds_no_stand_in(dockerfile):
    """Every copied directory (model_repository/ included) holds no stand-in: no file named for
    one and no module that imports one."""
    copied = [ROOT / s for s in copied_sources(dockerfile) if (ROOT / s).exists()]
    files = [f for c in copied for f in ([c] if c.is_file() else c.rglob("*"))
             if f.is_file() and not _outside_the_context(_rel(f))]
    assert not [_rel(f) for f in files if "standin" in _rel(f).lower()]
    bad = [f"{_rel(f)}: {m}" for f in files if f.suffix == ".py" for m, top_level in _imports(f)
           if _top(m) == "tests" or (_top(m) == "standins" and top_level)]
    assert not bad, "\n".join(bad)
    assert any(_rel(f).startswith("model_repository/") for f in files), "the image serves model_repository"


def test_the_package_leaves_the_stand_ins_out():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    for name in ("standins", "standins.trtllm", "tests", "tests.unit"):
        assert not any(fnmatch.fnmatch(name, pattern) for pattern in include), name


def _private_names_taken_from_other_modules(path: Path) -> list[str]:
    """`from kit.module import _name`: a module's private name used outside it."""
    return [f"{node.module}.{alias.name}" for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _top(node.module) in KIT
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


def test_no_module_imports_another_modules_private_name():
    found = {_rel(p): names for package in KIT if package != "tests" for p in sorted((ROOT / package).rglob("*.py"))
             if (names := _private_names_taken_from_other_modules(p))}
    assert not found, found


# --- the build options, by engine (issue 48) -----------------------------------------------------
ENGINE_OPTION_MODULES = {"openvino": "build_engines.openvino.cli_options", "trtllm": "build_engines.trtllm.cli_options",
                         "pytorch": "build_engines.pytorch.cli_options"}
# Options two engines read, declared with the first (each one's help says what it means to both).
READ_BY_TWO = {"draft_checkpoint": {"openvino", "trtllm"}, "max_draft_len": {"pytorch", "trtllm"}}


def _engine_option_modules() -> dict:
    import importlib

    return {engine: importlib.import_module(module) for engine, module in ENGINE_OPTION_MODULES.items()}


def test_each_engine_folder_owns_its_build_options():
    """build_engines/cli_options.py declares what every backend or both GPU flows read; each engine's
    own options are declared in its folder's cli_options.py and read by its from_options(), which
    reads no other engine's (READ_BY_TWO aside); every option is declared once; an engine's options
    module imports neither the common one nor another engine's."""
    import inspect

    from build_engines.cli_options import SPEC_OPTIONS
    from build_engines.option_lists import declared

    names = [p.name for p in declared(SPEC_OPTIONS)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    modules = _engine_option_modules()
    owner = {p.name: engine for engine, module in modules.items() for p in declared(module.OPTIONS)}
    for engine, module in modules.items():
        reads = {n for n, p in inspect.signature(module.from_options).parameters.items() if p.kind == p.KEYWORD_ONLY}
        own = {n for n, e in owner.items() if e == engine}
        assert own <= reads, f"{engine} declares options its from_options does not read: {sorted(own - reads)}"
        foreign = {n for n in reads if owner.get(n, engine) != engine and engine not in READ_BY_TWO.get(n, ())}
        assert not foreign, f"{engine}'s from_options reads other engines' options: {sorted(foreign)}"
    for engine, module in ENGINE_OPTION_MODULES.items():
        path = ROOT / (module.replace(".", "/") + ".py")
        bad = [m for m, _ in _imports(path) if m.endswith("cli_options") and m != module]
        assert not bad, f"{_rel(path)} imports {bad}"


def _spec_dataclasses() -> set[type]:
    """BuildSpec and every dataclass its fields hold, all the way down."""
    import dataclasses
    import typing

    from build_engines.spec import BuildSpec

    found: set[type] = set()
    todo: list = [BuildSpec]
    while todo:
        t = todo.pop()
        if isinstance(t, type) and dataclasses.is_dataclass(t) and t not in found:
            found.add(t)
            todo += list(typing.get_type_hints(t).values())
        todo += list(typing.get_args(t))
    return found


def test_build_engines_constructs_the_spec_by_keyword():
    """No positional arguments to BuildSpec or any options dataclass under it, in build_engines: a
    field added or moved cannot shift a value into its neighbour's place (OpenVinoOptions was built
    from 17 positional arguments)."""
    names = {cls.__name__ for cls in _spec_dataclasses()}
    assert {"BuildSpec", "OpenVinoOptions", "Int4Recipe", "TrtLlmServing", "PyTorchSpeculative", "GpuTarget"} <= names
    bad = [f"{_rel(p)}:{node.lineno} {ast.unparse(node.func)}" for p in _modules("build_engines")
           for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Call) and node.args
           and getattr(node.func, "id", getattr(node.func, "attr", None)) in names]
    assert not bad, "\n".join(bad)


# Where a sampling field may be spelled (issue 48: one field table): the table, the tensor table's
# placement of NVIDIA's inputs, the engine step's typed inputs, the engines that apply it, the
# PyTorch build's sampler choice, the upstream conformance data, and - for a field another API
# of the front carries as its own (the Responses API's extensions) - that API's schema and route.
FIELD_HOMES = ("contract/sampling_fields.py", "contract/tensors.py", "model_repository/engine_step/engine_inputs.py",
               "model_repository/engines/*", "build_engines/pytorch/*", "contract/upstream/*")
OTHER_APIS = {"repetition_penalty": ("openai_front/responses.py", "openai_front/responses_schemas.py")}


def test_a_plain_sampling_field_is_spelled_only_where_the_table_says():
    """A field the front, the client, preprocessing and the Dynamo worker pass as sent (no rule of
    their own: not resolved by TensorRT-LLM's greedy rule, not min_tokens, which ignore_eos sets)
    appears in no other product module: those read it from contract/sampling_fields.py."""
    import re

    from contract.sampling_fields import PASSED_AS_SENT

    fields = [f.name for f in PASSED_AS_SENT if f.name != "min_tokens"]
    assert fields, "the table has plain fields"
    for name in fields:
        word = re.compile(rf"\b{name}\b")
        homes = FIELD_HOMES + OTHER_APIS.get(name, ())
        spelled = [_rel(p) for p in _modules(*PRODUCT) if word.search(p.read_text())]
        stray = [p for p in spelled if not any(fnmatch.fnmatch(p, h) for h in homes)]
        assert not stray, f"{name} is spelled outside the field table's homes: {stray}"
