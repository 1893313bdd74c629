// Element-wise ops, their definitions: binary ops with NumPy or
// Paddle-axis broadcasting, unary math, scale and assign, and their
// gradients. The math is in kernels/elementwise.hpp (the kernel core), the
// CPU kernels in cpu/elementwise.hpp.
#pragma once

#include <string>
#include <vector>

#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/op.hpp"

namespace dlgraph::ops {

// The Y shape padded to X's rank as Paddle's `axis` places it; axis -1 means
// NumPy alignment (trailing dims), with X padded instead when Y is longer.
inline void align_shapes(const Shape& x, const Shape& y, std::int64_t axis, Shape& xa, Shape& ya, bool& ok) {
    std::int64_t a[kernels::max_rank], b[kernels::max_rank];
    int r = 0;
    ok = kernels::align_dims(x.begin(), x.rank(), y.begin(), y.rank(), axis, a, b, r);
    xa = ok ? Shape(std::span<const std::int64_t>(a, static_cast<std::size_t>(r))) : Shape();
    ya = ok ? Shape(std::span<const std::int64_t>(b, static_cast<std::size_t>(r))) : Shape();
}

inline Shape broadcast_infer(const InferContext& c, const Shape& x, const Shape& y, std::int64_t axis) {
    Shape xa, ya;
    bool ok;
    align_shapes(x, y, axis, xa, ya, ok);
    auto fail = [&](const std::string& why) {
        c.fail("dlgraph.shape.broadcast", "X is " + to_string(x) + " but Y is " + to_string(y) + " (axis " +
                                              std::to_string(axis) + "): " + why);
    };
    if (!ok) fail("Y does not fit into X at that axis");
    Shape out;
    for (int i = 0; i < xa.rank(); ++i) {
        auto a = xa[i], b = ya[i];
        std::int64_t d = 0;
        if (a == b) d = a;
        else if (a == 1) d = b;
        else if (b == 1) d = a;
        else if (a == -1) d = b;
        else if (b == -1) d = a;
        else { fail("dim " + std::to_string(i) + " is " + std::to_string(a) + " vs " + std::to_string(b)); }
        out.push_back(d);
    }
    if (axis != -1 && !(out == xa) && x.known() && y.known()) fail("with an axis, only Y is broadcast onto X");
    return out;
}

// A grad op reads its forward op's Out and Out@GRAD: each must have the
// shape the forward op gives Out (`want`, inferred again from the grad op's
// inputs), or the kernel would read past them. Unknown dims agree.
inline void check_grad_shape(const InferContext& c, const Shape& want, int slot, const std::string& name) {
    const Shape& got = c.shape(slot);
    bool ok = got.rank() == want.rank();
    for (int i = 0; ok && i < got.rank(); ++i) ok = got[i] < 0 || want[i] < 0 || got[i] == want[i];
    if (!ok)
        c.fail("dlgraph.shape.grad", name + " is " + to_string(got) + " but the forward op's Out is " + to_string(want));
}

// ---- binary ops ---------------------------------------------------------------

// Whether the gradient of binary op Fn reads Out (div's and pow's d/dY do).
template <class Fn> inline constexpr bool binary_grad_reads_out = Fn::grad_reads_out;

template <class Fn> struct elementwise_binary {
    enum { X = 0, Y = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, Y});
        c.set(0, c.dtype(X), broadcast_infer(c, c.shape(X), c.shape(Y), c.attr(axis).i));
    }
    static OpDef make(std::string_view type, std::string_view grad_type, std::string_view doc) {
        OpDef d{type, {{"X"}, {"Y"}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", -1)}}, &infer};
        d.doc = doc;
        // Only div's and pow's gradients read Out; the others take Out@GRAD alone, so
        // Out may die with the forward pass (and `relu(h + b)` fuses in training).
        if (binary_grad_reads_out<Fn>) d.grad_spec = {grad_type, {"X", "Y"}, {"Out"}, {"X", "Y"}};
        else d.grad_spec = {grad_type, {"X", "Y"}, {}, {"X", "Y"}, {"Out"}};
        return d;
    }
};

// The grad op of a binary op: X, Y, Out, Out@GRAD -> X@GRAD, Y@GRAD (each
// optional). Out is optional where the gradient does not read it.
struct elementwise_binary_grad {
    enum { X = 0, Y = 1, Out = 2, DOut = 3 };
    enum { DX = 0, DY = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        if (c.in_count(Out)) c.same_dtype({X, Y, Out, DOut});
        else c.same_dtype({X, Y, DOut});
        const Shape out = broadcast_infer(c, c.shape(X), c.shape(Y), c.attr(axis).i);
        if (c.in_count(Out)) check_grad_shape(c, out, Out, "Out");
        check_grad_shape(c, out, DOut, "Out@GRAD");
        if (c.out_count(DX)) c.set(DX, c.dtype(X), c.shape(X));
        if (c.out_count(DY)) c.set(DY, c.dtype(Y), c.shape(Y));
    }
    static OpDef make(std::string_view type, bool out_optional) {
        OpDef d{type, {{"X"}, {"Y"}, {"Out", false, out_optional}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
                {{"axis", Attribute::make_int("axis", -1)}}, &infer};
        d.doc = "X@GRAD, Y@GRAD of a broadcasting binary op";
        return d;
    }
};

inline OpDef elementwise_add_def() { return elementwise_binary<kernels::add_fn>::make("elementwise_add", "elementwise_add_grad", "Out = X + Y"); }
inline OpDef elementwise_sub_def() { return elementwise_binary<kernels::sub_fn>::make("elementwise_sub", "elementwise_sub_grad", "Out = X - Y"); }
inline OpDef elementwise_mul_def() { return elementwise_binary<kernels::mul_fn>::make("elementwise_mul", "elementwise_mul_grad", "Out = X * Y"); }
inline OpDef elementwise_div_def() {
    OpDef d = elementwise_binary<kernels::div_fn>::make("elementwise_div", "elementwise_div_grad", "Out = X / Y");
    d.may_fail = true;  // an integer divisor of zero
    return d;
}
inline OpDef elementwise_max_def() { return elementwise_binary<kernels::max_fn>::make("elementwise_max", "elementwise_max_grad", "Out = max(X, Y)"); }
inline OpDef elementwise_min_def() { return elementwise_binary<kernels::min_fn>::make("elementwise_min", "elementwise_min_grad", "Out = min(X, Y)"); }
// No gradient, as in Paddle; an integer divisor of zero is an error.
inline OpDef elementwise_mod_def() {
    OpDef d = elementwise_binary<kernels::mod_fn>::make("elementwise_mod", "", "Out = X mod Y (the sign of Y)");
    d.grad_spec = {};
    d.may_fail = true;
    return d;
}
inline OpDef elementwise_floordiv_def() {
    OpDef d = elementwise_binary<kernels::floordiv_fn>::make("elementwise_floordiv", "", "Out = floor(X / Y)");
    d.grad_spec = {};
    d.may_fail = true;
    return d;
}
inline OpDef elementwise_pow_def() { return elementwise_binary<kernels::pow_fn>::make("elementwise_pow", "elementwise_pow_grad", "Out = X ^ Y"); }

// ---- unary ops ------------------------------------------------------------------

// Same shape and dtype as X.
inline void same_as_x_infer(const InferContext& c) { c.set(0, c.dtype(0), c.shape(0)); }

// A unary op whose math is Fn. Its gradient reads X or Out (Fn's
// grad_reads_out), as Paddle's grad ops do: a gradient of Out alone (relu's)
// is not passed X, which then dies with the forward pass (a `relu(h + b)`
// chain fuses in training too).
// `attrs`: its attributes, which its grad op takes too.
template <class Fn>
OpDef elementwise_unary_def(std::string_view type, std::string_view grad_type, std::string_view doc,
                            std::vector<AttrDef> attrs = {}) {
    OpDef d{type, {{"X"}}, {{"Out"}}, std::move(attrs), &same_as_x_infer};
    d.doc = doc;
    if (Fn::grad_reads_out) d.grad_spec = {grad_type, {}, {"Out"}, {"X"}};
    else d.grad_spec = {grad_type, {"X"}, {"Out"}, {"X"}};
    return d;
}

// The grad op of a unary op: X, Out, Out@GRAD -> X@GRAD. X is optional
// for a gradient that reads only Out (then X@GRAD takes Out's shape).
struct elementwise_unary_grad {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        const int ref = c.in_count(X) ? X : Out;
        if (ref == X) c.same_dtype({X, Out, DOut});
        else c.same_dtype({Out, DOut});
        if (ref == X) check_grad_shape(c, c.shape(X), Out, "Out");
        check_grad_shape(c, c.shape(ref), DOut, "Out@GRAD");
        c.set(0, c.dtype(ref), c.shape(ref));
    }
    static OpDef make(std::string_view type, bool x_optional = false, std::vector<AttrDef> attrs = {}) {
        OpDef d{type, {{"X", false, x_optional}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, std::move(attrs), &infer};
        d.kernel_slot = DOut;
        d.doc = "X@GRAD = Out@GRAD * d(Out)/d(X)";
        return d;
    }
};

inline OpDef relu_def() { return elementwise_unary_def<kernels::relu_fn>("relu", "relu_grad", "Out = max(X, 0)"); }
inline OpDef sigmoid_def() { return elementwise_unary_def<kernels::sigmoid_fn>("sigmoid", "sigmoid_grad", "Out = 1 / (1 + exp(-X))"); }
inline OpDef tanh_def() { return elementwise_unary_def<kernels::tanh_fn>("tanh", "tanh_grad", "Out = tanh(X)"); }
inline OpDef exp_def() { return elementwise_unary_def<kernels::exp_fn>("exp", "exp_grad", "Out = exp(X)"); }
inline OpDef log_def() { return elementwise_unary_def<kernels::log_fn>("log", "log_grad", "Out = ln(X)"); }
inline OpDef sqrt_def() { return elementwise_unary_def<kernels::sqrt_fn>("sqrt", "sqrt_grad", "Out = sqrt(X)"); }
inline OpDef abs_def() { return elementwise_unary_def<kernels::abs_fn>("abs", "abs_grad", "Out = |X|"); }
inline OpDef square_def() { return elementwise_unary_def<kernels::square_fn>("square", "square_grad", "Out = X * X"); }

inline OpDef softsign_def() { return elementwise_unary_def<kernels::softsign_fn>("softsign", "softsign_grad", "Out = X / (1 + |X|)"); }
inline OpDef sin_def() { return elementwise_unary_def<kernels::sin_fn>("sin", "sin_grad", "Out = sin(X)"); }
inline OpDef cos_def() { return elementwise_unary_def<kernels::cos_fn>("cos", "cos_grad", "Out = cos(X)"); }
inline OpDef reciprocal_def() {
    return elementwise_unary_def<kernels::reciprocal_fn>("reciprocal", "reciprocal_grad", "Out = 1 / X");
}
inline OpDef rsqrt_def() { return elementwise_unary_def<kernels::rsqrt_fn>("rsqrt", "rsqrt_grad", "Out = 1 / sqrt(X)"); }
inline OpDef floor_def() {
    return elementwise_unary_def<kernels::floor_fn>("floor", "floor_grad", "Out = floor(X) (gradient 0)");
}
inline OpDef ceil_def() { return elementwise_unary_def<kernels::ceil_fn>("ceil", "ceil_grad", "Out = ceil(X) (gradient 0)"); }
inline OpDef round_def() {
    return elementwise_unary_def<kernels::round_fn>("round", "round_grad",
                                                    "Out = X rounded, halves away from zero (gradient 0)");
}
inline OpDef sign_def() {
    return elementwise_unary_def<kernels::sign_fn>("sign", "sign_grad", "Out = 1, -1 or X for 0 and NaN (gradient 0)");
}

// ---- activations with attributes (Paddle's names and defaults) ----------------------------

inline AttrDef float_attr(std::string_view name, double v) { return {name, Attribute::make_float(std::string(name), v)}; }

inline std::vector<AttrDef> gelu_attrs() { return {{"approximate", Attribute::make_bool("approximate", false)}}; }
inline std::vector<AttrDef> leaky_relu_attrs() { return {float_attr("alpha", 0.02)}; }
inline std::vector<AttrDef> elu_attrs() { return {float_attr("alpha", 1.0)}; }
inline std::vector<AttrDef> relu6_attrs() { return {float_attr("threshold", 6.0)}; }
inline std::vector<AttrDef> hard_sigmoid_attrs() { return {float_attr("slope", 0.2), float_attr("offset", 0.5)}; }
inline std::vector<AttrDef> hard_swish_attrs() {
    return {float_attr("threshold", 6.0), float_attr("scale", 6.0), float_attr("offset", 3.0)};
}
inline std::vector<AttrDef> softplus_attrs() { return {float_attr("beta", 1.0), float_attr("threshold", 20.0)}; }
inline std::vector<AttrDef> swish_attrs() { return {float_attr("beta", 1.0)}; }
// Paddle's clip requires min and max; the defaults are paddle.clip's (the
// FP32 range). Its optional Min and Max tensor inputs are not supported.
inline std::vector<AttrDef> clip_attrs() {
    return {float_attr("min", -3.4028234663852886e38), float_attr("max", 3.4028234663852886e38)};
}
inline std::vector<AttrDef> pow_attrs() { return {float_attr("factor", 1.0)}; }
// clip and clip_grad: X's shape, with min <= max.
inline void clip_infer(const InferContext& c) {
    const double lo = c.attr(0).f, hi = c.attr(1).f;
    if (!(lo <= hi))
        c.fail("dlgraph.shape.clip", "min " + std::to_string(lo) + " must not exceed max " + std::to_string(hi));
    c.set(0, c.dtype(0), c.shape(0));
}

inline OpDef gelu_def() {
    return elementwise_unary_def<kernels::gelu_fn>("gelu", "gelu_grad",
                                                   "Out = X * Phi(X), Phi the normal CDF (approximate: its tanh form)",
                                                   gelu_attrs());
}
inline OpDef leaky_relu_def() {
    return elementwise_unary_def<kernels::leaky_relu_fn<float>>("leaky_relu", "leaky_relu_grad",
                                                                "Out = X < 0 ? alpha * X : X", leaky_relu_attrs());
}
inline OpDef elu_def() {
    return elementwise_unary_def<kernels::elu_fn<float>>("elu", "elu_grad", "Out = X < 0 ? alpha * (exp(X) - 1) : X",
                                                         elu_attrs());
}
inline OpDef relu6_def() {
    return elementwise_unary_def<kernels::relu6_fn<float>>("relu6", "relu6_grad", "Out = min(max(X, 0), threshold)",
                                                           relu6_attrs());
}
inline OpDef hard_sigmoid_def() {
    return elementwise_unary_def<kernels::hard_sigmoid_fn<float>>(
        "hard_sigmoid", "hard_sigmoid_grad", "Out = min(max(slope * X + offset, 0), 1)", hard_sigmoid_attrs());
}
inline OpDef hard_swish_def() {
    return elementwise_unary_def<kernels::hard_swish_fn<float>>(
        "hard_swish", "hard_swish_grad", "Out = X * min(max(X + offset, 0), threshold) / scale", hard_swish_attrs());
}
inline OpDef softplus_def() {
    return elementwise_unary_def<kernels::softplus_fn<float>>(
        "softplus", "softplus_grad", "Out = log(1 + exp(beta * X)) / beta, or X where beta * X > threshold",
        softplus_attrs());
}
inline OpDef clip_def() {
    OpDef d = elementwise_unary_def<kernels::clip_fn<float>>("clip", "clip_grad", "Out = min(max(X, min), max)",
                                                             clip_attrs());
    d.infer = &clip_infer;
    return d;
}
inline OpDef pow_def() {
    return elementwise_unary_def<kernels::pow_factor_fn<float>>("pow", "pow_grad", "Out = X ^ factor", pow_attrs());
}
inline OpDef swish_def() {
    return elementwise_unary_def<kernels::swish_fn<float>>("swish", "swish_grad", "Out = X * sigmoid(beta * X)",
                                                           swish_attrs());
}

// ---- scale and assign ----------------------------------------------------------------

inline OpDef scale_def() {
    OpDef d{"scale", {{"X"}}, {{"Out"}},
            {{"scale", Attribute::make_float("scale", 1.0)},
             {"bias", Attribute::make_float("bias", 0.0)},
             {"bias_after_scale", Attribute::make_bool("bias_after_scale", true)}},
            &same_as_x_infer};
    d.doc = "Out = scale * X + bias (or scale * (X + bias))";
    // d(scale * X + b)/dX = scale, either bias order: the gradient is a scale.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "scale";
        g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
        const Attribute* sc = r.fwd.attr("scale");
        g.set_attr(Attribute::make_float("scale", sc ? sc->f : 1.0));
        return {g};
    };
    return d;
}

inline OpDef assign_def() {
    OpDef d{"assign", {{"X"}}, {{"Out"}}, {}, &same_as_x_infer};
    d.doc = "Out = X (a copy)";
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "assign";
        g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
        return {g};
    };
    d.in_place = true;  // a copy onto itself copies nothing
    return d;
}

