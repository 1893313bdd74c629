// The CPU kernels of ops/reduce.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/reduce.hpp"

namespace dlgraph::cpu_ops {
inline void mean_kernels(OpDef&) {}
inline void reduce_sum_kernels(OpDef&) {}
inline void reduce_mean_kernels(OpDef&) {}
inline void reduce_max_kernels(OpDef&) {}
inline void mean_grad_kernels(OpDef&) {}
inline void reduce_sum_grad_kernels(OpDef&) {}
inline void reduce_mean_grad_kernels(OpDef&) {}
inline void reduce_max_grad_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
