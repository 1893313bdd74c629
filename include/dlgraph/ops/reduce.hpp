// Reductions, their definitions: mean (of everything, Out [1] as in Paddle)
// and reduce_sum / mean / max / min / prod / all / any over a set of dims,
// and the gradients of those on numbers. The math is in kernels/reduce.hpp (the kernel core: one strided
// fold for every dim set and functor), the CPU kernels in cpu/reduce.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// Which dims of a rank-r input a reduce op folds, from its attributes.
// Returns false (with `bad` set to the offending entry of `dim`) on a dim
// out of range; `dup` tells a repeated dim from an out-of-range one.
inline bool reduced_dims(const Attribute* attrs, int r, bool* red, std::int64_t& bad, bool& dup) {
    enum { dim = 0, keep_dim = 1, reduce_all = 2 };
    for (int i = 0; i < r; ++i) red[i] = attrs[reduce_all].b;
    if (attrs[reduce_all].b) return true;
    for (auto d : attrs[dim].ints) {
        const std::int64_t a = d < 0 ? d + r : d;
        if (a < 0 || a >= r || red[a]) {
            bad = d;
            dup = a >= 0 && a < r;
            return false;
        }
        red[a] = true;
    }
    return true;
}

// ---- mean --------------------------------------------------------------------------------

struct mean_op {
    static void infer(const InferContext& c) {
        c.dtype_in(0, {DataType::FP32, DataType::FP64});
        c.set(0, c.dtype(0), Shape{1});
    }
};

inline OpDef mean_def() {
    OpDef d{"mean", {{"X"}}, {{"Out"}}, {}, &mean_op::infer};
    d.doc = "Out = the mean of all elements of X, shape [1]";
    d.grad_spec = {"mean_grad", {"X"}, {"Out"}, {"X"}};
    return d;
}

// X, Out, Out@GRAD -> X@GRAD = Out@GRAD / numel(X) everywhere.
struct mean_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, DOut});
        check_grad_shape(c, Shape{1}, Out, "Out");
        check_grad_shape(c, Shape{1}, DOut, "Out@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef mean_grad_def() {
    OpDef d{"mean_grad", {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &mean_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD / numel(X)";
    return d;
}

// ---- reduce_* ------------------------------------------------------------------------------

// X's shape after the reduction the attributes (dim, keep_dim, reduce_all,
// in this order in both a reduce op and its grad op) ask for.
inline Shape reduced_shape(const InferContext& c, const Shape& s) {
    enum { dim = 0, keep_dim = 1 };
    bool red[max_rank];
    std::int64_t bad = 0;
    bool dup = false;
    if (!reduced_dims(&c.attr(0), s.rank(), red, bad, dup))
        c.fail("dlgraph.shape.axis", "dim " + std::to_string(bad) + (dup ? " is listed twice" : " is out of range") +
                                         " for X of shape " + to_string(s) + " (dim is " + ints_text(c.attr(dim).ints) +
                                         ")");
    Shape out;
    for (int i = 0; i < s.rank(); ++i) {
        if (!red[i]) out.push_back(s[i]);
        else if (c.attr(keep_dim).b) out.push_back(1);
    }
    // Paddle keeps a rank-1 result when everything is folded.
    if (out.empty()) out.push_back(1);
    return out;
}

// The dtypes a reduction takes: floating point (mean), numbers (sum, max,
// min, prod) or BOOL (all, any). Out has X's dtype.
enum class reduce_dtypes { floats, numbers, bools };
template <reduce_dtypes D> struct reduce_op {
    static void infer(const InferContext& c) {
        if constexpr (D == reduce_dtypes::numbers)
            c.dtype_in(0, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        else if constexpr (D == reduce_dtypes::floats) c.dtype_in(0, {DataType::FP32, DataType::FP64});
        else c.dtype_in(0, {DataType::BOOL});
        c.set(0, c.dtype(0), reduced_shape(c, c.shape(0)));
    }
};

template <reduce_dtypes D> OpDef reduce_def(std::string_view type, std::string_view grad_type, std::string_view doc) {
    OpDef d{type, {{"X"}}, {{"Out"}},
            {{"dim", Attribute::make_ints("dim", {0})},
             {"keep_dim", Attribute::make_bool("keep_dim", false)},
             {"reduce_all", Attribute::make_bool("reduce_all", false)}},
            &reduce_op<D>::infer};
    d.doc = doc;
    if (!grad_type.empty()) d.grad_spec = {grad_type, {"X"}, {"Out"}, {"X"}};
    return d;
}

// X, Out, Out@GRAD -> X@GRAD for reduce_sum / mean / max / min / prod:
// each element of X takes the gradient of the output element it folded
// into (scaled by 1/count for mean; only where X equals the max (min) for
// max (min), every tied position included; times the product of the other
// elements folded with it for prod).
struct reduce_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, Out, DOut});
        const Shape out = reduced_shape(c, c.shape(X));
        check_grad_shape(c, out, Out, "Out");
        check_grad_shape(c, out, DOut, "Out@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef reduce_grad_def(std::string_view type) {
    OpDef d{type, {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}},
            {{"dim", Attribute::make_ints("dim", {0})},
             {"keep_dim", Attribute::make_bool("keep_dim", false)},
             {"reduce_all", Attribute::make_bool("reduce_all", false)}},
            &reduce_grad_op::infer};
    d.doc = "X@GRAD of a reduction";
    return d;
}

