// The CPU kernels of ops/matmul.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/matmul.hpp"

namespace dlgraph::cpu_ops {
inline void mul_kernels(OpDef&) {}
inline void matmul_kernels(OpDef&) {}
inline void mul_grad_kernels(OpDef&) {}
inline void matmul_grad_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
