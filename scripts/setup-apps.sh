#!/usr/bin/env bash
# Test-only set-up: the third-party MPI applications tests/test_real_apps.py runs, from
# Debian's archive. Idempotent (nothing to do once installed). Called by `make test` before
# pytest, not by `make setup`: users need none of them.
#   lammps      C++ molecular dynamics (its work is in liblammps.so.0: exported symbols, no DWARF)
#   mumps-test  MUMPS's example drivers: a Fortran direct solver (libdmumps: exported symbols)
#   hpcc        the HPC Challenge benchmarks (a stripped C executable; PingPong, HPL, FFT...)
#   mpi4py      the sdist of the installed mpi4py, for its own unit tests (tests/test_mpi4py_suite.py)
set -euo pipefail
APPS=(lammps mumps-test hpcc)
missing=()
for p in "${APPS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-apps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
# mpi4py's unit tests, from the sdist of the installed version (PyPI), unpacked under build/
command -v curl >/dev/null || { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo";
  $SUDO apt-get install -y -qq --no-install-recommends curl >/dev/null; }
PYTHONPATH=testing ${PY:-python3} -c "from mpiscope_testing.mpi4py_suite import sdist_tests; sdist_tests()"
