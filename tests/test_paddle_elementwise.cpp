// Paddle's OpTest classes for dlgraph's element-wise ops, ported as tables:
// test_elementwise_{add,sub,mul,div,max,min,pow}_op.py (Paddle's `axis`
// included), test_compare_op.py, test_logical_op.py, test_where_op.py,
// test_clip_op.py, test_scale_op.py, test_sum_op.py, test_mean_op.py,
// test_sign_op.py and the element-wise math classes of
// test_activation_op.py (python/paddle/fluid/tests/unittests). One row per
// Paddle class: its shapes, attributes and dtype, inputs drawn as the class
// draws them (np.random.uniform(lo, hi) -> a seeded uniform in [lo, hi),
// np.random.random / rand -> [0, 1)), and the class's own NumPy formula
// computed here in double (NumPy broadcasting of the formula's reshapes),
// compared with dlgraph's output.
//
// Tolerances: integer and BOOL outputs, and floating point ops that are one
// correctly rounded IEEE operation (+ - * /, max, min, sqrt, 1 / x, x * x,
// abs, floor, ceil, round, sign, clip, where, scale without a bias), are
// compared exactly; exp, log, sin, cos and pow (xsimd's or the C library's,
// within an ulp or two of the double reference) within 1e-13 of max(1,
// |want|) in FP64; reductions and sums whose order may differ within 1e-13
// (FP64) or Paddle's check_output atol 1e-5 (FP32).
//
// Gradients: the gradients of these ops are checked by central finite
// differences in test_grad_core.cpp (every binary op, NumPy broadcasting,
// add and div with an axis, exp, log, sqrt, abs, square, scale, mean,
// reduce_mean), test_activations.cpp (sin, cos, reciprocal, rsqrt, floor,
// ceil, round, sign, clip, pow), test_grad_ops.cpp (sum) and test_logic.cpp
// (where). Here: elementwise_div's gradients against the formulas Paddle's
// div classes give as user_defined_grads, and finite differences for a
// class with an axis of sub, mul, max, min and pow, whose gradients with an
// axis nothing else checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "grad_check.hpp"

using namespace dlgraph;

namespace {



// NumPy broadcasting of shapes a and b (right-aligned): the result's shape
// and, for each of its elements in row-major order, the element of a and of
// b it reads.
struct broadcast_map {
    Shape out;
    std::vector<std::size_t> a, b;
};
broadcast_map numpy_broadcast(const Shape& a, const Shape& b) {
    const int r = std::max(a.rank(), b.rank());
    std::vector<std::int64_t> ad(static_cast<std::size_t>(r), 1), bd(static_cast<std::size_t>(r), 1);
    for (int i = 0; i < a.rank(); ++i) ad[static_cast<std::size_t>(r - a.rank() + i)] = a[i];
    for (int i = 0; i < b.rank(); ++i) bd[static_cast<std::size_t>(r - b.rank() + i)] = b[i];
    broadcast_map m;
    for (std::size_t i = 0; i < ad.size(); ++i) {
        REQUIRE_MESSAGE((ad[i] == bd[i] || ad[i] == 1 || bd[i] == 1), "the class's formula does not broadcast");
        m.out.push_back(ad[i] == 1 ? bd[i] : ad[i]);
    }
    const std::int64_t n = m.out.numel();
    for (std::int64_t i = 0; i < n; ++i) {
        const auto idx = unravel(i, m.out);
        std::size_t ia = 0, ib = 0;
        for (std::size_t d = 0; d < idx.size(); ++d) {
            ia = ia * static_cast<std::size_t>(ad[d]) + static_cast<std::size_t>(ad[d] == 1 ? 0 : idx[d]);
            ib = ib * static_cast<std::size_t>(bd[d]) + static_cast<std::size_t>(bd[d] == 1 ? 0 : idx[d]);
        }
        m.a.push_back(ia);
        m.b.push_back(ib);
    }
    return m;
}

std::size_t count(const Shape& s) { return static_cast<std::size_t>(s.numel()); }

// How a class draws an input: np.random.uniform(lo, hi) (np.random.random
// and rand are [0, 1)); integers in [lo, hi] (random_integers(lo, hi),
// randint(lo, hi + 1)); a constant lo; or, for max and min, Y = X's
// matching elements + sign * uniform(lo, hi) with the sign and the uniform
// drawn of shape `noise` (Y's own shape when empty) and broadcast onto Y.
enum class draw { uniform, integers, constant, apart };
struct dist {
    draw kind = draw::uniform;
    double lo = 0, hi = 1;
    Shape noise = {};
};
dist U(double lo, double hi) { return {draw::uniform, lo, hi, {}}; }
dist I(double lo, double hi) { return {draw::integers, lo, hi, {}}; }
dist C(double v) { return {draw::constant, v, v, {}}; }
dist apart(double lo, double hi, Shape noise = {}) { return {draw::apart, lo, hi, noise}; }

std::vector<double> draw_values(const dist& d, std::size_t n, std::mt19937& g) {
    std::vector<double> v(n);
    std::uniform_real_distribution<double> u(d.lo, d.hi);
    std::uniform_int_distribution<std::int64_t> k(static_cast<std::int64_t>(d.lo), static_cast<std::int64_t>(d.hi));
    for (auto& e : v) {
        if (d.kind == draw::uniform) e = u(g);
        else if (d.kind == draw::integers) e = static_cast<double>(k(g));
        else e = d.lo;
    }
    return v;
}

// Y of shape `y_view` (X's rank; each dim X's or 1) drawn apart from X:
// y[idx] = x[idx] + sign * uniform(lo, hi) (TestElementwiseMaxOp's draw).
std::vector<double> draw_apart(const std::vector<double>& x, const Shape& xs, const Shape& y_view, const dist& d,
                               std::mt19937& g) {
    const Shape noise = d.noise.rank() ? d.noise : y_view;
    std::vector<double> sgn(count(noise)), mag(count(noise));
    std::bernoulli_distribution coin(0.5);
    std::uniform_real_distribution<double> u(d.lo, d.hi);
    for (auto& s : sgn) s = coin(g) ? 1.0 : -1.0;
    for (auto& m : mag) m = u(g);
    const auto nb = numpy_broadcast(y_view, noise);
    REQUIRE(nb.out == y_view);
    std::vector<double> y(count(y_view));
    for (std::size_t i = 0; i < y.size(); ++i) {
        const auto idx = unravel(static_cast<std::int64_t>(i), y_view);
        std::size_t xi = 0;
        for (int k = 0; k < xs.rank(); ++k)
            xi = xi * static_cast<std::size_t>(xs[k]) + static_cast<std::size_t>(idx[static_cast<std::size_t>(k)]);
        y[i] = x[xi] + sgn[nb.b[i]] * mag[nb.b[i]];
    }
    return y;
}

template <class T> std::vector<T> as(const std::vector<double>& v) {
    std::vector<T> out;
    for (double e : v) out.push_back(static_cast<T>(e));
    return out;
}

template <class T> Tensor tensor_from(const Shape& s, const std::vector<double>& v) { return tensor_of<T>(s, as<T>(v)); }

// got against want: exactly when tol is 0, else within tol * max(1, |want|);
// the first few misses are named.
template <class G> void check_values(const std::vector<G>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = static_cast<double>(got[i]), w = want[i];
        const bool ok = tol == 0 ? g == w : std::abs(g - w) <= tol * std::max(1.0, std::abs(w));
        if (!ok && bad++ < 5) FAIL_CHECK("element " << i << ": got " << g << ", want " << w);
    }
    CHECK(bad == 0);
}

// ---- the binary element-wise classes ----------------------------------------------------------

using binary_ref = std::function<double(double, double)>;

struct binary_class {
    const char* name;
    Shape x, y;
    int axis = -1;     // the class's attrs['axis'] (-1: none set, Paddle's default)
    Shape y_view = {};  // the class's formula's reshape of Y (empty: Y as drawn)
    Shape x_view = {};  // ... and of X
    dist xd = U(0, 1), yd = U(0, 1);
    DataType dtype = DataType::FP64;
    // Paddle broadcasts X too here; dlgraph refuses the class's axis, since
    // with an axis it broadcasts only Y onto X (see run_binary_classes).
    bool x_broadcast_with_axis = false;
};

