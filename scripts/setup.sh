#!/usr/bin/env bash
# Installs the Debian 12 packages dlgraph needs; does nothing when all are
# present. Runs as root or through sudo. `--with-data` adds the Fashion-MNIST
# data set (dataset-fashion-mnist) that the main example trains on;
# `--with-bench` adds OpenBLAS, Eigen and LibTorch, the references
# bench/bench_gemm and bench/bench_cnn compare against; `--with-fuzz` adds clang 14 and its libFuzzer runtime
# for the fuzz targets (scripts/fuzz.sh); `--with-embedded` the ARM
# cross-compiler with newlib and QEMU, for fixed models on an emulated
# Cortex-M4 (examples/embedded); `--with-mpi` Open MPI, for the collective ops
# and data-parallel training across processes (mpirun).
set -euo pipefail
pkgs=(build-essential cmake ninja-build xtensor-dev libxsimd-dev xtl-dev nlohmann-json3-dev doctest-dev
      libbenchmark-dev zlib1g-dev)
for arg in "$@"; do
  case "$arg" in
    --with-data) pkgs+=(dataset-fashion-mnist) ;;
    --with-bench) pkgs+=(libopenblas-dev libeigen3-dev libtorch-dev) ;;
    --with-fuzz) pkgs+=(clang-14 libclang-rt-14-dev) ;;
    --with-embedded) pkgs+=(gcc-arm-none-eabi libstdc++-arm-none-eabi-newlib libnewlib-arm-none-eabi qemu-system-arm) ;;
    --with-mpi) pkgs+=(libopenmpi-dev openmpi-bin) ;;
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
