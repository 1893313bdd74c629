// The CPU kernels of ops/io_ops.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/io_ops.hpp"

namespace dlgraph::cpu_ops {
inline void save_kernels(OpDef&) {}
inline void load_kernels(OpDef&) {}
inline void save_combine_kernels(OpDef&) {}
inline void load_combine_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