inline OpDef relu_grad_def() { return elementwise_unary_grad::make("relu_grad", kernels::relu_fn::grad_reads_out); }
inline OpDef sigmoid_grad_def() { return elementwise_unary_grad::make("sigmoid_grad", kernels::sigmoid_fn::grad_reads_out); }
inline OpDef tanh_grad_def() { return elementwise_unary_grad::make("tanh_grad", kernels::tanh_fn::grad_reads_out); }
inline OpDef exp_grad_def() { return elementwise_unary_grad::make("exp_grad", kernels::exp_fn::grad_reads_out); }
inline OpDef log_grad_def() { return elementwise_unary_grad::make("log_grad", kernels::log_fn::grad_reads_out); }
inline OpDef sqrt_grad_def() { return elementwise_unary_grad::make("sqrt_grad", kernels::sqrt_fn::grad_reads_out); }
inline OpDef abs_grad_def() { return elementwise_unary_grad::make("abs_grad", kernels::abs_fn::grad_reads_out); }
inline OpDef square_grad_def() { return elementwise_unary_grad::make("square_grad", kernels::square_fn::grad_reads_out); }

inline OpDef softsign_grad_def() { return elementwise_unary_grad::make("softsign_grad", kernels::softsign_fn::grad_reads_out); }
inline OpDef sin_grad_def() { return elementwise_unary_grad::make("sin_grad", kernels::sin_fn::grad_reads_out); }
inline OpDef cos_grad_def() { return elementwise_unary_grad::make("cos_grad", kernels::cos_fn::grad_reads_out); }
inline OpDef reciprocal_grad_def() {
    return elementwise_unary_grad::make("reciprocal_grad", kernels::reciprocal_fn::grad_reads_out);
}
inline OpDef rsqrt_grad_def() { return elementwise_unary_grad::make("rsqrt_grad", kernels::rsqrt_fn::grad_reads_out); }
inline OpDef floor_grad_def() { return elementwise_unary_grad::make("floor_grad", kernels::floor_fn::grad_reads_out); }
inline OpDef ceil_grad_def() { return elementwise_unary_grad::make("ceil_grad", kernels::ceil_fn::grad_reads_out); }
inline OpDef round_grad_def() { return elementwise_unary_grad::make("round_grad", kernels::round_fn::grad_reads_out); }
inline OpDef sign_grad_def() { return elementwise_unary_grad::make("sign_grad", kernels::sign_fn::grad_reads_out); }
inline OpDef gelu_grad_def() {
    return elementwise_unary_grad::make("gelu_grad", kernels::gelu_fn::grad_reads_out, gelu_attrs());
}
inline OpDef leaky_relu_grad_def() {
    return elementwise_unary_grad::make("leaky_relu_grad", kernels::leaky_relu_fn<float>::grad_reads_out,
                                        leaky_relu_attrs());
}
inline OpDef elu_grad_def() {
    return elementwise_unary_grad::make("elu_grad", kernels::elu_fn<float>::grad_reads_out, elu_attrs());
}
inline OpDef relu6_grad_def() {
    return elementwise_unary_grad::make("relu6_grad", kernels::relu6_fn<float>::grad_reads_out, relu6_attrs());
}
inline OpDef hard_sigmoid_grad_def() {
    return elementwise_unary_grad::make("hard_sigmoid_grad", kernels::hard_sigmoid_fn<float>::grad_reads_out,
                                        hard_sigmoid_attrs());
}
inline OpDef hard_swish_grad_def() {
    return elementwise_unary_grad::make("hard_swish_grad", kernels::hard_swish_fn<float>::grad_reads_out,
                                        hard_swish_attrs());
}
inline OpDef softplus_grad_def() {
    return elementwise_unary_grad::make("softplus_grad", kernels::softplus_fn<float>::grad_reads_out,
                                        softplus_attrs());
}
inline OpDef clip_grad_def() {
    return elementwise_unary_grad::make("clip_grad", kernels::clip_fn<float>::grad_reads_out, clip_attrs());
}
inline OpDef pow_grad_def() {
    return elementwise_unary_grad::make("pow_grad", kernels::pow_factor_fn<float>::grad_reads_out, pow_attrs());
}
inline OpDef swish_grad_def() {
    return elementwise_unary_grad::make("swish_grad", kernels::swish_fn<float>::grad_reads_out, swish_attrs());
}

