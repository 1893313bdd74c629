// Batch normalization, its definition with PaddlePaddle's slots and
// attributes: batch_norm (training with batch statistics and moving
// averages, or the moving statistics with is_test / use_global_stats) and
// batch_norm_grad. NCHW or NHWC (data_layout), X of rank 2 to 5, channels X's dim 1 or its last.
// The math is in kernels/norm.hpp, the CPU kernels in cpu/norm.hpp.
#pragma once

#include <string>
#include <vector>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// The end of a norm's grad op (batch_norm's, layer_norm's): Y@GRAD in, the
// wanted X, Scale and Bias gradients out, the forward op's attributes.
inline OpDesc with_param_grads(OpDesc g, const GradRequest& r, const std::string& dx, const std::string& ds,
                               const std::string& db) {
    g.set_input("Y@GRAD", {r.out_grad("Y", 0)});
    if (!dx.empty()) g.set_output("X@GRAD", {dx});
    if (!ds.empty()) g.set_output("Scale@GRAD", {ds});
    if (!db.empty()) g.set_output("Bias@GRAD", {db});
    g.attrs = r.fwd.attrs;
    return g;
}

struct batch_norm_op {
    enum { X = 0, Scale = 1, Bias = 2, Mean = 3, Variance = 4, MomentumTensor = 5 };
    enum { Y = 0, MeanOut = 1, VarianceOut = 2, SavedMean = 3, SavedVariance = 4, ReserveSpace = 5 };
    enum { is_test = 0, momentum = 1, epsilon = 2, data_layout = 3, use_global_stats = 4, trainable_statistics = 5 };

    // X's channel dim: 1 (NCHW), or the last (data_layout NHWC: channels last).
    static int channel_axis(const Attribute* a, int rank) { return a[data_layout].s == "NHWC" ? rank - 1 : 1; }

    // Whether the moving statistics normalize (and nothing is updated).
    static bool global_stats(const Attribute* a) {
        return (a[is_test].b && !a[trainable_statistics].b) || a[use_global_stats].b;
    }

    // X's checks and the per-channel inputs' (slots `per_channel`), shared
    // with the gradient. Returns C (-1 when unknown).
    static std::int64_t check(const InferContext& c, std::initializer_list<int> per_channel) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        const std::string& layout = c.attr(data_layout).s;
        if (layout != "NCHW" && layout != "NHWC")
            c.fail("dlgraph.shape.layout", "data_layout must be NCHW or NHWC, not '" + layout + "'");
        const double eps = c.attr(epsilon).f;  // compared as Paddle's float: 0.001f is 0.0010000000475
        if (!(eps >= 0 && static_cast<float>(eps) <= 1e-3f))
            c.fail("dlgraph.shape.batch_norm", "epsilon must be in [0, 0.001] (Paddle's range), not " + std::to_string(eps));
        const Shape& xs = c.shape(X);
        if (xs.rank() < 2 || xs.rank() > 5)
            c.fail("dlgraph.shape.batch_norm", "X is " + to_string(xs) + ": it must have rank 2 to 5 (" +
                                                   (layout == "NHWC" ? "[N, ..., C]" : "[N, C, ...]") + ")");
        const std::int64_t ch = xs[channel_axis(&c.attr(0), xs.rank())];
        for (int s : per_channel) {
            if (!c.in_count(s)) continue;
            const Shape& ss = c.shape(s);
            if (ss.rank() != 1 || !dims_agree(ss[0], ch))
                c.fail("dlgraph.shape.batch_norm", c.slot_name(s) + " is " + to_string(ss) + " but X is " +
                                                       to_string(xs) + ": it must be [C] = [" + std::to_string(ch) + "]");
            if (c.dtype(s) != c.dtype(X))
                c.fail_type(c.slot_name(s) + " is " + to_string(c.dtype(s)) + " but X is " + to_string(c.dtype(X)));
        }
        return ch;
    }

    static void infer(const InferContext& c) {
        const std::int64_t ch = check(c, {Scale, Bias, Mean, Variance});
        if (c.in_count(MomentumTensor)) c.dtype_in(MomentumTensor, {DataType::FP32, DataType::FP64});
        if (c.in_count(MomentumTensor) && c.shape(MomentumTensor).numel() != 1)
            c.fail("dlgraph.shape.batch_norm", "MomentumTensor is " + to_string(c.shape(MomentumTensor)) +
                                                   ": it must hold one value");
        const DataType t = c.dtype(X);
        c.set(Y, t, c.shape(X));
        for (int s : {static_cast<int>(MeanOut), static_cast<int>(VarianceOut), static_cast<int>(SavedMean),
                      static_cast<int>(SavedVariance)})
            if (c.out_count(s)) c.set(s, t, Shape{ch});
        if (c.out_count(ReserveSpace)) c.set(ReserveSpace, t, Shape{0});
    }
};

