// The CPU kernels of ops/feed_fetch.hpp. Transitional: this family's kernels are
// still set by its definitions; these hooks are where they move.
#pragma once

#include "dlgraph/ops/feed_fetch.hpp"

namespace dlgraph::cpu_ops {
inline void feed_kernels(OpDef&) {}
inline void fetch_kernels(OpDef&) {}
}  // namespace dlgraph::cpu_ops