// The class's X and Y as drawn (Y from X for `apart`).
struct drawn {
    std::vector<double> x, y;
};
drawn draw_class(const binary_class& c, std::mt19937& g) {
    drawn d;
    d.x = draw_values(c.xd, count(c.x), g);
    if (c.yd.kind == draw::apart) {
        const Shape view = c.y_view.rank() ? c.y_view : c.y;
        REQUIRE(count(view) == count(c.y));
        d.y = draw_apart(d.x, c.x, view, c.yd, g);
    } else {
        d.y = draw_values(c.yd, count(c.y), g);
    }
    if (c.dtype == DataType::FP32 || c.dtype == DataType::INT32 || c.dtype == DataType::INT64) {
        // The inputs as the class's dtype holds them.
        for (auto* v : {&d.x, &d.y})
            for (auto& e : *v)
                e = c.dtype == DataType::FP32 ? static_cast<double>(static_cast<float>(e)) : std::trunc(e);
    }
    return d;
}

template <class T>
void run_binary_as(const char* op, const binary_class& c, const drawn& d, const binary_ref& ref, double tol) {
    Program p;
    auto x = p.input<T>("x", c.x);
    auto y = p.input<T>("y", c.y);
    auto z = apply_op<T>(op, {{"X", x}, {"Y", y}}, {Attribute::make_int("axis", c.axis)});
    const auto m = numpy_broadcast(c.x_view.rank() ? c.x_view : c.x, c.y_view.rank() ? c.y_view : c.y);
    REQUIRE(z.shape() == m.out);
    std::vector<double> want;
    for (std::size_t i = 0; i < m.a.size(); ++i) want.push_back(ref(d.x[m.a[i]], d.y[m.b[i]]));
    Session<cpu> s(p);
    check_values(values_of<T>(s.eval({z}, {{x, tensor_from<T>(c.x, d.x)}, {y, tensor_from<T>(c.y, d.y)}})[0]), want, tol);
}

// Runs every class of a file through op `op` against `ref` (FP64 within
// tol64, integers exactly).
void run_binary_classes(const char* op, const std::vector<binary_class>& classes, const binary_ref& ref, double tol64,
                        unsigned seed) {
    for (binary_class c : classes) {
        INFO(std::string(c.name) << " (" << op << ", axis " << c.axis << ")");
        std::mt19937 g(seed++);
        const drawn d = draw_class(c, g);
        if (c.x_broadcast_with_axis) {
            // Paddle's class expects its axis to broadcast X as well (X of a
            // lower rank placed into Y at the axis, or X's dims of 1 widened);
            // dlgraph refuses that, because with an axis it broadcasts only Y
            // onto X (Paddle 1's definition of `axis`: ops/elementwise.hpp,
            // broadcast_infer; checked in test_elementwise.cpp). With axis -1
            // the same shapes broadcast as the class's formula does.
            Program p;
            auto x = p.input<double>("x", c.x);
            auto y = p.input<double>("y", c.y);
            check_throws<shape_error>(
                [&] { (void)apply_op<double>(op, {{"X", x}, {"Y", y}}, {Attribute::make_int("axis", c.axis)}); },
                {"dlgraph.shape.broadcast", "(axis " + std::to_string(c.axis) + ")", "only Y is broadcast onto X"});
            c.axis = -1;
        }
        switch (c.dtype) {
            case DataType::FP64: run_binary_as<double>(op, c, d, ref, tol64); break;
            case DataType::FP32: run_binary_as<float>(op, c, d, ref, 1e-5); break;
            case DataType::INT32: run_binary_as<std::int32_t>(op, c, d, ref, 0); break;
            case DataType::INT64: run_binary_as<std::int64_t>(op, c, d, ref, 0); break;
            default: FAIL("no such row dtype");
        }
    }
}

xt::xarray<double> xarray_of(const Shape& s, const std::vector<double>& v) {
    xt::xarray<double> a = xt::xarray<double>::from_shape(std::vector<std::size_t>(s.begin(), s.end()));
    std::copy(v.begin(), v.end(), a.begin());
    return a;
}

// Finite differences of `op` with the class's shapes, axis and draws.
void check_grad_of_class(const char* op, const binary_class& c, unsigned seed) {
    INFO(std::string(c.name) << " (" << op << " gradients)");
    std::mt19937 g(seed);
    const drawn d = draw_class(c, g);
    grad_check::check({{"x", xarray_of(c.x, d.x)}, {"y", xarray_of(c.y, d.y)}}, [&](Program&, const std::vector<Var<double>>& v) {
        return apply_op<double>(op, {{"X", v[0]}, {"Y", v[1]}}, {Attribute::make_int("axis", c.axis)});
    });
}

}  // namespace