inline OpDef elementwise_add_grad_def() {
    return elementwise_binary_grad::make("elementwise_add_grad", !binary_grad_reads_out<kernels::add_fn>);
}
inline OpDef elementwise_sub_grad_def() {
    return elementwise_binary_grad::make("elementwise_sub_grad", !binary_grad_reads_out<kernels::sub_fn>);
}
inline OpDef elementwise_mul_grad_def() {
    return elementwise_binary_grad::make("elementwise_mul_grad", !binary_grad_reads_out<kernels::mul_fn>);
}
inline OpDef elementwise_div_grad_def() {
    return elementwise_binary_grad::make("elementwise_div_grad", !binary_grad_reads_out<kernels::div_fn>);
}
inline OpDef elementwise_max_grad_def() {
    return elementwise_binary_grad::make("elementwise_max_grad", !binary_grad_reads_out<kernels::max_fn>);
}
inline OpDef elementwise_min_grad_def() {
    return elementwise_binary_grad::make("elementwise_min_grad", !binary_grad_reads_out<kernels::min_fn>);
}
inline OpDef elementwise_pow_grad_def() {
    return elementwise_binary_grad::make("elementwise_pow_grad", !binary_grad_reads_out<kernels::pow_fn>);
}

}  // namespace dlgraph::ops
