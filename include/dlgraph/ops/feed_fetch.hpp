// feed and fetch: Paddle's bridges between a program and its caller, which
// copy column `col` of a TensorList variable (FEED_MINIBATCH / FETCH_LIST)
// to or from a tensor. Defined here so programs exported by Paddle load.
//
// Limitation: a kernel sees only Tensors (KernelContext holds Tensor
// pointers and the Session binds every value as a Tensor), so these kernels
// cannot reach the TensorList and throw instead; a program is fed and
// fetched through Session feeds and targets, which cut these ops away. The
// column copies themselves are below (feed_column / fetch_column) for an
// executor that binds Variables.
#pragma once

#include "dlgraph/ops/op_util.hpp"
#include "dlgraph/scope.hpp"

namespace dlgraph::ops {

inline void feed_column(const TensorList& list, std::int64_t col, Tensor& out) {
    if (col < 0 || col >= static_cast<std::int64_t>(list.size()))
        throw value_error("dlgraph.value.feed", "feed: col " + std::to_string(col) + " is out of range: the feed list holds " +
                                                    std::to_string(list.size()) + " tensors");
    out.copy_from(list[static_cast<std::size_t>(col)]);
}

inline void fetch_column(const Tensor& x, std::int64_t col, TensorList& list) {
    if (col < 0) throw value_error("dlgraph.value.fetch", "fetch: col " + std::to_string(col) + " is negative");
    if (col >= static_cast<std::int64_t>(list.size())) list.resize(static_cast<std::size_t>(col) + 1);
    list[static_cast<std::size_t>(col)].copy_from(x);
}

// Out takes X's meta: the TensorList's column meta is only known at run
// time, and the builder's inference has no access to Out's declaration.
inline void feed_fetch_infer(const InferContext& c) { c.set(0, c.dtype(0), c.shape(0)); }

struct feed_fetch_op {
    template <class T> static void compute(cpu, const KernelContext&) {
        throw value_error("dlgraph.value.feed_fetch",
                          "feed/fetch ops read or write a TensorList variable, which kernels cannot reach: "
                          "feed the variables and evaluate the targets through the Session instead");
    }
};

inline OpDef feed_def() {
    OpDef d{"feed", {{"X"}}, {{"Out"}}, {{"col", Attribute::make_int("col", 0), true}}, &feed_fetch_infer};
    d.kernels[0] = cpu_kernels<feed_fetch_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
    d.doc = "Out = a copy of X[col], X being the feed list";
    return d;
}

inline OpDef fetch_def() {
    OpDef d{"fetch", {{"X"}}, {{"Out"}}, {{"col", Attribute::make_int("col", 0), true}}, &feed_fetch_infer};
    d.kernels[0] = cpu_kernels<feed_fetch_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
    d.doc = "Out[col] = a copy of X, Out being the fetch list";
    return d;
}

}  // namespace dlgraph::ops
