#!/usr/bin/env bash
# Idempotent set-up for a Debian bookworm machine: installs only what is missing,
# so a second run takes seconds. Called by `make setup` (and thus `make test`/`make demo`).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-python3}
# A Debian system Python (e.g. in the Docker image) is "externally managed"; we own the machine.
export PIP_BREAK_SYSTEM_PACKAGES=1
APT_PACKAGES=(
  build-essential cmake pkg-config gfortran python3-pip
  openmpi-bin libopenmpi-dev
  mpich libmpich-dev
  libotf2-trace-dev otf2-tools
  libdw-dev libelf-dev
  iproute2 util-linux
  pnetcdf-bin  # a real MPI-IO application (PnetCDF tools on Open MPI) for the interposer tests
  clang libclang-rt-14-dev  # libFuzzer + ASan: the crash-safe log reader's fuzz test
  chromium chromium-driver
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Open MPI is the default MPI (mpicc, mpirun); MPICH stays reachable as mpicc.mpich/mpiexec.mpich.

# The build backend (scikit-build-core, pyproject.toml [build-system]) goes in first, so that
# the install below runs with --no-build-isolation: nothing is fetched at build time.
if ! "$PY" -c "import scikit_build_core" 2>/dev/null; then
  backend=$("$PY" -c 'import re; b = open("pyproject.toml").read().split("[build-system]")[1]
print(*re.findall(r"\"([^\"]+)\"", re.search(r"requires\s*=\s*\[(.*?)\]", b, re.S)[1]))')
  echo "setup: installing the build backend ($backend)"
  # shellcheck disable=SC2086  # one argument per requirement
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore $backend
fi

# Re-install the Python package only when its metadata or its set of modules changed since
# the last install, or when `mpiscope` is imported from elsewhere (another checkout's
# editable install): the editable install maps each module to its file, so a module moved
# or removed needs a new map (an added one is found without). The editable install builds
# the C side too (CMakeLists.txt), into build/.
stamp=build/.pip-stamp
mkdir -p build
modules=$(find analyzer/mpiscope webui/mpiscope_webui -name '*.py' -not -path '*/__pycache__/*' | LC_ALL=C sort)
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$modules" != "$(cat "$stamp")" ] \
   || ! "$PY" -c "import mpiscope, mpi4py, os, sys
sys.exit(not os.path.realpath(mpiscope.__file__).startswith(os.path.realpath('analyzer') + os.sep))" 2>/dev/null
then
  echo "setup: installing the mpiscope Python package, its dependencies and its C side"
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --no-build-isolation -e ".[test]"
  printf '%s\n' "$modules" > "$stamp"
fi

# After set-up `mpiscope lib` works (the user contract): the interposers and the reader are
# in build/, up to date. Incremental, so about a second when nothing changed.
if ! log=$(make --no-print-directory interposer MPI=both native 2>&1); then
  echo "$log" >&2
  echo "setup: building the interposer and the native reader failed" >&2
  exit 1
fi