TEST_CASE("Paddle's test_elementwise_add_op.py classes") {
    // TestElementwiseAddOp: float64, uniform(0.1, 1); the others np.random.rand.
    const std::vector<binary_class> classes = {
        {.name = "TestElementwiseAddOp", .x = {13, 17}, .y = {13, 17}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwiseAddOp_scalar", .x = {2, 3, 4}, .y = {1}},
        {.name = "TestElementwiseAddOp_scalar2", .x = {2, 3, 4}, .y = {1, 1}},
        {.name = "TestElementwiseAddOp_Vector", .x = {100}, .y = {100}},
        {.name = "TestElementwiseAddOp_broadcast_0", .x = {100, 2, 3}, .y = {100}, .axis = 0, .y_view = {100, 1, 1}},
        {.name = "TestElementwiseAddOp_broadcast_1", .x = {2, 100, 3}, .y = {100}, .axis = 1, .y_view = {1, 100, 1}},
        {.name = "TestElementwiseAddOp_broadcast_2", .x = {2, 3, 100}, .y = {100}, .y_view = {1, 1, 100}},
        {.name = "TestElementwiseAddOp_broadcast_3", .x = {2, 10, 12, 1}, .y = {10, 12}, .axis = 1, .y_view = {1, 10, 12, 1}},
        {.name = "TestElementwiseAddOp_broadcast_4", .x = {100, 2, 1, 2}, .y = {100, 1}, .axis = 0, .y_view = {100, 1, 1, 1}},
        {.name = "TestElementwiseAddOp_broadcast_5", .x = {10, 3, 12}, .y = {10, 1, 12}},
        {.name = "TestElementwiseAddOp_broadcast_6", .x = {2, 12, 3, 5}, .y = {2, 12, 1, 5}},
        {.name = "TestElementwiseAddOp_broadcast_7", .x = {1, 1, 20, 5}, .y = {20, 5, 1, 1}},
        {.name = "TestElementwiseAddOp_rowwise_add_0", .x = {2, 10, 12}, .y = {10, 12}, .axis = 1, .y_view = {1, 10, 12}},
        {.name = "TestElementwiseAddOp_rowwise_add_1", .x = {100, 1}, .y = {1}, .axis = 1, .y_view = {1, 1}},
        {.name = "TestElementwiseAddOp_channelwise_add", .x = {100, 2, 3}, .y = {100, 1, 1}},
        {.name = "TestElementwiseAddOp_commonuse_add1", .x = {2, 3, 100}, .y = {1, 1, 100}},
        {.name = "TestElementwiseAddOp_commonuse_add2", .x = {10, 3, 1, 4}, .y = {10, 1, 12, 1}},
        // Paddle's axis 2 places X [10, 12] at Y's dims 2 and 3; dlgraph
        // refuses it (x_broadcast_with_axis) and gives the same with axis -1.
        {.name = "TestElementwiseAddOp_xsize_lessthan_ysize_add", .x = {10, 12}, .y = {2, 2, 10, 12}, .axis = 2,
         .x_broadcast_with_axis = true},
        // Paddle broadcasts X [10, 1, 12] with Y [10, 2, 12] under axis 0
        // into [10, 2, 12]; dlgraph refuses the axis, as above.
        {.name = "TestElementwiseAddOp_same_shape_ysize_large", .x = {10, 1, 12}, .y = {10, 2, 12}, .axis = 0,
         .x_broadcast_with_axis = true},
    };
    run_binary_classes("elementwise_add", classes, [](double a, double b) { return a + b; }, 0, 101);

    // Not ported: TestElementwiseAddOp_ZeroDim1-3 (0-D tensors); the FP16 and
    // BF16 classes (TestFP16ElementwiseAddOp*, TestBF16ElementwiseAddOp);
    // TestComplexElementwiseAddOp and TestRealComplexElementwiseAddOp
    // (complex); TestAddApi, TestAddInplaceApi, TestAddInplaceBroadcast*,
    // TestBoolAddFloatElementwiseAddop, TestElementwiseAddop1 (Python API and
    // dygraph).
}

TEST_CASE("Paddle's test_elementwise_sub_op.py classes") {
    const std::vector<binary_class> classes = {
        {.name = "TestElementwiseOp", .x = {2, 3, 4, 5}, .y = {2, 3, 4, 5}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwiseSubOp_scalar", .x = {10, 3, 4}, .y = {1}},
        {.name = "TestElementwiseSubOp_Vector", .x = {100}, .y = {100}},
        {.name = "TestElementwiseSubOp_broadcast_0", .x = {100, 3, 2}, .y = {100, 1, 1}, .axis = 0},
        {.name = "TestElementwiseSubOp_broadcast_1", .x = {2, 100, 3}, .y = {100}, .axis = 1, .y_view = {1, 100, 1}},
        {.name = "TestElementwiseSubOp_broadcast_2", .x = {2, 3, 100}, .y = {1, 1, 100}},
        {.name = "TestElementwiseSubOp_broadcast_3", .x = {2, 10, 12, 3}, .y = {10, 12}, .axis = 1, .y_view = {1, 10, 12, 1}},
        {.name = "TestElementwiseSubOp_broadcast_4", .x = {2, 5, 3, 12}, .y = {2, 5, 1, 12}},
        {.name = "TestElementwiseSubOp_commonuse_1", .x = {2, 3, 100}, .y = {1, 1, 100}},
        {.name = "TestElementwiseSubOp_commonuse_2", .x = {10, 3, 1, 4}, .y = {10, 1, 12, 1}},
        {.name = "TestElementwiseSubOp_xsize_lessthan_ysize", .x = {10, 12}, .y = {2, 3, 10, 12}, .axis = 2,
         .x_view = {1, 1, 10, 12}, .x_broadcast_with_axis = true},
    };
    run_binary_classes("elementwise_sub", classes, [](double a, double b) { return a - b; }, 0, 201);
    // check_grad with an axis (test_grad_core.cpp checks sub's gradients
    // with NumPy broadcasting only).
    check_grad_of_class("elementwise_sub", classes[4], 299);
    // Not ported: TestElementwiseSubOp_ZeroDim1-3 (0-D); TestBF16ElementwiseOp
    // (BF16); TestComplexElementwiseSubOp, TestRealComplexElementwiseSubOp
    // (complex); TestSubtractApi, TestSubtractInplaceApi,
    // TestSubtractInplaceBroadcast*, TestFloatElementwiseSubop* (Python API
    // and dygraph).
}

TEST_CASE("Paddle's test_elementwise_mul_op.py classes") {
    const std::vector<binary_class> classes = {
        {.name = "ElementwiseMulOp", .x = {13, 17}, .y = {13, 17}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwiseMulOp_scalar", .x = {10, 3, 4}, .y = {1}},
        {.name = "TestElementwiseMulOp_Vector", .x = {100}, .y = {100}},
        {.name = "ElementwiseMulOp_broadcast", .x = {13, 17, 1}, .y = {17, 17}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwiseMulOp_broadcast_0", .x = {100, 2, 3}, .y = {100}, .axis = 0, .y_view = {100, 1, 1}},
        {.name = "TestElementwiseMulOp_broadcast_1", .x = {2, 100, 3}, .y = {100}, .axis = 1, .y_view = {1, 100, 1}},
        {.name = "TestElementwiseMulOp_broadcast_2", .x = {2, 3, 100}, .y = {100}, .y_view = {1, 1, 100}},
        {.name = "TestElementwiseMulOp_broadcast_3", .x = {2, 10, 12, 3}, .y = {10, 12}, .axis = 1, .y_view = {1, 10, 12, 1}},
        {.name = "TestElementwiseMulOp_broadcast_4", .x = {10, 2, 11}, .y = {10, 1, 11}},
        {.name = "TestElementwiseMulOp_broadcast_5", .x = {10, 4, 2, 3}, .y = {10, 4, 1, 3}},
        {.name = "TestElementwiseMulOp_commonuse_1", .x = {2, 3, 100}, .y = {1, 1, 100}},
        {.name = "TestElementwiseMulOp_commonuse_2", .x = {30, 3, 1, 5}, .y = {30, 1, 4, 1}},
        {.name = "TestElementwiseMulOp_xsize_lessthan_ysize", .x = {10, 10}, .y = {2, 2, 10, 10}, .axis = 2,
         .x_view = {1, 1, 10, 10}, .x_broadcast_with_axis = true},
    };
    run_binary_classes("elementwise_mul", classes, [](double a, double b) { return a * b; }, 0, 301);
    check_grad_of_class("elementwise_mul", classes[7], 399);
    // Not ported: TestElementwiseMulOp_ZeroDim1-3 (0-D); TestBF16ElementwiseMulOp,
    // TestElementwiseMulOpFp16; TestComplexElementwiseMulOp,
    // TestRealComplexElementwiseMulOp (complex); TestElementwiseMulop (dygraph).
}

TEST_CASE("Paddle's test_elementwise_div_op.py classes") {
    // ElementwiseDivOp's gen_data: uniform(0.1, 1) for X and Y of every class.
    const dist u = U(0.1, 1);
    const std::vector<binary_class> classes = {
        {.name = "ElementwiseDivOp", .x = {13, 17}, .y = {13, 17}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpScalar", .x = {20, 3, 4}, .y = {1}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpVector", .x = {100}, .y = {100}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpBroadcast0", .x = {100, 3, 4}, .y = {100}, .axis = 0, .y_view = {100, 1, 1}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpBroadcast1", .x = {2, 100, 4}, .y = {100}, .axis = 1, .y_view = {1, 100, 1}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpBroadcast2", .x = {2, 3, 100}, .y = {100}, .y_view = {1, 1, 100}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpBroadcast3", .x = {2, 10, 12, 5}, .y = {10, 12}, .axis = 1, .y_view = {1, 10, 12, 1}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpBroadcast4", .x = {2, 3, 50}, .y = {2, 1, 50}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpBroadcast5", .x = {2, 3, 4, 20}, .y = {2, 3, 1, 20}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpCommonuse1", .x = {2, 3, 100}, .y = {1, 1, 100}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpCommonuse2", .x = {30, 3, 1, 5}, .y = {30, 1, 4, 1}, .xd = u, .yd = u},
        {.name = "TestElementwiseDivOpXsizeLessThanYsize", .x = {10, 12}, .y = {2, 3, 10, 12}, .axis = 2, .xd = u, .yd = u,
         .x_broadcast_with_axis = true},
    };
    run_binary_classes("elementwise_div", classes, [](double a, double b) { return a / b; }, 0, 401);
    // TestElementwiseDivOpInt: int32 randint(1, 5), Out = x // y (positive
    // operands: C++'s truncating division agrees).
    run_binary_classes("elementwise_div",
                       {{.name = "TestElementwiseDivOpInt", .x = {13, 17}, .y = {13, 17}, .xd = I(1, 4), .yd = I(1, 4),
                         .dtype = DataType::INT32}},
                       [](double a, double b) { return std::floor(a / b); }, 0, 450);

    // test_check_gradient: Out@GRAD = ones, X@GRAD = Out@GRAD / Y and Y@GRAD
    // = -Out@GRAD * Out / Y, each summed over the dims its input was
    // broadcast along (the classes' compute_gradient_x / _y).
    unsigned seed = 401;
    for (const auto& c : classes) {
        INFO(std::string(c.name) << " (gradients against the class's formulas)");
        std::mt19937 g(seed++);
        const drawn d = draw_class(c, g);
        Program p;
        auto x = p.parameter<double>("x", c.x, init::constant(1));
        auto y = p.parameter<double>("y", c.y, init::constant(1));
        // (XsizeLessThanYsize with axis -1, as above.)
        auto out = elementwise_div(x, y, c.x_broadcast_with_axis ? -1 : c.axis);
        auto grads = append_backward(reduce_sum(out));
        REQUIRE(grads.size() == 2);
        const auto m = numpy_broadcast(c.x_view.rank() ? c.x_view : c.x, c.y_view.rank() ? c.y_view : c.y);
        std::vector<double> dx(d.x.size(), 0.0), dy(d.y.size(), 0.0);
        for (std::size_t i = 0; i < m.a.size(); ++i) {
            const double xv = d.x[m.a[i]], yv = d.y[m.b[i]];
            dx[m.a[i]] += 1.0 / yv;
            dy[m.b[i]] += -1.0 * (xv / yv) / yv;
        }
        Session<cpu> s(p);
        const auto res = s.eval({grads[0].second, grads[1].second},
                                {{"x", tensor_from<double>(c.x, d.x)}, {"y", tensor_from<double>(c.y, d.y)}});
        REQUIRE(grads[0].first.name() == "x");
        // Sums of up to 240 terms in another order: 1e-13 relative.
        check_values(values_of<double>(res[0]), dx, 1e-13);
        check_values(values_of<double>(res[1]), dy, 1e-13);
    }
    // Not ported: TestElementwiseDivOpBF16, TestElementwiseDivOpFp16;
    // TestComplexElementwiseDivOp, TestRealComplexElementwiseDivOp (complex);
    // TestElementwiseDivBroadcast, TestDivideOp (Python API and dygraph).
}

TEST_CASE("Paddle's test_elementwise_max_op.py and test_elementwise_min_op.py classes") {
    // Y = X's matching elements + sign * uniform(...), so X and Y never tie.
    const std::vector<binary_class> maxes = {
        {.name = "TestElementwiseOp", .x = {13, 17}, .y = {13, 17}, .xd = U(0.1, 1), .yd = apart(0.1, 1)},
        {.name = "TestElementwiseMaxOp_scalar", .x = {2, 3, 20}, .y = {1}, .xd = I(-5, 5), .yd = C(0.5)},
        {.name = "TestElementwiseMaxOp_Vector", .x = {100}, .y = {100}, .xd = U(0, 1), .yd = apart(0.1, 1)},
        {.name = "TestElementwiseMaxOp_broadcast_0", .x = {100, 5, 2}, .y = {100}, .axis = 0, .y_view = {100, 1, 1},
         .xd = U(0.5, 1), .yd = apart(1, 2)},
        {.name = "TestElementwiseMaxOp_broadcast_1", .x = {2, 100, 3}, .y = {100}, .axis = 1, .y_view = {1, 100, 1},
         .xd = U(0.5, 1), .yd = apart(1, 2)},
        {.name = "TestElementwiseMaxOp_broadcast_2", .x = {1, 3, 100}, .y = {100}, .y_view = {1, 1, 100}, .xd = U(0.5, 1),
         .yd = apart(1, 2)},
        {.name = "TestElementwiseMaxOp_broadcast_3", .x = {2, 50, 2, 1}, .y = {50, 2}, .axis = 1, .y_view = {1, 50, 2, 1},
         .xd = U(0.5, 1), .yd = apart(1, 2)},
        // Y = X + sign * uniform of shape (2, 3, 1, 5): Y is (2, 3, 4, 5).
        {.name = "TestElementwiseMaxOp_broadcast_4", .x = {2, 3, 4, 5}, .y = {2, 3, 4, 5}, .xd = U(0.5, 1),
         .yd = apart(1, 2, {2, 3, 1, 5})},
    };
    run_binary_classes("elementwise_max", maxes, [](double a, double b) { return std::max(a, b); }, 0, 501);
    check_grad_of_class("elementwise_max", maxes[6], 599);
    // Not ported: TestElementwiseMaxOp_ZeroDim1-3 (0-D), TestElementwiseBF16Op (BF16).

    const std::vector<binary_class> mins = {
        {.name = "TestElementwiseOp", .x = {13, 17}, .y = {13, 17}, .xd = U(0.1, 1), .yd = apart(0.1, 1)},
        {.name = "TestElementwiseMinOp_scalar", .x = {10, 3, 4}, .y = {1}, .xd = I(-5, 5), .yd = C(0.5)},
        {.name = "TestElementwiseMinOp_Vector", .x = {100}, .y = {100}, .xd = U(0, 1), .yd = apart(0.1, 1)},
        {.name = "TestElementwiseMinOp_broadcast_0", .x = {100, 3, 2}, .y = {100}, .axis = 0, .y_view = {100, 1, 1},
         .xd = U(0.5, 1), .yd = apart(1, 2)},
        {.name = "TestElementwiseMinOp_broadcast_1", .x = {2, 100, 3}, .y = {100}, .axis = 1, .y_view = {1, 100, 1},
         .xd = U(0.5, 1), .yd = apart(1, 2)},
        {.name = "TestElementwiseMinOp_broadcast_2", .x = {2, 3, 100}, .y = {100}, .y_view = {1, 1, 100}, .xd = U(0.5, 1),
         .yd = apart(1, 2)},
        {.name = "TestElementwiseMinOp_broadcast_3", .x = {2, 25, 4, 1}, .y = {25, 4}, .axis = 1, .y_view = {1, 25, 4, 1},
         .xd = U(0.5, 1), .yd = apart(1, 2)},
        {.name = "TestElementwiseMinOp_broadcast_4", .x = {2, 10, 2, 5}, .y = {2, 10, 2, 5}, .xd = U(0.5, 1),
         .yd = apart(1, 2, {2, 10, 1, 5})},
    };
    run_binary_classes("elementwise_min", mins, [](double a, double b) { return std::min(a, b); }, 0, 601);
    check_grad_of_class("elementwise_min", mins[6], 699);
    // Not ported: TestElementwiseMinOpFP16 (FP16, dygraph).
}

TEST_CASE("Paddle's test_elementwise_pow_op.py classes") {
    const std::vector<binary_class> classes = {
        {.name = "TestElementwisePowOp", .x = {20, 5}, .y = {20, 5}, .xd = U(1, 2), .yd = U(1, 2)},
        {.name = "TestElementwisePowOp_big_shape_1", .x = {10, 10}, .y = {10, 10}, .xd = U(1, 2), .yd = U(0.1, 1)},
        {.name = "TestElementwisePowOp_big_shape_2", .x = {10, 10}, .y = {10, 10}, .xd = U(1, 2), .yd = U(0.2, 2)},
        {.name = "TestElementwisePowOp_scalar", .x = {3, 3, 4}, .y = {1}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwisePowOp_tensor", .x = {100}, .y = {100}, .xd = U(0.1, 1), .yd = U(1, 3)},
        {.name = "TestElementwisePowOp_broadcast_0", .x = {2, 1, 100}, .y = {100}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwisePowOp_broadcast_1", .x = {2, 100, 1}, .y = {100}, .axis = 1, .y_view = {100, 1},
         .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwisePowOp_broadcast_2", .x = {100, 3, 1}, .y = {100}, .axis = 0, .y_view = {100, 1, 1},
         .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwisePowOp_broadcast_3", .x = {2, 20, 5, 1}, .y = {20, 5}, .axis = 1, .y_view = {1, 20, 5, 1},
         .xd = U(0.1, 1), .yd = U(0.1, 1)},
        {.name = "TestElementwisePowOp_broadcast_4", .x = {2, 10, 3, 5}, .y = {2, 10, 1, 5}, .xd = U(0.1, 1), .yd = U(0.1, 1)},
    };
    run_binary_classes("elementwise_pow", classes, [](double a, double b) { return std::pow(a, b); }, 1e-13, 701);
    check_grad_of_class("elementwise_pow", classes[8], 799);

    // TestElementwisePowOpInt: X [1, 3, 6] ** Y [1, 1, 1], int64.
    {
        INFO("TestElementwisePowOpInt");
        Program p;
        auto x = p.input<std::int64_t>("x", {3});
        auto y = p.input<std::int64_t>("y", {3});
        auto z = elementwise_pow(x, y);
        Session<cpu> s(p);
        CHECK(values_of<std::int64_t>(s.eval({z}, {{x, tensor_of<std::int64_t>({3}, {1, 3, 6})},
                                                   {y, tensor_of<std::int64_t>({3}, {1, 1, 1})}})[0]) ==
              std::vector<std::int64_t>{1, 3, 6});
    }
    // Not ported: TestElementwisePowGradOpInt (dygraph).
}

// ---- comparisons, logical ops, where -----------------------------------------------------------

namespace {

// Paddle's EqualFunctor (phi/kernels/funcs/compare_functors.h), which
// equal and not_equal run: for floats, an infinity on either side equals
// only an equal value, a NaN on either side equals nothing, and otherwise
// fabs of a - b (the difference in T, widened to double) below 1e-8 counts
// as equal; other types compare exactly.
template <class T> bool paddle_equal_ref(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isinf(a) || std::isinf(b)) return a == b;
        if (std::isnan(a) || std::isnan(b)) return false;
        const T diff = a - b;
        return std::fabs(static_cast<double>(diff)) < 1e-8;
    } else {
        return a == b;
    }
}

template <class T> bool compare(const std::string& op, T a, T b) {
    if (op == "less_than") return a < b;
    if (op == "less_equal") return a <= b;
    if (op == "greater_than") return a > b;
    if (op == "greater_equal") return a >= b;
    if (op == "equal") return paddle_equal_ref(a, b);
    return !paddle_equal_ref(a, b);  // not_equal
}

const char* const compare_ops[] = {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"};

// x op y (NumPy broadcasting) against `compare` (the C++ operator; equal
// and not_equal by Paddle's rule), exactly.
template <class T>
void check_compare(const std::string& op, const Shape& xs, const std::vector<T>& xv, const Shape& ys,
                   const std::vector<T>& yv, std::vector<Attribute> attrs = {}) {
    Program p;
    auto x = p.input<T>("x", xs);
    auto y = p.input<T>("y", ys);
    auto z = apply_op<bool>(op, {{"X", x}, {"Y", y}}, std::move(attrs));
    const auto m = numpy_broadcast(xs, ys);
    REQUIRE(z.shape() == m.out);
    std::vector<double> want;
    for (std::size_t i = 0; i < m.a.size(); ++i) want.push_back(compare(op, xv[m.a[i]], yv[m.b[i]]) ? 1 : 0);
    Session<cpu> s(p);
    check_values(values_of<bool>(s.eval({z}, {{x, tensor_of<T>(xs, xv)}, {y, tensor_of<T>(ys, yv)}})[0]), want, 0);
}

}  // namespace

TEST_CASE("Paddle's test_compare_op.py classes") {
    // create_test_class(op, type): X, Y (10, 7) np.random.random cast to the
    // type (float32, float64, int32, int64), Out = the NumPy comparison
    // (for equal and not_equal, Paddle's kernel rule; it agrees with NumPy's
    // == unless two floats lie within 1e-8). The integer classes compare
    // zeros (random() truncates to 0), as Paddle's do.
    unsigned seed = 801;
    for (const char* op : compare_ops) {
        for (DataType t : {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64}) {
            INFO(std::string(op) << "_" << (t == DataType::FP32 ? "float32" : t == DataType::FP64 ? "float64" : t == DataType::INT32 ? "int32" : "int64"));
            std::mt19937 g(seed++);
            const auto a = draw_values(U(0, 1), 70, g), b = draw_values(U(0, 1), 70, g);
            switch (t) {
                case DataType::FP32: check_compare<float>(op, {10, 7}, as<float>(a), {10, 7}, as<float>(b)); break;
                case DataType::FP64: check_compare<double>(op, {10, 7}, a, {10, 7}, b); break;
                case DataType::INT32: check_compare<std::int32_t>(op, {10, 7}, as<std::int32_t>(a), {10, 7}, as<std::int32_t>(b)); break;
                default: check_compare<std::int64_t>(op, {10, 7}, as<std::int64_t>(a), {10, 7}, as<std::int64_t>(b)); break;
            }
        }
    }

    // create_paddle_case(op) -> TestCase_<op>: its static-graph runs of the op.
    for (const char* op : compare_ops) {
        const std::string o = op;
        INFO("TestCase_" << o);
        // test_api: int64 [1, 2, 3, 4] against [1, 3, 2, 4].
        check_compare<std::int64_t>(o, {4}, {1, 2, 3, 4}, {4}, {1, 3, 2, 4});
        // test_api_float (equal only): Y fed 1.0 into int64 [1].
        if (o == "equal") check_compare<std::int64_t>(o, {4}, {1, 2, 3, 4}, {1}, {1});
        // test_broadcast_api_1, _2, _3 (int32).
        check_compare<std::int32_t>(o, {1, 2, 1, 3}, {1, 2, 3, 4, 5, 6}, {1, 2, 3}, {0, 1, 2, 3, 4, 5});
        check_compare<std::int32_t>(o, {1, 2, 3}, {0, 1, 2, 3, 4, 5}, {1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
        check_compare<std::int32_t>(o, {5}, {0, 1, 2, 3, 4}, {3, 1}, {5, 3, 2});
        // test_bool_api_4 and test_bool_broadcast_api_4 (BOOL).
        check_compare<bool>(o, {3, 1}, {true, false, true}, {3, 1}, {true, true, false});
        check_compare<bool>(o, {3, 1}, {true, false, true}, {1}, {true});
    }
    // API_TestElementwise_Equal: equal of int32 [3, 3] and [3, 2], then [3, 3].
    check_compare<std::int32_t>("equal", {2}, {3, 3}, {2}, {3, 2});
    check_compare<std::int32_t>("equal", {2}, {3, 3}, {2}, {3, 3});
    // TestCompareOpPlace.test_place_1: less_than with force_cpu = true.
    check_compare<std::int32_t>("less_than", {2}, {3, 3}, {2}, {3, 2},
                                {Attribute::make_int("axis", -1), Attribute::make_bool("force_cpu", true)});

    // TestCase_not_equal.test_not_equal (dygraph; the same op): not_equal of
    // float32 [1.2e-8, 2, 2, 1] and [1.1e-8, 2, 2, 1] is all false, since
    // Paddle takes floats closer than 1e-8 as equal; equal of the same
    // values, all true.
    {
        INFO("TestCase_not_equal.test_not_equal");
        const std::vector<float> x{1.2e-8f, 2, 2, 1}, y{1.1e-8f, 2, 2, 1};
        for (std::size_t i = 0; i < x.size(); ++i) CHECK_FALSE(compare<float>("not_equal", x[i], y[i]));  // the class's real_result
        check_compare<float>("not_equal", {4}, x, {4}, y);
        check_compare<float>("equal", {4}, x, {4}, y);
    }

    // Not ported: the test_errors methods, TestCompareOpError (Python type
    // checks); test_dynamic_api*, test_place_2 (dygraph); test_attr_name
    // (Python API).
}

namespace {

bool logic(const std::string& op, bool a, bool b) {
    if (op == "logical_and") return a && b;
    if (op == "logical_or") return a || b;
    return a != b;  // logical_xor
}

// TestCPU.test's data: bool choice([True, False]), numbers normal(0, 1)
// cast to the dtype (integers truncate toward 0).
template <class T> std::vector<T> logical_data(std::size_t n, std::mt19937& g) {
    std::vector<T> v;
    std::bernoulli_distribution coin(0.5);
    std::normal_distribution<double> normal(0, 1);
    for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, bool>) v.push_back(coin(g));
        else v.push_back(static_cast<T>(normal(g)));
    }
    return v;
}

template <class T> void check_logical(const std::string& op, const Shape& xs, const Shape& ys, std::mt19937& g) {
    const auto xv = logical_data<T>(count(xs), g);
    const auto yv = logical_data<T>(count(ys), g);
    Program p;
    auto x = p.input<T>("x", xs);
    if (op == "logical_not") {
        auto z = logical_not(x);
        REQUIRE(z.shape() == xs);
        std::vector<double> want;
        for (const auto& e : xv) want.push_back(e == T(0) ? 1 : 0);
        Session<cpu> s(p);
        check_values(values_of<bool>(s.eval({z}, {{x, tensor_of<T>(xs, xv)}})[0]), want, 0);
        return;
    }
    auto y = p.input<T>("y", ys);
    auto z = apply_op<bool>(op, {{"X", x}, {"Y", y}});
    const auto m = numpy_broadcast(xs, ys);
    REQUIRE(z.shape() == m.out);
    std::vector<double> want;
    for (std::size_t i = 0; i < m.a.size(); ++i) want.push_back(logic(op, xv[m.a[i]] != T(0), yv[m.b[i]] != T(0)) ? 1 : 0);
    Session<cpu> s(p);
    check_values(values_of<bool>(s.eval({z}, {{x, tensor_of<T>(xs, xv)}, {y, tensor_of<T>(ys, yv)}})[0]), want, 0);
}

}  // namespace

TEST_CASE("Paddle's test_logical_op.py classes") {
    const char* const ops[] = {"logical_and", "logical_or", "logical_xor", "logical_not"};
    struct shape_case {
        const char* name;
        Shape x, y;
    };
    // TEST_META_SHAPE_DATA, less the ZeroDim entries (0-D).
    const shape_case shapes[] = {
        {"XDimLargerThanYDim1", {2, 3, 4, 5}, {4, 5}},    {"XDimLargerThanYDim2", {2, 3, 4, 5}, {4, 1}},
        {"XDimLargerThanYDim3", {2, 3, 4, 5}, {1, 4, 1}}, {"XDimLargerThanYDim4", {2, 3, 4, 5}, {3, 4, 1}},
        {"XDimLargerThanYDim5", {2, 3, 1, 5}, {3, 1, 1}}, {"XDimLessThanYDim1", {4, 1}, {2, 3, 4, 5}},
        {"XDimLessThanYDim2", {1, 4, 1}, {2, 3, 4, 5}},   {"XDimLessThanYDim3", {3, 4, 1}, {2, 3, 4, 5}},
        {"XDimLessThanYDim4", {3, 1, 1}, {2, 3, 1, 5}},   {"XDimLessThanYDim5", {4, 5}, {2, 3, 4, 5}},
        {"Axis1InLargerDim", {1, 4, 5}, {2, 3, 1, 5}},    {"EqualDim1", {10, 7}, {10, 7}},
        {"EqualDim2", {1, 1, 4, 5}, {2, 3, 1, 5}},
    };
    // TestCPU.test: every op, shape and dtype, against NumPy's logical ops.
    std::mt19937 g(901);
    for (const char* op : ops)
        for (const auto& sc : shapes)
            for (DataType t : {DataType::BOOL, DataType::INT32, DataType::INT64, DataType::FP32, DataType::FP64}) {
                INFO("TestCPU.test: " << std::string(op) << ", " << std::string(sc.name) << ", " << to_string(t));
                switch (t) {
                    case DataType::BOOL: check_logical<bool>(op, sc.x, sc.y, g); break;
                    case DataType::INT32: check_logical<std::int32_t>(op, sc.x, sc.y, g); break;
                    case DataType::INT64: check_logical<std::int64_t>(op, sc.x, sc.y, g); break;
                    case DataType::FP32: check_logical<float>(op, sc.x, sc.y, g); break;
                    default: check_logical<double>(op, sc.x, sc.y, g); break;
                }
            }
    // Paddle's TestCPU.test runs int16 too; dlgraph refuses INT16 for the
    // logical (and comparison) ops, which take BOOL, INT32, INT64, FP32 and
    // FP64 only (ops/logic.hpp logic_dtype_in; test_logic.cpp checks it).
    {
        Program p;
        auto x = p.input<std::int16_t>("x", {10, 7});
        check_throws<type_error>([&] { (void)logical_and(x, x); }, {"logical_and", "INT16"});
        check_throws<type_error>([&] { (void)logical_not(x); }, {"logical_not", "INT16"});
    }
    // TestCPU.test_error: TEST_META_WRONG_SHAPE_DATA fails for binary ops.
    for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
        for (const auto& [name, ys] : {std::pair<const char*, Shape>{"ErrorDim1", {3, 4}}, {"ErrorDim2", {4, 3}}}) {
            INFO("TestCPU.test_error: " << std::string(op) << ", " << std::string(name));
            Program p;
            auto x = p.input<float>("x", {2, 3, 4, 5});
            auto y = p.input<float>("y", ys);
            check_throws<shape_error>([&] { (void)apply_op<bool>(op, {{"X", x}, {"Y", y}}); }, {"dlgraph.shape.broadcast", op});
        }
    }
    // TestCPU.test_type_error: X and Y of different dtypes fail for binary
    // ops (the dtype pairs dlgraph has).
    {
        Program p;
        auto b = p.input<bool>("b", {10});
        auto i = p.input<std::int32_t>("i", {10});
        auto l = p.input<std::int64_t>("l", {10});
        auto f = p.input<float>("f", {10});
        auto d = p.input<double>("d", {10});
        const std::vector<SlotInput> vars = {{"X", b}, {"X", i}, {"X", l}, {"X", f}, {"X", d}};
        for (const char* op : {"logical_and", "logical_or", "logical_xor"})
            for (std::size_t a = 0; a < vars.size(); ++a)
                for (std::size_t c = 0; c < vars.size(); ++c) {
                    if (a == c) continue;
                    INFO("TestCPU.test_type_error: " << std::string(op) << ", " << vars[a].names[0] << " and " << vars[c].names[0]);
                    SlotInput y = vars[c];
                    y.slot = "Y";
                    check_throws<type_error>([&] { (void)apply_op<bool>(op, {vars[a], y}); }, {op});
                }
    }
    // Not ported: the int8 (dlgraph has no INT8), uint16 (BF16) and float16
    // runs of TestCPU; TestCUDA (a GPU); the ZeroDim shapes (0-D); the `out`
    // argument checks of test_type_error (Python API).
}

TEST_CASE("Paddle's test_where_op.py classes") {
    struct where_class {
        const char* name;
        Shape shape;
        double lo, hi;
        int cond;  // 0: zeros, 1: ones, 2: randint(2)
    };
    const where_class classes[] = {{"TestWhereOp", {100}, -3, 5, 0},
                                   {"TestWhereOp2", {60, 2}, -5, 5, 1},
                                   {"TestWhereOp3", {20, 2, 4}, -3, 5, 2}};
    unsigned seed = 1001;
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        std::mt19937 g(seed++);
        const auto xv = draw_values(U(c.lo, c.hi), count(c.shape), g), yv = draw_values(U(c.lo, c.hi), count(c.shape), g);
        std::vector<bool> cv;
        std::bernoulli_distribution coin(0.5);
        for (std::size_t i = 0; i < xv.size(); ++i) cv.push_back(c.cond == 2 ? coin(g) : c.cond == 1);
        Program p;
        auto cond = p.input<bool>("c", c.shape);
        auto x = p.input<double>("x", c.shape);
        auto y = p.input<double>("y", c.shape);
        auto out = where(cond, x, y);
        REQUIRE(out.shape() == c.shape);
        std::vector<double> want;
        for (std::size_t i = 0; i < xv.size(); ++i) want.push_back(cv[i] ? xv[i] : yv[i]);
        Session<cpu> s(p);
        check_values(values_of<double>(s.eval({out}, {{cond, tensor_of<bool>(c.shape, cv)}, {x, tensor_of<double>(c.shape, xv)},
                                                      {y, tensor_of<double>(c.shape, yv)}})[0]),
                     want, 0);
    }
    // Not ported: TestWhereAPI (the Python layer's where, its broadcasting
    // and its gradients through paddle.mean, in static and dygraph mode).
}

TEST_CASE("Paddle's test_clip_op.py classes") {
    // float32 np.random.random, elements within 0.006 of min or max set to
    // 0.5; Out = np.clip(X, min, max), whose bounds NumPy takes as float32.
    struct clip_class {
        const char* name;
        Shape shape;
        std::optional<double> min, max;  // unset: paddle.clip's default (the FP32 range)
    };
    const clip_class classes[] = {
        {"TestCase1", {8, 16, 8}, 0.0, 0.7},
        {"TestCase2", {8, 16}, 0.0, 1.0},
        {"TestCase3", {4, 8, 16}, 0.2, 0.7},
        // TestClipAPI.test_clip's outputs with attribute bounds (paddle.clip
        // on a [1, 9, 9, 4] float32 input): out_2, out_3 (min only), out_4
        // (max only).
        {"TestClipAPI.test_clip out_2", {1, 9, 9, 4}, 0.2, 0.9},
        {"TestClipAPI.test_clip out_3", {1, 9, 9, 4}, 0.3, std::nullopt},
        {"TestClipAPI.test_clip out_4", {1, 9, 9, 4}, std::nullopt, 0.7},
    };
    unsigned seed = 1101;
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        std::mt19937 g(seed++);
        auto xv = as<float>(draw_values(U(0, 1), count(c.shape), g));
        const std::string n = c.name;
        if (n.rfind("TestCase", 0) == 0)
            for (auto& e : xv)
                if (std::abs(e - *c.min) < 0.006 || std::abs(e - *c.max) < 0.006) e = 0.5f;
        std::vector<Attribute> attrs;
        if (c.min) attrs.push_back(Attribute::make_float("min", *c.min));
        if (c.max) attrs.push_back(Attribute::make_float("max", *c.max));
        Program p;
        auto x = p.input<float>("x", c.shape);
        auto out = apply_op<float>("clip", {{"X", x}}, attrs);
        const double lo = c.min ? static_cast<double>(static_cast<float>(*c.min)) : -std::numeric_limits<double>::infinity();
        const double hi = c.max ? static_cast<double>(static_cast<float>(*c.max)) : std::numeric_limits<double>::infinity();
        std::vector<double> want;
        for (float e : xv) want.push_back(std::min(std::max(static_cast<double>(e), lo), hi));
        Session<cpu> s(p);
        check_values(values_of<float>(s.eval({out}, {{x, tensor_of<float>(c.shape, xv)}})[0]), want, 0);
    }
    // Not ported: TestClipOp and TestCase4 take Min and Max as tensor inputs,
    // which dlgraph's clip does not support (ops/elementwise.hpp); nor do
    // TestClipAPI's out_1, out_5 and out_6. TestClipOpError, TestClipAPI's
    // test_errors (Python type checks) and test_clip_dygraph (dygraph).
}

TEST_CASE("Paddle's test_scale_op.py, test_sum_op.py, test_mean_op.py and test_sign_op.py classes") {
    {
        // TestScaleOp: float64 (10, 10) np.random.random, scale -2.3.
        INFO("TestScaleOp");
        std::mt19937 g(1201);
        const auto xv = draw_values(U(0, 1), 100, g);
        Program p;
        auto x = p.input<double>("x", {10, 10});
        auto out = apply_op<double>("scale", {{"X", x}}, {Attribute::make_float("scale", -2.3)});
        std::vector<double> want;
        for (double e : xv) want.push_back(e * -2.3);
        Session<cpu> s(p);
        check_values(values_of<double>(s.eval({out}, {{x, tensor_of<double>({10, 10}, xv)}})[0]), want, 0);
    }
    // Not ported (scale): TestScaleOpScaleVariable (ScaleTensor, a tensor
    // input dlgraph's scale does not take); TestScaleOpSelectedRows and
    // TestScaleFp16OpSelectedRows (SelectedRows, which dlgraph has not);
    // TestScaleFp16Op (FP16); TestScaleRaiseError (Python type check).

    {
        // TestSumOp: X = [x0, x1, x2], float64 (3, 40) np.random.random.
        INFO("TestSumOp");
        std::mt19937 g(1202);
        std::vector<std::vector<double>> xs;
        for (int k = 0; k < 3; ++k) xs.push_back(draw_values(U(0, 1), 120, g));
        Program p;
        std::vector<Var<double>> in;
        for (int k = 0; k < 3; ++k) in.push_back(p.input<double>("x" + std::to_string(k), {3, 40}));
        auto out = sum(in);
        std::vector<double> want;
        for (std::size_t i = 0; i < 120; ++i) want.push_back(xs[0][i] + xs[1][i] + xs[2][i]);
        Session<cpu> s(p);
        check_values(values_of<double>(s.eval({out}, {{in[0], tensor_of<double>({3, 40}, xs[0])},
                                                      {in[1], tensor_of<double>({3, 40}, xs[1])},
                                                      {in[2], tensor_of<double>({3, 40}, xs[2])}})[0]),
                     want, 1e-15);
    }
    {
        // API_Test_Add_n.test_api (static part): fill_constant int64 [2, 3] 5
        // and 3, summed: 8.
        INFO("API_Test_Add_n");
        Program p;
        auto out = sum(std::vector<Var<std::int64_t>>{p.constant<std::int64_t>(5, {2, 3}), p.constant<std::int64_t>(3, {2, 3})});
        Session<cpu> s(p);
        CHECK(values_of<std::int64_t>(s.eval({out})[0]) == std::vector<std::int64_t>(6, 8));
    }
    // Not ported (sum): TestSelectedRowsSumOp, TestSelectedRowsSumOpInt,
    // TestLoDTensorAndSelectedRowsOp (SelectedRows); TestSelectedRowsSumBF16Op*,
    // TestSumBF16Op, TestFP16SumOp and the SumFp16Test classes (BF16, FP16);
    // TestRaiseSumError, TestRaiseSumsError, TestSumOpError (Python checks);
    // TestReduceOPTensorAxisBase, TestSumWithTensorAxis1 (reduce_sum with a
    // tensor axis); TestAddNDoubleGradCheck, TestAddNTripleGradCheck,
    // TestSumDoubleGradCheck, TestSumTripleGradCheck (second and third
    // order gradients through gradient_checker, static and dygraph).

    {
        // TestMeanOp: float64 (10, 10) np.random.random, Out = np.mean(X).
        // Paddle 2's Out is 0-D; dlgraph has no 0-D tensors and gives [1], as
        // Paddle 1's mean did (ops/reduce.hpp).
        INFO("TestMeanOp");
        std::mt19937 g(1203);
        const auto xv = draw_values(U(0, 1), 100, g);
        Program p;
        auto x = p.input<double>("x", {10, 10});
        auto out = mean(x);
        REQUIRE(out.shape() == Shape{1});
        double total = 0;
        for (double e : xv) total += e;
        Session<cpu> s(p);
        check_values(values_of<double>(s.eval({out}, {{x, tensor_of<double>({10, 10}, xv)}})[0]), {total / 100}, 1e-13);
    }
    {
        // TestMeanOpError: mean of int32 is refused (as paddle.mean refuses it).
        INFO("TestMeanOpError");
        Program p;
        auto x = p.input<std::int32_t>("x", {12, 10});
        check_throws<type_error>([&] { (void)mean(x); }, {"mean", "INT32"});
    }
    {
        // TestReduceMeanOp and its subclasses: uniform(-1, 1) of shape [2, 3,
        // 4, 5] unless set, dim [0], keep_dim false; reduce_all = (not axis)
        // or len(axis) == len(x_np), where len(x_np) is X's first dim: true
        // only for TestReduceMeanOpAxisNegative ([-2, -1] and 2) and where the
        // class sets it. Out = np.mean over the dims (everything with
        // reduce_all); where that folds every dim without keep_dim Paddle 2
        // gives 0-D and dlgraph [1].
        struct reduce_mean_class {
            const char* name;
            Shape shape;
            std::vector<std::int64_t> dims;
            bool keep_dim;
            bool reduce_all_set;  // the class sets reduce_all = True
            DataType dtype;
            bool default_attrs;  // the class sets no attrs
        };
        const Shape s4{2, 3, 4, 5};
        const reduce_mean_class classes[] = {
            {"TestReduceMeanOp", s4, {0}, false, false, DataType::FP64, false},
            {"TestReduceMeanOpDefaultAttrs", s4, {0}, false, false, DataType::FP64, true},
            {"TestReduceMeanOpFloat32", s4, {0}, false, false, DataType::FP32, false},
            {"TestReduceMeanOpShape1D", {100}, {0}, false, false, DataType::FP64, false},
            {"TestReduceMeanOpShape6D", {2, 3, 4, 5, 6, 7}, {0}, false, false, DataType::FP64, false},
            {"TestReduceMeanOpAxisAll", s4, {0, 1, 2, 3}, false, false, DataType::FP64, false},
            {"TestReduceMeanOpAxisTuple", s4, {0, 1, 2}, false, false, DataType::FP64, false},
            {"TestReduceMeanOpAxisNegative", s4, {-2, -1}, false, false, DataType::FP64, false},
            {"TestReduceMeanOpKeepdimTrue1", s4, {0}, true, false, DataType::FP64, false},
            {"TestReduceMeanOpKeepdimTrue2", s4, {0, 1, 2, 3}, true, false, DataType::FP64, false},
            {"TestReduceMeanOpReduceAllTrue", s4, {0}, false, true, DataType::FP64, false},
        };
        unsigned seed = 1210;
        for (const auto& c : classes) {
            INFO(std::string(c.name));
            const bool reduce_all =
                c.reduce_all_set || c.dims.empty() || static_cast<std::int64_t>(c.dims.size()) == c.shape[0];
            std::vector<bool> red(static_cast<std::size_t>(c.shape.rank()), reduce_all);
            for (auto d : c.dims) red[static_cast<std::size_t>(d < 0 ? d + c.shape.rank() : d)] = true;
            Shape want_shape;
            for (int i = 0; i < c.shape.rank(); ++i)
                if (!red[static_cast<std::size_t>(i)]) want_shape.push_back(c.shape[i]);
                else if (c.keep_dim) want_shape.push_back(1);
            if (want_shape.rank() == 0) want_shape.push_back(1);
            std::mt19937 g(seed++);
            auto xv = draw_values(U(-1, 1), count(c.shape), g);
            if (c.dtype == DataType::FP32)
                for (auto& e : xv) e = static_cast<double>(static_cast<float>(e));
            // np.mean in double: each output element the mean of its group.
            Shape kept;  // X's shape with the folded dims as 1
            for (int i = 0; i < c.shape.rank(); ++i) kept.push_back(red[static_cast<std::size_t>(i)] ? 1 : c.shape[i]);
            const auto m = numpy_broadcast(c.shape, kept);
            std::vector<double> want(count(kept), 0.0);
            for (std::size_t i = 0; i < m.a.size(); ++i) want[m.b[i]] += xv[m.a[i]];
            const double group = static_cast<double>(c.shape.numel()) / static_cast<double>(kept.numel());
            for (auto& w : want) w /= group;
            std::vector<Attribute> attrs;
            if (!c.default_attrs)
                attrs = {Attribute::make_ints("dim", c.dims), Attribute::make_bool("keep_dim", c.keep_dim),
                         Attribute::make_bool("reduce_all", reduce_all)};
            auto run = [&]<class T>(type_tag<T>, double tol) {
                Program p;
                auto x = p.input<T>("x", c.shape);
                auto out = apply_op<T>("reduce_mean", {{"X", x}}, attrs);
                REQUIRE(out.shape() == want_shape);
                Session<cpu> s(p);
                check_values(values_of<T>(s.eval({out}, {{x, tensor_from<T>(c.shape, xv)}})[0]), want, tol);
            };
            if (c.dtype == DataType::FP32) run(type_tag<float>{}, 1e-5);
            else run(type_tag<double>{}, 1e-13);
        }
    }
    // Not ported (mean): TestFP16MeanOp, TestBF16MeanOp and the
    // TestReduceMeanOp*FP16 classes (FP16, BF16); TestMeanAPI (Python API
    // and dygraph); TestMeanWithTensorAxis1, 2 (a tensor axis);
    // TestMeanDoubleGradCheck, TestMeanTripleGradCheck (second and third
    // order gradients through gradient_checker).

    {
        // TestSignOp: float64 (10, 10) uniform(-10, 10), Out = np.sign(X).
        INFO("TestSignOp");
        std::mt19937 g(1204);
        const auto xv = draw_values(U(-10, 10), 100, g);
        Program p;
        auto x = p.input<double>("x", {10, 10});
        auto out = sign(x);
        std::vector<double> want;
        for (double e : xv) want.push_back(e > 0 ? 1.0 : e < 0 ? -1.0 : 0.0);
        Session<cpu> s(p);
        check_values(values_of<double>(s.eval({out}, {{x, tensor_of<double>({10, 10}, xv)}})[0]), want, 0);
    }
    // Not ported (sign): TestSignOpError (Python type checks).
}

TEST_CASE("Paddle's test_activation_op.py classes (element-wise math)") {
    // All float64 (TestActivation's init_dtype). TestActivation itself is
    // the exp op (the brief's TestExp).
    struct unary_class {
        const char* name;
        const char* op;
        Shape shape;
        double lo, hi;
        double scale;  // X = uniform(lo, hi) * scale (TestRsqrt's * 10)
        std::function<double(double)> ref;
        double tol;
        std::vector<Attribute> attrs = {};
    };
    const std::vector<unary_class> classes = {
        {"TestActivation", "exp", {11, 17}, 0.1, 1, 1, [](double v) { return std::exp(v); }, 1e-13},
        {"TestSqrt", "sqrt", {11, 17}, 0.1, 1, 1, [](double v) { return std::sqrt(v); }, 0},
        {"TestRsqrt", "rsqrt", {10, 12}, 0.1, 1, 10, [](double v) { return 1.0 / std::sqrt(v); }, 0},
        // |x| < 0.005 set to 0.02 (below).
        {"TestAbs", "abs", {4, 25}, -1, 1, 1, [](double v) { return std::abs(v); }, 0},
        {"TestCeil", "ceil", {10, 12}, -1, 1, 1, [](double v) { return std::ceil(v); }, 0},
        {"TestFloor", "floor", {10, 12}, -1, 1, 1, [](double v) { return std::floor(v); }, 0},
        {"TestCos", "cos", {10, 12}, -1, 1, 1, [](double v) { return std::cos(v); }, 1e-13},
        {"TestSin", "sin", {10, 12}, -1, 1, 1, [](double v) { return std::sin(v); }, 1e-13},
        // np.round rounds halves to even, dlgraph's round (as Paddle's
        // std::round) away from zero; uniform(-1, 1) never draws a half.
        {"TestRound", "round", {10, 12}, -1, 1, 1, [](double v) { return std::nearbyint(v); }, 0},
        {"TestReciprocal", "reciprocal", {11, 17}, 1, 2, 1, [](double v) { return 1.0 / v; }, 0},
        {"TestLog", "log", {11, 17}, 0.1, 1, 1, [](double v) { return std::log(v); }, 1e-13},
        {"TestSquare", "square", {11, 17}, 0.1, 1, 1, [](double v) { return v * v; }, 0},
        {"TestPow", "pow", {11, 17}, 1, 2, 1, [](double v) { return std::pow(v, 3.0); }, 1e-13,
         {Attribute::make_float("factor", 3.0)}},
    };
    unsigned seed = 1301;
    for (const auto& c : classes) {
        INFO(std::string(c.name) << " (" << c.op << ")");
        std::mt19937 g(seed++);
        auto xv = draw_values(U(c.lo, c.hi), count(c.shape), g);
        for (auto& e : xv) {
            e *= c.scale;
            if (std::string(c.name) == "TestAbs" && std::abs(e) < 0.005) e = 0.02;
        }
        Program p;
        auto x = p.input<double>("x", c.shape);
        auto out = apply_op<double>(c.op, {{"X", x}}, c.attrs);
        REQUIRE(out.shape() == c.shape);
        std::vector<double> want;
        for (double e : xv) want.push_back(c.ref(e));
        Session<cpu> s(p);
        check_values(values_of<double>(s.eval({out}, {{x, tensor_of<double>(c.shape, xv)}})[0]), want, c.tol);
    }
    // Not ported: the _ZeroDim classes (0-D); TestSqrtBF16, TestSquareBF16
    // and the create_test_act_fp16_class classes (BF16, FP16);
    // TestPow_factor_tensor (FactorTensor, a tensor input dlgraph's pow does
    // not take); TestSqrtOpError, TestLog.test_error and TestParameter's
    // test_out_name / test_dygraph (Python API and dygraph). This version of
    // the file has no TestSign (test_sign_op.py's TestSignOp is above).
}
