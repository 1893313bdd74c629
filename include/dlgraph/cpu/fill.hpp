// The CPU kernels of ops/fill.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/fill.hpp"

namespace dlgraph::cpu_ops {
inline void fill_constant_kernels(OpDef&) {}
inline void uniform_random_kernels(OpDef&) {}
inline void gaussian_random_kernels(OpDef&) {}
inline void fill_any_like_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
