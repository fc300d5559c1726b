"""Packaging: the Spack recipe agrees with pyproject.toml and the CMake files, and the
package installed the way users install it (`pip install .`, `pip install -e .`) carries a
working interposer: `mpiscope lib` right after it, no `make`."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "packaging" / "spack" / "spack_repo" / "mpiscope" / "packages" / "py_mpiscope" \
    / "package.py"
CMAKE_FILES = [ROOT / "CMakeLists.txt", ROOT / "interposer" / "CMakeLists.txt",
               ROOT / "analyzer" / "native" / "CMakeLists.txt"]

# pyproject.toml's name -> Spack's, where it is not py-<name>.
PYPI_TO_SPACK = {
    "otf2": "otf2",  # the OTF2 Python bindings ship with Spack's otf2 (it extends python)
}
# What the CMake files look for -> the Spack package that provides it.
CMAKE_TO_SPACK = {
    "mpicc": "mpi",  # find_program(MPISCOPE_MPICC NAMES mpicc.<flavour>), and CMakeLists.txt
    "libdw": "elfutils",  # pkg_check_modules(DWFL REQUIRED libdw)
    "otf2": "otf2",  # find_library(OTF2_LIB otf2)
    "PkgConfig": "pkgconfig",
    "Python3": "python",  # the wrapper generator
}
# Spack build tools that no CMake file names: the C compiler, CMake, the build backend.
BUILD_ONLY = {"c", "cmake", "py-scikit-build-core"}


# ---------------------------------------------------------------- the Spack recipe


def recipe_dependencies() -> dict[str, tuple[str, set[str]]]:
    """{name: (version range, dependency types)} of the recipe's depends_on() calls."""
    tree = ast.parse(RECIPE.read_text(), filename=str(RECIPE))
    deps: dict[str, tuple[str, set[str]]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "depends_on"):
            continue
        spec = ast.literal_eval(node.args[0])
        kinds = {"build", "link"}  # Spack's default
        for kw in node.keywords:
            if kw.arg == "type":
                value = ast.literal_eval(kw.value)
                kinds = {value} if isinstance(value, str) else set(value)
        name, _, versions = spec.partition("@")
        assert name not in deps, f"{name} listed twice in the recipe"
        deps[name] = (versions, kinds)
    return deps


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def lower_bound(requirement: str) -> tuple[str, str]:
    """'pandas>=2.1' -> ('pandas', '2.1')."""
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*(?:>=\s*([0-9.]+))?\s*", requirement)
    assert m, f"unexpected requirement form {requirement!r} (teach tests/test_packaging.py)"
    return m[1].lower(), m[2] or ""


def test_recipe_is_a_python_package_recipe() -> None:
    tree = ast.parse(RECIPE.read_text(), filename=str(RECIPE))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert [c.name for c in classes] == ["PyMpiscope"]
    assert [b.id for b in classes[0].bases if isinstance(b, ast.Name)] == ["PythonPackage"]
    methods = {n.name for n in classes[0].body if isinstance(n, ast.FunctionDef)}
    assert "config_settings" in methods  # the MPI flavour goes to CMake through it
    # Spack API v2: the repository's directory names the package with underscores
    assert RECIPE.parent.name == "py_mpiscope"
    assert "namespace: mpiscope" in (RECIPE.parents[2] / "repo.yaml").read_text()
    versions = [ast.literal_eval(n.args[0]) for n in ast.walk(classes[0])
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "version"]
    assert pyproject()["project"]["version"] in versions


def test_recipe_run_dependencies_are_pyprojects() -> None:
    deps = recipe_dependencies()
    wanted = {}
    for req in pyproject()["project"]["dependencies"]:
        name, floor = lower_bound(req)
        wanted[PYPI_TO_SPACK.get(name, "py-" + name.replace("_", "-"))] = floor
    python_floor = pyproject()["project"]["requires-python"].removeprefix(">=")
    wanted["python"] = python_floor
    run = {name: versions for name, (versions, kinds) in deps.items() if "run" in kinds}
    assert set(run) == set(wanted), (
        f"recipe run dependencies {sorted(run)} != pyproject.toml's {sorted(wanted)}")
    for name, floor in wanted.items():
        assert run[name] == (f"{floor}:" if floor else ""), (
            f"{name}: recipe says @{run[name]}, pyproject.toml >= {floor}")


