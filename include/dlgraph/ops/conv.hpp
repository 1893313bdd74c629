// Convolutional-network ops, their definitions, with PaddlePaddle's names,
// slots and attributes: conv2d and depthwise_conv2d (NCHW or NHWC; Paddle's Bias
// and ResidualData slots, read only by its oneDNN kernels, are not
// declared), pool2d (max and avg), flatten_contiguous_range, and their
// gradients. The window math is in kernels/conv.hpp (the kernel core), the
// CPU kernels in cpu/conv.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dlgraph/kernels/conv.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// ---- windows: paddings, output sizes ---------------------------------------------------------

// One spatial axis of a window op: its input size, window, stride,
// dilation and paddings after padding_algorithm, and its output size (-1:
// unknown until the input's size is).
struct window_axis {
    std::int64_t in = -1, k = 1, s = 1, d = 1, p0 = 0, p1 = 0, out = -1;
};

// The attributes that place windows, read once by inference and kernels.
struct window_attrs {
    const std::vector<std::int64_t>* strides = nullptr;
    const std::vector<std::int64_t>* paddings = nullptr;
    const std::vector<std::int64_t>* dilations = nullptr;  // conv only
    const std::string* algorithm = nullptr;                // padding_algorithm
    bool ceil_mode = false;                                // pool only
};

// Why attributes do not describe windows, or "".
inline std::string window_attrs_error(const window_attrs& a) {
    // Paddle's attributes are int32; larger values would overflow the sizes.
    for (const auto* v : {a.strides, a.paddings, a.dilations})
        if (v)
            for (auto x : *v)
                if (x > INT32_MAX) return "strides, paddings and dilations must fit in int32: " + ints_text(*v);
    if (a.strides->size() != 2) return "strides must have 2 values, not " + ints_text(*a.strides);
    for (auto s : *a.strides)
        if (s <= 0) return "strides must be positive: " + ints_text(*a.strides);
    if (a.dilations) {
        if (a.dilations->size() != 2) return "dilations must have 2 values, not " + ints_text(*a.dilations);
        for (auto d : *a.dilations)
            if (d <= 0) return "dilations must be positive: " + ints_text(*a.dilations);
    }
    if (a.paddings->size() != 2 && a.paddings->size() != 4)
        return "paddings must have 2 values ([h, w]) or 4 ([top, bottom, left, right]), not " + ints_text(*a.paddings);
    for (auto p : *a.paddings)
        if (p < 0) return "paddings must not be negative: " + ints_text(*a.paddings);
    const std::string& alg = *a.algorithm;
    if (alg != "EXPLICIT" && alg != "SAME" && alg != "VALID")
        return "padding_algorithm must be EXPLICIT, SAME or VALID, not '" + alg + "'";
    return "";
}

// Axis `i` (0: rows, 1: columns) for input size `in` and window `k`, as
// Paddle places it: SAME pads to ceil(in / stride) outputs (the extra pad
// after, dilation 1); VALID pads nothing; EXPLICIT takes the paddings, two
// values meaning [h, h, w, w]. The output size is
// (in + p0 + p1 - (d * (k - 1) + 1)) / s + 1, or with ceil_mode the
// division rounded up.
inline window_axis window_axis_of(const window_attrs& a, int i, std::int64_t in, std::int64_t k) {
    window_axis w;
    w.in = in;
    w.k = k;
    w.s = (*a.strides)[static_cast<std::size_t>(i)];
    w.d = a.dilations ? (*a.dilations)[static_cast<std::size_t>(i)] : 1;
    const auto& p = *a.paddings;
    const std::string& alg = *a.algorithm;
    if (alg == "SAME") {
        w.d = 1;
        if (in >= 0) {
            const std::int64_t out = (in + w.s - 1) / w.s;
            const std::int64_t sum = std::max<std::int64_t>((out - 1) * w.s + k - in, 0);
            w.p0 = sum / 2;
            w.p1 = sum - w.p0;
        }
    } else if (alg == "EXPLICIT") {
        w.p0 = p.size() == 2 ? p[static_cast<std::size_t>(i)] : p[static_cast<std::size_t>(2 * i)];
        w.p1 = p.size() == 2 ? p[static_cast<std::size_t>(i)] : p[static_cast<std::size_t>(2 * i + 1)];
    }
    if (in >= 0) {
        // Paddle's division truncates toward zero: a window past the padded
        // input by less than a stride still gives one output (the kernels
        // clip it); a larger overhang gives none, an error.
        const std::int64_t span = in + w.p0 + w.p1 - (w.d * (k - 1) + 1);
        w.out = std::max<std::int64_t>((a.ceil_mode ? (span + w.s - 1) / w.s : span / w.s) + 1, 0);
    }
    return w;
}

