// Tests of the ops in elementwise.hpp: the seven binary ops under NumPy
// broadcasting and Paddle's axis, the eight unary ops, scale (both bias
// orders, and the scalar operators built on it) and assign, against plain
// double-precision loops.
#include <doctest/doctest.h>

#include <cmath>
#include <dlgraph/dlgraph.hpp>
#include <functional>
#include <limits>
#include <random>

#include "test_helpers.hpp"

namespace {

using dlgraph::Program;
using dlgraph::Session;
using dlgraph::Shape;
using shape_t = std::vector<std::size_t>;

template <class T> double tol() { return std::is_same_v<T, float> ? 1e-5 : 1e-12; }

template <class T> xt::xarray<T> rnd(const shape_t& shape, std::uint64_t seed, double lo, double hi) {
    auto a = xt::xarray<T>::from_shape(shape);
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& v : a) {
        if constexpr (std::is_integral_v<T>) v = static_cast<T>(std::llround(d(g)));
        else v = static_cast<T>(d(g));
    }
    return a;
}

Shape to_shape(const shape_t& s) {
    Shape r;
    for (auto d : s) r.push_back(static_cast<std::int64_t>(d));
    return r;
}
std::size_t count(const shape_t& s) {
    std::size_t n = 1;
    for (auto d : s) n *= d;
    return n;
}

// Compares with |got - want| <= tol * (|want| + 1); integers exactly. NaN
// and inf must match. Reports the worst element.
template <class T> void check_close(const xt::xarray<T>& got, const shape_t& shape, const std::vector<double>& want) {
    REQUIRE(shape_t(got.shape().begin(), got.shape().end()) == shape);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double g = static_cast<double>(got.data()[i]), w = want[i];
        double err;
        if (std::isnan(w) || std::isinf(w)) err = (std::isnan(w) ? std::isnan(g) : g == w) ? 0.0 : 1e300;
        else err = std::abs(g - w) / (std::abs(w) + 1.0);
        if (!(err <= worst)) {
            worst = err;
            at = i;
        }
    }
    INFO("worst relative error " << worst << " at " << at << ": got "
                                 << (want.empty() ? 0.0 : static_cast<double>(got.data()[at])) << ", want "
                                 << (want.empty() ? 0.0 : want[at]));
    CHECK(worst <= (std::is_integral_v<T> ? 0.0 : tol<T>()));
}


// Broadcast of x and y, written out: both padded to a common rank (X's
// rank with Paddle's axis placing Y, else trailing alignment), then each
// output index maps to index 0 in any unit dim.
struct bcast_ref {
    shape_t out, xa, ya;
    bcast_ref(const shape_t& xs, const shape_t& ys, int axis) {
        if (axis == -1 || xs.size() < ys.size()) {
            const std::size_t r = std::max(xs.size(), ys.size());
            xa.assign(r - xs.size(), 1);
            xa.insert(xa.end(), xs.begin(), xs.end());
            ya.assign(r - ys.size(), 1);
            ya.insert(ya.end(), ys.begin(), ys.end());
        } else {
            xa = xs;
            ya.assign(static_cast<std::size_t>(axis), 1);
            ya.insert(ya.end(), ys.begin(), ys.end());
            ya.resize(xs.size(), 1);
        }
        for (std::size_t i = 0; i < xa.size(); ++i) out.push_back(xa[i] == 1 ? ya[i] : xa[i]);
    }
    // Flat offsets into x and y of output element f.
    std::pair<std::size_t, std::size_t> at(std::size_t f) const {
        std::size_t ox = 0, oy = 0, sx = 1, sy = 1;
        for (std::size_t i = out.size(); i-- > 0;) {
            const std::size_t idx = f % out[i];
            f /= out[i];
            if (xa[i] != 1) ox += idx * sx;
            if (ya[i] != 1) oy += idx * sy;
            sx *= xa[i];
            sy *= ya[i];
        }
        return {ox, oy};
    }
};

enum class bop { add, sub, mul, div, max, min, pow };
const char* name(bop o) {
    const char* n[] = {"add", "sub", "mul", "div", "max", "min", "pow"};
    return n[static_cast<int>(o)];
}

template <class T> dlgraph::Var<T> apply(bop o, const dlgraph::Var<T>& x, const dlgraph::Var<T>& y, int axis) {
    switch (o) {
        case bop::add: return dlgraph::elementwise_add(x, y, axis);
        case bop::sub: return dlgraph::elementwise_sub(x, y, axis);
        case bop::mul: return dlgraph::elementwise_mul(x, y, axis);
        case bop::div: return dlgraph::elementwise_div(x, y, axis);
        case bop::max: return dlgraph::elementwise_max(x, y, axis);
        case bop::min: return dlgraph::elementwise_min(x, y, axis);
        default: return dlgraph::elementwise_pow(x, y, axis);
    }
}

