#!/usr/bin/env bash
# `dlgraph run` under mpirun: a program whose ranks all-reduce a constant
# 1.5 (c_allreduce_sum, written in place as Paddle writes it). Rank 0 writes
# y.npy = 1.5 * NP; alone, outside mpirun, the CLI runs it as a group of one.
# Usage: cli_check.sh MPIEXEC DLGRAPH WORK_DIR
set -euo pipefail
mpiexec=$1 cli=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cat > "$work/prog.json" <<'JSON'
{"version":1,"blocks":[{"idx":0,"parent_idx":-1,
 "vars":[{"name":"y","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP32","dims":[3]},"lod_level":0}}],
 "ops":[{"type":"fill_constant","inputs":[],"outputs":[{"parameter":"Out","arguments":["y"]}],
         "attrs":[{"name":"shape","type":"INTS","ints":[3]},{"name":"value","type":"FLOAT","f":1.5},{"name":"dtype","type":"INT","i":5}]},
        {"type":"c_allreduce_sum","inputs":[{"parameter":"X","arguments":["y"]}],"outputs":[{"parameter":"Out","arguments":["y"]}],
         "attrs":[{"name":"ring_id","type":"INT","i":0}]}]}]}
JSON
values() { tail -c 12 "$1" | od -An -f | xargs; }
for case in "2:3 3 3" "3:4.5 4.5 4.5"; do
  np=${case%%:*} want=${case#*:}
  "$mpiexec" -n "$np" --oversubscribe "$cli" run "$work/prog.json" --fetch y --out "$work/np$np"
  got=$(values "$work/np$np/y.npy")
  [ "$got" = "$want" ] || { echo "cli_check: $np processes gave '$got', want '$want'"; exit 1; }
done
"$cli" run "$work/prog.json" --fetch y --out "$work/one"
[ "$(values "$work/one/y.npy")" = "1.5 1.5 1.5" ] || { echo "cli_check: one process gave '$(values "$work/one/y.npy")'"; exit 1; }
echo "cli_check: 2 and 3 processes sum the constant, one process keeps it"