// "the window of 5 (dilated: 9) is larger than the padded input of 4"-style text for an axis with no output.
inline std::string window_too_large(const char* axis, const window_axis& w) {
    const std::int64_t eff = w.d * (w.k - 1) + 1;
    return std::string("along ") + axis + " the window of " + std::to_string(w.k) +
           (w.d > 1 ? " (dilated: " + std::to_string(eff) + ")" : "") + " is larger than the padded input of " +
           std::to_string(w.in + w.p0 + w.p1) + " (" + std::to_string(w.in) + " + paddings " + std::to_string(w.p0) +
           ", " + std::to_string(w.p1) + ")";
}

// The kernel core's window for one image's channels (rows h, columns w).
inline kernels::window2d window_of(std::int64_t channels, const window_axis& h, const window_axis& w) {
    kernels::window2d g;
    g.c = channels;
    g.h = h.in;
    g.w = w.in;
    g.kh = h.k;
    g.kw = w.k;
    g.oh = h.out;
    g.ow = w.out;
    g.sh = h.s;
    g.sw = w.s;
    g.pt = h.p0;
    g.pl = w.p0;
    g.pb = h.p1;
    g.pr = w.p1;
    g.dh = h.d;
    g.dw = w.d;
    return g;
}

// data_format: NCHW (or AnyLayout, which Paddle reads as NCHW) or NHWC
// (channels last). The kernels see an NHWC tensor as the NCHW one it
// transposes to (as_nchw), and write their result back in NHWC.
inline void check_layout(const InferContext& c, const std::string& format, const char* attr = "data_format") {
    if (format == "NCHW" || format == "AnyLayout" || format == "NHWC") return;
    c.fail("dlgraph.shape.layout", std::string(attr) + " must be NCHW or NHWC, not '" + format + "'");
}
inline bool channels_last(const std::string& format) { return format == "NHWC"; }
// An [N, H, W, C] shape as the [N, C, H, W] it transposes to, and back.
inline Shape as_nchw(const Shape& s, bool nhwc) { return nhwc && s.rank() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s; }
inline Shape from_nchw(const Shape& s, bool nhwc) { return nhwc && s.rank() == 4 ? Shape{s[0], s[2], s[3], s[1]} : s; }

// ---- conv2d, depthwise_conv2d ------------------------------------------------------------------

// Input [N, C, H, W], Filter [M, C / groups, kh, kw] -> Output [N, M, oh, ow]
// (data_format NHWC: Input [N, H, W, C] -> Output [N, oh, ow, M]).
struct conv2d_op {
    enum { Input = 0, Filter = 1 };
    enum { strides = 0, paddings = 1, padding_algorithm = 2, groups = 3, dilations = 4, data_format = 5 };

    static window_attrs attrs_of(const Attribute* a) {
        return {&a[strides].ints, &a[paddings].ints, &a[dilations].ints, &a[padding_algorithm].s, false};
    }
    // Rows and columns of a checked conv (inference has passed).
    static std::pair<window_axis, window_axis> axes(const Attribute* a, const Shape& x, const Shape& f) {
        const window_attrs wa = attrs_of(a);
        return {window_axis_of(wa, 0, x[2], f[2]), window_axis_of(wa, 1, x[3], f[3])};
    }

    // Whether Input and Output are NHWC (Filter is [M, C/groups, kh, kw] either way, as Paddle's).
    static bool nhwc(const Attribute* a) { return channels_last(a[data_format].s); }

