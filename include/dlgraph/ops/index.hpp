// Indexing ops, their definitions with PaddlePaddle's slots and attributes:
// lookup_table (Ids [..., 1]) and lookup_table_v2 (Ids of any shape), the
// embedding lookups, and their gradients; one_hot and one_hot_v2. The math is in kernels/index.hpp,
// the CPU kernels in cpu/index.hpp.
//
// Deviations from Paddle: is_sparse is accepted but W@GRAD is always a dense
// tensor (dlgraph has no SelectedRows; the values are the same); a W with a
// dim of 0 is refused; is_distributed and remote_prefetch are refused.
#pragma once

#include <string>
#include <vector>

#include "dlgraph/kernels/index.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// lookup_table(_v2): W [rows, D], Ids -> Out; the grad op reads W (for its
// shape, as Paddle's), Ids and Out@GRAD, and writes W@GRAD.
template <bool V2> struct lookup_table_op {
    enum { W = 0, Ids = 1, DOut = 2 };
    enum { is_sparse = 0, is_distributed = 1, padding_idx = 2, remote_prefetch = 3 };

    // The checks of W, Ids and padding_idx; returns Out's shape.
    static Shape out_shape(const InferContext& c) {
        c.dtype_in(W, {DataType::FP32, DataType::FP64});
        if constexpr (V2) c.dtype_in(Ids, {DataType::INT64, DataType::INT32});
        else c.dtype_in(Ids, {DataType::INT64});
        const Shape& ws = c.shape(W);
        const Shape& is = c.shape(Ids);
        if (ws.rank() != 2 || ws[0] == 0 || ws[1] == 0)
            c.fail("dlgraph.shape.lookup_table", "W is " + to_string(ws) + ": it must be [rows, width], neither 0");
        for (int a : {static_cast<int>(is_distributed), static_cast<int>(remote_prefetch)})
            if (c.attr(a).b)
                c.fail("dlgraph.shape.lookup_table", std::string(a == is_distributed ? "is_distributed" : "remote_prefetch") +
                                                         " is set: a table on a parameter server is not supported");
        const std::int64_t pad = c.attr(padding_idx).i;
        if (pad != kernels::no_padding && (pad < 0 || (ws[0] >= 0 && pad >= ws[0])))
            c.fail("dlgraph.shape.lookup_table", "padding_idx " + std::to_string(pad) + " is out of range for W of shape " +
                                                     to_string(ws) + ": it must be -1 (none) or in [0, " +
                                                     std::to_string(ws[0]) + ")");
        Shape out;
        if constexpr (V2) {
            out = is;
        } else {
            if (is.rank() == 0 || !dims_agree(is[is.rank() - 1], 1))
                c.fail("dlgraph.shape.lookup_table",
                       "Ids is " + to_string(is) + ": lookup_table's Ids hold one id per row ([..., 1]; lookup_table_v2 "
                                                   "takes any shape)");
            for (int i = 0; i + 1 < is.rank(); ++i) out.push_back(is[i]);
        }
        if (out.rank() == max_rank)
            c.fail("dlgraph.shape.lookup_table", "Ids is " + to_string(is) + ": Out would have more than " +
                                                     std::to_string(max_rank) + " dims");
        out.push_back(ws[1]);
        return out;
    }
    static void infer(const InferContext& c) { c.set(0, c.dtype(W), out_shape(c)); }
    static void infer_grad(const InferContext& c) {
        const Shape want = out_shape(c);
        c.same_dtype({W, DOut});
        const Shape& ds = c.shape(DOut);
        bool ok = ds.rank() == want.rank();
        for (int i = 0; ok && i < ds.rank(); ++i) ok = dims_agree(ds[i], want[i]);
        if (!ok) c.fail("dlgraph.shape.grad", "Out@GRAD is " + to_string(ds) + " but Out is " + to_string(want));
        c.set(0, c.dtype(W), c.shape(W));
    }
};

