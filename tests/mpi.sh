# Sourced by the script tests that run programs under Open MPI: skips the test (exit 77)
# when this build has no MPI (./configure without --with-mpi) or mpirun is missing, and
# sets MPIRUN to mpirun as the tests use it: any number of ranks on this one machine
# (--oversubscribe), as root too (CI runs as root), over shared memory only.
grep -q '^HAVE_MPI *= *yes' Makefile 2>/dev/null ||
    { echo "built without MPI (./configure --with-mpi)"; exit 77; }
command -v mpirun >/dev/null 2>&1 || { echo "mpirun not found (apt-get install openmpi-bin)"; exit 77; }
MPIRUN="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader"