    static void infer(const InferContext& c) {
        c.dtype_in(Input, {DataType::FP32, DataType::FP64});
        c.same_dtype({Input, Filter});
        check_layout(c, c.attr(data_format).s);
        const bool cl = nhwc(&c.attr(0));
        const Shape xs = as_nchw(c.shape(Input), cl);
        const Shape& fs = c.shape(Filter);
        const std::string both = "Input is " + to_string(c.shape(Input)) + " and Filter is " + to_string(fs);
        if (xs.rank() != 4 || fs.rank() != 4)
            c.fail("dlgraph.shape.conv", both + ": both must have rank 4 (Input " +
                                             (cl ? "[N, H, W, C]" : "[N, C, H, W]") + ", Filter [M, C/groups, kh, kw])");
        const std::int64_t g = c.attr(groups).i;
        if (g < 1) c.fail("dlgraph.shape.conv", "groups must be at least 1, not " + std::to_string(g));
        const window_attrs wa = attrs_of(&c.attr(0));
        if (const std::string e = window_attrs_error(wa); !e.empty()) c.fail("dlgraph.shape.conv", e);
        for (int i = 0; i < 4; ++i)
            if (fs[i] == 0 || (i >= 2 && fs[i] < 0))
                c.fail("dlgraph.shape.conv", both + ": the Filter's dims must be known and positive");
        if (fs[0] > 0 && fs[0] % g != 0)
            c.fail("dlgraph.shape.conv", both + ": the " + std::to_string(fs[0]) +
                                             " output channels do not divide into " + std::to_string(g) + " groups");
        if (xs[1] >= 0 && fs[1] >= 0 && xs[1] != fs[1] * g)
            c.fail("dlgraph.shape.conv", both + ": Input's " + std::to_string(xs[1]) + " channels must be Filter's " +
                                             std::to_string(fs[1]) + " per group times groups " + std::to_string(g) +
                                             " = " + std::to_string(fs[1] * g));
        const window_axis h = window_axis_of(wa, 0, xs[2], fs[2]), w = window_axis_of(wa, 1, xs[3], fs[3]);
        if (h.out == 0) c.fail("dlgraph.shape.conv", both + ": " + window_too_large("H", h));
        if (w.out == 0) c.fail("dlgraph.shape.conv", both + ": " + window_too_large("W", w));
        c.set(0, c.dtype(Input), from_nchw(Shape{xs[0], fs[0], h.out, w.out}, cl));
    }
};

// depthwise_conv2d: conv2d with groups equal to the input channels (each
// channel convolved with its own filters, M a multiple of C).
struct depthwise_conv2d_op : conv2d_op {
    static void infer(const InferContext& c) {
        const Shape xs = as_nchw(c.shape(Input), nhwc(&c.attr(0)));
        if (xs.rank() == 4 && xs[1] >= 0 && c.attr(groups).i != xs[1])
            c.fail("dlgraph.shape.conv", "depthwise_conv2d needs groups equal to Input's channels (" +
                                             std::to_string(xs[1]) + "), not " + std::to_string(c.attr(groups).i));
        conv2d_op::infer(c);
    }
};

inline std::vector<AttrDef> conv2d_attrs() {
    return {{"strides", Attribute::make_ints("strides", {1, 1})},
            {"paddings", Attribute::make_ints("paddings", {0, 0})},
            {"padding_algorithm", Attribute::make_string("padding_algorithm", "EXPLICIT")},
            {"groups", Attribute::make_int("groups", 1)},
            {"dilations", Attribute::make_ints("dilations", {1, 1})},
            {"data_format", Attribute::make_string("data_format", "NCHW")}};
}

// The grad op `type` of a conv: Input, Filter, Output@GRAD -> the wanted
// gradients (Output itself is not read).
inline std::vector<OpDesc> conv_grad_ops(const GradRequest& r, const char* type) {
    const std::string dx = r.grad_name("Input", 0), df = r.grad_name("Filter", 0);
    if (dx.empty() && df.empty()) return {};
    OpDesc g;
    g.type = type;
    g.set_input("Input", r.fwd.input("Input")->arguments)
        .set_input("Filter", r.fwd.input("Filter")->arguments)
        .set_input("Output@GRAD", {r.out_grad("Output", 0)});
    if (!dx.empty()) g.set_output("Input@GRAD", {dx});
    if (!df.empty()) g.set_output("Filter@GRAD", {df});
    g.attrs = r.fwd.attrs;
    return {g};
}

inline OpDef conv2d_def() {
    OpDef d{"conv2d", {{"Input"}, {"Filter"}}, {{"Output"}}, conv2d_attrs(), &conv2d_op::infer};
    d.doc = "Output = Input (*) Filter: 2-D cross-correlation, NCHW or NHWC, with strides, paddings, dilations and groups";
    d.grad_maker = [](const GradRequest& r) { return conv_grad_ops(r, "conv2d_grad"); };
    d.host_only_with = &conv2d_op::nhwc;  // the CUDA kernels take NCHW
    return d;
}