inline OpDef reduce_sum_def() {
    return reduce_def<reduce_dtypes::numbers>("reduce_sum", "reduce_sum_grad", "Out = sum of X over dim");
}
inline OpDef reduce_mean_def() {
    return reduce_def<reduce_dtypes::floats>("reduce_mean", "reduce_mean_grad", "Out = mean of X over dim");
}
inline OpDef reduce_max_def() {
    return reduce_def<reduce_dtypes::numbers>("reduce_max", "reduce_max_grad", "Out = max of X over dim");
}
inline OpDef reduce_min_def() {
    return reduce_def<reduce_dtypes::numbers>("reduce_min", "reduce_min_grad", "Out = min of X over dim");
}
inline OpDef reduce_prod_def() {
    return reduce_def<reduce_dtypes::numbers>("reduce_prod", "reduce_prod_grad",
                                              "Out = product of X over dim (integers wrap)");
}
inline OpDef reduce_all_def() {
    return reduce_def<reduce_dtypes::bools>("reduce_all", "", "Out = whether every element of X over dim is true");
}
inline OpDef reduce_any_def() {
    return reduce_def<reduce_dtypes::bools>("reduce_any", "", "Out = whether any element of X over dim is true");
}

inline OpDef reduce_sum_grad_def() { return reduce_grad_def("reduce_sum_grad"); }
inline OpDef reduce_mean_grad_def() { return reduce_grad_def("reduce_mean_grad"); }
inline OpDef reduce_max_grad_def() { return reduce_grad_def("reduce_max_grad"); }
inline OpDef reduce_min_grad_def() { return reduce_grad_def("reduce_min_grad"); }
inline OpDef reduce_prod_grad_def() { return reduce_grad_def("reduce_prod_grad"); }

