# mpiscope's Spack recipe, kept with the source (tests/test_packaging.py checks it against
# pyproject.toml and the CMake files in `make test`). Build from a checkout:
#
#   spack repo add packaging/spack/spack_repo/mpiscope
#   spack develop --path "$PWD" py-mpiscope@=0.1.0
#   spack add py-mpiscope@=0.1.0 ^openmpi        # or ^mpich, ^mvapich2, ...
#   spack install
#   spack load py-mpiscope && mpiscope lib
#
# pip runs scikit-build-core on the top-level CMakeLists.txt, which builds the interposer
# for the MPI of the spec and the native reader into the package (mpiscope/_lib/).

from spack.package import *
from spack_repo.builtin.build_systems.python import PythonPackage


class PyMpiscope(PythonPackage):
    """MPI tracing and performance analysis: a PMPI -> OTF2 interposer (LD_PRELOAD, no
    recompiling), an analyzer of wait states, breakdowns and fixable patterns, and a web UI."""

    license("MIT")

    # The source is the checkout handed to `spack develop` (see above).
    version("0.1.0")

    # Build: scikit-build-core drives CMake (pyproject.toml [build-system]).
    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("pkgconfig", type="build")
    depends_on("py-scikit-build-core@0.10:", type="build")

    # C libraries the CMake files look for (interposer/, analyzer/native/).
    depends_on("mpi")  # the interposer wraps it: built with its mpicc, one flavour per spec
    depends_on("elfutils")  # libdw: call sites' file:line
    # libotf2 for the interposer and the reader; Spack's otf2 also installs the Python
    # bindings (it extends python), which pyproject.toml names "otf2".
    depends_on("otf2@3.0:", type=("build", "link", "run"))

    # Python, and pyproject.toml [project].dependencies as py-<name>.
    depends_on("python@3.10:", type=("build", "run"))
    depends_on("py-numpy@1.26:", type=("build", "run"))
    depends_on("py-pandas@2.1:", type=("build", "run"))
    depends_on("py-pyarrow@14:", type=("build", "run"))
    depends_on("py-rich@13:", type=("build", "run"))
    depends_on("py-plotly@5.20:", type=("build", "run"))
    depends_on("py-dash@2.16:", type=("build", "run"))
    # --engine dask: dask.dataframe and dask.distributed (pyproject's extras)
    depends_on("py-dask@2024.12:", type=("build", "run"))

    import_modules = ["mpiscope", "mpiscope_webui"]

    def config_settings(self, spec, prefix):
        # Open MPI, or the MPICH ABI family (MPICH, MVAPICH, Intel MPI, Cray MPICH), whose
        # mpicc speaks -compile_info / -link_info.
        mpi = spec["mpi"]
        flavour = "openmpi" if mpi.name == "openmpi" else "mpich"
        return {
            "cmake.define.MPISCOPE_MPI_FLAVOURS": flavour,
            f"cmake.define.MPISCOPE_MPICC_{flavour}": mpi.mpicc,
        }

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_interposer(self):
        """`mpiscope lib` prints the interposer installed in the package."""
        python("-m", "mpiscope", "lib")