inline OpDef depthwise_conv2d_def() {
    OpDef d{"depthwise_conv2d", {{"Input"}, {"Filter"}}, {{"Output"}}, conv2d_attrs(), &depthwise_conv2d_op::infer};
    d.doc = "conv2d with groups = Input's channels";
    d.grad_maker = [](const GradRequest& r) { return conv_grad_ops(r, "depthwise_conv2d_grad"); };
    d.host_only_with = &conv2d_op::nhwc;
    return d;
}

// Input, Filter, Output@GRAD -> Input@GRAD, Filter@GRAD (each when wanted).
struct conv2d_grad_op {
    enum { Input = 0, Filter = 1, DOutput = 2 };
    enum { DInput = 0, DFilter = 1 };
    static void infer(const InferContext& c) {
        // The forward op's checks, on a context whose output is a scratch meta.
        VarMeta out;
        VarMeta* outs[] = {&out};
        const std::uint32_t off[] = {0, 1};
        const VarMeta* ins[] = {&c.in(Input), &c.in(Filter)};
        const std::uint32_t in_off[] = {0, 1, 2};
        conv2d_op::infer(InferContext(c.def(), c.label(), {ins, in_off}, {outs, off}, &c.attr(0)));
        const Shape& ds = c.shape(DOutput);
        bool ok = ds.rank() == 4;
        for (int i = 0; ok && i < 4; ++i) ok = dims_agree(ds[i], out.shape[i]);
        if (!ok)
            c.fail("dlgraph.shape.grad", "Output@GRAD is " + to_string(ds) + " but the forward Output is " +
                                             to_string(out.shape));
        c.same_dtype({Input, Filter, DOutput});
        if (c.out_count(DInput)) c.set(DInput, c.dtype(Input), c.shape(Input));
        if (c.out_count(DFilter)) c.set(DFilter, c.dtype(Filter), c.shape(Filter));
    }
};

inline OpDef conv2d_grad_def() {
    OpDef d{"conv2d_grad", {{"Input"}, {"Filter"}, {"Output@GRAD"}},
            {{"Input@GRAD", false, true}, {"Filter@GRAD", false, true}}, conv2d_attrs(), &conv2d_grad_op::infer};
    d.doc = "Input@GRAD and Filter@GRAD of conv2d";
    d.host_only_with = &conv2d_op::nhwc;
    return d;
}

inline OpDef depthwise_conv2d_grad_def() {
    OpDef d{"depthwise_conv2d_grad", {{"Input"}, {"Filter"}, {"Output@GRAD"}},
            {{"Input@GRAD", false, true}, {"Filter@GRAD", false, true}}, conv2d_attrs(), &conv2d_grad_op::infer};
    d.doc = "Input@GRAD and Filter@GRAD of depthwise_conv2d";
    d.host_only_with = &conv2d_op::nhwc;
    return d;
}

// ---- pool2d ----------------------------------------------------------------------------------

// X [N, C, H, W] -> Out [N, C, oh, ow] (NHWC: [N, H, W, C] -> [N, oh, ow, C]):
// the max or the mean of each window.
struct pool2d_op {
    enum { X = 0 };
    enum {
        pooling_type = 0, ksize = 1, global_pooling = 2, strides = 3, paddings = 4, exclusive = 5, adaptive = 6,
        ceil_mode = 7, data_format = 8, padding_algorithm = 9
    };

    // Rows and columns for X's shape: global pooling takes the whole
    // image; global and adaptive pooling pad nothing; adaptive pooling's
    // output is ksize.
    static std::pair<window_axis, window_axis> axes(const Attribute* a, const Shape& x) {
        const bool global = a[global_pooling].b, adapt = a[adaptive].b;
        static const std::vector<std::int64_t> no_pad{0, 0};
        static const std::string explicit_alg = "EXPLICIT";
        const window_attrs wa{&a[strides].ints, global || adapt ? &no_pad : &a[paddings].ints, nullptr,
                              global || adapt ? &explicit_alg : &a[padding_algorithm].s, a[ceil_mode].b};
        const auto& k = a[ksize].ints;
        window_axis h = window_axis_of(wa, 0, x[2], global ? x[2] : k[0]);
        window_axis w = window_axis_of(wa, 1, x[3], global ? x[3] : k[1]);
        if (adapt) {
            h.out = global ? x[2] : k[0];
            w.out = global ? x[3] : k[1];
        }
        return {h, w};
    }

