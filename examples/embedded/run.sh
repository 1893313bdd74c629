#!/usr/bin/env bash
# The Fashion-MNIST MLP as a fixed model on an emulated Cortex-M4:
# train (or reuse a checkpoint), emit, build for the host and for QEMU's
# mps2-an386, run both on the first N test images, compare, report sizes.
#
#   bash examples/embedded/run.sh BUILD_DIR WORK_DIR [N]     (N: images, default 1000)
#
# BUILD_DIR holds dlgraph's build (dlgraph, examples/fashion_mnist,
# examples/embedded_tools). CHECKPOINT=DIR reuses a trained checkpoint
# (fashion_mnist's out/fashion_mnist_model); without it the demo trains one
# epochs on the 60,000 training images. DATA=DIR points at the data (default
# /usr/share/datasets/fashion-mnist). Needs gcc-arm-none-eabi,
# libstdc++-arm-none-eabi-newlib, libnewlib-arm-none-eabi and qemu-system-arm
# (scripts/setup.sh --with-embedded). Exit status 0 when every image gets the
# same class on both, for the FP32 and the INT8 model (weights quantized by
# `dlgraph emit --weights int8`), and INT8's accuracy is within half a point
# of FP32's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd)
n=${3:-1000}
data=${DATA:-/usr/share/datasets/fashion-mnist}

ckpt=${CHECKPOINT:-}
if [ -z "$ckpt" ]; then
  echo "== training the demo's MLP (2 epochs)"
  "$build/examples/fashion_mnist" --data "$data" --epochs 2 --out "$work/train" | tail -n 2
  ckpt=$work/train/fashion_mnist_model
fi

echo "== dlgraph emit"
"$build/dlgraph" emit "$ckpt/program.json" --params "$ckpt" --feed x=1,784 --fetch prob \
  --namespace fmnist --arena-budget 64K -o "$work/model.hpp"
"$build/examples/embedded_tools" images "$data" "$n" "$work/images.hpp"

echo "== dlgraph emit --weights int8 (calibrated on 1,000 training images, compared on the $n test images)"
"$build/examples/embedded_tools" npy "$data" train 0 1000 "$work/calibrate_x.npy" "$work/calibrate_y.npy"
"$build/examples/embedded_tools" npy "$data" t10k 0 "$n" "$work/test_x.npy" "$work/test_y.npy"
"$build/dlgraph" emit "$ckpt/program.json" --params "$ckpt" --feed x=1,784 --fetch prob \
  --namespace fmnist --arena-budget 64K --weights int8 --calibrate x="$work/calibrate_x.npy" \
  --evaluate x="$work/test_x.npy" --labels "$work/test_y.npy" -o "$work/model_int8.hpp"
int8=(-DDLGRAPH_MODEL_HEADER='"model_int8.hpp"')

# The same floating point everywhere: no fast-math, no contraction.
common=(-std=c++20 -ffp-contract=off -fno-exceptions -fno-rtti -Wall -Wextra -I "$root/include" -I "$work" -I "$here")

echo "== host build (the emitted model, and the same MLP as a fixed:: expression)"
g++ -O2 "${common[@]}" "$here/firmware.cpp" "$here/model_unit.cpp" -o "$work/host"
"$work/host" > "$work/host.txt"
g++ -O2 "${common[@]}" -DDLGRAPH_EXPR_MODEL "$here/firmware.cpp" "$here/model_unit.cpp" -o "$work/host_expr"
"$work/host_expr" > "$work/host_expr.txt"
# The two give the same bits (the last line, the arena's size, differs).
if ! cmp -s <(head -n -1 "$work/host.txt") <(head -n -1 "$work/host_expr.txt"); then
  echo "embedded: the fixed:: expression and the emitted model differ on the host"; exit 1
fi

g++ -O2 "${common[@]}" "${int8[@]}" "$here/firmware.cpp" "$here/model_unit.cpp" -o "$work/host_int8"
"$work/host_int8" > "$work/host_int8.txt"
# INT8 within half a point of FP32's accuracy on these images.
"$build/examples/embedded_tools" within "$work/host.txt" "$work/host_int8.txt" 0.5

echo "== Cortex-M4 build (arm-none-eabi-g++ -Os, mps2-an386)"
# One float per portable vector (DLGRAPH_VECTOR_BYTES=4): the core has no
# vector unit, and wider portable vectors only unroll the code (FP32 models
# only: an FP64 model needs 8). -fno-math-errno lets a result nobody reads
# (softmax's log-sum) go; it changes no value.
arm=(arm-none-eabi-g++ -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os -ffunction-sections
     -fdata-sections -fno-math-errno -DDLGRAPH_VECTOR_BYTES=4 "${common[@]}")
