// The CPU kernels of ops/optimizers.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/optimizers.hpp"

namespace dlgraph::cpu_ops {
inline void sgd_kernels(OpDef&) {}
inline void momentum_kernels(OpDef&) {}
inline void adam_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