inline std::vector<AttrDef> batch_norm_attrs() {
    return {{"is_test", Attribute::make_bool("is_test", false)},
            {"momentum", Attribute::make_float("momentum", 0.9)},
            {"epsilon", Attribute::make_float("epsilon", 1e-5)},
            {"data_layout", Attribute::make_string("data_layout", "NCHW")},
            {"use_global_stats", Attribute::make_bool("use_global_stats", false)},
            {"trainable_statistics", Attribute::make_bool("trainable_statistics", false)}};
}

inline OpDef batch_norm_def() {
    OpDef d{"batch_norm",
            {{"X"}, {"Scale"}, {"Bias"}, {"Mean"}, {"Variance"}, {"MomentumTensor", false, true}},
            {{"Y"},
             {"MeanOut", false, true},
             {"VarianceOut", false, true},
             {"SavedMean", false, true},
             {"SavedVariance", false, true},
             {"ReserveSpace", false, true}},
            batch_norm_attrs(),
            &batch_norm_op::infer};
    d.doc = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel; training updates the moving Mean and "
            "Variance";
    d.no_grad_inputs = {"Mean", "Variance", "MomentumTensor"};
    // Paddle's grad op: X, Scale, Bias, SavedMean, SavedVariance, Y@GRAD,
    // and with the moving statistics normalizing, Mean and Variance.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0), ds = r.grad_name("Scale", 0), db = r.grad_name("Bias", 0);
        if (dx.empty() && ds.empty() && db.empty()) return {};
        OpDesc g;
        g.type = "batch_norm_grad";
        for (const char* slot : {"X", "Scale", "Bias"}) g.set_input(slot, r.fwd.input(slot)->arguments);
        for (const char* slot : {"SavedMean", "SavedVariance"})
            if (auto* o = r.fwd.output(slot); o && !o->arguments.empty()) g.set_input(slot, o->arguments);
        for (const char* slot : {"Mean", "Variance"}) g.set_input(slot, r.fwd.input(slot)->arguments);
        return {with_param_grads(std::move(g), r, dx, ds, db)};
    };
    d.in_place = true;  // MeanOut = Mean, VarianceOut = Variance, channel by channel
    return d;
}

// X, Scale, Bias, SavedMean, SavedVariance (batch statistics: the mean and
// 1 / sqrt(var + epsilon)), Mean, Variance (the moving ones), Y@GRAD ->
// X@GRAD, Scale@GRAD, Bias@GRAD (each when wanted).
struct batch_norm_grad_op {
    enum { X = 0, Scale = 1, Bias = 2, SavedMean = 3, SavedVariance = 4, Mean = 5, Variance = 6, DY = 7 };
    enum { DX = 0, DScale = 1, DBias = 2 };
    enum { is_test = 0, use_global_stats = 4 };
    // The gradient uses the moving statistics when the forward did (or is_test).
    static bool global_stats(const Attribute* a) { return a[is_test].b || a[use_global_stats].b; }

