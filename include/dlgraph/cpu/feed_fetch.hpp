// The CPU kernels of feed and fetch (ops/feed_fetch.hpp): host operations
// on the TensorList variables of the session's scope; the planner never
// places them on a device.
#pragma once

#include <cstring>

#include "dlgraph/ops/feed_fetch.hpp"

namespace dlgraph::cpu_ops {

struct feed_op {
    // Out was sized by inference from the same column, so a plain copy into
    // its (planned) storage is enough.
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& src = ops::feed_column(c.in_var(0).get<TensorList>(), c.attr(0).i);
        if (src.bytes()) std::memcpy(c.out(0).raw(), src.raw(), src.bytes());
    }
};
struct fetch_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        ops::fetch_column(c.in(0), c.attr(0).i, c.out_var(0).get_mutable<TensorList>());
    }
};

// The kernels copy bytes, so the dtype that selects them (X's, a list's
// declared one) does not matter: every dtype is registered.
inline void feed_kernels(OpDef& d) {
    d.kernels = cpu_kernels<feed_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
}
inline void fetch_kernels(OpDef& d) {
    d.kernels = cpu_kernels<fetch_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
}

}  // namespace dlgraph::cpu_ops
