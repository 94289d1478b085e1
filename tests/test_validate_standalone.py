"""`python -m autograder validate` from the exercise alone: no solutions/, no nbgrader (issue 14).

A learner on Colab has only what the setup cell installs (``transformer-core`` and its base
dependencies); a learner with a clone may have no ``solutions/``. The check then plans from the
released exercise: in ``<root>/exercises/`` or, in an installed wheel, ``autograder/exercises/``.
"""

import ast
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from base_dependencies_only import base_requirements, canonical
from conftest import run_once
from test_autograder_grading import (ASSIGNMENT, GOOD_SCALE, GOOD_SOFTMAX, LIMITS, NOTEBOOK, WRONG_SOFTMAX,
                                     edited, make_course)

from autograder.__main__ import main
from autograder.core.errors import UsageError
from autograder.engine.sandbox import KERNEL_BOOTSTRAP
from autograder.engine.validate import _VALIDATE_NEEDS, _validate_install_command, validate

REPO = Path(__file__).resolve().parents[1]
HELPER = Path(__file__).with_name("base_dependencies_only.py")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def learner_root(tmp_path_factory) -> Path:
    """The fixture course as a learner's clone without solutions/: its released exercises only."""
    course = Path(run_once(tmp_path_factory, "course", make_course))
    root = tmp_path_factory.mktemp("no-solutions")
    shutil.copytree(course / "exercises", root / "exercises")
    shutil.copy(course / "_config.yml", root / "_config.yml")
    assert not (root / "solutions").exists()
    return root


def learner_notebook(root: Path, folder: Path, sources: dict[str, str], change=None) -> Path:
    """The released fixture exercise with some cells' sources replaced, written to ``folder``."""
    path = folder / NOTEBOOK
    path.write_text(edited(root / "exercises" / ASSIGNMENT / NOTEBOOK, sources, change), encoding="utf-8")
    return path


def check(root: Path, notebook: Path, capsys) -> tuple[int, str]:
    """Run the command line's validate on ``notebook``; return its exit status and output."""
    status = main(["--root", str(root), "validate", str(notebook), *LIMITS])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


# --- Planning from the released exercise ------------------------------------------------------------


def test_a_completed_notebook_passes_without_solutions(learner_root, tmp_path, capsys):
    notebook = learner_notebook(learner_root, tmp_path, {"softmax": GOOD_SOFTMAX, "scale": GOOD_SCALE})
    status, out = check(learner_root, notebook, capsys)
    assert status == 0, out
    assert f"against the released exercise in {learner_root / 'exercises'}" in out
    assert "passed  test_softmax" in out and "passed  test_scale" in out
    assert "all visible tests pass" in out


def test_a_blank_notebook_fails_and_names_the_failing_tests(learner_root, tmp_path, capsys):
    notebook = learner_notebook(learner_root, tmp_path, {})
    status, out = check(learner_root, notebook, capsys)
    assert status == 1, out
    assert "FAILED  test_softmax" in out and "FAILED  test_scale" in out
    assert "not ready" in out


def test_deleted_and_edited_tests_are_restored_from_the_released_copy(learner_root, tmp_path, capsys):
    def drop_test_scale(grade_id, cell):
        if grade_id is None:
            cell["cells"] = [c for c in cell["cells"] if c.get("id") != "test_scale"]

    # A wrong softmax whose test was replaced by `pass`: only the restored test catches it.
    notebook = learner_notebook(learner_root, tmp_path, {"softmax": WRONG_SOFTMAX, "scale": GOOD_SCALE,
                                                         "test_softmax": "pass"}, drop_test_scale)
    status, out = check(learner_root, notebook, capsys)
    assert status == 1, out
    assert "FAILED  test_softmax" in out, "the edited test cell was run as released, not as edited"
    assert "passed  test_scale" in out, "the deleted test cell was put back and run"
    assert "note: The course cell `test_softmax` was changed in your notebook; the original was used." in out
    assert "note: The test cell `test_scale` was missing from your notebook; it was put back and run." in out


def test_the_assignment_is_told_from_grade_ids_when_the_file_was_renamed(learner_root, tmp_path):
    notebook = tmp_path / "my copy (1).ipynb"
    notebook.write_text(edited(learner_root / "exercises" / ASSIGNMENT / NOTEBOOK,
                               {"softmax": GOOD_SOFTMAX, "scale": GOOD_SCALE}), encoding="utf-8")
    ok, lines = validate(notebook, root=learner_root, limits=None)
    assert ok, lines
    assert lines[0].startswith(f"checking my copy (1).ipynb as {ASSIGNMENT}/fixture.ipynb")


