// The CPU kernels of ops/index.hpp: each reads its tensors and attributes,
// runs the kernel core (kernels/index.hpp) and records an id out of range as
// the step's fault; and each op's kernel table.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dlgraph/kernels/index.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/index.hpp"

namespace dlgraph::cpu_ops {

template <bool V2> struct lookup_table_op : ops::lookup_table_op<V2> {
    using base = ops::lookup_table_op<V2>;
    // f(ids) with Ids as its integer type.
    template <class F> static kernels::fault with_ids(const Tensor& ids, F f) {
        if (ids.dtype() == DataType::INT32) return f(ids.data<std::int32_t>());
        return f(ids.data<std::int64_t>());
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& w = c.in(base::W);
        const Tensor& ids = c.in(base::Ids);
        const std::int64_t pad = c.attr(base::padding_idx).i;
        T* out = c.out(0).data<T>();
        c.fault->raise(with_ids(ids, [&](const auto* id) {
            return kernels::lookup_table(w.data<T>(), w.shape()[0], w.shape()[1], id, ids.numel(), pad, out);
        }));
    }
};

template <bool V2> struct lookup_table_grad_op : lookup_table_op<V2> {
    using base = ops::lookup_table_op<V2>;
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& w = c.in(base::W);
        const Tensor& ids = c.in(base::Ids);
        const std::int64_t pad = c.attr(base::padding_idx).i;
        const T* dout = c.in(base::DOut).template data<T>();
        T* dw = c.out(0).data<T>();
        c.fault->raise(lookup_table_op<V2>::with_ids(ids, [&](const auto* id) {
            return kernels::lookup_table_grad(id, ids.numel(), dout, w.shape()[0], w.shape()[1], pad, dw);
        }));
    }
};

// one_hot, one_hot_v2: Ids of type I (the kernel's), Out of the dtype the
// attribute gave it.
template <bool V2> struct one_hot_op : ops::one_hot_op<V2> {
    using base = ops::one_hot_op<V2>;
    template <class I> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        Tensor& out = c.out(0);
        const std::int64_t depth = c.attr(base::depth).i;
        const bool allow = c.attr(base::allow_out_of_range).b;
        c.fault->raise(visit_dtype(out.dtype(), [&]<class T>(type_tag<T>) -> kernels::fault {
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                          std::is_same_v<T, std::int64_t>)
                return kernels::one_hot(x.data<I>(), x.numel(), depth, allow, out.data<T>());
            else
                return {};  // refused by infer
        }));
    }
};

inline void lookup_table_kernels(OpDef& d) { d.kernels = cpu_kernels<lookup_table_op<false>, float, double>(); }
inline void lookup_table_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<lookup_table_grad_op<false>, float, double>(); }
inline void lookup_table_v2_kernels(OpDef& d) { d.kernels = cpu_kernels<lookup_table_op<true>, float, double>(); }
inline void lookup_table_v2_grad_kernels(OpDef& d) {
    d.kernels = cpu_kernels<lookup_table_grad_op<true>, float, double>();
}

inline void one_hot_kernels(OpDef& d) { d.kernels = cpu_kernels<one_hot_op<false>, std::int32_t, std::int64_t>(); }
inline void one_hot_v2_kernels(OpDef& d) { d.kernels = cpu_kernels<one_hot_op<true>, std::int32_t, std::int64_t>(); }

}  // namespace dlgraph::cpu_ops