    static void infer(const InferContext& c) {
        const std::int64_t ch = batch_norm_op::check(c, {Scale, Bias, SavedMean, SavedVariance, Mean, Variance});
        const bool global = global_stats(&c.attr(0));
        // (Two arrays: an initializer_list picked by ?: would outlive its elements.)
        const int moving[] = {Mean, Variance}, saved[] = {SavedMean, SavedVariance};
        for (int s : global ? moving : saved)
            if (!c.in_count(s))
                c.fail("dlgraph.shape.batch_norm", std::string("the gradient with ") +
                                                       (global ? "the moving statistics" : "batch statistics") +
                                                       " needs " + c.slot_name(s));
        const Shape& ds = c.shape(DY);
        bool ok = ds.rank() == c.shape(X).rank();
        for (int i = 0; ok && i < ds.rank(); ++i) ok = dims_agree(ds[i], c.shape(X)[i]);
        if (!ok) c.fail("dlgraph.shape.grad", "Y@GRAD is " + to_string(ds) + " but X is " + to_string(c.shape(X)));
        c.same_dtype({X, DY});
        if (c.out_count(DX)) c.set(DX, c.dtype(X), c.shape(X));
        if (c.out_count(DScale)) c.set(DScale, c.dtype(X), Shape{ch});
        if (c.out_count(DBias)) c.set(DBias, c.dtype(X), Shape{ch});
    }
};

inline OpDef batch_norm_grad_def() {
    OpDef d{"batch_norm_grad",
            {{"X"},
             {"Scale"},
             {"Bias"},
             {"SavedMean", false, true},
             {"SavedVariance", false, true},
             {"Mean", false, true},
             {"Variance", false, true},
             {"Y@GRAD"}},
            {{"X@GRAD", false, true}, {"Scale@GRAD", false, true}, {"Bias@GRAD", false, true}},
            batch_norm_attrs(),
            &batch_norm_grad_op::infer};
    d.doc = "X@GRAD, Scale@GRAD, Bias@GRAD of batch_norm";
    return d;
}

// ---- layer_norm ---------------------------------------------------------------------

// Paddle's layer_norm: X seen as [left, right] split at begin_norm_axis;
// each row normalized by its own mean and biased variance, then times Scale
// and plus Bias (each optional, [right]). Mean and Variance ([left]) are
// what the gradient reads.
struct layer_norm_op {
    enum { X = 0, Scale = 1, Bias = 2 };
    enum { Y = 0, Mean = 1, Variance = 2 };
    enum { epsilon = 0, begin_norm_axis = 1 };

    // Checks X, the axis and the slots `per_row` ([right] each); returns
    // {left, right} (-1 where unknown).
    static std::pair<std::int64_t, std::int64_t> check(const InferContext& c, int x, int axis_attr,
                                                       std::initializer_list<int> per_row) {
        c.dtype_in(x, {DataType::FP32, DataType::FP64});
        const Shape& xs = c.shape(x);
        const std::int64_t a = c.attr(axis_attr).i;
        if (a < 1 || a >= xs.rank())
            c.fail("dlgraph.shape.layer_norm", "X is " + to_string(xs) + ": begin_norm_axis must be in [1, " +
                                                   std::to_string(xs.rank()) + "), not " + std::to_string(a));
        const double eps = c.attr(epsilon).f;  // compared as Paddle's float, as batch_norm's
        if (!(eps >= 0 && static_cast<float>(eps) <= 1e-3f))
            c.fail("dlgraph.shape.layer_norm", "epsilon must be in [0, 0.001] (Paddle's range), not " + std::to_string(eps));
        auto product = [&](int b, int e) {
            std::int64_t p = 1;
            for (int i = b; i < e; ++i) {
                if (xs[i] < 0) return std::int64_t(-1);
                p *= xs[i];
            }
            return p;
        };
        const std::int64_t left = product(0, static_cast<int>(a)), right = product(static_cast<int>(a), xs.rank());
        for (int s : per_row) {
            if (!c.in_count(s)) continue;
            const Shape& ss = c.shape(s);
            if (ss.rank() != 1 || !dims_agree(ss[0], right))
                c.fail("dlgraph.shape.layer_norm", c.slot_name(s) + " is " + to_string(ss) + " but X is " + to_string(xs) +
                                                       " normalized from dim " + std::to_string(a) + ": it must be [" +
                                                       std::to_string(right) + "]");
            if (c.dtype(s) != c.dtype(x))
                c.fail_type(c.slot_name(s) + " is " + to_string(c.dtype(s)) + " but X is " + to_string(c.dtype(x)));
        }
        return {left, right};
    }

    static void infer(const InferContext& c) {
        const auto [left, right] = check(c, X, begin_norm_axis, {Scale, Bias});
        (void)right;
        c.set(Y, c.dtype(X), c.shape(X));
        if (c.out_count(Mean)) c.set(Mean, c.dtype(X), Shape{left});
        if (c.out_count(Variance)) c.set(Variance, c.dtype(X), Shape{left});
    }
};