def test_recipe_build_backend_is_pyprojects() -> None:
    (backend,) = pyproject()["build-system"]["requires"]
    name, floor = lower_bound(backend)
    versions, kinds = recipe_dependencies()["py-" + name]
    assert kinds == {"build"} and versions == f"{floor}:"


def cmake_dependencies() -> set[str]:
    """What the CMake files look for: pkg-config modules, libraries, packages, mpicc."""
    found: set[str] = set()
    for f in CMAKE_FILES:
        text = re.sub(r"#[^\n]*", "", f.read_text())
        for m in re.finditer(r"pkg_check_modules\(\s*\w+\s+(?:REQUIRED\s+)?([^)]*)\)", text):
            found.update(w for w in m[1].split() if not w.isupper())  # not REQUIRED etc.
        for m in re.finditer(r"find_library\(\s*\w+\s+(?:NAMES\s+)?(\w+)", text):
            found.add(m[1])
        for m in re.finditer(r"find_package\(\s*(\w+)", text):
            found.add(m[1])
        if re.search(r"find_program\([^)]*mpicc", text):
            found.add("mpicc")
    return found


def test_recipe_c_dependencies_are_the_cmake_files() -> None:
    needed = cmake_dependencies()
    assert {"mpicc", "libdw", "otf2"} <= needed  # the parser still sees them
    unknown = needed - set(CMAKE_TO_SPACK)
    assert not unknown, f"CMake looks for {sorted(unknown)}: map it in CMAKE_TO_SPACK " \
                        "and add the Spack package to the recipe"
    deps = recipe_dependencies()
    spack_names = {CMAKE_TO_SPACK[n] for n in needed}
    missing = spack_names - set(deps)
    assert not missing, f"the recipe lacks depends_on({sorted(missing)}) that CMake looks for"
    for name in spack_names - {"python", "pkgconfig"}:
        assert "link" in deps[name][1], f"{name} is linked: its type must include link"
    # and the other way: every non-Python dependency of the recipe is there for CMake
    python_side = {PYPI_TO_SPACK.get(lower_bound(r)[0], "py-" + lower_bound(r)[0])
                   for r in pyproject()["project"]["dependencies"]}
    extra = set(deps) - spack_names - python_side - BUILD_ONLY
    assert not extra, f"recipe dependencies {sorted(extra)} are neither CMake's nor pyproject's"


# ---------------------------------------------------------------- where mpiscope looks


def fake_tree(root: Path, *flavours: str) -> Path:
    for mpi in flavours:
        (root / "interposer" / mpi).mkdir(parents=True)
        (root / "interposer" / mpi / "libmpiscope.so").write_bytes(b"")
    return root


def test_lookup_order(tmp_path, monkeypatch) -> None:
    """$MPISCOPE_BUILD_DIR, else the installed package's _lib/, else the checkout's build/."""
    from mpiscope import paths

    package = fake_tree(tmp_path / "package_lib", "mpich")
    checkout = fake_tree(tmp_path / "checkout_build", "openmpi", "mpich")
    override = fake_tree(tmp_path / "override", "openmpi")
    monkeypatch.setattr(paths, "PACKAGE_LIB_DIR", package)
    monkeypatch.setattr(paths, "CHECKOUT_BUILD_DIR", checkout)
    monkeypatch.delenv("MPISCOPE_LIB", raising=False)
    monkeypatch.setenv("MPISCOPE_BUILD_DIR", str(override))
    assert paths.build_dirs() == [override]
    assert paths.interposer_library() == override / "interposer/openmpi/libmpiscope.so"

    monkeypatch.delenv("MPISCOPE_BUILD_DIR")
    assert paths.build_dirs() == [package, checkout]
    # the package's first, each file on its own: Open MPI's comes from build/ here
    assert paths.interposer_library("mpich") == package / "interposer/mpich/libmpiscope.so"
    assert paths.interposer_library("openmpi") == checkout / "interposer/openmpi/libmpiscope.so"
    assert paths.interposer_library(None) == checkout / "interposer/openmpi/libmpiscope.so"

    # an install with MPICH only (no checkout): `mpiscope lib` names MPICH's
    monkeypatch.setattr(paths, "CHECKOUT_BUILD_DIR", tmp_path / "no-checkout")
    assert paths.build_dirs() == [package]
    assert paths.interposer_library(None) == package / "interposer/mpich/libmpiscope.so"
    with pytest.raises(paths.UserError, match="installed without the openmpi interposer"):
        paths.interposer_library("openmpi")
    monkeypatch.setattr(paths, "PACKAGE_LIB_DIR", tmp_path / "not-installed")
    with pytest.raises(paths.UserError, match="make build"):
        paths.interposer_library("openmpi")