def test_unknown_assignments_and_missing_course_notebooks_say_what_to_do(learner_root, tmp_path, monkeypatch):
    notebook = learner_notebook(learner_root, tmp_path, {})
    with pytest.raises(UsageError, match=r"unknown assignment: 99-nope; the assignments are: 00-fixture, 01-other"):
        validate(notebook, "99-nope", root=learner_root)
    stranger = tmp_path / "stranger.ipynb"
    stranger.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(UsageError, match=r"cannot tell which assignment stranger.ipynb belongs to; pass "
                                         r"--assignment \(one of: 00-fixture, 01-other\)"):
        validate(stranger, root=learner_root)
    monkeypatch.setattr("autograder.engine.plan.PACKAGED_EXERCISES", tmp_path / "not-installed")
    with pytest.raises(UsageError, match="no course notebooks found: .* install the course package"):
        validate(notebook, root=tmp_path / "empty")


def test_a_file_that_is_not_a_notebook_says_what_it_is_and_what_to_validate(learner_root, tmp_path, capsys,
                                                                            monkeypatch):
    """A zip, a .txt: validate says what the file is and which file to check instead, exit status 2, with
    or without --assignment (it said "cannot tell which assignment", then "'utf-8' codec can't decode"),
    in the learner's language where it can be told: a Chinese notebook inside the zip, a ``zh`` folder,
    ``$COURSE_LANGUAGE``."""
    monkeypatch.delenv("COURSE_LANGUAGE", raising=False)
    released = (learner_root / "exercises" / ASSIGNMENT / NOTEBOOK).read_text(encoding="utf-8")
    chinese = json.loads(released)
    chinese["metadata"]["course"] = {"language": "zh_CN"}
    zipped = {"work.zip": released, "zh-work.zip": json.dumps(chinese)}
    for name, text in zipped.items():
        with zipfile.ZipFile(tmp_path / name, "w") as zf:
            zf.writestr(f"work/{NOTEBOOK}", text)
    (tmp_path / "answers.txt").write_text("softmax is exp over the sum of exps\n")
    (tmp_path / "zh").mkdir()
    (tmp_path / "zh" / "answers.txt").write_text("softmax\n")
    inside = (f"work.zip is not a notebook but a zip holding work/{NOTEBOOK}: validate the .ipynb file inside it, "
              "the notebook you will submit (and submit that file itself, not the zip)")
    text = "answers.txt is not a notebook but a text file: validate the .ipynb notebook you will submit"
    for args, said in [([tmp_path / "work.zip"], inside), ([tmp_path / "work.zip", "--assignment", ASSIGNMENT], inside),
                       ([tmp_path / "answers.txt"], text), ([tmp_path / "answers.txt", "--assignment", ASSIGNMENT], text)]:
        status = main(["--root", str(learner_root), "validate", *map(str, args), *LIMITS])
        assert (status, capsys.readouterr().err.strip()) == (2, f"error: {said}")
    in_chinese = {tmp_path / "zh-work.zip": f"zh-work.zip 不是笔记本，而是一个压缩包，里面是 work/{NOTEBOOK}。请对其中的 "
                                            ".ipynb 文件运行 validate，它就是你要提交的笔记本。提交时也请提交这个文件本身，"
                                            "不要提交压缩包。",
                  tmp_path / "zh" / "answers.txt": "answers.txt 不是笔记本，而是一个文本文件：请对你要提交的 .ipynb 笔记本运行 validate。"}
    for path, said in in_chinese.items():
        with pytest.raises(UsageError) as error:
            validate(path, ASSIGNMENT, root=learner_root)
        assert str(error.value) == said
    status = main(["--root", str(learner_root), "validate", str(tmp_path / "zh" / "answers.txt"), *LIMITS])
    assert (status, capsys.readouterr().err.strip()) == (2, "错误：" + in_chinese[tmp_path / "zh" / "answers.txt"])
    monkeypatch.setenv("COURSE_LANGUAGE", "zh_CN")
    with pytest.raises(UsageError, match="^answers.txt 不是笔记本，而是一个文本文件"):
        validate(tmp_path / "answers.txt", root=learner_root)


