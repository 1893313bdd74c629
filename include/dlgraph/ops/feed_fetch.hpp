// feed and fetch: Paddle's bridges between a program and its caller. feed
// copies column `col` of a FEED_MINIBATCH list (a TensorList variable in the
// session's scope) into a tensor; fetch copies a tensor into column `col` of
// a FETCH_LIST. Session feeds and targets make these unnecessary for dlgraph
// programs; they exist so programs in Paddle's shape run as they are.
#pragma once

#include "dlgraph/op.hpp"
#include "dlgraph/scope.hpp"

namespace dlgraph::ops {

inline const Tensor& feed_column(const TensorList& list, std::int64_t col) {
    if (col < 0 || col >= static_cast<std::int64_t>(list.size()))
        throw value_error("dlgraph.value.feed", "feed: col " + std::to_string(col) + " is out of range: the feed list holds " +
                                                    std::to_string(list.size()) + " tensors");
    const Tensor& t = list[static_cast<std::size_t>(col)];
    if (!t.initialized()) throw value_error("dlgraph.value.feed", "feed: column " + std::to_string(col) + " holds no value");
    return t;
}

// A fetch list grows to hold its highest column; more columns than this is
// a hostile program, not a model.
inline constexpr std::int64_t max_fetch_col = 1 << 20;

inline void fetch_column(const Tensor& x, std::int64_t col, TensorList& list) {
    if (col < 0) throw value_error("dlgraph.value.fetch", "fetch: col " + std::to_string(col) + " is negative");
    if (col >= max_fetch_col)
        throw value_error("dlgraph.value.fetch", "fetch: col " + std::to_string(col) + " is above the limit of " +
                                                     std::to_string(max_fetch_col) + " columns");
    if (col >= static_cast<std::int64_t>(list.size())) list.resize(static_cast<std::size_t>(col) + 1);
    list[static_cast<std::size_t>(col)].copy_from(x);
}

// At run time Out takes the meta of the list's column; before a run (builder,
// validation) there is no list, and Out keeps its declared meta.
inline void feed_infer(const InferContext& c) {
    const Variable* v = c.in_var(0);
    if (v && v->is<TensorList>()) {
        const Tensor& t = feed_column(v->get<TensorList>(), c.attr(0).i);
        c.set(0, t.dtype(), t.shape());
    }
}

// Out is a list, which has no tensor meta; X's is passed through for tools.
inline void fetch_infer(const InferContext& c) { c.set(0, c.dtype(0), c.shape(0)); }

inline OpDef feed_def() {
    OpDef d{"feed", {{"X", false, false, VarType::FEED_MINIBATCH}}, {{"Out"}}, {{"col", Attribute::make_int("col", 0), true}}, &feed_infer};
    d.may_fail = true;  // a column the list lacks
    d.doc = "Out = a copy of X[col], X being the feed list";
    return d;
}

inline OpDef fetch_def() {
    OpDef d{"fetch", {{"X"}}, {{"Out", false, false, VarType::FETCH_LIST}}, {{"col", Attribute::make_int("col", 0), true}}, &fetch_infer};
    d.may_fail = true;  // a negative column
    d.doc = "Out[col] = a copy of X, Out being the fetch list";
    return d;
}

}  // namespace dlgraph::ops

