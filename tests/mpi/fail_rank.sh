#!/usr/bin/env bash
# A rank that fails must stop the whole job with a clear error, not leave
# its peers waiting: rank 1 of 2 gets a bad feed and never reaches the
# all-reduce rank 0 waits in (test_mpi.cpp, fail_rank), then
#   exit   returns 1 (mpirun ends the job),
#   abort  calls Communicator::abort (MPI_Abort ends the job),
#   hang   sleeps: rank 0's call times out ([dlgraph.comm.timeout], 3 s), and
#          its Environment ends the job with MPI_Abort.
# Checks: the job fails within 60 s, rank 1's error is printed (and rank 0's
# timeout, for hang), and no process of the job is left.
# Usage: fail_rank.sh MPIEXEC TEST_MPI MODE
set -uo pipefail
mpiexec=$1 bin=$2 mode=$3
log=$(mktemp)
start=$SECONDS
timeout 90 "$mpiexec" -n 2 --oversubscribe "$bin" --fail "$mode" >"$log" 2>&1
rc=$?
took=$((SECONDS - start))
cat "$log"
fail() { echo "fail_rank ($mode): $*"; rm -f "$log"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job succeeded"
[ "$rc" -ne 124 ] || fail "the job was still running after 90 s"
[ "$took" -le 60 ] || fail "the job took $took s"
grep -q "rank 1: \[dlgraph.shape" "$log" || fail "rank 1's feed error is missing"
if [ "$mode" = hang ]; then
  grep -q "rank 0: \[dlgraph.comm.timeout\] c_allreduce_sum on MPI rank 0 of 2: no answer" "$log" || fail "rank 0's timeout is missing"
fi
sleep 1
if pgrep -f -- "$bin --fail $mode" >/dev/null; then
  pgrep -af -- "$bin --fail $mode"
  fail "processes of the job are still running"
fi
rm -f "$log"
echo "fail_rank ($mode): the job stopped in $took s with exit code $rc; no process left"
