// The CPU kernels of ops/shape_ops.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/shape_ops.hpp"

namespace dlgraph::cpu_ops {
inline void reshape_kernels(OpDef&) {}
inline void transpose_kernels(OpDef&) {}
inline void concat_kernels(OpDef&) {}
inline void split_kernels(OpDef&) {}
inline void cast_kernels(OpDef&) {}
inline void sum_kernels(OpDef&) {}
inline void reshape_grad_kernels(OpDef&) {}
inline void concat_grad_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