link=(-nostartfiles --specs=rdimon.specs -T "$here/mps2_an386.ld" -Wl,--gc-sections)
"${arm[@]}" -c "$here/model_unit.cpp" -o "$work/model_unit.o"
"${arm[@]}" -DDLGRAPH_EXPR_MODEL -c "$here/model_unit.cpp" -o "$work/expr_unit.o"
"${arm[@]}" "${int8[@]}" -c "$here/model_unit.cpp" -o "$work/int8_unit.o"
"${arm[@]}" -DDLGRAPH_EMPTY_MODEL -c "$here/model_unit.cpp" -o "$work/empty_unit.o"
for v in model expr int8 empty; do
  "${arm[@]}" "$here/firmware.cpp" "$here/startup.cpp" "$work/${v}_unit.o" "${link[@]}" -o "$work/$v.elf"
done

# No heap, no exceptions, no RTTI in the models: their object files refer
# to none of their symbols.
bad=$(arm-none-eabi-nm -u "$work/model_unit.o" "$work/expr_unit.o" "$work/int8_unit.o" | grep -E ' (malloc|free|calloc|realloc|_Zn[wa]|_Zd[la]|__cxa_|_ZTI|__gxx_personality)' || true)
if [ -n "$bad" ]; then
  echo "embedded: the model's object needs heap or exception support:"; echo "$bad"; exit 1
fi

echo "== running on QEMU mps2-an386"
timeout 900 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$work/model.elf" > "$work/target.txt"
timeout 900 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$work/expr.elf" > "$work/target_expr.txt"
timeout 900 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
  -semihosting-config enable=on,target=native -kernel "$work/int8.elf" > "$work/target_int8.txt"

echo "== comparison"
"$build/examples/embedded_tools" compare "$work/host.txt" "$work/target.txt"
if ! cmp -s <(head -n -1 "$work/target.txt") <(head -n -1 "$work/target_expr.txt"); then
  echo "embedded: the fixed:: expression and the emitted model differ on the Cortex-M4"; exit 1
fi
echo "the fixed:: expression: the same bits as the emitted model, on the host and the Cortex-M4"
echo "the INT8 model, host and Cortex-M4:"
"$build/examples/embedded_tools" compare "$work/host_int8.txt" "$work/target_int8.txt"

# Sizes: code (.text) and RAM (.data + .bss) of the firmware less the empty
# program's; the weights are .rodata.
size_of() { arm-none-eabi-size -A "$1" | awk -v s="$2" '$1 == s { print $2 }'; }
text=$(( $(size_of "$work/model.elf" .text) - $(size_of "$work/empty.elf" .text) ))
ram=$(( $(size_of "$work/model.elf" .data) + $(size_of "$work/model.elf" .bss) - $(size_of "$work/empty.elf" .data) - $(size_of "$work/empty.elf" .bss) ))
rodata=$(( $(size_of "$work/model.elf" .rodata) - $(size_of "$work/empty.elf" .rodata) ))
arena=$(sed -n 's/.*arena \([0-9]*\) bytes$/\1/p' "$work/target.txt")
echo "Cortex-M4 -Os: code $text bytes (kernel core and steps), RAM $ram bytes (arena $arena), weights and constants $rodata bytes"
text=$(( $(size_of "$work/expr.elf" .text) - $(size_of "$work/empty.elf" .text) ))
ram=$(( $(size_of "$work/expr.elf" .data) + $(size_of "$work/expr.elf" .bss) - $(size_of "$work/empty.elf" .data) - $(size_of "$work/empty.elf" .bss) ))
arena=$(sed -n 's/.*arena \([0-9]*\) bytes$/\1/p' "$work/target_expr.txt")
echo "the same as a fixed:: expression: code $text bytes, RAM $ram bytes (arena $arena)"
text=$(( $(size_of "$work/int8.elf" .text) - $(size_of "$work/empty.elf" .text) ))
ram=$(( $(size_of "$work/int8.elf" .data) + $(size_of "$work/int8.elf" .bss) - $(size_of "$work/empty.elf" .data) - $(size_of "$work/empty.elf" .bss) ))
rodata=$(( $(size_of "$work/int8.elf" .rodata) - $(size_of "$work/empty.elf" .rodata) ))
arena=$(sed -n 's/.*arena \([0-9]*\) bytes$/\1/p' "$work/target_int8.txt")
echo "the INT8 model: code $text bytes, RAM $ram bytes (arena $arena), weights and constants $rodata bytes"