def test_a_chinese_learners_refusal_joins_its_lists_in_chinese(tmp_path, monkeypatch):
    """What validate lists for a Chinese learner (the notebooks inside a zip, the packages it lacks) is
    joined with 、 and each item said in Chinese, not with the English ", " around English words
    (issue 29). The check comes before any course notebook is read, so no course is needed here."""
    chinese = json.dumps({"cells": [], "metadata": {"course": {"language": "zh_CN"}}, "nbformat": 4, "nbformat_minor": 5})
    with zipfile.ZipFile(tmp_path / "work.zip", "w") as zf:
        for name in ("work/a.ipynb", "work/b.ipynb"):
            zf.writestr(name, chinese)
    with pytest.raises(UsageError) as error:
        validate(tmp_path / "work.zip", root=tmp_path)
    assert str(error.value).startswith("work.zip 不是笔记本，而是一个压缩包，里面是 work/a.ipynb、work/b.ipynb。")
    monkeypatch.setattr("autograder.engine.validate._missing_for_validate",
                        lambda: ["jupyter_client (not installed)", "pyzmq (version 0.1; 1 or later is needed)"])
    (tmp_path / "x.ipynb").write_text(chinese)
    with pytest.raises(UsageError) as error:
        validate(tmp_path / "x.ipynb", root=tmp_path)
    assert "需要 jupyter_client（未安装）、pyzmq（版本为 0.1；需要 1 或更高版本）。" in str(error.value), str(error.value)
    english = [w for w in re.findall(r"[A-Za-z]{2,}", re.sub(r"`[^`]*`|\w+\.\w+|jupyter_client|pyzmq", " ",
                                                             str(error.value)))
               if w not in ("validate", "Colab")]
    assert not english, (english, str(error.value))


# --- What an installed wheel ships and needs --------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The course package as pip builds it from the repository (what Colab's setup cell installs),
    unpacked: the folder that would be site-packages."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for name in ("autograder", "course_runtime", "transformer_core", "exercises"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    # Build with this environment's setuptools when it is recent enough for pyproject.toml (offline,
    # fast); otherwise as pip does by default, in an isolated build environment.
    recent = int(importlib.metadata.version("setuptools").split(".")[0]) >= 77
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source),
                    *(["--no-build-isolation"] if recent else [])], check=True, capture_output=True)
    (built,) = dist.glob("transformer_core-*.whl")
    site = tmp_path_factory.mktemp("site-packages")
    with zipfile.ZipFile(built) as archive:
        archive.extractall(site)
    return site