// Paddle's attributes of lookup_table (v2's are the same), so that programs
// Paddle saved load: all but padding_idx concern its parameter server and
// sparse updates, accepted at their defaults (is_sparse at either value).
inline std::vector<AttrDef> lookup_table_attrs() {
    return {{"is_sparse", Attribute::make_bool("is_sparse", false)},
            {"is_distributed", Attribute::make_bool("is_distributed", false)},
            {"padding_idx", Attribute::make_long("padding_idx", kernels::no_padding)},
            {"remote_prefetch", Attribute::make_bool("remote_prefetch", false)},
            {"grad_inplace", Attribute::make_bool("grad_inplace", false)},
            {"trainer_id", Attribute::make_int("trainer_id", 0)},
            {"height_sections", Attribute::make_ints("height_sections", {})},
            {"epmap", Attribute::make_strings("epmap", {})},
            {"table_names", Attribute::make_strings("table_names", {})},
            {"entry_config", Attribute::make_string("entry_config", "")},
            {"is_test", Attribute::make_bool("is_test", false)},
            {"entry", Attribute::make_string("entry", "none")},
            {"table_class", Attribute::make_string("table_class", "none")}};
}

template <bool V2> OpDef lookup_table_def_of() {
    constexpr std::string_view type = V2 ? "lookup_table_v2" : "lookup_table";
    constexpr std::string_view grad = V2 ? "lookup_table_v2_grad" : "lookup_table_grad";
    OpDef d{type, {{"W"}, {"Ids"}}, {{"Out"}}, lookup_table_attrs(), &lookup_table_op<V2>::infer};
    d.may_fail = true;  // an id out of range
    d.doc = V2 ? "Out[..., :] = W[Ids[...], :] (0 where Ids == padding_idx)"
               : "Out[..., :] = W[Ids[..., 0], :] (0 where Ids == padding_idx)";
    d.no_grad_inputs = {"Ids"};
    d.grad_spec = {grad, {"W", "Ids"}, {}, {"W"}, {"Out"}};
    return d;
}
template <bool V2> OpDef lookup_table_grad_def_of() {
    constexpr std::string_view grad = V2 ? "lookup_table_v2_grad" : "lookup_table_grad";
    OpDef d{grad, {{"W"}, {"Ids"}, {"Out@GRAD"}}, {{"W@GRAD"}}, lookup_table_attrs(), &lookup_table_op<V2>::infer_grad};
    d.may_fail = true;
    d.doc = "W@GRAD = 0, then W@GRAD[Ids[i], :] += Out@GRAD[i, :] in order (padding ids add nothing)";
    return d;
}

inline OpDef lookup_table_def() { return lookup_table_def_of<false>(); }
inline OpDef lookup_table_grad_def() { return lookup_table_grad_def_of<false>(); }
inline OpDef lookup_table_v2_def() { return lookup_table_def_of<true>(); }
inline OpDef lookup_table_v2_grad_def() { return lookup_table_grad_def_of<true>(); }

// ---- one_hot, one_hot_v2 ------------------------------------------------------------------
//
// X (INT32 or INT64 ids) -> Out of `dtype` (Paddle's number; FP32 unless
// set; FP64, INT32 and INT64 too): the one-hot row of `depth` classes of
// each id. one_hot_v2 (paddle.nn.functional.one_hot) appends the classes as
// a new last dim; one_hot takes X [..., 1] and replaces that dim. An id
// outside [0, depth) is an error ([dlgraph.value.id]) unless
// allow_out_of_range, which gives a row of zeros. No gradient. Deviation:
// Paddle's optional depth_tensor input is not supported (depth is the
// attribute).
template <bool V2> struct one_hot_op {
    enum { depth = 0, dtype = 1, allow_out_of_range = 2 };
    static void infer(const InferContext& c) {
        c.dtype_in(0, {DataType::INT64, DataType::INT32});
        const std::int64_t n = c.attr(depth).i;
        if (n < 1) c.fail("dlgraph.shape.attr", "depth is " + std::to_string(n) + ": it must be at least 1");
        const std::int64_t dt = c.attr(dtype).i;
        if (dt != static_cast<int>(DataType::FP32) && dt != static_cast<int>(DataType::FP64) &&
            dt != static_cast<int>(DataType::INT32) && dt != static_cast<int>(DataType::INT64))
            c.fail("dlgraph.shape.attr", "dtype " + std::to_string(dt) + " is not supported: it must be 5 (FP32), 6 (FP64), 2 (INT32) or 3 (INT64)");
        const Shape& s = c.shape(0);
        Shape out;
        if constexpr (V2) {
            out = s;
        } else {
            if (s.rank() == 0 || !dims_agree(s[s.rank() - 1], 1))
                c.fail("dlgraph.shape.one_hot", "X is " + to_string(s) + ": one_hot's ids are [..., 1] (one_hot_v2 takes any shape)");
            for (int i = 0; i + 1 < s.rank(); ++i) out.push_back(s[i]);
        }
        if (out.rank() == max_rank)
            c.fail("dlgraph.shape.one_hot", "X is " + to_string(s) + ": Out would have more than " + std::to_string(max_rank) + " dims");
        out.push_back(n);
        if (out.known()) checked_numel(c, out, "one_hot's Out dims");
        c.set(0, static_cast<DataType>(dt), out);
    }
};