template <class T> double ref(bop o, T a, T b) {
    const double x = static_cast<double>(a), y = static_cast<double>(b);
    switch (o) {
        case bop::add: return x + y;
        case bop::sub: return x - y;
        case bop::mul: return x * y;
        case bop::div:
            if constexpr (std::is_integral_v<T>) return static_cast<double>(a / b);  // truncating, as C++
            else return x / y;
        case bop::max: return std::max(x, y);
        case bop::min: return std::min(x, y);
        default:
            if constexpr (std::is_integral_v<T>) return static_cast<double>(static_cast<T>(std::pow(x, y)));
            else return std::pow(x, y);
    }
}

struct bcase {
    shape_t xs, ys;
    int axis;
};
const bcase binary_cases[] = {
    {{2, 3, 37}, {2, 3, 37}, -1},  // same shape
    {{2, 3, 37}, {37}, -1},        // trailing vector
    {{2, 3, 4}, {3, 1}, -1},       // unit dim in Y
    {{2, 1, 37}, {3, 1}, -1},      // both broadcast
    {{2, 3, 4}, {1}, -1},          // Y one element
    {{1}, {2, 3}, -1},             // X one element
    {{4}, {2, 3, 4}, -1},          // X shorter: X padded
    {{5, 1, 19}, {1, 3, 1}, -1},
    {{2, 3, 4, 5}, {3, 4}, 1},     // Paddle axis in the middle
    {{2, 3, 4}, {2}, 0},
    {{2, 3, 4}, {4}, 2},
    {{2, 3, 4}, {3, 1}, 1},
    {{2, 3, 17}, {2, 3, 17}, 0},
    {{0, 3}, {3}, -1},             // empty
};

template <class T> void run_binary(bop o) {
    std::uint64_t seed = 1000 + static_cast<std::uint64_t>(o) * 100;
    for (auto& cs : binary_cases) {
        double xlo = -3, xhi = 3, ylo = -3, yhi = 3;
        if (o == bop::pow) {
            xlo = std::is_integral_v<T> ? 0 : 0.1;
            yhi = std::is_integral_v<T> ? 3 : 2;
            ylo = std::is_integral_v<T> ? 0 : -2;
        }
        auto xv = rnd<T>(cs.xs, seed++, xlo, xhi);
        auto yv = rnd<T>(cs.ys, seed++, o == bop::div ? 0.5 : ylo, o == bop::div ? 3 : yhi);
        if (o == bop::div) {
            std::mt19937 g(static_cast<unsigned>(seed));
            for (auto& v : yv)
                if (g() % 2) v = static_cast<T>(-v);
        }
        Program p;
        auto x = p.input<T>("x", to_shape(cs.xs));
        auto y = p.input<T>("y", to_shape(cs.ys));
        auto out = apply(o, x, y, cs.axis);
        bcast_ref b(cs.xs, cs.ys, cs.axis);
        INFO(name(o) << ": x " << to_string(to_shape(cs.xs)) << " y " << to_string(to_shape(cs.ys)) << " axis "
                     << cs.axis);
        CHECK(out.shape() == to_shape(b.out));
        std::vector<double> want;
        for (std::size_t f = 0; f < count(b.out); ++f) {
            auto [ox, oy] = b.at(f);
            want.push_back(ref<T>(o, xv.data()[ox], yv.data()[oy]));
        }
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, xv}, {y, yv}});
        check_close(got, b.out, want);
    }
}

}  // namespace

TEST_CASE_TEMPLATE("binary ops: NumPy broadcasting and Paddle axis", T, float, double, std::int32_t, std::int64_t) {
    for (bop o : {bop::add, bop::sub, bop::mul, bop::div, bop::max, bop::min, bop::pow}) run_binary<T>(o);
}

TEST_CASE("binary ops: unknown dims, shape errors, integer division by zero") {
    Program p;
    auto x = p.input<float>("x", {-1, 3});
    auto y = p.input<float>("y", {3});
    CHECK((x + y).shape() == Shape{-1, 3});
    auto z = p.input<float>("z", {-1, 1});
    CHECK((y * z).shape() == Shape{-1, 3});
    CHECK(dlgraph::elementwise_sub(x, z).shape() == Shape{-1, 3});
    auto a = p.input<float>("a", {2, 3});
    auto b = p.input<float>("b", {4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::elementwise_add(a, b); },
                                       {"dlgraph.shape.broadcast", "elementwise_add", "X is [2,3] but Y is [4]"});
    auto c = p.input<float>("c", {3, 4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::elementwise_mul(a, c, 1); },
                                       {"X is [2,3] but Y is [3,4] (axis 1)", "does not fit"});
    auto d = p.input<float>("d", {2, 1});
    check_throws<dlgraph::shape_error>([&] { dlgraph::elementwise_div(d, p.var<float>("y"), 1); },
                                       {"X is [2,1] but Y is [3] (axis 1)", "only Y is broadcast"});

    Program q;
    auto i = q.input<std::int32_t>("i", {3});
    auto j = q.input<std::int32_t>("j", {3});
    auto k = i / j;
    Session<dlgraph::cpu> s(q);
    xt::xarray<std::int32_t> iv = {7, -7, 1}, jv = {2, 2, 0};
    check_throws<dlgraph::value_error>([&] { (void)s.eval(k, {{i, iv}, {j, jv}}); },
                                       {"dlgraph.value.div0", "division by zero"});
}