# ---------------------------------------------------------------- installing as a user


MPI_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, x = 1, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("sum %d of %d\n", sum, size);
    MPI_Finalize();
    return sum == size ? 0 : 1;
}
"""
LAUNCHERS = {
    "openmpi": (["mpicc.openmpi", "mpicc"], ["mpirun", "--allow-run-as-root", "--oversubscribe"]),
    "mpich": (["mpicc.mpich"], ["mpiexec.mpich"]),
}


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user with nothing of this checkout set."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MPISCOPE_BUILD_DIR", "MPISCOPE_LIB", "MPISCOPE_OUT",
                        "LD_PRELOAD", "VIRTUAL_ENV")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
    return env


def make_venv(where: Path) -> Path:
    """A fresh venv that sees this interpreter's installed packages (pandas, the build
    backend, ...) but none of their .pth start-up hooks: with --system-site-packages the
    checkout's own editable install (a meta-path finder put first by its .pth) would
    answer `import mpiscope` instead of the copy installed into the venv."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True,
                   capture_output=True, env=user_env())
    site_dirs = [p for p in sys.path
                 if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    purelib = sysconfig.get_path("purelib", vars={"base": str(where), "platbase": str(where)})
    (Path(purelib) / "outer-site-packages.pth").write_text("\n".join(site_dirs) + "\n")
    return where


def pip_install(venv: Path, *args: str) -> None:
    # --no-build-isolation --no-deps --no-index: nothing fetched, the backend and the
    # dependencies are those `make setup` installed
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", "--no-deps", "--no-build-isolation",
                           "--no-index", *args], capture_output=True, text=True,
                          env=user_env(), cwd=venv, timeout=900)
    assert proc.returncode == 0, f"pip install {' '.join(args)} failed:\n{proc.stdout}\n" \
                                 f"{proc.stderr}"


def mpiscope(venv: Path, *args: str, cwd: Path) -> str:
    proc = subprocess.run([str(venv / "bin" / "mpiscope"), *args], capture_output=True,
                          text=True, env=user_env(), cwd=cwd, timeout=300)
    assert proc.returncode == 0, f"mpiscope {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def in_venv_python(venv: Path, code: str, cwd: Path) -> str:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, env=user_env(), cwd=cwd, check=True)
    return proc.stdout.strip()


def trace_tiny_program(venv: Path, mpi: str, work: Path) -> Path:
    """Compile the tiny MPI program with `mpi`'s mpicc, run it on 2 ranks with
    LD_PRELOAD=$(mpiscope lib --mpi MPI): returns the trace directory."""
    compilers, launcher = LAUNCHERS[mpi]
    cc = next((c for c in compilers if shutil.which(c)), None)
    if cc is None or not shutil.which(launcher[0]):
        pytest.skip(f"{mpi} is not installed ({compilers[0]} / {launcher[0]}: make setup)")
    lib = mpiscope(venv, "lib", "--mpi", mpi, cwd=work).strip()
    assert Path(lib).is_file() and Path(lib).is_absolute(), lib
    src = work / "tiny.c"
    src.write_text(MPI_PROGRAM)
    exe = work / f"tiny-{mpi}"
    subprocess.run([cc, "-g", "-o", str(exe), str(src)], check=True, capture_output=True)
    out = work / f"trace-{mpi}"
    job = subprocess.run([*launcher, "-np", "2", str(exe)], capture_output=True, text=True,
                         env=user_env(LD_PRELOAD=lib, MPISCOPE_OUT=str(out)), cwd=work,
                         timeout=180)
    assert job.returncode == 0, job.stderr
    assert "sum 2 of 2" in job.stdout
    assert (out / "traces.otf2").is_file(), f"no trace written by {lib}: {job.stderr}"
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    where = tmp_path_factory.mktemp("packaging")
    yield where
    shutil.rmtree(where, ignore_errors=True)  # venvs are tens of MB: leave nothing behind


def backend_available() -> None:
    import importlib.util

    assert importlib.util.find_spec("scikit_build_core"), \
        "scikit-build-core (the build backend) is missing: `make setup` installs it"