template <bool V2> OpDef one_hot_def_of() {
    OpDef d{V2 ? "one_hot_v2" : "one_hot", {{"X"}}, {{"Out"}},
            {{"depth", Attribute::make_int("depth", -1)},
             {"dtype", Attribute::make_int("dtype", static_cast<int>(DataType::FP32))},
             {"allow_out_of_range", Attribute::make_bool("allow_out_of_range", false)}},
            &one_hot_op<V2>::infer};
    d.kernel_slot = 0;  // by X: Out's dtype is the attribute's
    d.may_fail = true;  // an id out of range
    d.doc = V2 ? "Out[..., :] = the one-hot row of X[...] among depth classes"
               : "Out[..., :] = the one-hot row of X[..., 0] among depth classes";
    return d;
}
inline OpDef one_hot_def() { return one_hot_def_of<false>(); }
inline OpDef one_hot_v2_def() { return one_hot_def_of<true>(); }

// ---- gather, scatter ----------------------------------------------------------------------------
//
// Index/Ids: INT32 or INT64, [N] or [N, 1]. An id outside the dim it picks
// from is an error ([dlgraph.value.id]), found before anything is written.

// The N of an index input, checking its dtype and shape.
inline std::int64_t index_count(const InferContext& c, int slot, const std::string& name) {
    c.dtype_in(slot, {DataType::INT64, DataType::INT32});
    const Shape& s = c.shape(slot);
    if (!(s.rank() == 1 || (s.rank() == 2 && dims_agree(s[1], 1))))
        c.fail("dlgraph.shape.index", name + " is " + to_string(s) + ": it must be [N] or [N, 1]");
    return s[0];
}