TEST_CASE("integer division by zero is an error on any thread count, wherever the zero is, INT_MIN / -1 wraps") {
    using dlgraph::Program;
    // Long enough that two threads split the loop (over 65,536 elements each).
    const std::size_t n = 1'000'000;
    for (int threads : {1, 2}) {
        for (std::size_t zero_at : {std::size_t(0), n / 2 + 1, n - 1}) {
            INFO("threads " << threads << ", zero at " << zero_at);
            Program p;
            auto x = p.input<std::int32_t>("x", {-1});
            auto y = p.input<std::int32_t>("y", {-1});
            auto q = x / y;
            dlgraph::Session<dlgraph::cpu> s(p, {.threads = threads});
            xt::xarray<std::int32_t> xv = xt::ones<std::int32_t>({n}) * 9, yv = xt::ones<std::int32_t>({n}) * 3;
            yv(zero_at) = 0;
            check_throws<dlgraph::value_error>([&] { (void)s.eval(q, {{x, xv}, {y, yv}}); },
                                               {"[dlgraph.value.div0]", "elementwise_div (op #0)", "division by zero"});
            yv(zero_at) = 3;
            auto got = s.eval(q, {{x, xv}, {y, yv}});  // the session still works
            CHECK(xt::all(xt::equal(got, 3)));
        }
    }
    Program p;
    auto x = p.input<std::int32_t>("x", {2});
    auto y = p.input<std::int32_t>("y", {2});
    dlgraph::Session<dlgraph::cpu> s(p);
    xt::xarray<std::int32_t> xv = {std::numeric_limits<std::int32_t>::min(), 7}, yv = {-1, -1};
    CHECK(s.eval(x / y, {{x, xv}, {y, yv}}) == xt::xarray<std::int32_t>{std::numeric_limits<std::int32_t>::min(), -7});
}

namespace {
struct ucase {
    const char* name;
    double lo, hi;
    std::function<double(double)> f;
};
template <class T>
dlgraph::Var<T> apply_unary(const std::string& n, const dlgraph::Var<T>& x) {
    if (n == "relu") return dlgraph::relu(x);
    if (n == "sigmoid") return dlgraph::sigmoid(x);
    if (n == "tanh") return dlgraph::tanh(x);
    if (n == "exp") return dlgraph::exp(x);
    if (n == "log") return dlgraph::log(x);
    if (n == "sqrt") return dlgraph::sqrt(x);
    if (n == "abs") return dlgraph::abs(x);
    return dlgraph::square(x);
}
}  // namespace

