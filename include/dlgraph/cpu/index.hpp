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

// f(ids) with ids (lookup_table's Ids, gather's Index, scatter's Ids) as
// its integer type, INT32 or INT64.
template <class F> kernels::fault with_index(const Tensor& ids, F f) {
    if (ids.dtype() == DataType::INT32) return f(ids.data<std::int32_t>());
    return f(ids.data<std::int64_t>());
}

template <bool V2> struct lookup_table_op : ops::lookup_table_op<V2> {
    using base = ops::lookup_table_op<V2>;
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& w = c.in(base::W);
        const Tensor& ids = c.in(base::Ids);
        const std::int64_t pad = c.attr(base::padding_idx).i;
        T* out = c.out(0).data<T>();
        c.fault->raise(with_index(ids, [&](const auto* id) {
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
        c.fault->raise(with_index(ids, [&](const auto* id) {
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


struct gather_op : ops::gather_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& idx = c.in(Index);
        const ops::axis_split g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        T* out = c.out(0).data<T>();
        c.fault->raise(with_index(idx, [&](const auto* id) {
            return kernels::gather(x.data<T>(), g.outer, g.d, g.inner, id, idx.numel(), out);
        }));
    }
};
struct gather_grad_op : ops::gather_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& idx = c.in(Index);
        const ops::axis_split g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        const T* dout = c.in(DOut).data<T>();
        T* dx = c.out(0).data<T>();
        c.fault->raise(with_index(idx, [&](const auto* id) {
            return kernels::gather_grad(id, idx.numel(), dout, g.outer, g.d, g.inner, overwrites(c.attrs, x.rank()), dx);
        }));
    }
};
struct scatter_op : ops::scatter_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& ids = c.in(Ids);
        const std::int64_t rows = x.shape()[0], inner = rows ? x.numel() / rows : 0;
        const T* upd = c.in(Updates).data<T>();
        T* out = c.out(0).data<T>();
        c.fault->raise(with_index(ids, [&](const auto* id) {
            return kernels::scatter(x.data<T>(), rows, inner, id, ids.numel(), upd, c.attr(overwrite).b, out);
        }));
    }
};
struct scatter_grad_op : ops::scatter_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& d = c.in(DOut);
        const Tensor& ids = c.in(Ids);
        const std::int64_t rows = d.shape()[0], inner = rows ? d.numel() / rows : 0;
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* du = c.out_count(DUpdates) ? c.out(DUpdates).data<T>() : nullptr;
        c.fault->raise(with_index(ids, [&](const auto* id) {
            return kernels::scatter_grad(id, ids.numel(), d.data<T>(), rows, inner, dx, du);
        }));
    }
};

inline void gather_kernels(OpDef& d) { d.kernels = cpu_kernels<gather_op, float, double, std::int32_t, std::int64_t>(); }
inline void gather_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<gather_grad_op, float, double>(); }
inline void scatter_kernels(OpDef& d) { d.kernels = cpu_kernels<scatter_op, float, double, std::int32_t, std::int64_t>(); }
inline void scatter_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<scatter_grad_op, float, double>(); }

}  // namespace dlgraph::cpu_ops
