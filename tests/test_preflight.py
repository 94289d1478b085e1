"""The pre-flight check (issues 28 and 30): a set-up that cannot grade is named as the set-up, before any
notebook runs, and the fix is chosen on structured fields, never on the words of an error message."""

import asyncio
import contextlib
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import course_runtime
import transformer_core
from autograder.core.files import REPO_ROOT
from autograder.core.limits import Limits
from autograder.engine.preflight import (CHECKOUT_PACKAGES, KERNEL_PACKAGES, ImportFailure, PreflightError,
                                         checkout_problem, import_failure, import_probe, package_origins, preflight,
                                         preflight_fix)
from course_runtime.language import CHINESE, translate_message

FIXTURE = Path(__file__).parent / "fixtures" / "course"


def probe_outputs(imports: list[str]) -> list[dict]:
    """What the pre-flight cell prints when run in this interpreter, as a kernel's outputs."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(import_probe(imports), "<preflight>", "exec"), {})
    return [{"kind": "stdout", "text": printed.getvalue()}] if printed.getvalue() else []


# --- The failing import, as fields ---------------------------------------------------------------------


def test_the_probe_reports_the_failing_import_as_fields():
    assert import_failure(probe_outputs(["import json", "import os.path"])) is None
    missing = import_failure(probe_outputs(["import json", "import numpyy_not_a_module", "import os"]))
    assert (missing.exception, missing.module) == ("ModuleNotFoundError", "numpyy_not_a_module")
    deep = import_failure(probe_outputs(["from json import decoder", "import json.not_a_submodule"]))
    assert (deep.exception, deep.module) == ("ModuleNotFoundError", "json.not_a_submodule")
    # A name a module lacks is an ImportError whose `name` is the module: nothing to install.
    absent = import_failure(probe_outputs(["from json import not_a_name"]))
    assert (absent.exception, absent.module) == ("ImportError", "json")
    raised = import_failure(probe_outputs(["import json; json.loads('{')"]))
    assert (raised.exception, raised.module) == ("JSONDecodeError", None)
    # Only the report line counts: other output, a bare mark or a mark with broken JSON is no report.
    assert import_failure([{"kind": "stdout", "text": "loading...\nautograder-preflight: {broken\n"},
                           {"kind": "stderr", "text": 'autograder-preflight: {"exception": "X"}\n'}]) is None


def test_multi_line_imports_run_inside_the_probe():
    statement = "from os.path import (\n    join,\n    not_in_os_path,\n)"
    failure = import_failure(probe_outputs([statement]))
    assert failure is not None and failure.exception == "ImportError" and "not_in_os_path" in failure.message


def test_the_fix_is_chosen_on_the_fields_not_the_words():
    course = preflight_fix("x", ImportFailure("ModuleNotFoundError", "transformer_core.attention", "..."))
    assert "run `make setup`" in course and "install the package" not in course
    other = preflight_fix("x", ImportFailure("ModuleNotFoundError", "numpyy", "No module named 'numpyy'"))
    assert "install the package that provides numpyy" in other
    # The words of a message decide nothing: a kernel's text naming a course package gets the general fix,
    # and so does an ImportError of a name (installing a package would not help).
    worded = preflight_fix("ModuleNotFoundError: No module named 'transformer_core'")
    assert "make setup" not in worded and "validate" in worded
    assert "install" not in preflight_fix("x", ImportFailure("ImportError", "json", "cannot import name 'y'"))
    assert preflight_fix("a\n  b", None).startswith("the grading kernel does not work: a b. Fix: ")


# --- One venv, one checkout ------------------------------------------------------------------------------


def test_this_checkout_with_its_own_venv_passes():
    origins = package_origins()
    # Independently: where this process imported the packages from.
    assert Path(origins["course_runtime"]).parent == Path(course_runtime.__file__).resolve().parent
    assert Path(origins["transformer_core"]).parent == Path(transformer_core.__file__).resolve().parent
    assert Path(course_runtime.__file__).resolve().parent == REPO_ROOT / "course_runtime"
    assert checkout_problem() is None


def test_another_checkout_or_no_install_is_named():
    elsewhere = {name: f"/srv/first-clone/{name}/__init__.py" for name in CHECKOUT_PACKAGES} | {"ipykernel": "/x"}
    problem = checkout_problem(Path("/home/me/second-clone"), elsewhere)
    assert problem.startswith("this venv was installed for another checkout, /srv/first-clone: its kernels "
                              "import course_runtime, transformer_core from there, not from this checkout "
                              "(/home/me/second-clone). A venv serves one checkout: run `make setup` here")
    # One package from elsewhere is enough (an editable install of the library alone, say).
    mixed = dict(elsewhere, course_runtime="/home/me/second-clone/course_runtime/__init__.py")
    assert "import transformer_core from there" in checkout_problem(Path("/home/me/second-clone"), mixed)
    bare = checkout_problem(Path("/home/me/second-clone"), dict(elsewhere, transformer_core=None, ipykernel=None))
    assert "cannot give a kernel transformer_core, ipykernel: the course is not installed" in bare
    same = {name: f"/home/me/second-clone/{name}/__init__.py" for name in CHECKOUT_PACKAGES} | {"ipykernel": "/x"}
    assert checkout_problem(Path("/home/me/second-clone"), same) is None


def test_a_chinese_learner_reads_the_set_up_problem_in_chinese():
    problem = checkout_problem(Path("/home/me/second-clone"),
                               {name: f"/srv/first-clone/{name}/__init__.py" for name in KERNEL_PACKAGES})
    said = translate_message(f"validate cannot run notebooks with this Python, whatever they hold: {problem}", CHINESE)
    assert "一个虚拟环境只服务于一份副本" in said and "问题不在你的笔记本" in said
    assert said.count("/srv/first-clone") == 2 and "/home/me/second-clone" in said
    left = set(re.findall(r"[A-Za-z]{2,}", re.sub(r"`[^`]*`|/\S*|\.venv\S*|\w+_\w+", "", said)))
    assert left <= {"validate", "Python", "venv", "VENV"}, left


@pytest.fixture(scope="module")
def second_checkout(tmp_path_factory) -> Path:
    """A second checkout of the course (its packages and the fixture course), with no venv of its own:
    run with this checkout's venv, whose editable install points here."""
    clone = tmp_path_factory.mktemp("second-clone")
    for name in ("autograder", "course_runtime", "transformer_core"):
        shutil.copytree(REPO_ROOT / name, clone / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(FIXTURE, clone, dirs_exist_ok=True)
    learner = clone / "submissions" / "kim" / "00-fixture"
    learner.mkdir(parents=True)
    shutil.copy(FIXTURE / "solutions" / "00-fixture" / "fixture.ipynb", learner / "fixture.ipynb")
    return clone


@pytest.mark.slow
def test_grading_from_a_second_checkout_stops_with_the_set_up_not_the_learner(second_checkout, tmp_path):
    def run(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "autograder", *arguments], cwd=second_checkout,
                              capture_output=True, text=True, timeout=600)

    graded = run("grade", "submissions", "--assignment", "00-fixture", "--out", str(tmp_path / "out"))
    assert graded.returncode == 2, graded.stdout + graded.stderr
    assert f"this venv was installed for another checkout, {REPO_ROOT}" in graded.stderr
    assert f"not from this checkout ({second_checkout.resolve()})" in graded.stderr
    assert not (tmp_path / "out" / "results").exists() or not any((tmp_path / "out" / "results").rglob("*.json"))
    checked = run("validate", "submissions/kim/00-fixture/fixture.ipynb")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "validate cannot run notebooks with this Python, whatever they hold: this venv was installed " \
           f"for another checkout, {REPO_ROOT}" in checked.stderr
    assert "FAILED" not in checked.stdout + checked.stderr


# --- The kernel -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_preflight_kernel_names_the_missing_package(tmp_path):
    limits = Limits(memory_mb=2048)
    asyncio.run(preflight(tmp_path / "ok", limits, (), ["import json", "import torch"]))
    with pytest.raises(PreflightError) as error:
        asyncio.run(preflight(tmp_path / "missing", limits, (), ["import json", "import numpyy_not_a_module"]))
    said = str(error.value)
    assert said.startswith("the grading kernel does not work: the assignment's imports failed in the kernel: "
                           "ModuleNotFoundError: No module named 'numpyy_not_a_module'")
    assert said.endswith("Fix: install the package that provides numpyy_not_a_module into the Python you grade "
                         "with, then grade again.")