TEST_CASE_TEMPLATE("unary ops: vector body and scalar tail", T, float, double) {
    const ucase cases[] = {
        {"relu", -3, 3, [](double v) { return v > 0 ? v : 0.0; }},
        {"sigmoid", -10, 10, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
        {"tanh", -5, 5, [](double v) { return std::tanh(v); }},
        {"exp", -20, 20, [](double v) { return std::exp(v); }},
        {"log", 1e-3, 100, [](double v) { return std::log(v); }},
        {"sqrt", 0, 100, [](double v) { return std::sqrt(v); }},
        {"abs", -3, 3, [](double v) { return std::abs(v); }},
        {"square", -3, 3, [](double v) { return v * v; }},
    };
    std::uint64_t seed = 300;
    for (auto& cs : cases)
        for (auto shape : {shape_t{3, 37}, shape_t{1}, shape_t{65}, shape_t{0, 5}}) {
            Program p;
            auto x = p.input<T>("x", to_shape(shape));
            auto out = apply_unary(cs.name, x);
            CHECK(out.shape() == to_shape(shape));
            auto xv = rnd<T>(shape, seed++, cs.lo, cs.hi);
            std::vector<double> want;
            for (auto v : xv) want.push_back(cs.f(static_cast<double>(v)));
            Session<dlgraph::cpu> s(p);
            xt::xarray<T> got = s.eval(out, {{x, xv}});
            INFO(cs.name << " on " << to_string(to_shape(shape)));
            check_close(got, shape, want);
        }
    // Unknown dims pass through.
    Program p;
    auto x = p.input<T>("x", {-1, 4});
    CHECK(dlgraph::sigmoid(x).shape() == Shape{-1, 4});
}

TEST_CASE_TEMPLATE("abs and square on integers", T, std::int32_t, std::int64_t) {
    xt::xarray<T> xv = {-5, 0, 3, -1, 7, -9, 11, 2, -2, 4, -4, 6, -6, 8, -8, 10, -10, 12};
    Program p;
    auto x = p.input<T>("x", {18});
    auto a = dlgraph::abs(x);
    auto q = dlgraph::square(x);
    Session<dlgraph::cpu> s(p);
    std::vector<double> wa, wq;
    for (auto v : xv) {
        wa.push_back(std::abs(static_cast<double>(v)));
        wq.push_back(static_cast<double>(v) * static_cast<double>(v));
    }
    check_close(xt::xarray<T>(s.eval(a, {{x, xv}})), {18}, wa);
    check_close(xt::xarray<T>(s.eval(q, {{x, xv}})), {18}, wq);
    // exp has no integer kernel: the line that builds it throws.
    auto b = p.input<std::int32_t>("b", {2});
    check_throws<dlgraph::type_error>([&] { (void)dlgraph::exp(b); },
                                      {"dlgraph.type.kernel", "exp", "no kernel for INT32"});
}

TEST_CASE_TEMPLATE("scale: both bias orders and the scalar operators", T, float, double, std::int32_t, std::int64_t) {
    const shape_t shape{2, 37};
    auto xv = rnd<T>(shape, 400, -5, 5);
    struct op_case {
        const char* what;
        std::function<dlgraph::Var<T>(const dlgraph::Var<T>&)> build;
        std::function<double(double)> f;
    };
    std::vector<op_case> cases = {
        {"scale after", [](auto& x) { return dlgraph::scale(x, 3.0, 2.0, true); }, [](double v) { return v * 3 + 2; }},
        {"scale before", [](auto& x) { return dlgraph::scale(x, 3.0, 2.0, false); }, [](double v) { return (v + 2) * 3; }},
        {"scale only", [](auto& x) { return dlgraph::scale(x, -2.0); }, [](double v) { return -2 * v; }},
        {"x + c", [](auto& x) { return x + T(4); }, [](double v) { return v + 4; }},
        {"c + x", [](auto& x) { return T(4) + x; }, [](double v) { return v + 4; }},
        {"x - c", [](auto& x) { return x - T(4); }, [](double v) { return v - 4; }},
        {"c - x", [](auto& x) { return T(4) - x; }, [](double v) { return 4 - v; }},
        {"x * c", [](auto& x) { return x * T(3); }, [](double v) { return v * 3; }},
        {"c * x", [](auto& x) { return T(3) * x; }, [](double v) { return 3 * v; }},
        {"-x", [](auto& x) { return -x; }, [](double v) { return -v; }},
    };
    if constexpr (std::is_floating_point_v<T>) {
        cases.push_back({"x / c", [](auto& x) { return x / T(4); }, [](double v) { return v / 4; }});
        cases.push_back({"scale fraction", [](auto& x) { return dlgraph::scale(x, 0.5, -0.25, false); },
                         [](double v) { return (v - 0.25) * 0.5; }});
    }
    for (auto& cs : cases) {
        Program p;
        auto x = p.input<T>("x", to_shape(shape));
        auto out = cs.build(x);
        std::vector<double> want;
        for (auto v : xv) want.push_back(cs.f(static_cast<double>(v)));
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, xv}});
        INFO(cs.what);
        check_close(got, shape, want);
    }
}

TEST_CASE("c / x divides a constant by the tensor") {
    Program p;
    auto x = p.input<double>("x", {5});
    auto out = 2.0 / x;
    xt::xarray<double> xv = {1.0, -4.0, 0.5, 8.0, 3.0};
    Session<dlgraph::cpu> s(p);
    xt::xarray<double> got = s.eval(out, {{x, xv}});
    std::vector<double> want;
    for (auto v : xv) want.push_back(2.0 / v);
    check_close(got, {5}, want);
}

TEST_CASE_TEMPLATE("assign copies every dtype", T, bool, std::int16_t, std::int32_t, std::int64_t, float, double) {
    auto xv = rnd<T>({3, 7}, 500, -100, 100);
    Program p;
    auto x = p.input<T>("x", {-1, 7});
    auto out = dlgraph::assign(x);
    CHECK(out.shape() == Shape{-1, 7});
    Session<dlgraph::cpu> s(p);
    xt::xarray<T> got = s.eval(out, {{x, xv}});
    CHECK(got == xv);
    xt::xarray<T> empty = xt::xarray<T>::from_shape({0, 7});
    xt::xarray<T> got_empty = s.eval(out, {{x, empty}});
    CHECK(got_empty.size() == 0);
}
