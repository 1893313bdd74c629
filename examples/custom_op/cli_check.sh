#!/usr/bin/env bash
# The CLI and a custom op (ctest example.custom_op_cli, after example.custom_op
# wrote DIR/custom_op_model and the grid files):
#   - the CLI built with mish.cpp (dlgraph_add_cli) lists mish as registered
#     and runs the saved program, giving custom_op's predictions byte for byte;
#   - the plain CLI refuses the program, naming the op.
# usage: cli_check.sh DLGRAPH_MISH DLGRAPH DIR
set -euo pipefail
mish_cli=$1 plain_cli=$2 dir=$3
"$mish_cli" ops | grep -q '^mish  (registered)$' || { echo "dlgraph_mish ops does not list mish"; exit 1; }
rm -rf "$dir/cli_out"
"$mish_cli" run "$dir/custom_op_model/program.json" --params "$dir/custom_op_model" \
  --feed x="$dir/custom_op_x.npy" --fetch pred --out "$dir/cli_out"
cmp "$dir/cli_out/pred.npy" "$dir/custom_op_pred.npy"
if "$plain_cli" inspect "$dir/custom_op_model/program.json" 2>"$dir/plain.err"; then
  echo "the plain CLI loaded a program with an unregistered op"; exit 1
fi
grep -q "unknown op type 'mish'" "$dir/plain.err" || { cat "$dir/plain.err"; exit 1; }
echo "ok: dlgraph_mish runs the program (same predictions); dlgraph names the unknown op"
