"""Packaging tells the truth: pyproject.toml, the conda environments (envs/*.yaml), the CI
constraints (.ci/constraints.txt) and the ``test`` extra agree with each other and with what the
workflow's rules and the tests use. Fast, in process, no network."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
NAME = canonicalize_name(PYPROJECT["name"])

# PyPI name -> the conda-forge package the environments ask for instead
CONDA_NAME = {"torch": "pytorch", "matplotlib": "matplotlib-base", "seaborn": "seaborn-base"}
PYTORCH_PACKAGES = {"pytorch", "pytorch-cpu", "pytorch-gpu"}

# the extras of verbeval each environment's rules need: plots (figures), pdf (fetch of the PDF verb
# list); gpu (accelerate: models[].device_map in infer, simverb_score, veridicality_predict)
ENV_EXTRAS = {"verbeval.yaml": {"plots", "pdf"}, "inference.yaml": {"gpu"}}


def _extra_requirements(extras: set[str], seen: set[str] | None = None) -> list[Requirement]:
    """[project].dependencies plus the given extras of pyproject.toml, self-references
    (``verbeval[a,b]``) resolved."""
    seen = set() if seen is None else seen
    reqs = [Requirement(r) for r in PYPROJECT["dependencies"]] if not seen else []
    for extra in sorted(extras - seen):
        seen.add(extra)
        for text in PYPROJECT["optional-dependencies"][extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == NAME:
                reqs += _extra_requirements(set(req.extras), seen)
            else:
                reqs.append(req)
    return reqs


def _pyproject_ranges() -> dict[str, list[SpecifierSet]]:
    """Every range pyproject.toml gives a distribution (dependencies and all extras)."""
    ranges: dict[str, list[SpecifierSet]] = {}
    for req in _extra_requirements(set(PYPROJECT["optional-dependencies"])):
        ranges.setdefault(canonicalize_name(req.name), []).append(req.specifier)
    return ranges


def _conda_spec(entry: str) -> tuple[str, SpecifierSet]:
    """A conda MatchSpec of the simple form the envs use: ``name`` or ``name<op>version[,...]``."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", entry.strip())
    assert m, f"unparsable conda spec {entry!r}"
    return m.group(1).lower(), SpecifierSet(m.group(2))


def _env(name: str) -> dict:
    """One environment: its conda specs, its pip requirements, the extras its verbeval line installs."""
    env = yaml.safe_load((REPO / "envs" / name).read_text())
    conda: dict[str, SpecifierSet] = {}
    pip: dict[str, SpecifierSet] = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                # Snakemake builds the env from a copy under .snakemake/conda/: a path here would
                # not point at the checkout (the post-deploy script installs verbeval instead)
                assert not line.startswith(("--editable", "-e", ".", "/")), f"envs/{name}: pip path {line!r}"
                req = Requirement(line)
                pip[canonicalize_name(req.name)] = req.specifier
        else:
            n, spec = _conda_spec(dep)
            assert n not in conda, f"envs/{name}: {n} listed twice"
            conda[n] = spec
    # Snakemake's post-deploy script of the env (same stem) installs verbeval from the working
    # directory, the repository root, without dependencies (the env lists them)
    script = (REPO / "envs" / name).with_suffix(".post-deploy.sh").read_text()
    installs = re.findall(r'^python -m pip install --no-deps --editable "\.(?:\[([^\]]*)\])?"$', script, re.M)
    assert len(installs) == 1, f"envs/{name}: its post-deploy script installs verbeval exactly once: {installs}"
    extras = {e.strip() for e in installs[0].split(",") if e.strip()}
    return {"conda": conda, "pip": pip, "extras": extras}


ENVS = sorted(p.name for p in (REPO / "envs").glob("*.yaml"))