@pytest.fixture(scope="module")
def wheel_venv(scratch: Path) -> dict[str, object]:
    """A fresh venv with `pip install <checkout>` done in it (and the mtime of the
    checkout's build/ library before, to show the wheel build leaves it alone)."""
    backend_available()
    build_lib = ROOT / "build" / "interposer" / "openmpi" / "libmpiscope.so"
    before = build_lib.stat().st_mtime_ns if build_lib.exists() else None
    venv = make_venv(scratch / "venv")
    pip_install(venv, str(ROOT))
    after = build_lib.stat().st_mtime_ns if build_lib.exists() else None
    return {"venv": venv, "build_lib_untouched": before == after}


@pytest.mark.slow
def test_pip_install_builds_a_working_interposer(wheel_venv, scratch: Path) -> None:
    """`pip install .` in a fresh venv: the interposer(s) and the reader are built and
    installed inside the package; `mpiscope lib` names one that traces a real job, and
    `mpiscope analyze` reads that trace with the installed reader."""
    venv = wheel_venv["venv"]
    # a wheel is built in a temporary tree: the checkout's build/ is not touched
    assert wheel_venv["build_lib_untouched"]
    work = scratch / "work"
    work.mkdir()
    package = Path(in_venv_python(venv, "import mpiscope, os; "
                                  "print(os.path.dirname(mpiscope.__file__))", cwd=work))
    assert package.is_relative_to(venv), f"mpiscope imported from {package}, not the venv"

    lib = Path(mpiscope(venv, "lib", cwd=work).strip())
    assert lib == package / "_lib" / "interposer" / "openmpi" / "libmpiscope.so"
    assert lib.is_file()
    reader = in_venv_python(venv, "from mpiscope import paths; "
                            "print(paths.built('native/libmpiscope_reader.so'))", cwd=work)
    assert Path(reader) == package / "_lib" / "native" / "libmpiscope_reader.so"
    recover = package / "_lib" / "interposer" / "openmpi" / "mpiscope-recover"
    usage = subprocess.run([str(recover)], capture_output=True, text=True, env=user_env())
    assert usage.returncode == 2 and "usage" in usage.stderr  # it runs: $ORIGIN finds the lib
    symbolize = recover.with_name("mpiscope-symbolize")
    usage = subprocess.run([str(symbolize)], capture_output=True, text=True, env=user_env())
    assert usage.returncode == 2 and "usage" in usage.stderr
    assert (package.parent / "mpiscope_webui" / "assets" / "style.css").is_file()

    trace = trace_tiny_program(venv, "openmpi", work)
    summary = mpiscope(venv, "analyze", str(trace), "--json", str(work / "a.json"), cwd=work)
    assert "MPI_Allreduce" in (work / "a.json").read_text(), summary


@pytest.mark.slow
@pytest.mark.mpich
def test_pip_install_builds_the_mpich_interposer_too(wheel_venv, scratch: Path) -> None:
    """The same install carries the MPICH flavour when MPICH is installed."""
    venv = wheel_venv["venv"]
    work = scratch / "work-mpich"
    work.mkdir()
    if not shutil.which("mpicc.mpich"):
        pytest.skip("MPICH is not installed (mpicc.mpich: make setup)")
    lib = Path(mpiscope(venv, "lib", "--mpi", "mpich", cwd=work).strip())
    assert lib.is_relative_to(venv) and lib.parent.name == "mpich"
    trace_tiny_program(venv, "mpich", work)


@pytest.mark.slow
def test_editable_install_builds_into_the_checkout(scratch: Path) -> None:
    """`pip install -e .` (what `make setup` runs) builds into the checkout's build/, the
    trees `make build` uses, and `mpiscope lib` names the library there."""
    backend_available()
    if os.environ.get("MPISCOPE_BUILD_DIR", str(ROOT / "build")) != str(ROOT / "build"):
        pytest.skip("MPISCOPE_BUILD_DIR points elsewhere: build/ may not be this checkout's")
    venv = make_venv(scratch / "venv-editable")
    pip_install(venv, "-e", str(ROOT))
    work = scratch / "work-editable"
    work.mkdir()
    package = Path(in_venv_python(venv, "import mpiscope, os; "
                                  "print(os.path.dirname(mpiscope.__file__))", cwd=work))
    assert package == ROOT / "analyzer" / "mpiscope"
    assert not (package / "_lib").exists()  # nothing copied into the source tree
    lib = Path(mpiscope(venv, "lib", cwd=work).strip())
    assert lib == ROOT / "build" / "interposer" / "openmpi" / "libmpiscope.so"
    trace_tiny_program(venv, "openmpi", work)