inline std::vector<AttrDef> layer_norm_attrs() {
    return {{"epsilon", Attribute::make_float("epsilon", 1e-5)},
            {"begin_norm_axis", Attribute::make_int("begin_norm_axis", 1)}};
}

inline OpDef layer_norm_def() {
    OpDef d{"layer_norm",
            {{"X"}, {"Scale", false, true}, {"Bias", false, true}},
            {{"Y"}, {"Mean", false, true}, {"Variance", false, true}},
            layer_norm_attrs(),
            &layer_norm_op::infer};
    d.doc = "Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias over the dims from begin_norm_axis, per row";
    // Paddle's grad op reads X, Scale, Mean, Variance and Y@GRAD.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0), ds = r.grad_name("Scale", 0), db = r.grad_name("Bias", 0);
        if (dx.empty() && ds.empty() && db.empty()) return {};
        auto* mean = r.fwd.output("Mean");
        auto* var = r.fwd.output("Variance");
        if (!mean || mean->arguments.empty() || !var || var->arguments.empty())
            throw graph_error("dlgraph.graph.grad", "layer_norm: its gradient needs the Mean and Variance outputs");
        OpDesc g;
        g.type = "layer_norm_grad";
        g.set_input("X", r.fwd.input("X")->arguments);
        if (auto* s = r.fwd.input("Scale"); s && !s->arguments.empty()) g.set_input("Scale", s->arguments);
        g.set_input("Mean", mean->arguments).set_input("Variance", var->arguments);
        return {with_param_grads(std::move(g), r, dx, ds, db)};
    };
    return d;
}

// X, Scale, Bias (Paddle passes it; unread), Mean, Variance, Y@GRAD ->
// X@GRAD, Scale@GRAD, Bias@GRAD (each when wanted).
struct layer_norm_grad_op {
    enum { X = 0, Scale = 1, Bias = 2, Mean = 3, Variance = 4, DY = 5 };
    enum { DX = 0, DScale = 1, DBias = 2 };
    enum { epsilon = 0, begin_norm_axis = 1 };

    static void infer(const InferContext& c) {
        const auto [left, right] = layer_norm_op::check(c, X, begin_norm_axis, {Scale, Bias});
        for (int s : {static_cast<int>(Mean), static_cast<int>(Variance)}) {
            const Shape& ss = c.shape(s);
            if (ss.rank() != 1 || !dims_agree(ss[0], left))
                c.fail("dlgraph.shape.layer_norm", c.slot_name(s) + " is " + to_string(ss) + " but X is " +
                                                       to_string(c.shape(X)) + ": it must be [" + std::to_string(left) + "]");
        }
        const Shape& ds = c.shape(DY);
        bool ok = ds.rank() == c.shape(X).rank();
        for (int i = 0; ok && i < ds.rank(); ++i) ok = dims_agree(ds[i], c.shape(X)[i]);
        if (!ok) c.fail("dlgraph.shape.grad", "Y@GRAD is " + to_string(ds) + " but X is " + to_string(c.shape(X)));
        c.same_dtype({X, Mean, Variance, DY});
        if (c.out_count(DScale) && !c.in_count(Scale))
            c.fail("dlgraph.shape.layer_norm", "Scale@GRAD is wanted but the op has no Scale");
        if (c.out_count(DX)) c.set(DX, c.dtype(X), c.shape(X));
        if (c.out_count(DScale)) c.set(DScale, c.dtype(X), Shape{right});
        if (c.out_count(DBias)) c.set(DBias, c.dtype(X), Shape{right});
    }
};

inline OpDef layer_norm_grad_def() {
    OpDef d{"layer_norm_grad",
            {{"X"}, {"Scale", false, true}, {"Bias", false, true}, {"Mean"}, {"Variance"}, {"Y@GRAD"}},
            {{"X@GRAD", false, true}, {"Scale@GRAD", false, true}, {"Bias@GRAD", false, true}},
            layer_norm_attrs(),
            &layer_norm_grad_op::infer};
    d.doc = "X@GRAD, Scale@GRAD, Bias@GRAD of layer_norm";
    return d;
}

}  // namespace dlgraph::ops
