"""scripts/check_layers.py, the import-layer check of `make lint`: it catches an upward
import and import cycles planted in a copy of the packages, knows each rule on a small
tree written here, and passes on the real tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from mpiscope_testing import REPO, scriptload

SCRIPT = REPO / "scripts" / "check_layers.py"

# What the real tree still does against the layers: (path, rule, text in the detail).
# Empty since the jobs layer stopped importing the command `mpiscope run` and reader and
# salvaged stopped importing each other; an entry that no longer matches fails the test,
# so it cannot go stale.
ALLOWED: list[tuple[str, str, str]] = []


@pytest.fixture(scope="module")
def layers() -> ModuleType:
    """The script, loaded from its file (scripts/ is no package)."""
    return scriptload.load(SCRIPT, "check_layers")


def allowed(v) -> bool:
    return any(str(v.path) == p and v.rule == r and d in v.detail for p, r, d in ALLOWED)


def test_the_real_tree_keeps_its_layers(layers):
    found = layers.check(REPO)
    assert [str(v) for v in found if not allowed(v)] == []
    stale = [a for a in ALLOWED
             if not any(str(v.path) == a[0] and v.rule == a[1] and a[2] in v.detail
                        for v in found)]
    assert stale == [], "fixed: remove these from ALLOWED"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                          text=True)


def test_an_upward_import_and_cycles_planted_in_a_copy_are_caught(layers, tmp_path):
    for where in ("analyzer/mpiscope", "webui/mpiscope_webui"):
        shutil.copytree(REPO / where, tmp_path / where,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    before = {str(v) for v in layers.check(tmp_path)}
    write(tmp_path / "analyzer" / "mpiscope", {
        # upward, and lazy: imports inside functions count
        "archive/planted_low.py": """\
            def f():
                from mpiscope.render import planted_high
            """,
        "render/planted_high.py": "",
        # a cycle within one sub-package, one side relative
        "analysis/planted_a.py": "from mpiscope.analysis import planted_b\n",
        "analysis/planted_b.py": """\
            def f():
                from . import planted_a
            """,
        # a cycle between two sub-packages (one edge of it upward)
        "jobs/planted_job.py": "import mpiscope.cli.planted_cmd\n",
        "cli/planted_cmd.py": "from mpiscope.jobs.planted_job import f\n",
    })
    new = sorted({str(v) for v in layers.check(tmp_path)} - before)
    assert new == [
        "analyzer/mpiscope/analysis/planted_a.py:1: import cycle within analysis: "
        "mpiscope.analysis.planted_a (planted_a.py:1) -> mpiscope.analysis.planted_b "
        "(planted_b.py:2) -> mpiscope.analysis.planted_a",
        "analyzer/mpiscope/archive/planted_low.py:2: layers: upward import: archive -> "
        "render (mpiscope.archive.planted_low imports mpiscope.render.planted_high)",
        "analyzer/mpiscope/cli/planted_cmd.py:1: import cycle between sub-packages cli, jobs: "
        "mpiscope.cli.planted_cmd (planted_cmd.py:1) -> mpiscope.jobs.planted_job "
        "(planted_job.py:1) -> mpiscope.cli.planted_cmd",
        "analyzer/mpiscope/jobs/planted_job.py:1: layers: upward import: jobs -> cli "
        "(mpiscope.jobs.planted_job imports mpiscope.cli.planted_cmd)"]
    proc = run(tmp_path)
    assert proc.returncode == 1 and set(new) <= set(proc.stdout.splitlines())


# one module per layer, importing only downwards: the check passes
CLEAN = {
    "analyzer/mpiscope/__init__.py": """\
        __version__ = "0"

        def load(path):
            from mpiscope.archive import reader
            return reader
        """,
    "analyzer/mpiscope/__main__.py": "from mpiscope.cli import main\n",
    "analyzer/mpiscope/errors.py": "",
    "analyzer/mpiscope/paths.py": "from mpiscope import errors\n",
    "analyzer/mpiscope/output.py": "from mpiscope.errors import UserError\n",
    "analyzer/mpiscope/archive/__init__.py": "",
    "analyzer/mpiscope/archive/reader.py": "from mpiscope import __version__, output\n",
    "analyzer/mpiscope/analysis/__init__.py": "",
    "analyzer/mpiscope/analysis/stats.py": "from ..archive import reader\n",
    "analyzer/mpiscope/render/__init__.py": "",
    "analyzer/mpiscope/render/palette.py": "from mpiscope.analysis.stats import x\n",
    "analyzer/mpiscope/jobs/__init__.py": "",
    "analyzer/mpiscope/jobs/cluster/__init__.py": "from . import launch\n",
    "analyzer/mpiscope/jobs/cluster/launch.py": "from mpiscope.analysis import stats\n",
    "analyzer/mpiscope/cli/__init__.py": """\
        import mpiscope.jobs.cluster.launch
        from mpiscope.render import palette
        from mpiscope_webui import app
        """,
    "webui/mpiscope_webui/__init__.py": "",
    "webui/mpiscope_webui/app.py": "from mpiscope.render.palette import COLOURS\n",
}


def test_a_tree_that_keeps_the_layers_passes(tmp_path):
    write(tmp_path, CLEAN)
    proc = run(tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "")


@pytest.mark.parametrize("file, text, rule", [
    ("analyzer/mpiscope/paths.py", "from mpiscope.archive import reader\n",
     "upward import: base -> archive"),
    ("analyzer/mpiscope/analysis/stats.py", "from ..render import palette\n",
     "upward import: analysis -> render"),
    ("analyzer/mpiscope/jobs/cluster/launch.py", "from mpiscope.render import palette\n",
     "sideways import: jobs -> render"),
    ("analyzer/mpiscope/render/palette.py", "import mpiscope_webui.app\n",
     "sideways import: render -> webui"),
    ("webui/mpiscope_webui/app.py", "from mpiscope.cli import main\n",
     "upward import: webui -> cli"),
    ("analyzer/mpiscope/analysis/stats.py", "from mpiscope import load\n",
     "the façade is for notebooks: import from the sub-package (mpiscope.analysis.stats "
     "imports mpiscope load)"),
    ("analyzer/mpiscope/archive/reader.py", "import mpiscope\n", "the façade is for notebooks"),
    ("analyzer/mpiscope/__init__.py", "def f():\n    from mpiscope.jobs import launch\n",
     "the façade may import only analysis, archive, base, engines, render (mpiscope.jobs is jobs)"),
])
def test_each_rule(layers, tmp_path, file, text, rule):
    write(tmp_path, {**CLEAN, file: text})
    found = [str(v) for v in layers.check(tmp_path) if v.rule == "layers"]  # cycles aside
    assert len(found) == 1 and found[0].startswith(f"{file}:") and rule in found[0], found


def test_a_module_outside_every_layer_is_named(layers, tmp_path):
    write(tmp_path, {**CLEAN, "analyzer/mpiscope/stray.py": ""})
    assert [str(v) for v in layers.check(tmp_path)] == [
        "analyzer/mpiscope/stray.py:1: module in no layer: mpiscope.stray: give it a layer "
        "in scripts/check_layers.py"]


def test_a_package_and_its_module_importing_each_other_is_a_cycle(layers, tmp_path):
    write(tmp_path, {**CLEAN, "analyzer/mpiscope/jobs/cluster/launch.py":
                     "def f():\n    from mpiscope.jobs.cluster import spec\n"})
    assert [str(v) for v in layers.check(tmp_path)] == [
        "analyzer/mpiscope/jobs/cluster/__init__.py:1: import cycle within jobs: "
        "mpiscope.jobs.cluster (__init__.py:1) -> mpiscope.jobs.cluster.launch (launch.py:2) "
        "-> mpiscope.jobs.cluster"]