def test_every_env_is_known_and_every_rule_names_one():
    """Every envs/*.yaml has its extras declared here, and every rule's conda: directive names one
    of them (a new environment or rule env must be added to ENV_EXTRAS and so to these checks)."""
    assert set(ENVS) == set(ENV_EXTRAS), f"envs/: {ENVS}"
    named = set()
    for smk in (REPO / "workflow").rglob("*.smk"):
        for m in re.finditer(r"^\s+conda:\s*\n\s+[\"']([^\"']+)[\"']", smk.read_text(), re.M):
            named.add(Path(m.group(1)).name)
    assert named == set(ENV_EXTRAS), f"rules name {sorted(named)}"


@pytest.mark.parametrize("name", ENVS)
def test_env_installs_verbeval_with_the_extras_its_rules_need(name):
    env = _env(name)
    assert env["extras"] == ENV_EXTRAS[name], f"envs/{name} installs verbeval[{','.join(sorted(env['extras']))}]"
    assert set(env["extras"]) <= set(PYPROJECT["optional-dependencies"])


@pytest.mark.parametrize("name", ENVS)
def test_env_lists_every_dependency_with_pyprojects_range(name):
    """Each dependency of [project].dependencies and of the env's extras is in the env, as a conda
    package (CONDA_NAME maps PyPI names) or a pip requirement, with pyproject's range; so adding a
    dependency to pyproject.toml and not to an env fails here."""
    env = _env(name)
    missing, differ = [], []
    for req in _extra_requirements(env["extras"]):
        dist = canonicalize_name(req.name)
        conda_name = CONDA_NAME.get(dist, dist)
        if conda_name in env["conda"]:
            spec = env["conda"][conda_name]
        elif dist in env["pip"]:
            spec = env["pip"][dist]
        else:
            missing.append(str(req))
            continue
        if spec != req.specifier:
            differ.append(f"{req} (envs/{name}: {spec or 'any'})")
    assert not missing, f"envs/{name} lacks {missing}"
    assert not differ, f"envs/{name} gives other ranges than pyproject.toml: {differ}"
    both = {CONDA_NAME.get(d, d) for d in env["pip"]} & set(env["conda"])
    assert not both, f"envs/{name}: {sorted(both)} both from conda and from pip"


@pytest.mark.parametrize("name", ENVS)
def test_env_asks_for_one_pytorch(name):
    torch = sorted(set(_env(name)["conda"]) & PYTORCH_PACKAGES)
    assert len(torch) == 1, f"envs/{name} asks for {torch}"


def _floor(spec: SpecifierSet) -> Version:
    floors = [Version(s.version) for s in spec if s.operator == ">="]
    assert len(floors) == 1, f"no single >= floor in {spec}"
    return floors[0]


@pytest.mark.parametrize("name", ENVS)
def test_python_floor_matches_requires_python(name):
    floor = _floor(SpecifierSet(PYPROJECT["requires-python"]))
    env_floor = _floor(_env(name)["conda"]["python"])
    assert env_floor == floor, f"envs/{name}: python>={env_floor}, pyproject.toml: requires-python >={floor}"
    assert floor == Version("3.11"), "the floor of snakemake>=9.27 and the SLURM plugin is 3.11"


