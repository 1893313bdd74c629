// The CPU kernels of ops/softmax.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/softmax.hpp"

namespace dlgraph::cpu_ops {
inline void softmax_kernels(OpDef&) {}
inline void cross_entropy_kernels(OpDef&) {}
inline void softmax_with_cross_entropy_kernels(OpDef&) {}
inline void softmax_grad_kernels(OpDef&) {}
inline void cross_entropy_grad_kernels(OpDef&) {}
inline void softmax_with_cross_entropy_grad_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
