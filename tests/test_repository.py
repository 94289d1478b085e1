"""The repository's own promises: layout, environment files, CI entry point."""

import pathlib
import re
import tomllib

import yaml
from base_dependencies_only import imported_modules

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_required_top_level_exists():
    for name in ["book", "exercises", "solutions", "autograder", "_config.yml", "_toc.yml",
                 "environment.yml", "README.md", "pyproject.toml", "Makefile", "transformer_core",
                 "tests", ".ci/run"]:
        assert (ROOT / name).exists(), f"{name} is part of the required layout but is missing"


def test_environment_yml_matches_pyproject():
    """environment.yml installs exactly the runtime, book and grading requirements of pyproject.toml."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip_section, "environment.yml must install the course library itself (-e .)"
    from_env = {req for req in pip_section if req != "-e ."}
    project = _pyproject()["project"]
    expected = set(project["dependencies"])
    for extra in ("book", "grading"):
        expected |= set(project["optional-dependencies"][extra])
    assert from_env == expected, (
        f"environment.yml and pyproject.toml disagree.\n only in environment.yml: {sorted(from_env - expected)}"
        f"\n only in pyproject.toml: {sorted(expected - from_env)}")
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    minimum = project["requires-python"].removeprefix(">=")
    assert tuple(map(int, python.split("=")[1].split("."))) >= tuple(map(int, minimum.split("."))), (
        f"environment.yml pins {python}, below requires-python {project['requires-python']}")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^\s*(make \w+)\s*$", readme, flags=re.MULTILINE)
    assert "make test" in commands, "the README must give `make test` as the test command"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, flags=re.MULTILINE), ".ci/run must run the README's `make test`"


def test_every_module_a_learner_notebook_imports_is_installed_by_the_learner_requirements():
    """A learner who installs the runtime and book requirements (environment.yml, Binder) must be
    able to run every chapter and exercise: each third-party import of book/ and exercises/ comes
    from a distribution listed there."""
    import importlib.metadata
    import json
    import sys

    project = _pyproject()["project"]
    declared = {re.split(r"[<>=!~ \[;]", req, maxsplit=1)[0].lower().replace("_", "-")
                for req in project["dependencies"] + project["optional-dependencies"]["book"]}
    declared.add(project["name"])
    providers = importlib.metadata.packages_distributions()
    local = {"transformer_core", "autograder"}
    missing = {}
    for path in sorted(ROOT.glob("book/*.ipynb")) + sorted(ROOT.glob("exercises/*/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = [imported_modules("".join(cell["source"])) for cell in cells if cell["cell_type"] == "code"]
        for module in set().union(*code):
            if module in sys.stdlib_module_names or module in local:
                continue
            distributions = {d.lower().replace("_", "-") for d in providers.get(module, [])}
            if not distributions & declared:
                missing.setdefault(module, []).append(path.relative_to(ROOT).as_posix())
    assert not missing, f"imported by learner notebooks but not in the runtime or book requirements: {missing}"