// gather: Out = X's rows along `axis` picked by Index (Out's dim axis is N).
// gather_grad (X, Index, Out@GRAD -> X@GRAD) adds each row back, or along
// axis 0 assigns it with `overwrite` (Paddle's attribute, true unless
// given; paddle.gather sets it false, as the builder does; with repeated
// ids only false gives the true gradient). Deviation: the Axis tensor input is not supported.
struct gather_op {
    enum { X = 0, Index = 1, DOut = 2 };
    enum { overwrite = 0, axis = 1 };
    static Shape out_shape(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        const std::int64_t n = index_count(c, Index, "Index");
        Shape out = c.shape(X);
        out[infer_axis(c, c.attr(axis).i, out, "X")] = n;
        if (out.known()) checked_numel(c, out, "gather's Out dims");
        return out;
    }
    static void infer(const InferContext& c) { c.set(0, c.dtype(X), out_shape(c)); }
    // Whether gather_grad assigns (overwrite, along axis 0 only: Paddle's
    // gradient along another axis always adds).
    static bool overwrites(const Attribute* attrs, int rank) {
        const std::int64_t a = attrs[axis].i;
        return attrs[overwrite].b && (a < 0 ? a + rank : a) == 0;
    }
    static void infer_grad(const InferContext& c) {
        c.same_dtype({X, DOut});
        check_grad_shape(c, out_shape(c), DOut, "Out@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline std::vector<AttrDef> gather_attrs() {
    return {{"overwrite", Attribute::make_bool("overwrite", true)}, {"axis", Attribute::make_int("axis", 0)}};
}
inline OpDef gather_def() {
    OpDef d{"gather", {{"X"}, {"Index"}}, {{"Out"}}, gather_attrs(), &gather_op::infer};
    d.may_fail = true;  // an id out of range
    d.doc = "Out = X's slices along axis at Index";
    d.no_grad_inputs = {"Index"};
    d.grad_spec = {"gather_grad", {"X", "Index"}, {}, {"X"}, {"Out"}};
    return d;
}
inline OpDef gather_grad_def() {
    OpDef d{"gather_grad", {{"X"}, {"Index"}, {"Out@GRAD"}}, {{"X@GRAD"}}, gather_attrs(), &gather_op::infer_grad};
    d.may_fail = true;
    d.doc = "X@GRAD = 0, then X@GRAD's slices at Index += (or, with overwrite, =) Out@GRAD's";
    return d;
}

// scatter: Out = X with its rows (dim 0) at Ids replaced by Updates [N,
// X's other dims...]: with overwrite (the default) in order, the last write
// staying; else the rows at Ids are zeroed and every update is added.
// scatter_grad (Ids, Updates, Out@GRAD -> X@GRAD, Updates@GRAD) is Paddle's:
// X@GRAD = Out@GRAD with the rows at Ids zeroed, Updates@GRAD = Out@GRAD's
// rows at Ids (with overwrite and repeated ids, an overwritten update gets
// a gradient too, as in Paddle).
struct scatter_op {
    enum { X = 0, Ids = 1, Updates = 2 };
    enum { overwrite = 0 };
    // Checks Ids and Updates against X's shape `xs` (Updates' dtype: `t`).
    static void check(const InferContext& c, int ids, int updates, const Shape& xs, DataType t) {
        const std::int64_t n = index_count(c, ids, "Ids");
        if (c.dtype(updates) != t)
            c.fail_type("X is " + to_string(t) + " but Updates is " + to_string(c.dtype(updates)));
        const Shape& u = c.shape(updates);
        bool ok = xs.rank() >= 1 && u.rank() == xs.rank() && dims_agree(u[0], n);
        for (int i = 1; ok && i < u.rank(); ++i) ok = dims_agree(u[i], xs[i]);
        if (!ok)
            c.fail("dlgraph.shape.scatter", "X is " + to_string(xs) + ", Ids " + to_string(c.shape(ids)) + " and Updates " +
                                                to_string(u) + ": Updates must be [N, X's dims after the first]");
    }
    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        check(c, Ids, Updates, c.shape(X), c.dtype(X));
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef scatter_def() {
    OpDef d{"scatter", {{"X"}, {"Ids"}, {"Updates"}}, {{"Out"}}, {{"overwrite", Attribute::make_bool("overwrite", true)}},
            &scatter_op::infer};
    d.may_fail = true;
    d.doc = "Out = X with rows Ids set to (or, without overwrite, the sum of) Updates";
    d.no_grad_inputs = {"Ids"};
    d.grad_spec = {"scatter_grad", {"Ids", "Updates"}, {}, {"X", "Updates"}, {"Out"}};
    return d;
}
struct scatter_grad_op {
    enum { Ids = 0, Updates = 1, DOut = 2 };
    enum { DX = 0, DUpdates = 1 };
    static void infer(const InferContext& c) {
        c.dtype_in(DOut, {DataType::FP32, DataType::FP64});
        scatter_op::check(c, Ids, Updates, c.shape(DOut), c.dtype(DOut));
        if (c.out_count(DX)) c.set(DX, c.dtype(DOut), c.shape(DOut));
        if (c.out_count(DUpdates)) c.set(DUpdates, c.dtype(DOut), c.shape(Updates));
    }
};
inline OpDef scatter_grad_def() {
    OpDef d{"scatter_grad", {{"Ids"}, {"Updates"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Updates@GRAD", false, true}},
            {{"overwrite", Attribute::make_bool("overwrite", true)}}, &scatter_grad_op::infer};
    d.kernel_slot = scatter_grad_op::DOut;
    d.may_fail = true;
    d.doc = "X@GRAD = Out@GRAD with rows Ids zeroed; Updates@GRAD = Out@GRAD's rows Ids";
    return d;
}

}  // namespace dlgraph::ops