@pytest.fixture(scope="module")
def colab_python(wheel, tmp_path_factory) -> Path:
    """A Python that imports the course from the unpacked wheel (not from this checkout) and the other
    packages from this environment, in every process it starts (kernels included): a virtual
    environment whose one .pth file lists the wheel first. Returns its interpreter."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "course.pth").write_text(f"{wheel}\n{ours}\n", encoding="utf-8")
    return venv / "bin" / "python"


def test_the_wheel_ships_every_released_exercise(wheel):
    released = sorted(p.relative_to(REPO / "exercises").as_posix() for p in (REPO / "exercises").glob("*/*.ipynb"))
    shipped = sorted(p.relative_to(wheel / "autograder" / "exercises").as_posix()
                     for p in (wheel / "autograder" / "exercises").glob("*/*.ipynb"))
    assert released and shipped == released
    assert not (wheel / "solutions").exists() and not (wheel / "exercises").exists()


def test_every_package_of_the_repository_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for top in ("autograder", "course_runtime", "transformer_core")
             for p in (REPO / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"


@pytest.fixture(scope="module")
def wheel_check(wheel, colab_python, tmp_path_factory) -> dict:
    """The Colab case, run once: validate a blank real exercise from the unpacked wheel (no clone: the
    package's own copy of the exercise is the plan), with every import outside pyproject's base
    dependencies refused (nbgrader, nbclient, nbconvert, pytest, ...)."""
    folder = tmp_path_factory.mktemp("colab")
    notebook = folder / "self_attention.ipynb"
    shutil.copy(REPO / "exercises" / "02-self-attention" / "self_attention.ipynb", notebook)
    report = folder / "report.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder)}
    run = subprocess.run([str(colab_python), str(HELPER), "--report", str(report), "--extras", "validate",
                          "--no-namespaces", "validate", str(notebook), *LIMITS],
                         capture_output=True, text=True, env=env, timeout=300)
    facts = json.loads(report.read_text()) if report.exists() else {}
    return {"status": run.returncode, "out": run.stdout + run.stderr, "facts": facts}


def test_validate_runs_from_the_installed_wheel_with_base_dependencies_only(wheel, wheel_check):
    out = wheel_check["out"]
    assert wheel_check["status"] == 1, out
    assert f"against the released exercise in {wheel / 'autograder' / 'exercises'}" in out
    assert "FAILED  test_attention: NotImplementedError" in out and "Traceback" not in out
    notes = [line for line in out.splitlines() if "isolation" in line or line.startswith("warning")]
    assert notes == ["note: your notebook runs without the grader's full isolation here (Linux namespaces or "
                     "pivot_root are not available); the tests and their verdicts are the same"], out
    facts = wheel_check["facts"]
    assert "nbgrader" not in facts["closure"] and "nbclient" not in facts["closure"]
    assert {"autograder.engine.validate", "autograder.engine.runner", "autograder.engine.referee"} <= set(facts["imports"])
    assert not {"autograder", "course_runtime", "transformer_core", "nbformat", "yaml", "jupyter_client"} & set(facts["refused"])


def test_what_validate_imports_directly_is_a_direct_base_dependency(wheel_check):
    """Each third-party module a course module imported by name in that run, and what the kernel's
    bootstrap imports, belongs to a distribution listed in pyproject's own dependencies (not one
    that merely happens to come with another)."""
    facts = wheel_check["facts"]
    base = base_requirements(("validate",))
    imported = {top for tops in facts["imports"].values() for top in tops}
    assert {"nbformat", "yaml", "jupyter_client", "zmq", "traitlets", "torch"} <= imported, imported
    kernel = {node.names[0].name.partition(".")[0] if isinstance(node, ast.Import) else node.module.partition(".")[0]
              for node in ast.walk(ast.parse(KERNEL_BOOTSTRAP)) if isinstance(node, (ast.Import, ast.ImportFrom))}
    assert "ipykernel" in kernel
    missing = {top: facts["owners"].get(top) for top in (imported | kernel) - {"course_runtime", "transformer_core"}
               if not {canonical(d) for d in facts["owners"].get(top, [])} & base}
    assert not missing, f"imported by validate but not in pyproject's dependencies: {missing}"


def test_the_light_packages_are_base_dependencies_and_the_kernel_ones_the_validate_extra():
    """nbformat, PyYAML and traitlets come with the course package itself (Colab's versions fit);
    the kernel's packages are the `validate` extra, which validate names when they are missing."""
    base = base_requirements()
    assert {"nbformat", "pyyaml", "traitlets"} <= base and "nbgrader" not in base
    assert {"jupyter-client", "pyzmq", "ipykernel"} <= base_requirements(("validate",)) - base
    needs = {canonical(distribution) for _, distribution, _ in _VALIDATE_NEEDS}
    assert needs == base_requirements(("validate",)) - base


def test_without_the_validate_extra_validate_says_what_to_install(colab_python, tmp_path):
    notebook = tmp_path / "self_attention.ipynb"
    shutil.copy(REPO / "exercises" / "02-self-attention" / "self_attention.ipynb", notebook)
    run = subprocess.run([str(colab_python), str(HELPER), "validate", str(notebook)], capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "needs jupyter_client (not installed), pyzmq (not installed), ipykernel (not installed)" in run.stderr
    assert 'install them with `pip install "transformer-core[validate]' in run.stderr
    assert "Traceback" not in run.stderr


def test_the_install_command_follows_where_the_package_came_from(monkeypatch):
    class Installed:
        def __init__(self, record: dict) -> None:
            self.record = record

        def read_text(self, name: str) -> str:
            return json.dumps(self.record) if name == "direct_url.json" else None

    git = {"url": "https://github.com/owner/course", "vcs_info": {"vcs": "git", "requested_revision": "v2026.1",
                                                                  "commit_id": "abc"}}
    monkeypatch.setattr("importlib.metadata.distribution", lambda name: Installed(git))
    assert _validate_install_command() == 'pip install "transformer-core[validate] @ git+https://github.com/owner/course@v2026.1"'
    monkeypatch.setattr("importlib.metadata.distribution",
                        lambda name: Installed({"url": "file:///home/me/course", "dir_info": {"editable": True}}))
    assert _validate_install_command() == 'pip install -e "/home/me/course[validate]"'