def _constraints() -> dict[str, Version]:
    pins = {}
    for line in (REPO / ".ci" / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = list(req.specifier)
            assert spec.operator == "==", f"{line!r}: the constraints pin exact versions"
            pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def test_constraints_pin_inside_pyprojects_ranges():
    ranges = _pyproject_ranges()
    pins = _constraints()
    assert {"torch", "transformers", "snakemake", "dvc", "snakemake-executor-plugin-slurm"} <= set(pins)
    outside = [
        f"{d}=={v} not in {r}"
        for d, v in pins.items()
        for r in ranges.get(d, [None])
        if r is None or not r.contains(v, prereleases=True)
    ]
    assert not outside, f".ci/constraints.txt: {outside}"


def _closure(reqs: list[Requirement]) -> set[str]:
    """The installed distributions these requirements pull in (markers evaluated here)."""
    env = default_environment()
    seen: set[str] = set()
    todo = [(r, "") for r in reqs]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        dist = canonicalize_name(req.name)
        key = f"{dist}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            sub = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for text in sub:
            child = Requirement(text)
            for e in {""} | set(req.extras):
                if child.marker is None or child.marker.evaluate({**env, "extra": e}):
                    todo.append((Requirement(str(child).split(";")[0]), e))
                    break
    return {k.split("[")[0] for k in seen}


def _test_imports() -> set[str]:
    """Top-level modules the tests import (import statements and pytest.importorskip)."""
    mods = set()
    for path in (REPO / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split(".")[0])
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                mods.add(node.args[0].value.split(".")[0])
    local = {p.stem for p in (REPO / "tests").glob("*.py")}
    return {m for m in mods if m not in sys.stdlib_module_names and m not in local and m != "verbeval"}


def test_test_extra_pulls_what_the_tests_import():
    """Every third-party module the tests import comes from a distribution that verbeval[test]
    requires, directly or through its dependencies."""
    closure = _closure(_extra_requirements({"test"}))
    providers = metadata.packages_distributions()
    lacking = []
    for mod in sorted(_test_imports()):
        dists = {canonicalize_name(d) for d in providers.get(mod, [])}
        if not dists & closure:
            lacking.append(f"{mod} ({', '.join(sorted(dists)) or 'not installed'})")
    assert not lacking, f"the test extra does not pull in {lacking}"


def test_newest_releases_step_never_fails_ci():
    """``.ci/newest`` (the newest releases, non-blocking): every exit is 0, no ``set -e``, .ci/run calls it
    with a fallback, torch stays 2.13.0, no constraints file, and every test file it runs exists."""
    newest = (REPO / ".ci" / "newest").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in newest.splitlines())
    exits = re.findall(r"\bexit\b\s*([^\s;}]*)", code)
    assert len(exits) >= 3 and set(exits) == {"0"}, exits
    # installed without the constraints (it reads them only to print the CI pins beside the releases)
    assert not re.search(r"set -\w*e", code) and not re.search(r"pip install[^\n]*(-c |--constraint)", code)
    assert code.count("torch==2.13.0") == 2 and _constraints()[canonicalize_name("torch")] == Version("2.13.0")
    tests = re.search(r"NEWEST_TESTS=\((.*?)\)", code, re.S).group(1).split()
    assert tests and all((REPO / t).is_file() for t in tests), tests
    run = (REPO / ".ci" / "run").read_text()
    assert re.search(
        r'^\s+PATH="\$NO_SLURM:\$PATH" VERBEVAL_DATA_MIRROR="\$SHARED/data" "\$NEWEST_DIR/verbeval/\.ci/newest" \\\n'
        r'\s+\|\| echo "newest releases: the step itself failed to run \(non-blocking\)"\n\) > "\$NEWEST_LOG" 2>&1 &$',
        run,
        re.M,
    )
    assert 'say "$n failures (non-blocking)' in newest and 'say() { echo "newest releases: $*"; }' in newest


def test_ci_stage_budgets_are_the_documented_ones_and_sum_to_the_target():
    """``.ci/run`` prints each stage's time against the budget docs/testing.md gives it ("CI", the stage
    table): the same budgets in the same order, summing to the 30-minute target, and the guard at 45 minutes."""
    run = (REPO / ".ci" / "run").read_text()
    in_run = [int(b) for b in re.findall(r'^stage_done "[^"]+" (\d+)$', run, re.M)]
    doc = (REPO / "docs" / "testing.md").read_text().split("## CI (`.ci/run`)", 1)[1]
    in_doc = [int(b) for b in re.findall(r"^\| \d+ \| .* \| (\d+) s \|$", doc, re.M)]
    assert len(in_run) == 10 and in_run == in_doc, (in_run, in_doc)
    assert sum(in_run) <= 30 * 60
    assert re.search(r"^CI_GUARD_S=2700$", run, re.M)
