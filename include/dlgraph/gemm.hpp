// The matrix product every op uses, under its public names: C = alpha *
// op(A) * op(B) (+ C), row-major, FP32 and FP64, threaded, and B packed
// once for repeated products. The core (packing, micro-kernels) is
// kernels/gemm.hpp, the threading and workspaces cpu/gemm.hpp.
#pragma once

#include "dlgraph/cpu/gemm.hpp"
#include "dlgraph/kernels/gemm.hpp"

namespace dlgraph {

// gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, accumulate, C, ldc)
using cpu_ops::gemm;
// gemm_prepack_pays(M): whether gemm would pack B for M rows at all.
using cpu_ops::gemm_prepack_pays;
// gemm_packed_b_size<T>(K, N): elements of packed B (64-byte aligned buffer).
using kernels::gemm_packed_b_size;
// gemm_pack_b(trans_b, K, N, B, ldb, out): op(B), K x N, packed whole.
using kernels::gemm_pack_b;
// gemm_prepacked(trans_a, M, N, K, alpha, A, lda, packed_b, accumulate, C, ldc)
using cpu_ops::gemm_prepacked;

}  // namespace dlgraph