    static bool nhwc(const Attribute* a) { return channels_last(a[data_format].s); }

    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        check_layout(c, c.attr(data_format).s);
        const std::string& type = c.attr(pooling_type).s;
        if (type != "max" && type != "avg") c.fail("dlgraph.shape.pool", "pooling_type must be max or avg, not '" + type + "'");
        const bool cl = nhwc(&c.attr(0));
        const Shape xs = as_nchw(c.shape(X), cl);
        if (xs.rank() != 4)
            c.fail("dlgraph.shape.pool", "X is " + to_string(c.shape(X)) + ": it must have rank 4 (" +
                                             (cl ? "[N, H, W, C]" : "[N, C, H, W]") + ")");
        const auto& k = c.attr(ksize).ints;
        if (k.size() != 2) c.fail("dlgraph.shape.pool", "ksize must have 2 values, not " + ints_text(k));
        for (auto v : k)
            if (v <= 0 || v > INT32_MAX) c.fail("dlgraph.shape.pool", "ksize must be positive int32 values: " + ints_text(k));
        const window_attrs wa{&c.attr(strides).ints, &c.attr(paddings).ints, nullptr, &c.attr(padding_algorithm).s,
                              c.attr(ceil_mode).b};
        if (const std::string e = window_attrs_error(wa); !e.empty()) c.fail("dlgraph.shape.pool", e);
        const auto [h, w] = axes(&c.attr(0), xs);
        const std::string x_is = "X is " + to_string(c.shape(X)) + ", ksize " + ints_text(k);
        if (h.out == 0) c.fail("dlgraph.shape.pool", x_is + ": " + window_too_large("H", h));
        if (w.out == 0) c.fail("dlgraph.shape.pool", x_is + ": " + window_too_large("W", w));
        c.set(0, c.dtype(X), from_nchw(Shape{xs[0], xs[1], h.out, w.out}, cl));
    }
};

inline std::vector<AttrDef> pool2d_attrs() {
    return {{"pooling_type", Attribute::make_string("pooling_type", "max"), true},
            {"ksize", Attribute::make_ints("ksize", {}), true},
            {"global_pooling", Attribute::make_bool("global_pooling", false)},
            {"strides", Attribute::make_ints("strides", {1, 1})},
            {"paddings", Attribute::make_ints("paddings", {0, 0})},
            {"exclusive", Attribute::make_bool("exclusive", true)},
            {"adaptive", Attribute::make_bool("adaptive", false)},
            {"ceil_mode", Attribute::make_bool("ceil_mode", false)},
            {"data_format", Attribute::make_string("data_format", "NCHW")},
            {"padding_algorithm", Attribute::make_string("padding_algorithm", "EXPLICIT")}};
}

inline OpDef pool2d_def() {
    OpDef d{"pool2d", {{"X"}}, {{"Out"}}, pool2d_attrs(), &pool2d_op::infer};
    d.doc = "Out = max or mean of each window of X (NCHW or NHWC; global, adaptive, ceil_mode, exclusive)";
    d.grad_spec = {"pool2d_grad", {"X"}, {"Out"}, {"X"}};
    d.host_only_with = &pool2d_op::nhwc;
    return d;
}

