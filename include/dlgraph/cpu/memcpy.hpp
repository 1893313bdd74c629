// The CPU kernels of memcpy_h2d and memcpy_d2h (ops/memcpy.hpp): on the host
// both are a byte copy, under every dtype.
#pragma once

#include <cstring>

#include "dlgraph/ops/memcpy.hpp"

namespace dlgraph::cpu_ops {

inline void host_copy_kernel(const KernelContext& c) {
    if (c.in(0).raw() != c.out(0).raw() && c.in(0).bytes()) std::memcpy(c.out(0).raw(), c.in(0).raw(), c.in(0).bytes());
}
inline void memcpy_h2d_kernels(OpDef& d) { d.kernels.fill(&host_copy_kernel); }
inline void memcpy_d2h_kernels(OpDef& d) { d.kernels.fill(&host_copy_kernel); }

}  // namespace dlgraph::cpu_ops