// ---- arg_max, arg_min ---------------------------------------------------------------------
//
// X -> Out: where along `axis` the first max (min) of X is, as INT64 (dtype
// 3, Paddle's default, or -1) or INT32 (dtype 2); keepdims keeps the axis
// as a dim of 1; flatten searches all of X (Out [1]). No gradient.
// Deviation: without keepdims a 1-D X gives Out [1], where Paddle 2's
// argmax gives a 0-D tensor (dlgraph has none; reductions give [1] too).
struct arg_extreme_op {
    enum { axis = 0, keepdims = 1, flatten = 2, dtype = 3 };
    static void infer(const InferContext& c) {
        c.dtype_in(0, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        const std::int64_t dt = c.attr(dtype).i;
        if (dt != -1 && dt != 2 && dt != 3)
            c.fail("dlgraph.shape.attr", "dtype " + std::to_string(dt) + " is not an index type: it must be 2 (INT32) or 3 (INT64)");
        const Shape& s = c.shape(0);
        Shape out;
        std::int64_t searched = 0;  // elements along the search, -1 unknown
        if (c.attr(flatten).b) {
            out.push_back(1);
            searched = s.known() ? s.numel() : -1;
        } else {
            const int a = infer_axis(c, c.attr(axis).i, s, "X");
            searched = s[a];
            for (int i = 0; i < s.rank(); ++i)
                if (i != a) out.push_back(s[i]);
                else if (c.attr(keepdims).b) out.push_back(1);
            if (out.rank() == 0) out.push_back(1);
        }
        if (searched == 0) c.fail("dlgraph.shape.axis", "X is " + to_string(s) + ": there is nothing to search along the axis");
        if (dt == 2 && searched > std::numeric_limits<std::int32_t>::max())
            c.fail("dlgraph.shape.attr", "X has " + std::to_string(searched) + " elements along the search: too many for INT32 indices (dtype 3: INT64)");
        c.set(0, dt == 2 ? DataType::INT32 : DataType::INT64, out);
    }
};

inline OpDef arg_extreme_def(std::string_view type, std::string_view doc) {
    OpDef d{type, {{"X"}}, {{"Out"}},
            {{"axis", Attribute::make_long("axis", 0)},
             {"keepdims", Attribute::make_bool("keepdims", false)},
             {"flatten", Attribute::make_bool("flatten", false)},
             {"dtype", Attribute::make_int("dtype", 3)}},
            &arg_extreme_op::infer};
    d.kernel_slot = 0;  // by X: Out is an index type
    d.doc = doc;
    return d;
}
inline OpDef arg_max_def() { return arg_extreme_def("arg_max", "Out = where along axis X is largest (first of ties; NaN beats numbers)"); }
inline OpDef arg_min_def() { return arg_extreme_def("arg_min", "Out = where along axis X is smallest (first of ties; NaN beats numbers)"); }

// ---- cumsum ----------------------------------------------------------------------------------
//
// X -> Out, the running sums along `axis` (flatten: over all of X, Out
// [numel]); exclusive leaves each element out of its own sum; reverse sums
// from the end. The gradient is the cumsum of Out@GRAD the other way round
// with the same exclusive: Paddle's grad maker makes a cumsum op with
// reverse flipped; dlgraph names it cumsum_grad (the same attributes, read
// as the forward op's).
struct cumsum_op {
    enum { axis = 0, flatten = 1, exclusive = 2, reverse = 3 };
    static Shape out_shape(const InferContext& c, const Shape& s) {
        if (c.attr(flatten).b) return Shape{s.known() ? s.numel() : -1};
        infer_axis(c, c.attr(axis).i, s, "X");
        return s;
    }
    static void infer(const InferContext& c) {
        c.dtype_in(0, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        c.set(0, c.dtype(0), out_shape(c, c.shape(0)));
    }
    // Out@GRAD -> X@GRAD: X@GRAD has X's shape, which cumsum_grad is not
    // given; with flatten it is Out@GRAD's, laid out as X (X is read for it).
    enum { X = 0, DOut = 1 };
    static void infer_grad(const InferContext& c) {
        c.same_dtype({X, DOut});
        check_grad_shape(c, out_shape(c, c.shape(X)), DOut, "Out@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline std::vector<AttrDef> cumsum_attrs() {
    return {{"axis", Attribute::make_int("axis", -1)},
            {"flatten", Attribute::make_bool("flatten", false)},
            {"exclusive", Attribute::make_bool("exclusive", false)},
            {"reverse", Attribute::make_bool("reverse", false)}};
}
inline OpDef cumsum_def() {
    OpDef d{"cumsum", {{"X"}}, {{"Out"}}, cumsum_attrs(), &cumsum_op::infer};
    d.doc = "Out = the running sums of X along axis (exclusive: without the element itself; reverse: from the end)";
    d.grad_spec = {"cumsum_grad", {"X"}, {}, {"X"}, {"Out"}};
    return d;
}
inline OpDef cumsum_grad_def() {
    OpDef d{"cumsum_grad", {{"X"}, {"Out@GRAD"}}, {{"X@GRAD"}}, cumsum_attrs(), &cumsum_op::infer_grad};
    d.doc = "X@GRAD = the running sums of Out@GRAD along axis the other way round";
    return d;
}

}  // namespace dlgraph::ops