// X, Out, Out@GRAD -> X@GRAD.
struct pool2d_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        VarMeta out;
        VarMeta* outs[] = {&out};
        const std::uint32_t off[] = {0, 1};
        const VarMeta* ins[] = {&c.in(X)};
        const std::uint32_t in_off[] = {0, 1};
        pool2d_op::infer(InferContext(c.def(), c.label(), {ins, in_off}, {outs, off}, &c.attr(0)));
        c.same_dtype({X, Out, DOut});
        for (int slot : {static_cast<int>(Out), static_cast<int>(DOut)}) {
            const Shape& s = c.shape(slot);
            bool ok = s.rank() == 4;
            for (int i = 0; ok && i < 4; ++i) ok = dims_agree(s[i], out.shape[i]);
            if (!ok)
                c.fail("dlgraph.shape.grad", c.slot_name(slot) + " is " + to_string(s) + " but the forward Out is " +
                                                 to_string(out.shape));
        }
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline OpDef pool2d_grad_def() {
    OpDef d{"pool2d_grad", {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, pool2d_attrs(), &pool2d_grad_op::infer};
    d.doc = "X@GRAD of pool2d (max: to the first input equal to the max)";
    d.host_only_with = &pool2d_op::nhwc;
    return d;
}

// ---- flatten_contiguous_range ------------------------------------------------------------------

// X -> Out with dims [start_axis, stop_axis] merged into one; XShape
// (optional) is [0, X's dims...], a shape without elements for the gradient.
struct flatten_contiguous_range_op {
    enum { X = 0 };
    enum { Out = 0, XShape = 1 };
    enum { start_axis = 0, stop_axis = 1 };
    static void infer(const InferContext& c) {
        const Shape& xs = c.shape(X);
        const int r = std::max(xs.rank(), 1);
        const std::int64_t a0 = c.attr(start_axis).i, a1 = c.attr(stop_axis).i;
        const std::int64_t s0 = a0 < 0 ? a0 + r : a0, s1 = a1 < 0 ? a1 + r : a1;
        const std::string what = "start_axis " + std::to_string(a0) + " and stop_axis " + std::to_string(a1) +
                                 " for X of shape " + to_string(xs);
        if (s0 < 0 || s0 >= r || s1 < 0 || s1 >= r)
            c.fail("dlgraph.shape.flatten", what + ": axes must be in [" + std::to_string(-r) + ", " +
                                                std::to_string(r) + ")");
        if (s1 < s0) c.fail("dlgraph.shape.flatten", what + ": stop_axis comes before start_axis");
        Shape out;
        if (xs.rank() == 0) out.push_back(1);
        for (int i = 0; i < xs.rank(); ++i) {
            if (i <= s0 || i > s1) {
                out.push_back(xs[i]);
                continue;
            }
            const std::int64_t last = out[out.rank() - 1];
            out[out.rank() - 1] = last < 0 || xs[i] < 0 ? -1 : dim_mul(c, last, xs[i], "the merged dims of " + to_string(xs));
        }
        c.set(Out, c.dtype(X), out);
        if (c.out_count(XShape)) {
            Shape xshape{0};
            for (int i = 0; i < xs.rank(); ++i) xshape.push_back(xs[i]);
            c.set(XShape, c.dtype(X), xshape);
        }
    }
};

inline OpDef flatten_contiguous_range_def() {
    OpDef d{"flatten_contiguous_range", {{"X"}}, {{"Out"}, {"XShape", false, true}},
            {{"start_axis", Attribute::make_int("start_axis", 1)}, {"stop_axis", Attribute::make_int("stop_axis", 1)}},
            &flatten_contiguous_range_op::infer};
    d.doc = "Out = X with dims start_axis..stop_axis merged";
    // The gradient reads XShape (Paddle's); a program whose op has none
    // gets reshape_grad, which reads X.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        const auto* xshape = r.fwd.output("XShape");
        if (xshape && !xshape->arguments.empty()) {
            g.type = "flatten_contiguous_range_grad";
            g.set_input("XShape", xshape->arguments);
        } else {
            g.type = "reshape_grad";
            g.set_input("X", r.fwd.input("X")->arguments);
        }
        g.set_input("Out@GRAD", {r.out_grad("Out", 0)}).set_output("X@GRAD", {dx});
        return {g};
    };
    return d;
}

// XShape, Out@GRAD -> X@GRAD: Out@GRAD's elements with XShape's dims after the first.
struct flatten_contiguous_range_grad_op {
    enum { XShape = 0, DOut = 1 };
    static void infer(const InferContext& c) {
        const Shape& xs = c.shape(XShape);
        if (xs.rank() == 0 || xs[0] != 0)
            c.fail("dlgraph.shape.flatten", "XShape is " + to_string(xs) + ": it must be [0, X's dims...]");
        Shape x;
        for (int i = 1; i < xs.rank(); ++i) x.push_back(xs[i]);
        if (c.dtype(XShape) != c.dtype(DOut))
            c.fail_type("XShape is " + to_string(c.dtype(XShape)) + " but Out@GRAD is " + to_string(c.dtype(DOut)));
        const std::int64_t nx = x.numel(), nd = c.shape(DOut).numel();
        if (nx >= 0 && nd >= 0 && nx != nd)
            c.fail("dlgraph.shape.grad", "X is " + to_string(x) + " but Out@GRAD is " + to_string(c.shape(DOut)) +
                                             ": element counts differ");
        c.set(0, c.dtype(DOut), x);
    }
};

inline OpDef flatten_contiguous_range_grad_def() {
    OpDef d{"flatten_contiguous_range_grad", {{"XShape"}, {"Out@GRAD"}}, {{"X@GRAD"}},
            {{"start_axis", Attribute::make_int("start_axis", 1)}, {"stop_axis", Attribute::make_int("stop_axis", 1)}},
            &flatten_contiguous_range_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD with the dims of XShape after its first";
    d.kernel_slot = flatten_contiguous_range_grad_op::DOut;
    return d;
}

}  // namespace dlgraph::ops
