#!/usr/bin/env bash
# The default build has no MPI and says so: `dlm --version` and `dlm doctor`
# print "mpi: no"/"not built in", and a default-build dlm started by mpirun
# (Open MPI's OMPI_COMM_WORLD_SIZE in the environment) refuses with MPIError
# and a hint naming `make mpi`, before the store is touched. (The MPI build's
# own tests are tests/mpi, registered only with -DDLM_MPI=ON.)
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
if grep -q '^DLM_MPI:BOOL=ON' "$DLM_BUILD/CMakeCache.txt" 2>/dev/null; then
    "$DLM" --version | grep '^mpi: yes' >/dev/null || fail "an MPI build whose --version does not say mpi: yes"
    echo "ok (MPI build: see tests/mpi)"
    exit 0
fi
"$DLM" --version | grep "^mpi: no (build with 'make mpi')" >/dev/null || fail "--version: $("$DLM" --version)"
"$DLM" doctor 2>/dev/null | grep "^mpi: *not built in" >/dev/null || fail "doctor has no mpi line"
write_doc doc.dlm 1
set +e
out=$(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$DLM" train doc.dlm --max-steps 1 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "a default build under mpirun trained: $out"
grep <<<"$out" -q "MPIError.*built without MPI" || fail "no MPIError: $out"
grep <<<"$out" -q "hint: .*make mpi" || fail "no hint naming make mpi: $out"
[ ! -e "$DLM_HOME/store/$ID" ] || fail "the refused run created the store"
echo ok
