// Tests of the ops in matmul.hpp, softmax.hpp, reduce.hpp, shape_ops.hpp and
// feed_fetch.hpp, built through the public builder and checked against
// plain double-precision loops written here (never the kernels' code).
#include <doctest/doctest.h>

#include <cmath>
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/gemm.hpp>
#include <dlgraph/ops/feed_fetch.hpp>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <xtensor/xview.hpp>

#include "grad_check.hpp"
#include "test_helpers.hpp"

namespace {

using dlgraph::Program;
using dlgraph::Session;
using dlgraph::Shape;
using shape_t = std::vector<std::size_t>;

template <class T> double tol() { return std::is_same_v<T, float> ? 1e-5 : 1e-12; }

template <class T> xt::xarray<T> rnd(const shape_t& shape, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
    auto a = xt::xarray<T>::from_shape(shape);
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& v : a) v = static_cast<T>(d(g));
    return a;
}
template <class T> xt::xarray<T> rnd_int(const shape_t& shape, std::uint64_t seed, std::int64_t lo, std::int64_t hi) {
    auto a = xt::xarray<T>::from_shape(shape);
    std::mt19937_64 g(seed);
    std::uniform_int_distribution<std::int64_t> d(lo, hi);
    for (auto& v : a) v = static_cast<T>(d(g));
    return a;
}

template <class T> std::vector<double> as_double(const xt::xarray<T>& a) {
    std::vector<double> v;
    for (auto x : a) v.push_back(static_cast<double>(x));
    return v;
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

// Row-major multi-index of flat position f.
shape_t unravel(std::size_t f, const shape_t& s) {
    shape_t idx(s.size());
    for (std::size_t i = s.size(); i-- > 0;) {
        idx[i] = f % s[i];
        f /= s[i];
    }
    return idx;
}
std::size_t ravel(const shape_t& idx, const shape_t& s) {
    std::size_t f = 0;
    for (std::size_t i = 0; i < s.size(); ++i) f = f * s[i] + idx[i];
    return f;
}

// Compares element by element: |got - want| <= tol * (|want| + mag), mag
// being the sum of |terms| that formed want (1 when not given). Reports the
// worst element only.
template <class T>
void check_close(const xt::xarray<T>& got, const shape_t& shape, const std::vector<double>& want,
                 const std::vector<double>& mag = {}, double tolerance = tol<T>()) {
    REQUIRE(shape_t(got.shape().begin(), got.shape().end()) == shape);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    std::size_t at = 0;
    bool ok = true;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double g = static_cast<double>(got.data()[i]), w = want[i];
        if (std::isnan(w) || std::isinf(w)) {
            if (!(std::isnan(w) ? std::isnan(g) : g == w)) {
                ok = false;
                at = i;
            }
            continue;
        }
        const double m = mag.empty() ? 1.0 : mag[i];
        const double err = g == w ? 0.0 : std::abs(g - w) / std::max(std::abs(w) + m, 1e-300);
        if (!(err <= worst)) {
            worst = err;
            at = i;
        }
    }
    INFO("worst relative error " << worst << " at flat index " << at << ": got "
                                 << (want.empty() ? 0.0 : static_cast<double>(got.data()[at])) << ", want "
                                 << (want.empty() ? 0.0 : want[at]));
    CHECK(ok);
    CHECK(worst <= tolerance);
}

template <class T> void check_exact(const xt::xarray<T>& got, const shape_t& shape, const std::vector<T>& want) {
    REQUIRE(shape_t(got.shape().begin(), got.shape().end()) == shape);
    REQUIRE(got.size() == want.size());
    bool same = true;
    for (std::size_t i = 0; i < want.size(); ++i) same = same && got.data()[i] == want[i];
    CHECK(same);
}


// ---- reference matmul ---------------------------------------------------------------

struct ref_t {
    shape_t shape;
    std::vector<double> v, mag;
};

ref_t ref_matmul(const shape_t& xs, const std::vector<double>& x, const shape_t& ys, const std::vector<double>& y,
                 bool tx, bool ty, double alpha) {
    // Paddle's vectors: X a row (transposed, a column), Y a column
    // (transposed, a row); Out drops a vector's unit dim.
    const bool xvec = xs.size() == 1, yvec = ys.size() == 1;
    const shape_t x2 = xvec ? (tx ? shape_t{xs[0], 1} : shape_t{1, xs[0]}) : xs;
    const shape_t y2 = yvec ? (ty ? shape_t{1, ys[0]} : shape_t{ys[0], 1}) : ys;
    if (xvec) tx = false;
    if (yvec) ty = false;
    const std::size_t xr = x2.size(), yr = y2.size();
    const std::size_t M = tx ? x2[xr - 1] : x2[xr - 2], K = tx ? x2[xr - 2] : x2[xr - 1];
    const std::size_t N = ty ? y2[yr - 2] : y2[yr - 1];
    const shape_t xb(x2.begin(), x2.end() - 2), yb(y2.begin(), y2.end() - 2);
    const std::size_t rb = std::max(xb.size(), yb.size());
    shape_t ob(rb), xbp(rb, 1), ybp(rb, 1);
    for (std::size_t i = 0; i < xb.size(); ++i) xbp[rb - xb.size() + i] = xb[i];
    for (std::size_t i = 0; i < yb.size(); ++i) ybp[rb - yb.size() + i] = yb[i];
    for (std::size_t i = 0; i < rb; ++i) ob[i] = xbp[i] == 1 ? ybp[i] : xbp[i];
    ref_t r;
    r.shape = ob;
    if (!xvec || M != 1) r.shape.push_back(M);
    if (!yvec || N != 1) r.shape.push_back(N);
    if (r.shape.empty()) r.shape = {1};
    const std::size_t nb = count(ob);
    for (std::size_t b = 0; b < nb; ++b) {
        const shape_t bi = unravel(b, ob);
        shape_t xi(rb), yi(rb);
        for (std::size_t i = 0; i < rb; ++i) {
            xi[i] = xbp[i] == 1 ? 0 : bi[i];
            yi[i] = ybp[i] == 1 ? 0 : bi[i];
        }
        const std::size_t xo = ravel(xi, xbp) * M * K, yo = ravel(yi, ybp) * K * N;
        for (std::size_t i = 0; i < M; ++i)
            for (std::size_t j = 0; j < N; ++j) {
                double s = 0, m = 0;
                for (std::size_t k = 0; k < K; ++k) {
                    const double a = tx ? x[xo + k * M + i] : x[xo + i * K + k];
                    const double bb = ty ? y[yo + j * K + k] : y[yo + k * N + j];
                    s += a * bb;
                    m += std::abs(a * bb);
                }
                r.v.push_back(alpha * s);
                r.mag.push_back(std::abs(alpha) * m + 1e-300);
            }
    }
    return r;
}

}  // namespace

// ---- the op table ---------------------------------------------------------------------

TEST_CASE("op table lists every new op once") {
    CHECK(dlgraph::op_table().size() == static_cast<std::size_t>(dlgraph::op_count));
    for (auto name : {"mul", "matmul", "softmax", "cross_entropy", "softmax_with_cross_entropy", "mean", "reduce_sum",
                      "reduce_mean", "reduce_max", "reshape", "transpose", "concat", "split", "cast", "sum", "feed",
                      "fetch"}) {
        INFO(name);
        CHECK(dlgraph::find_op(name) != nullptr);
    }
}

// ---- GEMM, directly ------------------------------------------------------------------------

TEST_CASE_TEMPLATE("gemm: every transpose combination on odd sizes", T, float, double) {
    const std::size_t sizes[] = {1, 3, 17, 33, 65};
    std::uint64_t seed = 1;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (auto M : sizes)
                for (auto N : sizes)
                    for (auto K : sizes) {
                        const shape_t as = ta ? shape_t{K, M} : shape_t{M, K};
                        const shape_t bs = tb ? shape_t{N, K} : shape_t{K, N};
                        auto a = rnd<T>(as, seed++);
                        auto b = rnd<T>(bs, seed++);
                        std::vector<T> c(M * N, T(7));
                        dlgraph::gemm<T>(ta, tb, static_cast<std::int64_t>(M), static_cast<std::int64_t>(N),
                                              static_cast<std::int64_t>(K), T(1), a.data(),
                                              static_cast<std::int64_t>(as[1]), b.data(),
                                              static_cast<std::int64_t>(bs[1]), false, c.data(),
                                              static_cast<std::int64_t>(N));
                        auto r = ref_matmul(as, as_double(a), bs, as_double(b), ta, tb, 1.0);
                        xt::xarray<T> got = xt::adapt(c, shape_t{M, N});
                        INFO("ta " << ta << " tb " << tb << " M " << M << " N " << N << " K " << K);
                        check_close(got, {M, N}, r.v, r.mag);
                    }
}

TEST_CASE_TEMPLATE("gemm: blocked sizes, unaligned padded operands, alpha, accumulate, threads", T, float, double) {
    // Shapes for the unpacked few-rows path (M = 5), the packed path with
    // K beyond a k block, M beyond an m block, N beyond a column block; rows
    // of A and B padded (lda/ldb > width) and every pointer off by one
    // element. Two threads must give the same bits as one.
    struct dims {
        std::int64_t M, N, K;
    };
    const dims cases[] = {{5, 300, 600}, {37, 300, 600}, {200, 70, 300}, {13, 4200, 20}};
    const std::int64_t pad = 3;
    std::uint64_t seed = 100;
    for (auto [M, N, K] : cases)
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                for (bool acc : {false, true}) {
                    const std::int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
                    const std::int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
                    auto abuf = rnd<T>({static_cast<std::size_t>(ar * lda + 1)}, seed++);
                    auto bbuf = rnd<T>({static_cast<std::size_t>(br * ldb + 1)}, seed++);
                    auto c0 = rnd<T>({static_cast<std::size_t>(M * ldc + 1)}, seed++);
                    const T* a = abuf.data() + 1;
                    const T* b = bbuf.data() + 1;
                    std::vector<double> want, mag;
                    for (std::int64_t i = 0; i < M; ++i)
                        for (std::int64_t j = 0; j < N; ++j) {
                            double s = 0, m = 0;
                            for (std::int64_t k = 0; k < K; ++k) {
                                const double x = ta ? a[k * lda + i] : a[i * lda + k];
                                const double y = tb ? b[j * ldb + k] : b[k * ldb + j];
                                s += x * y;
                                m += std::abs(x * y);
                            }
                            const double old = c0(1 + i * ldc + j);
                            want.push_back(0.5 * s + (acc ? old : 0.0));
                            mag.push_back(0.5 * m + std::abs(old));
                        }
                    xt::xarray<T> one_thread;
                    for (int threads : {1, 2}) {
                        const dlgraph::parallelism_scope scope(threads);
                        auto cbuf = c0;
                        dlgraph::gemm<T>(ta, tb, M, N, K, T(0.5), a, lda, b, ldb, acc, cbuf.data() + 1, ldc);
                        auto got = xt::xarray<T>::from_shape({static_cast<std::size_t>(M), static_cast<std::size_t>(N)});
                        bool pad_kept = true;
                        for (std::int64_t i = 0; i < M; ++i) {
                            for (std::int64_t j = 0; j < N; ++j) got(i, j) = cbuf(1 + i * ldc + j);
                            for (std::int64_t j = N; j < ldc; ++j)
                                pad_kept = pad_kept && cbuf(1 + i * ldc + j) == c0(1 + i * ldc + j);
                        }
                        INFO("M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb << " accumulate "
                                  << acc << " threads " << threads);
                        CHECK(pad_kept);
                        CHECK(cbuf(0) == c0(0));
                        check_close(got, {static_cast<std::size_t>(M), static_cast<std::size_t>(N)}, want, mag);
                        if (threads == 1) one_thread = got;
                        else CHECK(got == one_thread);
                    }
                }
}

TEST_CASE("gemm: K = 0 zeroes C unless accumulating") {
    std::vector<double> c(6, 5.0);
    dlgraph::gemm<double>(false, false, 2, 3, 0, 1.0, nullptr, 0, nullptr, 3, true, c.data(), 3);
    CHECK(c == std::vector<double>(6, 5.0));
    dlgraph::gemm<double>(true, true, 2, 3, 0, 1.0, nullptr, 2, nullptr, 0, false, c.data(), 3);
    CHECK(c == std::vector<double>(6, 0.0));
}

// ---- mul -------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("mul: flattening by num_col_dims", T, float, double) {
    struct case_t {
        shape_t xs, ys;
        int xn, yn;
        shape_t out;
    };
    const case_t cases[] = {
        {{5, 7}, {7, 3}, 1, 1, {5, 3}},
        {{2, 3, 4}, {12, 5}, 1, 1, {2, 5}},
        {{2, 3, 4}, {4, 17}, 2, 1, {2, 3, 17}},
        {{3, 17}, {17, 2, 3}, 1, 1, {3, 2, 3}},
        {{2, 3, 5}, {3, 5, 2, 2}, 1, 2, {2, 2, 2}},
        {{1, 1}, {1, 1}, 1, 1, {1, 1}},
        {{0, 4}, {4, 3}, 1, 1, {0, 3}},
        {{3, 0}, {0, 2}, 1, 1, {3, 2}},
    };
    std::uint64_t seed = 7;
    for (auto& cs : cases) {
        Program p;
        auto x = p.input<T>("x", to_shape(cs.xs));
        auto y = p.input<T>("y", to_shape(cs.ys));
        auto out = dlgraph::mul(x, y, cs.xn, cs.yn);
        CHECK(out.shape() == to_shape(cs.out));
        auto xv = rnd<T>(cs.xs, seed++);
        auto yv = rnd<T>(cs.ys, seed++);
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, xv}, {y, yv}});
        std::size_t M = 1, K = 1, N = 1;
        for (int i = 0; i < cs.xn; ++i) M *= cs.xs[static_cast<std::size_t>(i)];
        for (std::size_t i = static_cast<std::size_t>(cs.xn); i < cs.xs.size(); ++i) K *= cs.xs[i];
        for (std::size_t i = static_cast<std::size_t>(cs.yn); i < cs.ys.size(); ++i) N *= cs.ys[i];
        auto r = ref_matmul({M, K}, as_double(xv), {K, N}, as_double(yv), false, false, 1.0);
        INFO("x " << to_string(to_shape(cs.xs)) << " y " << to_string(to_shape(cs.ys)));
        check_close(got, cs.out, r.v, r.mag);
    }
}

TEST_CASE("mul: unknown dims and errors") {
    Program p;
    auto x = p.input<float>("x", {-1, 3, 4});
    auto y = p.input<float>("y", {12, 5});
    auto out = dlgraph::mul(x, y);
    CHECK(out.shape() == Shape{-1, 5});
    auto z = p.input<float>("z", {4, -1});
    CHECK(dlgraph::mul(x, z, 2).shape() == Shape{-1, 3, -1});
    auto w = p.input<float>("w", {10, 5});
    check_throws<dlgraph::shape_error>([&] { dlgraph::mul(x, w); },
                                       {"dlgraph.shape.mul", "mul", "X is [-1,3,4]", "Y is [10,5]", "(12)", "(10)"});
    auto k = p.input<float>("k", {3, 4});
    auto v = p.input<float>("v", {4, 2});
    check_throws<dlgraph::shape_error>([&] { dlgraph::mul(k, v, 2); }, {"x_num_col_dims 2", "[3,4]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::mul(k, v, 1, 0); }, {"y_num_col_dims 0", "[4,2]"});
    auto i = p.input<std::int32_t>("i", {2, 2});
    check_throws<dlgraph::type_error>([&] { dlgraph::mul(i, i); }, {"dlgraph.type.op", "mul", "X must be FP32 or FP64"});
}

// ---- matmul -----------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("matmul: rank 2 with transposes and alpha on odd sizes", T, float, double) {
    std::uint64_t seed = 11;
    for (bool tx : {false, true})
        for (bool ty : {false, true})
            for (double alpha : {1.0, -0.75})
                for (std::size_t M : {1, 3, 17})
                    for (std::size_t N : {1, 33})
                        for (std::size_t K : {1, 65}) {
                            const shape_t xs = tx ? shape_t{K, M} : shape_t{M, K};
                            const shape_t ys = ty ? shape_t{N, K} : shape_t{K, N};
                            Program p;
                            auto x = p.input<T>("x", to_shape(xs));
                            auto y = p.input<T>("y", to_shape(ys));
                            auto out = dlgraph::matmul(x, y, tx, ty, alpha);
                            auto xv = rnd<T>(xs, seed++);
                            auto yv = rnd<T>(ys, seed++);
                            Session<dlgraph::cpu> s(p);
                            xt::xarray<T> got = s.eval(out, {{x, xv}, {y, yv}});
                            auto r = ref_matmul(xs, as_double(xv), ys, as_double(yv), tx, ty, alpha);
                            INFO("tx " << tx << " ty " << ty << " alpha " << alpha << " M " << M << " N " << N
                                       << " K " << K);
                            CHECK(out.shape() == to_shape(r.shape));
                            check_close(got, r.shape, r.v, r.mag);
                        }
}

TEST_CASE_TEMPLATE("matmul: batches, broadcasting and vectors", T, float, double) {
    struct case_t {
        shape_t xs, ys;
        bool tx, ty;
        shape_t out;
    };
    const case_t cases[] = {
        {{2, 3, 5, 4}, {4, 6}, false, false, {2, 3, 5, 6}},      // Y shared: one tall GEMM
        {{2, 3, 5, 4}, {6, 4}, false, true, {2, 3, 5, 6}},
        {{2, 3, 4, 5}, {4, 6}, true, false, {2, 3, 5, 6}},
        {{5, 4}, {3, 4, 7}, false, false, {3, 5, 7}},            // X broadcast
        {{2, 1, 5, 4}, {1, 3, 4, 7}, false, false, {2, 3, 5, 7}},  // both broadcast
        {{2, 1, 4, 5}, {3, 7, 4}, true, true, {2, 3, 5, 7}},
        {{3, 5, 4}, {3, 4, 2}, false, false, {3, 5, 2}},
        {{4}, {4}, false, false, {1}},                           // dot product
        {{4}, {4, 3}, false, false, {3}},
        {{4}, {3, 4}, false, true, {3}},
        {{3}, {1, 4}, true, false, {3, 4}},                      // a transposed X vector is a column
        {{3}, {4, 1}, true, true, {3, 4}},
        {{5, 1}, {4}, false, true, {5, 4}},                      // a transposed Y vector is a row
        {{2, 1, 5}, {4}, true, true, {2, 5, 4}},
        {{1}, {1, 4}, true, false, {4}},                         // Out drops the column's unit dim
        {{3}, {1}, true, false, {3}},
        {{5, 4}, {4}, false, false, {5}},
        {{2, 3, 5, 4}, {4}, false, false, {2, 3, 5}},
        {{4}, {2, 4, 3}, false, false, {2, 3}},
        {{0, 5, 4}, {4, 3}, false, false, {0, 5, 3}},            // empty batch
        {{2, 0, 4}, {4, 3}, false, false, {2, 0, 3}},
        {{2, 5, 0}, {0, 3}, false, false, {2, 5, 3}},            // K = 0: zeros
    };
    std::uint64_t seed = 21;
    for (auto& cs : cases) {
        Program p;
        auto x = p.input<T>("x", to_shape(cs.xs));
        auto y = p.input<T>("y", to_shape(cs.ys));
        auto out = dlgraph::matmul(x, y, cs.tx, cs.ty, 1.5);
        INFO("x " << to_string(to_shape(cs.xs)) << " y " << to_string(to_shape(cs.ys)) << " tx " << cs.tx << " ty "
                  << cs.ty);
        CHECK(out.shape() == to_shape(cs.out));
        auto xv = rnd<T>(cs.xs, seed++);
        auto yv = rnd<T>(cs.ys, seed++);
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, xv}, {y, yv}});
        auto r = ref_matmul(cs.xs, as_double(xv), cs.ys, as_double(yv), cs.tx, cs.ty, 1.5);
        REQUIRE(r.shape == cs.out);
        check_close(got, cs.out, r.v, r.mag);
    }
}

TEST_CASE("matmul: unknown dims at build time, concrete at run time") {
    Program p;
    auto x = p.input<double>("x", {-1, 3, 4});
    auto y = p.input<double>("y", {4, 5});
    auto out = dlgraph::matmul(x, y);
    CHECK(out.shape() == Shape{-1, 3, 5});
    auto b = p.input<double>("b", {-1, -1, 4, 2});
    CHECK(dlgraph::matmul(x, b).shape() == Shape{-1, -1, 3, 2});
    auto u = p.input<double>("u", {7, -1, 4});
    CHECK(dlgraph::matmul(u, b).shape() == Shape{-1, 7, -1, 2});  // -1 vs 7: 7 (or an error at run time)
    auto xv = rnd<double>({2, 3, 4}, 5);
    auto yv = rnd<double>({4, 5}, 6);
    Session<dlgraph::cpu> s(p);
    xt::xarray<double> got = s.eval(out, {{x, xv}, {y, yv}});
    auto r = ref_matmul({2, 3, 4}, as_double(xv), {4, 5}, as_double(yv), false, false, 1.0);
    check_close(got, {2, 3, 5}, r.v, r.mag);
    // A second batch size reuses the plan with a new shape pass.
    auto xv2 = rnd<double>({5, 3, 4}, 7);
    xt::xarray<double> got2 = s.eval(out, {{x, xv2}, {y, yv}});
    auto r2 = ref_matmul({5, 3, 4}, as_double(xv2), {4, 5}, as_double(yv), false, false, 1.0);
    check_close(got2, {5, 3, 5}, r2.v, r2.mag);
}

TEST_CASE("matmul: errors name both shapes") {
    Program p;
    auto x = p.input<float>("x", {2, 3});
    auto y = p.input<float>("y", {4, 5});
    check_throws<dlgraph::shape_error>(
        [&] { dlgraph::matmul(x, y); },
        {"dlgraph.shape.matmul", "matmul", "X is [2,3] but Y is [4,5]: X's dim 1 (3) must equal Y's dim 0 (4)"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::matmul(x, y, true, true); },
                                       {"X is [2,3] (transpose_X) but Y is [4,5] (transpose_Y)",
                                        "X's dim 0 (2) must equal Y's dim 1 (5)"});
    // A transposed vector is a column (X) or a row (Y) whose K is 1.
    auto vec = p.input<float>("vec", {3});
    check_throws<dlgraph::shape_error>(
        [&] { dlgraph::matmul(vec, y, true); },
        {"X is [3] (transpose_X) but Y is [4,5]: X (a transposed vector, so K is 1) must equal Y's dim 0 (4)"});
    check_throws<dlgraph::shape_error>(
        [&] { dlgraph::matmul(x, vec, false, true); },
        {"X is [2,3] but Y is [3] (transpose_Y): X's dim 1 (3) must equal Y (a transposed vector, so K is 1)"});
    auto a = p.input<float>("a", {2, 3, 4});
    auto b = p.input<float>("b", {5, 4, 6});
    check_throws<dlgraph::shape_error>([&] { dlgraph::matmul(a, b); },
                                       {"X is [2,3,4] but Y is [5,4,6]", "batch dims", "(2)", "(5)"});
    auto i = p.input<std::int32_t>("i", {2, 2});
    check_throws<dlgraph::type_error>([&] { dlgraph::matmul(i, i); }, {"dlgraph.type.op", "X must be FP32 or FP64"});
    // Run-time shapes that do not fit fail in the shape pass, before any kernel.
    auto u = p.input<float>("u", {2, -1});
    auto v = p.input<float>("v", {-1, 2});
    auto out2 = dlgraph::matmul(u, v);
    CHECK(out2.shape() == Shape{2, 2});
    Session<dlgraph::cpu> s(p);
    check_throws<dlgraph::shape_error>(
        [&] {
            xt::xarray<float> uv = rnd<float>({2, 3}, 1), vv = rnd<float>({4, 2}, 2);
            (void)s.eval(out2, {{u, uv}, {v, vv}});
        },
        {"dlgraph.shape.matmul", "X is [2,3] but Y is [4,2]"});
}

// ---- softmax ----------------------------------------------------------------------------------

namespace {
// Softmax of a flat array along `axis` of `shape`, in double.
std::vector<double> ref_softmax(const std::vector<double>& x, const shape_t& shape, std::size_t axis) {
    std::vector<double> y(x.size());
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < axis; ++i) outer *= shape[i];
    for (std::size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
    const std::size_t d = shape[axis];
    for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t j = 0; j < inner; ++j) {
            double m = -std::numeric_limits<double>::infinity();
            for (std::size_t k = 0; k < d; ++k) m = std::max(m, x[(o * d + k) * inner + j]);
            double s = 0;
            for (std::size_t k = 0; k < d; ++k) s += std::exp(x[(o * d + k) * inner + j] - m);
            for (std::size_t k = 0; k < d; ++k) y[(o * d + k) * inner + j] = std::exp(x[(o * d + k) * inner + j] - m) / s;
        }
    return y;
}
}  // namespace

TEST_CASE_TEMPLATE("softmax: every axis, odd sizes, large values", T, float, double) {
    struct case_t {
        shape_t shape;
        int axis;
    };
    const case_t cases[] = {{{3, 17}, -1}, {{3, 17}, 1},  {{3, 17}, 0},   {{2, 5, 19}, 1}, {{2, 5, 19}, -2},
                            {{2, 5, 3}, 0}, {{1, 1}, -1}, {{65}, 0},      {{4, 1, 33}, 1}, {{2, 3, 4, 5}, 2},
                            {{0, 5}, -1},  {{5, 0}, 0}};
    std::uint64_t seed = 31;
    for (auto& cs : cases)
        for (double scale : {3.0, 500.0}) {
            Program p;
            auto x = p.input<T>("x", to_shape(cs.shape));
            auto out = dlgraph::softmax(x, cs.axis);
            CHECK(out.shape() == to_shape(cs.shape));
            auto xv = rnd<T>(cs.shape, seed++, -scale, scale);
            Session<dlgraph::cpu> s(p);
            xt::xarray<T> got = s.eval(out, {{x, xv}});
            const std::size_t a = static_cast<std::size_t>(cs.axis < 0 ? cs.axis + static_cast<int>(cs.shape.size()) : cs.axis);
            INFO("shape " << to_string(to_shape(cs.shape)) << " axis " << cs.axis << " scale " << scale);
            // exp(x - m) of FP32 inputs of size 500 magnifies input rounding;
            // the reference starts from the same rounded inputs, so only the
            // kernel's own rounding remains.
            check_close(got, cs.shape, ref_softmax(as_double(xv), cs.shape, a));
        }
}

TEST_CASE("softmax: unknown dims and a bad axis") {
    Program p;
    auto x = p.input<double>("x", {-1, 3});
    CHECK(dlgraph::softmax(x).shape() == Shape{-1, 3});
    check_throws<dlgraph::shape_error>([&] { dlgraph::softmax(x, 2); },
                                       {"dlgraph.shape.axis", "softmax", "axis 2", "X of shape [-1,3]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::softmax(x, -3); }, {"axis -3", "[-1,3]"});
    auto i = p.input<std::int64_t>("i", {2});
    check_throws<dlgraph::type_error>([&] { dlgraph::softmax(i); }, {"X must be FP32 or FP64, not INT64"});
}

// ---- cross_entropy and softmax_with_cross_entropy ---------------------------------------------

TEST_CASE_TEMPLATE("cross_entropy: hard and soft labels", T, float, double) {
    std::uint64_t seed = 41;
    for (auto shape : {shape_t{5, 7}, shape_t{2, 3, 17}, shape_t{1, 1}, shape_t{0, 4}}) {
        const std::size_t d = shape.back(), rows = count(shape) / d;
        shape_t lshape = shape;
        lshape.back() = 1;
        // Probabilities: positive rows normalised to 1.
        auto xv = rnd<T>(shape, seed++, 0.05, 1.0);
        for (std::size_t r = 0; r < rows; ++r) {
            double s = 0;
            for (std::size_t k = 0; k < d; ++k) s += static_cast<double>(xv.data()[r * d + k]);
            for (std::size_t k = 0; k < d; ++k) xv.data()[r * d + k] = static_cast<T>(xv.data()[r * d + k] / s);
        }
        INFO("shape " << to_string(to_shape(shape)));
        {
            Program p;
            auto x = p.input<T>("x", to_shape(shape));
            auto l = p.input<std::int64_t>("l", to_shape(lshape));
            auto y = dlgraph::cross_entropy(x, l);
            CHECK(y.shape() == to_shape(lshape));
            auto lv = rnd_int<std::int64_t>(lshape, seed++, 0, static_cast<std::int64_t>(d) - 1);
            Session<dlgraph::cpu> s(p);
            xt::xarray<T> got = s.eval(y, {{x, xv}, {l, lv}});
            std::vector<double> want;
            for (std::size_t r = 0; r < rows; ++r)
                want.push_back(-std::log(static_cast<double>(xv.data()[r * d + static_cast<std::size_t>(lv.data()[r])])));
            check_close(got, lshape, want);
        }
        {
            Program p;
            auto x = p.input<T>("x", to_shape(shape));
            auto l = p.input<T>("l", to_shape(shape));
            auto y = dlgraph::cross_entropy(x, l, true);
            CHECK(y.shape() == to_shape(lshape));
            auto lv = rnd<T>(shape, seed++, 0.0, 1.0);
            Session<dlgraph::cpu> s(p);
            xt::xarray<T> got = s.eval(y, {{x, xv}, {l, lv}});
            std::vector<double> want, mag;
            for (std::size_t r = 0; r < rows; ++r) {
                double acc = 0, m = 0;
                for (std::size_t k = 0; k < d; ++k) {
                    const double t = static_cast<double>(lv.data()[r * d + k]) * std::log(static_cast<double>(xv.data()[r * d + k]));
                    acc += t;
                    m += std::abs(t);
                }
                want.push_back(-acc);
                mag.push_back(m);
            }
            check_close(got, lshape, want, mag);
        }
    }
}

TEST_CASE("cross_entropy: label range and shape errors") {
    Program p;
    auto x = p.input<double>("x", {3, 5});
    auto l = p.input<std::int64_t>("l", {3, 1});
    auto y = dlgraph::cross_entropy(x, l);
    Session<dlgraph::cpu> s(p);
    xt::xarray<double> xv = rnd<double>({3, 5}, 1, 0.1, 1.0);
    for (std::int64_t bad : {5, -1, 100}) {
        auto lv = xt::xarray<std::int64_t>::from_shape({3, 1});
        lv(0, 0) = 0;
        lv(1, 0) = bad;
        lv(2, 0) = 2;
        check_throws<dlgraph::value_error>([&] { (void)s.eval(y, {{x, xv}, {l, lv}}); },
                                           {"dlgraph.value.label", "label " + std::to_string(bad), "[0, 5)"});
    }
    auto l2 = p.input<std::int64_t>("l2", {3, 2});
    check_throws<dlgraph::shape_error>([&] { dlgraph::cross_entropy(x, l2); },
                                       {"dlgraph.shape.loss", "X is [3,5] but Label is [3,2]", "must be 1"});
    auto l3 = p.input<std::int64_t>("l3", {4, 1});
    check_throws<dlgraph::shape_error>([&] { dlgraph::cross_entropy(x, l3); }, {"X is [3,5] but Label is [4,1]", "dim 0"});
    // A hard Label one rank lower (Paddle's): Y has its shape; two lower, or
    // a soft one, is refused.
    auto l4 = p.input<std::int64_t>("l4", {3});
    CHECK(dlgraph::cross_entropy(x, l4).shape() == Shape{3});
    auto l4s = p.input<double>("l4s", {3});
    check_throws<dlgraph::shape_error>([&] { dlgraph::cross_entropy(x, l4s, true); },
                                       {"X is [3,5] but Label is [3]: Label must have X's rank (2)"});
    auto x3 = p.input<double>("x3", {2, 3, 5});
    check_throws<dlgraph::shape_error>([&] { dlgraph::cross_entropy(x3, l4); },
                                       {"X is [2,3,5] but Label is [3]: Label must have X's rank (3) or one less"});
    auto l5 = p.input<std::int32_t>("l5", {3, 1});
    check_throws<dlgraph::type_error>([&] { dlgraph::cross_entropy(x, l5); }, {"Label must be INT64, not INT32"});
    auto l6 = p.input<double>("l6", {3, 4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::cross_entropy(x, l6, true); }, {"soft Label", "[3,4]"});
    auto l7 = p.input<float>("l7", {3, 5});
    check_throws<dlgraph::type_error>([&] { dlgraph::cross_entropy(x, l7, true); }, {"X is FP64 but Label is FP32"});
    auto u = p.input<double>("u", {-1, 5});
    auto lu = p.input<std::int64_t>("lu", {-1, 1});
    CHECK(dlgraph::cross_entropy(u, lu).shape() == Shape{-1, 1});
    auto lk = p.input<std::int64_t>("lk", {4, -1});
    CHECK(dlgraph::cross_entropy(u, lk).shape() == Shape{4, 1});
}

TEST_CASE_TEMPLATE("softmax_with_cross_entropy: hard and soft, stable on large logits", T, float, double) {
    std::uint64_t seed = 51;
    for (auto shape : {shape_t{5, 7}, shape_t{2, 3, 33}, shape_t{1, 1}, shape_t{0, 3}})
        for (double scale : {2.0, 800.0})
            for (bool soft : {false, true}) {
                const std::size_t d = shape.back(), rows = count(shape) / d;
                shape_t lshape = shape;
                lshape.back() = 1;
                auto xv = rnd<T>(shape, seed++, -scale, scale);
                Program p;
                auto x = p.input<T>("x", to_shape(shape));
                xt::xarray<T> got_sm, got_loss;
                std::vector<double> xd = as_double(xv), sm = ref_softmax(xd, shape, shape.size() - 1), loss, mag;
                // Reference loss from log-sum-exp in double.
                std::vector<double> lse(rows);
                for (std::size_t r = 0; r < rows; ++r) {
                    double m = -std::numeric_limits<double>::infinity(), s = 0;
                    for (std::size_t k = 0; k < d; ++k) m = std::max(m, xd[r * d + k]);
                    for (std::size_t k = 0; k < d; ++k) s += std::exp(xd[r * d + k] - m);
                    lse[r] = m + std::log(s);
                }
                INFO("shape " << to_string(to_shape(shape)) << " scale " << scale << " soft " << soft);
                if (soft) {
                    auto l = p.input<T>("l", to_shape(shape));
                    auto [smv, lossv] = dlgraph::softmax_with_cross_entropy(x, l, true);
                    CHECK(smv.shape() == to_shape(shape));
                    CHECK(lossv.shape() == to_shape(lshape));
                    auto lv = rnd<T>(shape, seed++, 0.0, 1.0);
                    Session<dlgraph::cpu> s(p);
                    got_sm = s.eval(smv, {{x, xv}, {l, lv}});
                    got_loss = s.eval(lossv, {{x, xv}, {l, lv}});
                    for (std::size_t r = 0; r < rows; ++r) {
                        double acc = 0, m = 0;
                        for (std::size_t k = 0; k < d; ++k) {
                            const double t = static_cast<double>(lv.data()[r * d + k]) * (lse[r] - xd[r * d + k]);
                            acc += t;
                            m += std::abs(static_cast<double>(lv.data()[r * d + k])) * (std::abs(lse[r]) + std::abs(xd[r * d + k]));
                        }
                        loss.push_back(acc);
                        mag.push_back(m);
                    }
                } else {
                    auto l = p.input<std::int64_t>("l", to_shape(lshape));
                    auto [smv, lossv] = dlgraph::softmax_with_cross_entropy(x, l);
                    CHECK(lossv.shape() == to_shape(lshape));
                    auto lv = rnd_int<std::int64_t>(lshape, seed++, 0, static_cast<std::int64_t>(d) - 1);
                    Session<dlgraph::cpu> s(p);
                    auto both = s.eval({smv, lossv}, {{x, xv}, {l, lv}});
                    got_sm = dlgraph::to_xarray<T>(both[0]);
                    got_loss = dlgraph::to_xarray<T>(both[1]);
                    for (std::size_t r = 0; r < rows; ++r) {
                        const double xl = xd[r * d + static_cast<std::size_t>(lv.data()[r])];
                        loss.push_back(lse[r] - xl);
                        mag.push_back(std::abs(lse[r]) + std::abs(xl));
                    }
                }
                check_close(got_sm, shape, sm);
                check_close(got_loss, lshape, loss, mag);
                for (auto v : got_loss) CHECK(std::isfinite(static_cast<double>(v)));
            }
}

TEST_CASE("softmax_with_cross_entropy: label out of range and shapes") {
    Program p;
    auto x = p.input<float>("x", {2, 4});
    auto l = p.input<std::int64_t>("l", {2, 1});
    auto [sm, loss] = dlgraph::softmax_with_cross_entropy(x, l);
    (void)sm;
    Session<dlgraph::cpu> s(p);
    xt::xarray<float> xv = rnd<float>({2, 4}, 3);
    auto lv = xt::xarray<std::int64_t>::from_shape({2, 1});
    lv(0, 0) = 4;
    lv(1, 0) = 0;
    check_throws<dlgraph::value_error>([&] { (void)s.eval(loss, {{x, xv}, {l, lv}}); },
                                       {"dlgraph.value.label", "softmax_with_cross_entropy", "label 4", "[0, 4)"});
    auto bad = p.input<std::int64_t>("bad", {2, 4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::softmax_with_cross_entropy(x, bad); },
                                       {"Logits is [2,4] but Label is [2,4]"});
    auto u = p.input<float>("u", {-1, -1, 6});
    auto lu = p.input<std::int64_t>("lu", {3, -1, 1});
    auto [su, lossu] = dlgraph::softmax_with_cross_entropy(u, lu);
    CHECK(su.shape() == Shape{-1, -1, 6});
    CHECK(lossu.shape() == Shape{3, -1, 1});
}

TEST_CASE_TEMPLATE("cross entropy losses: ignore_index (Paddle) gives rows of loss 0 and no gradient", T, float,
                   double) {
    // Labels [5, 1]: a padding class 0 as ignore_index, then Paddle's default
    // -100, which is no class at all.
    const std::size_t d = 4;
    xt::xarray<T> zv = rnd<T>({5, d}, 7, -2.0, 2.0);
    for (const std::int64_t ignore : {std::int64_t(0), std::int64_t(-100)}) {
        INFO("ignore_index " << ignore);
        xt::xarray<std::int64_t> lv = xt::xarray<std::int64_t>::from_shape({5, 1});
        for (std::size_t r = 0; r < 5; ++r) lv(r, 0) = r % 2 ? ignore : std::int64_t(r / 2 + 1);  // 1, -, 2, -, 3
        Program p;
        auto z = p.input<T>("z", {5, static_cast<std::int64_t>(d)});
        auto l = p.input<std::int64_t>("l", {5, 1});
        auto w = p.parameter<T>("w", {5, static_cast<std::int64_t>(d)}, dlgraph::init::constant(0));
        auto logits = z + w;
        auto [sm, loss] = dlgraph::softmax_with_cross_entropy(logits, l, false, ignore);
        auto prob = dlgraph::softmax(logits);
        auto ce = dlgraph::cross_entropy(prob, l, false, ignore);
        auto total = dlgraph::reduce_sum(loss) + dlgraph::reduce_sum(ce);
        auto grads = dlgraph::append_backward(total);
        REQUIRE(grads.size() == 1);
        Session<dlgraph::cpu> s(p);
        auto outs = s.eval({dlgraph::TargetRef(loss), dlgraph::TargetRef(ce), dlgraph::TargetRef(grads[0].second)},
                           {{z, zv}, {l, lv}});
        const xt::xarray<T> got_loss = dlgraph::to_xarray<T>(outs[0]), got_ce = dlgraph::to_xarray<T>(outs[1]),
                            got_g = dlgraph::to_xarray<T>(outs[2]);
        std::vector<double> want_loss, want_g;
        for (std::size_t r = 0; r < 5; ++r) {
            double m = -INFINITY, sum = 0;
            for (std::size_t k = 0; k < d; ++k) m = std::max(m, static_cast<double>(zv(r, k)));
            for (std::size_t k = 0; k < d; ++k) sum += std::exp(static_cast<double>(zv(r, k)) - m);
            const bool ignored = lv(r, 0) == ignore;
            const auto lab = static_cast<std::size_t>(lv(r, 0));
            want_loss.push_back(ignored ? 0.0 : m + std::log(sum) - static_cast<double>(zv(r, lab)));
            // d/dz of both losses: 2 * (softmax - onehot), 0 on an ignored row.
            for (std::size_t k = 0; k < d; ++k) {
                const double pk = std::exp(static_cast<double>(zv(r, k)) - m) / sum;
                want_g.push_back(ignored ? 0.0 : 2 * (pk - (k == lab ? 1.0 : 0.0)));
            }
        }
        check_close(got_loss, {5, 1}, want_loss);
        check_close(got_ce, {5, 1}, want_loss);
        check_close(got_g, {5, d}, want_g);
        for (std::size_t r : {std::size_t(1), std::size_t(3)}) {
            CHECK(got_loss(r, 0) == T(0));  // exactly 0, not a rounding
            for (std::size_t k = 0; k < d; ++k) CHECK(got_g(r, k) == T(0));
        }
        // A label that is neither a class nor ignore_index is still refused.
        lv(4, 0) = ignore == 0 ? -100 : -1;
        check_throws<dlgraph::value_error>([&] { (void)s.eval(loss, {{z, zv}, {l, lv}}); },
                                           {"dlgraph.value.label", "label " + std::to_string(lv(4, 0)), "[0, 4)"});
    }
}

// ---- mean and reduce_* ------------------------------------------------------------------------

TEST_CASE_TEMPLATE("mean: everything to [1]", T, float, double) {
    std::uint64_t seed = 61;
    for (auto shape : {shape_t{3, 5}, shape_t{1}, shape_t{2, 3, 37}, shape_t{1000}}) {
        Program p;
        auto x = p.input<T>("x", to_shape(shape));
        auto m = dlgraph::mean(x);
        CHECK(m.shape() == Shape{1});
        auto xv = rnd<T>(shape, seed++);
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(m, {{x, xv}});
        double sum = 0, mag = 0;
        for (auto v : xv) {
            sum += static_cast<double>(v);
            mag += std::abs(static_cast<double>(v));
        }
        check_close(got, {1}, {sum / static_cast<double>(xv.size())}, {mag / static_cast<double>(xv.size())});
    }
    Program p;
    auto x = p.input<T>("x", {0, 3});
    auto m = dlgraph::mean(x);
    Session<dlgraph::cpu> s(p);
    xt::xarray<T> got = s.eval(m, {{x, xt::xarray<T>::from_shape({0, 3})}});
    CHECK(std::isnan(static_cast<double>(got(0))));
}

namespace {
enum class red_kind { sum, mean, max, min, prod };

// Reduces over the dims flagged in `red`; Out shape per keep_dim (Paddle: [1]
// when nothing is left).
std::pair<shape_t, std::vector<double>> ref_reduce(const std::vector<double>& x, const shape_t& shape,
                                                  const std::vector<bool>& red, bool keep, red_kind kind) {
    shape_t out_full, out;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        out_full.push_back(red[i] ? 1 : shape[i]);
        if (!red[i]) out.push_back(shape[i]);
        else if (keep) out.push_back(1);
    }
    if (out.empty()) out = {1};
    const std::size_t n = count(out_full);
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> acc(n, kind == red_kind::max ? -inf : kind == red_kind::min ? inf : kind == red_kind::prod ? 1.0 : 0.0);
    std::vector<std::size_t> cnt(n, 0);
    for (std::size_t f = 0; f < x.size(); ++f) {
        shape_t idx = unravel(f, shape);
        for (std::size_t i = 0; i < shape.size(); ++i)
            if (red[i]) idx[i] = 0;
        const std::size_t o = ravel(idx, out_full);
        if (kind == red_kind::max) acc[o] = std::max(acc[o], x[f]);
        else if (kind == red_kind::min) acc[o] = std::min(acc[o], x[f]);
        else if (kind == red_kind::prod) acc[o] *= x[f];
        else acc[o] += x[f];
        ++cnt[o];
    }
    if (kind == red_kind::mean) {
        std::size_t c = 1;
        for (std::size_t i = 0; i < shape.size(); ++i)
            if (red[i]) c *= shape[i];
        for (auto& v : acc) v /= static_cast<double>(c);
    }
    return {out, acc};
}

template <class T> dlgraph::Var<T> apply_reduce(red_kind k, const dlgraph::Var<T>& x, std::vector<std::int64_t> dims, bool keep) {
    switch (k) {
        case red_kind::sum: return dlgraph::reduce_sum(x, dims, keep);
        case red_kind::mean: return dlgraph::reduce_mean(x, dims, keep);
        case red_kind::min: return dlgraph::reduce_min(x, dims, keep);
        case red_kind::prod: return dlgraph::reduce_prod(x, dims, keep);
        default: return dlgraph::reduce_max(x, dims, keep);
    }
}
}  // namespace

TEST_CASE_TEMPLATE("reduce_sum / reduce_mean / reduce_max: dim sets, keep_dim, reduce_all", T, float, double) {
    const std::vector<std::vector<std::int64_t>> dim_sets = {{0}, {1}, {3}, {-1}, {0, 2}, {1, 2}, {0, 3}, {-3, -1},
                                                             {2, 1}, {0, 1, 2, 3}, {}};
    std::uint64_t seed = 71;
    for (auto shape : {shape_t{2, 3, 4, 5}, shape_t{3, 1, 17, 2}, shape_t{1, 33, 1, 7}})
        for (auto& dims : dim_sets)
            for (bool keep : {false, true})
                for (red_kind k : {red_kind::sum, red_kind::mean, red_kind::max}) {
                    Program p;
                    auto x = p.input<T>("x", to_shape(shape));
                    auto out = apply_reduce(k, x, dims, keep);
                    std::vector<bool> red(shape.size(), dims.empty());
                    for (auto d : dims) red[static_cast<std::size_t>(d < 0 ? d + 4 : d)] = true;
                    auto xv = rnd<T>(shape, seed++);
                    auto [os, want] = ref_reduce(as_double(xv), shape, red, keep, k);
                    INFO("shape " << to_string(to_shape(shape)) << " dims " << to_string(Shape(dims)) << " keep "
                                  << keep << " kind " << static_cast<int>(k));
                    CHECK(out.shape() == to_shape(os));
                    Session<dlgraph::cpu> s(p);
                    xt::xarray<T> got = s.eval(out, {{x, xv}});
                    // Sums of values in [-1, 1]: scale errors by the count.
                    check_close(got, os, want, std::vector<double>(want.size(), static_cast<double>(xv.size())));
                }
}

TEST_CASE_TEMPLATE("reduce_sum / reduce_max: integer dtypes are exact", T, std::int32_t, std::int64_t) {
    const shape_t shape{3, 4, 5};
    auto xv = rnd_int<T>(shape, 81, -1000, 1000);
    for (auto dims : std::vector<std::vector<std::int64_t>>{{1}, {0, 2}, {}})
        for (bool mx : {false, true}) {
            Program p;
            auto x = p.input<T>("x", to_shape(shape));
            auto out = mx ? dlgraph::reduce_max(x, dims) : dlgraph::reduce_sum(x, dims);
            std::vector<bool> red(3, dims.empty());
            for (auto d : dims) red[static_cast<std::size_t>(d)] = true;
            auto [os, want] = ref_reduce(as_double(xv), shape, red, false, mx ? red_kind::max : red_kind::sum);
            Session<dlgraph::cpu> s(p);
            xt::xarray<T> got = s.eval(out, {{x, xv}});
            std::vector<T> wt;
            for (auto v : want) wt.push_back(static_cast<T>(v));
            check_exact(got, os, wt);
        }
}

// Sizes that are not multiples of the vector width, of the 8 batches in
// flight, of the 8-row groups or of a pairwise leaf (4096 floats, 2048
// doubles), so that every tail of the folds runs. Errors are scaled by the
// sum of |terms| of each output (a tight bound), and max must be exact.
TEST_CASE_TEMPLATE("reduce_sum / reduce_mean / reduce_max / mean: odd sizes on each axis", T, float, double) {
    std::uint64_t seed = 91;
    for (auto shape : {shape_t{3, 1037}, shape_t{19, 1037}, shape_t{1037, 3}, shape_t{2, 3 * 4096 + 77},
                       shape_t{5, 7, 333}})
        for (auto dims : std::vector<std::vector<std::int64_t>>{{0}, {1}, {-1}, {0, 2}, {}}) {
            if (dims.size() == 2 && shape.size() < 3) continue;
            if (dims == std::vector<std::int64_t>{-1} && shape.size() < 3) continue;
            std::vector<bool> red(shape.size(), dims.empty());
            for (auto d : dims) red[static_cast<std::size_t>(d < 0 ? d + static_cast<std::int64_t>(shape.size()) : d)] = true;
            auto xv = rnd<T>(shape, seed++);
            std::vector<double> xd = as_double(xv), xa;
            for (auto v : xd) xa.push_back(std::abs(v));
            for (red_kind k : {red_kind::sum, red_kind::mean, red_kind::max}) {
                INFO("shape " << to_string(to_shape(shape)) << " dims " << to_string(Shape(dims)) << " kind "
                              << static_cast<int>(k));
                Program p;
                auto x = p.input<T>("x", to_shape(shape));
                auto out = apply_reduce(k, x, dims, false);
                auto [os, want] = ref_reduce(xd, shape, red, false, k);
                Session<dlgraph::cpu> s(p);
                xt::xarray<T> got = s.eval(out, {{x, xv}});
                if (k == red_kind::max) check_close(got, os, want, {}, 0.0);
                else check_close(got, os, want, ref_reduce(xa, shape, red, false, k).second);
            }
            if (dims.empty()) {
                Program p;
                auto x = p.input<T>("x", to_shape(shape));
                auto m = dlgraph::mean(x);
                Session<dlgraph::cpu> s(p);
                xt::xarray<T> got = s.eval(m, {{x, xv}});
                check_close(got, {1}, ref_reduce(xd, shape, red, false, red_kind::mean).second,
                            ref_reduce(xa, shape, red, false, red_kind::mean).second);
            }
        }
}

// The contiguous fold is blocked and pairwise: a sum of 2^20 + 37 FP32
// values in [0, 1) stays within ~1e-7 of the exact sum, where one running
// sum drifts to ~1e-5. Results depend on the shape only: the same values
// read from buffers of any alignment give bit-identical results, for the
// contiguous fold and for the fold over rows (which picks its batch width by
// alignment).
TEST_CASE("reduce_sum / mean over a million FP32 values: pairwise accuracy, independent of alignment") {
    const std::size_t n = (std::size_t{1} << 20) + 37;
    const std::int64_t rows = 16384, cols = 64;  // the first 2^20 values as a matrix
    auto xv = rnd<float>({n}, 7, 0.0, 1.0);
    double exact = 0;
    std::vector<double> col_exact(cols, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        exact += static_cast<double>(xv(i));
        if (i < static_cast<std::size_t>(rows * cols)) col_exact[i % cols] += static_cast<double>(xv(i));
    }
    Program p;
    auto x = p.input<float>("x", {-1});
    auto m = p.input<float>("m", {-1, cols});
    auto total = dlgraph::reduce_sum(x);
    auto avg = dlgraph::mean(x);
    auto col = dlgraph::reduce_sum(m, {0});
    Session<dlgraph::cpu> s(p);
    std::vector<float> buf(n + 16);
    std::vector<float> first;
    for (std::size_t off = 0; off < 16; ++off) {
        std::copy(xv.begin(), xv.end(), buf.begin() + static_cast<std::ptrdiff_t>(off));
        const auto view = dlgraph::Tensor::borrow(dlgraph::DataType::FP32, Shape{static_cast<std::int64_t>(n)},
                                                  buf.data() + off);
        const auto mat = dlgraph::Tensor::borrow(dlgraph::DataType::FP32, Shape{rows, cols}, buf.data() + off);
        auto got = s.eval({total, avg, col}, {{x.name(), view}, {m.name(), mat}});
        const float sum = *got[0].data<float>(), mean = *got[1].data<float>();
        INFO("offset " << off << " sum " << sum << " exact " << exact);
        CHECK(std::abs(static_cast<double>(sum) - exact) <= 1e-6 * exact);
        CHECK(std::abs(static_cast<double>(mean) - exact / static_cast<double>(n)) <= 1e-6 * exact / static_cast<double>(n));
        std::vector<float> all{sum, mean};
        for (std::int64_t j = 0; j < cols; ++j) {
            const float c = got[2].data<float>()[j];
            CHECK(std::abs(static_cast<double>(c) - col_exact[static_cast<std::size_t>(j)]) <=
                  1e-4 * col_exact[static_cast<std::size_t>(j)]);
            all.push_back(c);
        }
        if (off == 0) first = all;
        CHECK(all == first);
    }
}

TEST_CASE("reduce: explicit reduce_all attribute, unknown dims, empty inputs, errors") {
    Program p;
    auto x = p.input<double>("x", {2, 3, 4});
    // reduce_all wins over dim.
    std::vector<std::vector<std::string>> names;
    int idx = p.append("reduce_sum", {{"X", {"x"}}}, {{"Out", 1}},
                       {dlgraph::Attribute::make_ints("dim", {1}), dlgraph::Attribute::make_bool("keep_dim", true),
                        dlgraph::Attribute::make_bool("reduce_all", true)},
                       &names);
    dlgraph::Var<double> all(p.state(), names[0][0], idx);
    CHECK(all.shape() == Shape{1, 1, 1});
    // All dims listed without keep_dim: [1].
    CHECK(dlgraph::reduce_max(x, {0, 1, 2}).shape() == Shape{1});
    auto xv = rnd<double>({2, 3, 4}, 3);
    Session<dlgraph::cpu> s(p);
    xt::xarray<double> got = s.eval(all, {{x, xv}});
    double want = 0;
    for (auto v : xv) want += v;
    check_close(got, {1, 1, 1}, {want}, {24.0});

    auto u = p.input<float>("u", {-1, 4});
    CHECK(dlgraph::reduce_sum(u, {1}).shape() == Shape{-1});
    CHECK(dlgraph::reduce_sum(u, {0}).shape() == Shape{4});
    CHECK(dlgraph::reduce_mean(u, {0}, true).shape() == Shape{1, 4});

    check_throws<dlgraph::shape_error>([&] { dlgraph::reduce_sum(x, {3}); },
                                       {"dlgraph.shape.axis", "reduce_sum", "dim 3 is out of range", "[2,3,4]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reduce_mean(x, {-4}); }, {"dim -4 is out of range", "[2,3,4]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reduce_max(x, {1, -2}); }, {"dim -2 is listed twice"});
    auto b = p.input<bool>("b", {2});
    check_throws<dlgraph::type_error>([&] { dlgraph::reduce_sum(b); }, {"X must be FP32 or FP64 or INT32 or INT64"});

    Program q;
    auto e = q.input<float>("e", {0, 3});
    auto es = dlgraph::reduce_sum(e, {0});
    auto em = dlgraph::reduce_max(e, {0});
    auto ek = dlgraph::reduce_sum(e, {1});
    Session<dlgraph::cpu> t(q);
    auto ev = xt::xarray<float>::from_shape({0, 3});
    check_close(xt::xarray<float>(t.eval(es, {{e, ev}})), {3}, {0, 0, 0});
    check_close(xt::xarray<float>(t.eval(em, {{e, ev}})), {3},
                std::vector<double>(3, -std::numeric_limits<double>::infinity()));
    check_close(xt::xarray<float>(t.eval(ek, {{e, ev}})), {0}, {});
}

// reduce_min is exact; reduce_prod is within (count + 1) rounding errors of
// the double product (values of magnitude 0.9 to 1.1 with random signs, so
// products of thousands stay in range). Sizes past the vector width, the 8
// batches in flight and a pairwise leaf, on every axis.
TEST_CASE_TEMPLATE("reduce_min / reduce_prod: dim sets, keep_dim, reduce_all, odd sizes", T, float, double) {
    const double eps = std::numeric_limits<T>::epsilon();
    std::uint64_t seed = 301;
    for (auto shape : {shape_t{2, 3, 4, 5}, shape_t{3, 1, 17, 2}, shape_t{3, 1037}, shape_t{1037, 3},
                       shape_t{2, 3 * 4096 + 77}, shape_t{5, 7, 333}})
        for (auto dims : std::vector<std::vector<std::int64_t>>{{0}, {1}, {-1}, {0, 2}, {1, 2}, {}})
            for (bool keep : {false, true}) {
                const auto rank = static_cast<std::int64_t>(shape.size());
                bool fits = true;
                for (auto d : dims) fits = fits && d < rank;
                if (!fits) continue;
                std::vector<bool> red(shape.size(), dims.empty());
                for (auto d : dims) red[static_cast<std::size_t>(d < 0 ? d + rank : d)] = true;
                auto xv = rnd<T>(shape, seed++, 0.9, 1.1);
                std::mt19937_64 g(seed);
                for (auto& v : xv)
                    if (g() % 2) v = -v;
                std::size_t folded = 1;
                for (std::size_t i = 0; i < shape.size(); ++i)
                    if (red[i]) folded *= shape[i];
                for (red_kind k : {red_kind::min, red_kind::prod}) {
                    INFO("shape " << to_string(to_shape(shape)) << " dims " << to_string(Shape(dims)) << " keep "
                                  << keep << (k == red_kind::min ? " min" : " prod"));
                    Program p;
                    auto x = p.input<T>("x", to_shape(shape));
                    auto out = apply_reduce(k, x, dims, keep);
                    auto [os, want] = ref_reduce(as_double(xv), shape, red, keep, k);
                    Session<dlgraph::cpu> s(p);
                    xt::xarray<T> got = s.eval(out, {{x, xv}});
                    if (k == red_kind::min) check_close(got, os, want, {}, 0.0);
                    else
                        check_close(got, os, want, std::vector<double>(want.size(), 0.0),
                                    static_cast<double>(folded + 1) * eps);
                }
            }
}

TEST_CASE_TEMPLATE("reduce_min / reduce_prod: integers are exact, and products wrap", T, std::int32_t, std::int64_t) {
    const shape_t shape{3, 4, 5};
    for (auto dims : std::vector<std::vector<std::int64_t>>{{1}, {0, 2}, {}})
        for (red_kind k : {red_kind::min, red_kind::prod}) {
            // Factors in [-3, 3]: at most 3^60 would overflow, so prod folds at most 20.
            auto xv = k == red_kind::min ? rnd_int<T>(shape, 83, -1000, 1000) : rnd_int<T>(shape, 84, -3, 3);
            if (k == red_kind::prod && dims.empty()) xv = rnd_int<T>(shape, 85, -1, 1);
            Program p;
            auto x = p.input<T>("x", to_shape(shape));
            auto out = apply_reduce(k, x, dims, false);
            std::vector<bool> red(3, dims.empty());
            for (auto d : dims) red[static_cast<std::size_t>(d)] = true;
            auto [os, want] = ref_reduce(as_double(xv), shape, red, false, k);
            Session<dlgraph::cpu> s(p);
            xt::xarray<T> got = s.eval(out, {{x, xv}});
            std::vector<T> wt;
            for (auto v : want) wt.push_back(static_cast<T>(v));
            check_exact(got, os, wt);
        }
    // Past the type's range a product wraps, as NumPy's does: modulo 2^bits.
    using U = std::make_unsigned_t<T>;
    const T big = std::numeric_limits<T>::max() / 3 + 7;
    Program p;
    auto x = p.input<T>("x", {3});
    auto out = dlgraph::reduce_prod(x);
    Session<dlgraph::cpu> s(p);
    xt::xarray<T> got = s.eval(out, {{x, xt::xarray<T>{big, T(5), T(-3)}}});
    const T wrapped = static_cast<T>(static_cast<U>(static_cast<U>(big) * U(5)) * static_cast<U>(T(-3)));
    CHECK(got(0) == wrapped);
}

// reduce_prod's gradient is the product of the other elements of the group:
// dout * Out / x where the group has no zero (Paddle's formula), and at a
// zero the product of the rest (Paddle's formula gives NaN there).
TEST_CASE_TEMPLATE("reduce_prod_grad: groups without a zero, with one, with two", T, float, double) {
    // Rows of [3, 4]: no zero; one zero; two zeros; a zero and a -0.
    const xt::xarray<T> xv = {{T(2), T(-1.5), T(3), T(0.5)},
                              {T(2), T(0), T(3), T(-4)},
                              {T(0), T(5), T(0), T(7)},
                              {T(-0.0), T(2), T(0.0), T(-3)}};
    const xt::xarray<T> dv = {T(1.5), T(-2), T(3), T(0.25)};
    Program p;
    auto x = p.input<T>("x", {4, 4});
    auto out = dlgraph::reduce_prod(x, {1});
    auto d = p.input<T>("d", {4});
    auto dx = dlgraph::apply_op<T>("reduce_prod_grad", {{"X", x}, {"Out", out}, {"Out@GRAD", d}},
                                   {dlgraph::Attribute::make_ints("dim", {1})}, "X@GRAD");
    Session<dlgraph::cpu> s(p);
    xt::xarray<T> got = s.eval(dx, {{x, xv}, {d, dv}});
    std::vector<double> want;
    for (std::size_t r = 0; r < 4; ++r)
        for (std::size_t j = 0; j < 4; ++j) {
            double others = 1;
            for (std::size_t k = 0; k < 4; ++k)
                if (k != j) others *= static_cast<double>(xv(r, k));
            want.push_back(static_cast<double>(dv(r)) * others);
        }
    check_close(got, {4, 4}, want, std::vector<double>(16, 0.0), 4 * std::numeric_limits<T>::epsilon());
    CHECK(got(1, 1) == T(-2 * 2 * 3 * -4));  // the only zero: the product of the rest
    CHECK(got(2, 0) == T(0));                // two zeros: every gradient is 0
    CHECK(got(2, 1) == T(0));
    for (auto v : got) CHECK_FALSE(std::isnan(v));
}

TEST_CASE("reduce_all / reduce_any: BOOL over dim sets, empty folds give true and false") {
    const shape_t shape{3, 4, 5};
    std::mt19937_64 g(7);
    auto xv = xt::xarray<bool>::from_shape(shape);
    for (auto& v : xv) v = g() % 4 != 0;  // mostly true, so some groups are all true
    for (auto dims : std::vector<std::vector<std::int64_t>>{{0}, {1}, {2}, {0, 2}, {1, 2}, {}})
        for (bool keep : {false, true})
            for (bool any : {false, true}) {
                INFO("dims " << to_string(Shape(dims)) << " keep " << keep << (any ? " any" : " all"));
                Program p;
                auto x = p.input<bool>("x", to_shape(shape));
                auto out = any ? dlgraph::reduce_any(x, dims, keep) : dlgraph::reduce_all(x, dims, keep);
                std::vector<bool> red(3, dims.empty());
                for (auto d : dims) red[static_cast<std::size_t>(d)] = true;
                // all: the min of 0/1 values; any: the max.
                auto [os, want] = ref_reduce(as_double(xv), shape, red, keep, any ? red_kind::max : red_kind::min);
                Session<dlgraph::cpu> s(p);
                xt::xarray<bool> got = s.eval(out, {{x, xv}});
                std::vector<bool> wb;
                for (auto v : want) wb.push_back(v != 0);
                REQUIRE(got.size() == wb.size());
                CHECK(shape_t(got.shape().begin(), got.shape().end()) == os);
                bool same = true;
                for (std::size_t i = 0; i < wb.size(); ++i) same = same && got.data()[i] == wb[i];
                CHECK(same);
            }
    // Over an empty dim: all of nothing is true, any of nothing is false.
    Program q;
    auto e = q.input<bool>("e", {0, 3});
    auto ea = dlgraph::reduce_all(e, {0});
    auto ey = dlgraph::reduce_any(e, {0});
    Session<dlgraph::cpu> t(q);
    auto ev = xt::xarray<bool>::from_shape({0, 3});
    auto res = t.eval({ea, ey}, {{e.name(), dlgraph::Tensor::borrow(dlgraph::DataType::BOOL, Shape{0, 3}, ev.data())}});
    for (int j = 0; j < 3; ++j) {
        CHECK(res[0].data<bool>()[j]);
        CHECK_FALSE(res[1].data<bool>()[j]);
    }
}

TEST_CASE("reduce_min / prod / all / any: dtypes and dims refused by name") {
    Program p;
    auto b = p.input<bool>("b", {2, 3});
    auto f = p.input<float>("f", {2, 3});
    check_throws<dlgraph::type_error>([&] { dlgraph::reduce_min(b); },
                                      {"reduce_min", "X must be FP32 or FP64 or INT32 or INT64"});
    check_throws<dlgraph::type_error>([&] { dlgraph::reduce_prod(b); }, {"reduce_prod", "X must be FP32"});
    check_throws<dlgraph::type_error>([&] { dlgraph::reduce_all(f); }, {"reduce_all", "X must be BOOL"});
    check_throws<dlgraph::type_error>([&] { dlgraph::reduce_any(f); }, {"reduce_any", "X must be BOOL"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reduce_any(b, {2}); },
                                       {"dlgraph.shape.axis", "reduce_any", "dim 2 is out of range", "[2,3]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reduce_prod(f, {0, -2}); }, {"dim -2 is listed twice"});
    // BOOL reductions have no gradient: a loss reached through one has none for X.
    CHECK_FALSE(dlgraph::find_op("reduce_all")->differentiable());
    CHECK_FALSE(dlgraph::find_op("reduce_any")->differentiable());
}

// Paddle's test_reduce_op.py, class by class: its op, shape, attributes
// (only those the class sets; dim defaults to [0]), input (np.random.random,
// or np.random.randint(0, 2) as BOOL) and NumPy formula; the classes that
// call check_grad are checked by finite differences too. Python keeps only
// the second of the file's two TestReduceAll classes; both are here.
TEST_CASE("Paddle's test_reduce_op.py classes") {
    struct paddle_reduce {
        const char* paddle_class;
        const char* op;
        shape_t shape;
        std::optional<std::vector<std::int64_t>> dim;  // unset: the op's default [0]
        bool keep_dim = false, reduce_all = false, check_grad = false;
    };
    using dims = std::vector<std::int64_t>;
    const std::vector<paddle_reduce> cases = {
        {"TestSumOp", "reduce_sum", {5, 6, 10}, {}, false, false, true},
        {"TestMeanOp", "reduce_mean", {5, 6, 2, 10}, dims{1}, false, false, true},
        {"TestMaxOp", "reduce_max", {5, 6, 10}, dims{-1}},
        {"TestMinOp", "reduce_min", {5, 6, 10}, dims{2}},
        {"TestProdOp", "reduce_prod", {5, 6, 10}, {}, false, false, true},
        {"TestAllOp", "reduce_all", {5, 6, 10}, {}, false, true},
        {"TestAllOpWithDim", "reduce_all", {5, 6, 10}, dims{1}},
        {"TestAllOpWithKeepDim", "reduce_all", {5, 6, 10}, dims{1}, true},
        {"TestAnyOp", "reduce_any", {5, 6, 10}, {}, false, true},
        {"TestAnyOpWithDim", "reduce_any", {5, 6, 10}, dims{1}},
        {"TestAnyOpWithKeepDim", "reduce_any", {5, 6, 10}, dims{1}, true},
        {"Test1DReduce", "reduce_sum", {20}, {}, false, false, true},
        {"Test2DReduce0", "reduce_sum", {20, 10}, dims{0}, false, false, true},
        {"Test2DReduce1", "reduce_sum", {20, 10}, dims{1}, false, false, true},
        {"Test3DReduce0", "reduce_sum", {5, 6, 7}, dims{1}, false, false, true},
        {"Test3DReduce1", "reduce_sum", {5, 6, 7}, dims{2}, false, false, true},
        {"Test3DReduce2", "reduce_sum", {5, 6, 7}, dims{-2}, false, false, true},
        {"Test3DReduce3", "reduce_sum", {5, 6, 7}, dims{1, 2}, false, false, true},
        {"TestKeepDimReduce", "reduce_sum", {5, 6, 10}, dims{1}, true, false, true},
        {"TestReduceAll (the first, shadowed in Python)", "reduce_sum", {5, 6, 2, 10}, {}, false, true, true},
        {"TestReduceMeanOpMultiAxises", "reduce_mean", {5, 6, 2, 10}, dims{1, 2}, false, false, true},
        {"TestReduceMaxOpMultiAxises", "reduce_max", {5, 6, 10}, dims{-2, -1}},
        {"TestReduceMinOpMultiAxises", "reduce_min", {5, 6, 10}, dims{1, 2}},
        {"TestKeepDimReduceSumMultiAxises", "reduce_sum", {5, 6, 10}, dims{-2, -1}, true, false, true},
        {"TestReduceSumWithDimOne", "reduce_sum", {10, 1, 1}, dims{1, 2}, true, false, true},
        {"TestReduceSumWithNumelOne", "reduce_sum", {1, 1}, dims{1}, false, false, true},
        {"TestReduceMeanWithDimOne", "reduce_mean", {10, 1, 1}, dims{1}, false, false, true},
        {"TestReduceMeanWithNumelOne", "reduce_mean", {1, 1}, dims{1}, true, false, true},
        {"TestReduceAll", "reduce_sum", {1, 1, 1}, {}, false, true, true},
        {"Test1DReduceWithAxes1", "reduce_sum", {1}, dims{0}, false, false, true},
    };
    std::uint64_t seed = 401;
    for (const auto& c : cases) {
        INFO(c.paddle_class << " (" << c.op << ")");
        std::vector<dlgraph::Attribute> attrs;
        if (c.dim) attrs.push_back(dlgraph::Attribute::make_ints("dim", *c.dim));
        if (c.keep_dim) attrs.push_back(dlgraph::Attribute::make_bool("keep_dim", true));
        if (c.reduce_all) attrs.push_back(dlgraph::Attribute::make_bool("reduce_all", true));
        const auto rank = static_cast<std::int64_t>(c.shape.size());
        std::vector<bool> red(c.shape.size(), c.reduce_all);
        for (auto d : c.dim.value_or(dims{0})) red[static_cast<std::size_t>(d < 0 ? d + rank : d)] = true;
        const std::string_view op = c.op;
        const bool logical = op == "reduce_all" || op == "reduce_any";
        const red_kind kind = op == "reduce_sum"    ? red_kind::sum
                              : op == "reduce_mean" ? red_kind::mean
                              : op == "reduce_min" || op == "reduce_all" ? red_kind::min
                              : op == "reduce_prod" ? red_kind::prod
                                                    : red_kind::max;  // max and any
        Program p;
        if (logical) {
            auto xv = xt::xarray<bool>::from_shape(c.shape);
            std::mt19937_64 g(seed++);
            for (auto& v : xv) v = g() % 2 == 1;
            auto x = p.input<bool>("x", to_shape(c.shape));
            auto out = dlgraph::apply_op<bool>(c.op, {{"X", x}}, attrs);
            Session<dlgraph::cpu> s(p);
            xt::xarray<bool> got = s.eval(out, {{x, xv}});
            auto [os, want] = ref_reduce(as_double(xv), c.shape, red, c.keep_dim, kind);
            REQUIRE(shape_t(got.shape().begin(), got.shape().end()) == os);
            for (std::size_t i = 0; i < want.size(); ++i) CHECK(got.data()[i] == (want[i] != 0));
            continue;
        }
        auto xv = rnd<double>(c.shape, seed++, 0.0, 1.0);
        auto x = p.input<double>("x", to_shape(c.shape));
        auto out = dlgraph::apply_op<double>(c.op, {{"X", x}}, attrs);
        Session<dlgraph::cpu> s(p);
        xt::xarray<double> got = s.eval(out, {{x, xv}});
        auto [os, want] = ref_reduce(as_double(xv), c.shape, red, c.keep_dim, kind);
        // Paddle's check_output compares within atol 1e-5; these are within 1e-12 relative.
        check_close(got, os, want, std::vector<double>(want.size(), kind == red_kind::prod ? 0.0 : 1.0), 1e-12);
        if (c.check_grad)
            grad_check::check({{"x", xv}}, [&](Program&, const std::vector<dlgraph::Var<double>>& v) {
                return dlgraph::apply_op<double>(c.op, {{"X", v[0]}}, attrs);
            });
    }
}

// ---- squeeze2, unsqueeze2, flip ----------------------------------------------------------------

TEST_CASE("squeeze / unsqueeze: Paddle's shapes, the elements unchanged, XShape, gradients") {
    struct case_t {
        bool squeeze;
        shape_t in;
        std::vector<std::int64_t> axes;
        shape_t out;
    };
    const std::vector<case_t> cases = {
        {true, {1, 3, 1, 5}, {}, {3, 5}},          {true, {1, 3, 1, 5}, {0}, {3, 1, 5}},
        {true, {1, 3, 1, 5}, {-2}, {1, 3, 5}},     {true, {1, 3, 1, 5}, {1}, {1, 3, 1, 5}},  // 3 stays
        {true, {1, 1}, {}, {1}},                   {false, {3, 5}, {0}, {1, 3, 5}},
        {false, {3, 5}, {-1}, {3, 5, 1}},          {false, {3, 5}, {0, 2}, {1, 3, 1, 5}},
        {false, {3, 5}, {2, 0}, {1, 3, 5, 1}},     {false, {3, 5}, {-1, -1}, {3, 5, 1, 1}},
        {false, {3, 5}, {1, -4}, {1, 3, 1, 5}},
    };
    std::uint64_t seed = 501;
    for (const auto& c : cases) {
        INFO((c.squeeze ? "squeeze " : "unsqueeze ") << to_string(to_shape(c.in)) << " axes " << to_string(Shape(c.axes)));
        Program p;
        auto x = p.input<double>("x", to_shape(c.in));
        auto y = c.squeeze ? dlgraph::squeeze(x, c.axes) : dlgraph::unsqueeze(x, c.axes);
        CHECK(y.shape() == to_shape(c.out));
        const auto& op = p.desc().blocks[0].ops.back();
        CHECK(op.type == (c.squeeze ? "squeeze2" : "unsqueeze2"));
        Shape xshape{0};
        for (auto d : c.in) xshape.push_back(static_cast<std::int64_t>(d));
        CHECK(Shape(p.desc().blocks[0].find_var(op.output("XShape")->arguments.at(0))->dims) == xshape);
        auto xv = rnd<double>(c.in, seed++);
        Session<dlgraph::cpu> s(p);
        xt::xarray<double> got = s.eval(y, {{x, xv}});
        REQUIRE(got.size() == xv.size());
        CHECK(std::equal(got.begin(), got.end(), xv.begin()));
        grad_check::check({{"x", xt::xarray<double>(xv)}}, [&](Program&, const std::vector<dlgraph::Var<double>>& v) {
            return c.squeeze ? dlgraph::squeeze(v[0], c.axes) : dlgraph::unsqueeze(v[0], c.axes);
        });
    }
    Program p;
    auto x = p.input<float>("x", {2, -1, 1});
    check_throws<dlgraph::shape_error>([&] { dlgraph::squeeze(x, {3}); }, {"dlgraph.shape.axis", "squeeze2", "axes entry 3"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::squeeze(x, {1}); },
                                       {"dlgraph.shape.squeeze", "axis 1 of unknown size cannot be squeezed"});
    CHECK(dlgraph::squeeze(x).shape() == Shape{2, -1});  // unknown dims are not listed: kept
    check_throws<dlgraph::shape_error>([&] { dlgraph::unsqueeze(x, {5}); },
                                       {"dlgraph.shape.axis", "unsqueeze2", "axes entry 5 is out of range for a shape of 3 dims"});
}

TEST_CASE_TEMPLATE("flip: every set of dims against a direct reference, gradient, errors", T, double, std::int64_t, bool) {
    const shape_t shape{2, 3, 4};
    auto xv = xt::xarray<T>::from_shape(shape);
    std::mt19937_64 g(9);
    for (auto& v : xv) v = static_cast<T>(static_cast<int>(g() % 50));
    for (auto axis : std::vector<std::vector<std::int64_t>>{{}, {0}, {2}, {-1}, {1, 2}, {0, 2}, {0, 1, 2}}) {
        INFO("axis " << to_string(Shape(axis)));
        Program p;
        auto x = p.input<T>("x", to_shape(shape));
        auto y = dlgraph::flip(x, axis);
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(y, {{x, xv}});
        bool f[3] = {};
        for (auto a : axis) f[a < 0 ? a + 3 : a] = true;
        bool same = true;
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 3; ++j)
                for (std::size_t k = 0; k < 4; ++k)
                    same = same && got(i, j, k) == xv(f[0] ? 1 - i : i, f[1] ? 2 - j : j, f[2] ? 3 - k : k);
        CHECK(same);
    }
    if constexpr (std::is_same_v<T, double>) {
        for (auto axis : std::vector<std::vector<std::int64_t>>{{0}, {1, 2}, {-1}})
            grad_check::check({{"x", grad_check::random({2, 3, 4}, 7)}},
                              [&](Program&, const std::vector<dlgraph::Var<double>>& v) { return dlgraph::flip(v[0], axis); });
        Program p;
        auto x = p.input<double>("x", {2, 3});
        check_throws<dlgraph::shape_error>([&] { dlgraph::flip(x, {2}); }, {"dlgraph.shape.axis", "flip", "axis 2 is out of range"});
        check_throws<dlgraph::shape_error>([&] { dlgraph::flip(x, {1, -1}); }, {"lists dim 1 twice"});
    }
}

// ---- slice -------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("slice: boxes with negative, clamped and empty bounds against a direct reference, gradient, errors", T,
                   double, std::int64_t, bool) {
    const shape_t shape{3, 4, 5};
    auto xv = xt::xarray<T>::from_shape(shape);
    std::mt19937_64 g(11);
    for (auto& v : xv) v = static_cast<T>(static_cast<int>(g() % 50));
    struct case_t {
        std::vector<std::int64_t> axes, starts, ends, decrease;
        shape_t out;
    };
    const case_t cases[] = {
        {{0}, {1}, {3}, {}, {2, 4, 5}},
        {{2}, {-2}, {5}, {}, {3, 4, 2}},
        {{1, 2}, {-100, 1}, {100, -1}, {}, {3, 4, 3}},
        {{0, 1}, {2, 1}, {3, 2}, {0}, {1, 5}},
        {{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {0, 1, 2}, {1}},
        {{1}, {3}, {1}, {}, {3, 0, 5}},
        {{-1, 0}, {0, 0}, {1, 3}, {2}, {3, 4}},
        {{}, {}, {}, {}, {3, 4, 5}},
    };
    for (const auto& cs : cases) {
        INFO("axes " << to_string(Shape(cs.axes)) << " starts " << to_string(Shape(cs.starts)) << " ends "
                     << to_string(Shape(cs.ends)) << " decrease " << to_string(Shape(cs.decrease)));
        Program p;
        auto x = p.input<T>("x", to_shape(shape));
        auto y = dlgraph::slice(x, cs.axes, cs.starts, cs.ends, cs.decrease);
        CHECK(y.shape() == to_shape(cs.out));
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(y, {{x, xv}});
        // The reference: each element's index in the box, shifted by the box's start.
        std::int64_t lo[3] = {0, 0, 0}, n[3] = {3, 4, 5};
        for (std::size_t k = 0; k < cs.axes.size(); ++k) {
            const std::int64_t a = cs.axes[k] < 0 ? cs.axes[k] + 3 : cs.axes[k], d = static_cast<std::int64_t>(shape[a]);
            auto clamp = [d](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + d : v, 0, d); };
            lo[a] = clamp(cs.starts[k]);
            n[a] = std::max<std::int64_t>(clamp(cs.ends[k]) - lo[a], 0);
        }
        REQUIRE(static_cast<std::int64_t>(got.size()) == n[0] * n[1] * n[2]);
        std::size_t at = 0;
        bool same = true;
        for (std::int64_t i = 0; i < n[0]; ++i)
            for (std::int64_t j = 0; j < n[1]; ++j)
                for (std::int64_t k = 0; k < n[2]; ++k) same = same && got.data()[at++] == xv(lo[0] + i, lo[1] + j, lo[2] + k);
        CHECK(same);
        if constexpr (std::is_same_v<T, double>) {
            if (got.size() > 0)
                grad_check::check({{"x", grad_check::random({3, 4, 5}, 3)}},
                                  [&](Program&, const std::vector<dlgraph::Var<double>>& v) {
                                      return dlgraph::slice(v[0], cs.axes, cs.starts, cs.ends, cs.decrease);
                                  });
        }
    }
    Program p;
    auto x = p.input<T>("x", {3, 4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::slice(x, {0, 1}, {0}, {1, 2}); },
                                       {"dlgraph.shape.attr", "slice", "axes [0,1], starts [0] and ends [1,2] must have the same length"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::slice(x, {1, -1}, {0, 0}, {1, 1}); }, {"lists dim 1 twice"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::slice(x, {2}, {0}, {1}); },
                                       {"dlgraph.shape.axis", "axes entry 2 is out of range for Input of shape [3,4]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::slice(x, {0}, {0}, {2}, {0}); },
                                       {"decrease_axis [0] drops dim 0, which must be sliced to size 1 (it is 2)"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::slice(x, {0}, {0}, {1}, {1}); }, {"(it is not in axes)"});
    // An unknown dim stays unknown; the run slices what it gets.
    auto u = p.input<T>("u", {-1, 4});
    auto su = dlgraph::slice(u, {0, 1}, {1, 1}, {-1, 3});
    CHECK(su.shape() == Shape{-1, 2});
    Session<dlgraph::cpu> s(p);
    xt::xarray<T> uv = xt::xarray<T>::from_shape({5, 4});
    for (std::size_t i = 0; i < uv.size(); ++i) uv.data()[i] = static_cast<T>(static_cast<int>(i % 7));
    xt::xarray<T> got = s.eval(su, {{u, uv}});
    CHECK(got == xt::xarray<T>(xt::view(uv, xt::range(1, 4), xt::range(1, 3))));
}

// ---- reshape ---------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("reshape: 0 copies, -1 infers, data is unchanged", T, float, double, std::int64_t, bool) {
    struct case_t {
        shape_t in;
        std::vector<std::int64_t> want;
        shape_t out;
    };
    const case_t cases[] = {{{2, 3, 4}, {4, -1}, {4, 6}},  {{2, 3, 4}, {0, -1}, {2, 12}},
                            {{2, 3, 4}, {0, 0, 2, 2}, {2, 3, 2, 2}}, {{2, 3, 4}, {24}, {24}},
                            {{2, 3, 4}, {-1}, {24}},        {{0, 3}, {3, -1}, {3, 0}},
                            {{1}, {1, 1, 1}, {1, 1, 1}},    {{0, 4}, {0, -1}, {0, 4}},
                            {{0, 3}, {0, 5}, {0, 5}},       {{3, 0}, {0, -1, 1}, {3, 0, 1}}};
    for (auto& cs : cases) {
        Program p;
        auto x = p.input<T>("x", to_shape(cs.in));
        auto out = dlgraph::reshape(x, cs.want);
        INFO("in " << to_string(to_shape(cs.in)) << " shape " << to_string(Shape(cs.want)));
        CHECK(out.shape() == to_shape(cs.out));
        auto xv = rnd_int<T>(cs.in, 9, 0, 100);
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, xv}});
        check_exact(got, cs.out, std::vector<T>(xv.begin(), xv.end()));
    }
}

TEST_CASE("reshape: unknown dims and errors name both shapes") {
    Program p;
    auto x = p.input<float>("x", {-1, 3, 4});
    CHECK(dlgraph::reshape(x, {0, -1}).shape() == Shape{-1, 12});
    CHECK(dlgraph::reshape(x, {0, 2, -1}).shape() == Shape{-1, 2, 6});
    CHECK(dlgraph::reshape(x, {-1, 6}).shape() == Shape{-1, 6});  // undecidable at build time
    CHECK(dlgraph::reshape(x, {6, 4}).shape() == Shape{6, 4});
    auto y = p.input<float>("y", {2, 3});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(y, {4, 2}); },
                                       {"dlgraph.shape.reshape", "reshape", "[2,3]", "[4,2]", "6", "8"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(y, {-1, -1}); }, {"[2,3]", "[-1,-1]", "only one"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(y, {4, -1}); }, {"[2,3]", "[4,-1]"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(y, {0, 0, 0}); }, {"[2,3]", "[0,0,0]", "position 2"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(y, {-2, 3}); }, {"[2,3]", "negative"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(x, {0, 5, 2}); },
                                       {"[-1,3,4]", "[0,5,2]", "12 elements in X but 10"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::reshape(x, {0, 5, -1}); }, {"[-1,3,4]", "[0,5,-1]", "divide"});
    // Known only at run time: the shape pass reports it.
    auto z = p.input<float>("z", {-1, 3});
    auto r = dlgraph::reshape(z, {4, 2});
    Session<dlgraph::cpu> s(p);
    xt::xarray<float> zv = rnd<float>({2, 3}, 1);
    check_throws<dlgraph::shape_error>([&] { (void)s.eval(r, {{z, zv}}); }, {"dlgraph.shape.reshape", "[2,3]", "[4,2]"});
    auto r2 = dlgraph::reshape(z, {-1, 6});
    xt::xarray<float> zv3 = rnd<float>({4, 3}, 3);
    xt::xarray<float> got = s.eval(r2, {{z, zv3}});
    check_exact(got, {2, 6}, std::vector<float>(zv3.begin(), zv3.end()));
}

// ---- transpose ---------------------------------------------------------------------------------

namespace {
template <class T> std::vector<T> ref_transpose(const xt::xarray<T>& x, const std::vector<std::int64_t>& perm, shape_t& out) {
    const shape_t in(x.shape().begin(), x.shape().end());
    out.clear();
    for (auto p : perm) out.push_back(in[static_cast<std::size_t>(p)]);
    std::vector<T> y(x.size());
    for (std::size_t f = 0; f < y.size(); ++f) {
        const shape_t oi = unravel(f, out);
        shape_t ii(in.size());
        for (std::size_t k = 0; k < perm.size(); ++k) ii[static_cast<std::size_t>(perm[k])] = oi[k];
        y[f] = x.data()[ravel(ii, in)];
    }
    return y;
}
}  // namespace

TEST_CASE_TEMPLATE("transpose: every permutation of rank 4, unit dims, large tiles", T, float, double, std::int32_t,
                   bool) {
    auto xv = rnd_int<T>({2, 3, 4, 5}, 5, 0, 1000);
    std::vector<std::int64_t> perm{0, 1, 2, 3};
    do {
        Program p;
        auto x = p.input<T>("x", {2, 3, 4, 5});
        auto out = dlgraph::transpose(x, perm);
        shape_t os;
        auto want = ref_transpose(xv, perm, os);
        INFO("perm " << to_string(Shape(perm)));
        CHECK(out.shape() == to_shape(os));
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, xv}});
        check_exact(got, os, want);
    } while (std::next_permutation(perm.begin(), perm.end()));
    struct case_t {
        shape_t in;
        std::vector<std::int64_t> perm;
    };
    const case_t cases[] = {{{67, 45}, {1, 0}},          {{3, 1, 4}, {2, 1, 0}},       {{1, 7, 1, 9}, {3, 2, 1, 0}},
                            {{5, 33, 40}, {0, 2, 1}},    {{33, 5, 40}, {2, 1, 0}},     {{2, 3, 4, 5, 6}, {4, 0, 3, 1, 2}},
                            {{0, 3}, {1, 0}},            {{7}, {0}},                    {{2, 2, 3, 3}, {1, 0, 3, 2}}};
    for (auto& cs : cases) {
        Program p;
        auto x = p.input<T>("x", to_shape(cs.in));
        auto out = dlgraph::transpose(x, cs.perm);
        auto v = rnd_int<T>(cs.in, 6, 0, 1000);
        shape_t os;
        auto want = ref_transpose(v, cs.perm, os);
        INFO("in " << to_string(to_shape(cs.in)) << " perm " << to_string(Shape(cs.perm)));
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got = s.eval(out, {{x, v}});
        check_exact(got, os, want);
    }
}

TEST_CASE("transpose: unknown dims and errors") {
    Program p;
    auto x = p.input<double>("x", {-1, 3, 4});
    CHECK(dlgraph::transpose(x, {2, 0, 1}).shape() == Shape{4, -1, 3});
    check_throws<dlgraph::shape_error>([&] { dlgraph::transpose(x, {0, 1}); },
                                       {"dlgraph.shape.transpose", "axis [0,1]", "[-1,3,4]", "all 3 dims"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::transpose(x, {0, 1, 1}); }, {"axis [0,1,1]", "permutation"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::transpose(x, {0, 1, 3}); }, {"axis [0,1,3]", "permutation"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::transpose(x, {0, 1, -1}); }, {"permutation"});
}

// ---- concat and split ------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("concat: every axis, negative axes, empty parts", T, float, double, std::int64_t) {
    struct case_t {
        std::vector<shape_t> ins;
        int axis;
        shape_t out;
    };
    const case_t cases[] = {
        {{{2, 3}, {2, 1}, {2, 4}}, 1, {2, 8}},    {{{2, 3}, {2, 1}, {2, 4}}, -1, {2, 8}},
        {{{1, 3}, {4, 3}}, 0, {5, 3}},            {{{1, 3}, {4, 3}}, -2, {5, 3}},
        {{{2, 3, 4}, {2, 5, 4}}, 1, {2, 8, 4}},   {{{2, 0}, {2, 3}, {2, 0}}, 1, {2, 3}},
        {{{3, 17}}, 0, {3, 17}},                  {{{0, 2}, {0, 2}}, 1, {0, 4}},
    };
    std::uint64_t seed = 91;
    for (auto& cs : cases) {
        Program p;
        std::vector<dlgraph::Var<T>> xs;
        std::vector<xt::xarray<T>> vals;
        for (std::size_t k = 0; k < cs.ins.size(); ++k) {
            xs.push_back(p.input<T>("x" + std::to_string(k), to_shape(cs.ins[k])));
            vals.push_back(rnd_int<T>(cs.ins[k], seed++, -50, 50));
        }
        auto out = dlgraph::concat(xs, cs.axis);
        CHECK(out.shape() == to_shape(cs.out));
        const std::size_t a = static_cast<std::size_t>(cs.axis < 0 ? cs.axis + static_cast<int>(cs.out.size()) : cs.axis);
        std::vector<T> want(count(cs.out));
        for (std::size_t f = 0; f < want.size(); ++f) {
            shape_t oi = unravel(f, cs.out);
            std::size_t k = 0;
            while (oi[a] >= cs.ins[k][a]) {
                oi[a] -= cs.ins[k][a];
                ++k;
            }
            want[f] = vals[k].data()[ravel(oi, cs.ins[k])];
        }
        Session<dlgraph::cpu> s(p);
        std::vector<dlgraph::Feed> feeds;
        xt::xarray<T> got;
        if (xs.size() == 1) got = s.eval(out, {{xs[0], vals[0]}});
        else if (xs.size() == 2) got = s.eval(out, {{xs[0], vals[0]}, {xs[1], vals[1]}});
        else got = s.eval(out, {{xs[0], vals[0]}, {xs[1], vals[1]}, {xs[2], vals[2]}});
        check_exact(got, cs.out, want);
    }
}

TEST_CASE("concat: unknown dims and errors") {
    Program p;
    auto a = p.input<float>("a", {-1, 3});
    auto b = p.input<float>("b", {2, 3});
    auto c = p.input<float>("c", {2, -1});
    CHECK(dlgraph::concat(std::vector{a, b}, 0).shape() == Shape{-1, 3});
    CHECK(dlgraph::concat(std::vector{b, c}, 1).shape() == Shape{2, -1});
    CHECK(dlgraph::concat(std::vector{a, c}, 1).shape() == Shape{2, -1});
    CHECK(dlgraph::concat(std::vector{b, b}, -1).shape() == Shape{2, 6});
    auto d = p.input<float>("d", {3, 4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::concat(std::vector{b, d}, 1); },
                                       {"dlgraph.shape.concat", "X[0] is [2,3] but X[1] is [3,4]", "axis 1", "dim 0"});
    auto e = p.input<float>("e", {2, 3, 1});
    check_throws<dlgraph::shape_error>([&] { dlgraph::concat(std::vector{b, e}, 0); }, {"X[1] is [2,3,1]", "ranks"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::concat(std::vector{b, b}, 2); },
                                       {"dlgraph.shape.axis", "axis 2", "X[0] of shape [2,3]"});
    // Mixed dtypes through the generic append path.
    auto f = p.input<double>("f", {2, 3});
    check_throws<dlgraph::type_error>(
        [&] { p.append("concat", {{"X", {"b", "f"}}}, {{"Out", 1}}, {}); }, {"X[0] is FP32 but X[1] is FP64"});
}

TEST_CASE_TEMPLATE("split: num and sections (with -1), every axis", T, float, double, std::int32_t) {
    struct case_t {
        shape_t in;
        int num;
        std::vector<std::int64_t> sections;
        int axis;
        std::vector<shape_t> outs;
    };
    const case_t cases[] = {
        {{2, 6, 3}, 3, {}, 1, {{2, 2, 3}, {2, 2, 3}, {2, 2, 3}}},
        {{2, 6, 3}, 1, {}, -1, {{2, 6, 3}}},
        {{4, 5}, 2, {}, 0, {{2, 5}, {2, 5}}},
        {{4, 5}, 0, {1, -1, 2}, 1, {{4, 1}, {4, 2}, {4, 2}}},
        {{4, 5}, 0, {1, 4, 0}, -1, {{4, 1}, {4, 4}, {4, 0}}},
        {{4, 5}, 0, {-1, 4}, 0, {{0, 5}, {4, 5}}},
        {{3, 17, 2}, 0, {16, 1}, 1, {{3, 16, 2}, {3, 1, 2}}},
        {{0, 4}, 2, {}, 1, {{0, 2}, {0, 2}}},
    };
    std::uint64_t seed = 101;
    for (auto& cs : cases) {
        Program p;
        auto x = p.input<T>("x", to_shape(cs.in));
        auto outs = cs.num > 0 ? dlgraph::split(x, cs.num, cs.axis) : dlgraph::split(x, cs.sections, cs.axis);
        REQUIRE(outs.size() == cs.outs.size());
        auto xv = rnd_int<T>(cs.in, seed++, -50, 50);
        const std::size_t a = static_cast<std::size_t>(cs.axis < 0 ? cs.axis + static_cast<int>(cs.in.size()) : cs.axis);
        Session<dlgraph::cpu> s(p);
        std::size_t start = 0;
        for (std::size_t k = 0; k < outs.size(); ++k) {
            INFO("in " << to_string(to_shape(cs.in)) << " part " << k);
            CHECK(outs[k].shape() == to_shape(cs.outs[k]));
            std::vector<T> want(count(cs.outs[k]));
            for (std::size_t f = 0; f < want.size(); ++f) {
                shape_t i = unravel(f, cs.outs[k]);
                i[a] += start;
                want[f] = xv.data()[ravel(i, cs.in)];
            }
            xt::xarray<T> got = s.eval(outs[k], {{x, xv}});
            check_exact(got, cs.outs[k], want);
            start += cs.outs[k][a];
        }
    }
}

TEST_CASE("split: unknown dims and errors") {
    Program p;
    auto x = p.input<float>("x", {-1, 6});
    auto parts = dlgraph::split(x, 2, 0);
    CHECK(parts[0].shape() == Shape{-1, 6});
    auto secs = dlgraph::split(x, std::vector<std::int64_t>{2, -1}, 0);
    CHECK(secs[0].shape() == Shape{2, 6});
    CHECK(secs[1].shape() == Shape{-1, 6});
    auto cols = dlgraph::split(x, std::vector<std::int64_t>{2, -1}, 1);
    CHECK(cols[1].shape() == Shape{-1, 4});
    auto y = p.input<float>("y", {4, 6});
    check_throws<dlgraph::shape_error>([&] { dlgraph::split(y, 4, 1); },
                                       {"dlgraph.shape.split", "X is [4,6]", "dim 6 does not split into 4"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::split(y, std::vector<std::int64_t>{2, 3}, 1); },
                                       {"sections [2,3]", "add up to 5", "dim 1 is 6"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::split(y, std::vector<std::int64_t>{-1, -1}, 1); },
                                       {"only one section may be -1"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::split(y, std::vector<std::int64_t>{7, -1}, 1); },
                                       {"add up to 7"});
    check_throws<dlgraph::shape_error>([&] { dlgraph::split(y, 2, 2); }, {"dlgraph.shape.axis", "axis 2"});
    // Out count must match num / sections.
    check_throws<dlgraph::shape_error>(
        [&] { p.append("split", {{"X", {"y"}}}, {{"Out", 3}}, {dlgraph::Attribute::make_int("num", 2)}); },
        {"num is 2 but there are 3 Out variables"});
    check_throws<dlgraph::shape_error>(
        [&] {
            p.append("split", {{"X", {"y"}}}, {{"Out", 1}}, {dlgraph::Attribute::make_ints("sections", {3, 3})});
        },
        {"2 sections but 1 Out variables"});
    check_throws<dlgraph::shape_error>(
        [&] {
            p.append("split", {{"X", {"y"}}}, {{"Out", 2}},
                     {dlgraph::Attribute::make_int("num", 2), dlgraph::Attribute::make_ints("sections", {3, 3})});
        },
        {"not both"});
    check_throws<dlgraph::shape_error>([&] { p.append("split", {{"X", {"y"}}}, {{"Out", 1}}, {}); },
                                       {"give num or sections"});
}

// ---- cast -------------------------------------------------------------------------------------------

namespace {
template <class U, class T> void check_cast(const xt::xarray<T>& xv) {
    Program p;
    const shape_t shape(xv.shape().begin(), xv.shape().end());
    auto x = p.input<T>("x", to_shape(shape));
    auto y = dlgraph::cast<U>(x);
    CHECK(y.shape() == to_shape(shape));
    CHECK(y.desc().data_type == dlgraph::dtype_of<U>);
    Session<dlgraph::cpu> s(p);
    xt::xarray<U> got = s.eval(y, {{x, xv}});
    std::vector<U> want;
    for (auto v : xv) want.push_back(static_cast<U>(v));
    check_exact(got, shape, want);
}
}  // namespace

TEST_CASE("cast: between bool, integers and floats") {
    xt::xarray<double> d = {{1.75, -2.5, 0.0}, {3.0, 1e6, -7.25}};
    xt::xarray<float> f = {0.0f, 1.5f, -3.0f, 2.0f};
    xt::xarray<std::int32_t> i = {{-3, 0, 5}, {100000, 7, -1}};
    xt::xarray<std::int64_t> l = {1, -1, 30000, -2};
    xt::xarray<std::int16_t> h = {1, -300, 0};
    xt::xarray<bool> b = {true, false, true};
    check_cast<std::int32_t>(d);
    check_cast<float>(d);
    check_cast<std::int64_t>(d);
    check_cast<bool>(d);
    check_cast<double>(f);
    check_cast<bool>(f);
    check_cast<std::int16_t>(f);
    check_cast<float>(i);
    check_cast<double>(i);
    check_cast<std::int64_t>(i);
    check_cast<std::int16_t>(l);
    check_cast<double>(l);
    check_cast<std::int32_t>(h);
    check_cast<double>(b);
    check_cast<std::int32_t>(b);
    check_cast<double>(d);  // same dtype: a copy
    check_cast<bool>(b);
    auto empty = xt::xarray<float>::from_shape({0, 2});
    check_cast<std::int64_t>(empty);
}

TEST_CASE("cast: in_dtype must match X, FP16 is refused") {
    Program p;
    auto x = p.input<float>("x", {2});
    check_throws<dlgraph::type_error>(
        [&] {
            p.append("cast", {{"X", {"x"}}}, {{"Out", 1}},
                     {dlgraph::Attribute::make_int("in_dtype", 6), dlgraph::Attribute::make_int("out_dtype", 2)});
        },
        {"dlgraph.type.op", "cast", "in_dtype is FP64 but X is FP32"});
    check_throws<dlgraph::type_error>([&] { dlgraph::cast<dlgraph::float16>(x); }, {"FP16"});
    check_throws<dlgraph::format_error>([&] { p.append("cast", {{"X", {"x"}}}, {{"Out", 1}}, {}); },
                                        {"needs attribute 'in_dtype'"});
}

// ---- sum ----------------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("sum: one to four inputs", T, float, double, std::int32_t, std::int64_t) {
    const shape_t shape{3, 37};
    std::vector<xt::xarray<T>> vals;
    for (int k = 0; k < 4; ++k) vals.push_back(rnd_int<T>(shape, 111 + static_cast<std::uint64_t>(k), -1000, 1000));
    for (std::size_t n = 1; n <= 4; ++n) {
        Program p;
        std::vector<dlgraph::Var<T>> xs;
        for (std::size_t k = 0; k < n; ++k) xs.push_back(p.input<T>("x" + std::to_string(k), to_shape(shape)));
        auto out = dlgraph::sum(xs);
        CHECK(out.shape() == to_shape(shape));
        std::vector<T> want(count(shape), T(0));
        for (std::size_t k = 0; k < n; ++k)
            for (std::size_t f = 0; f < want.size(); ++f) want[f] = static_cast<T>(want[f] + vals[k].data()[f]);
        Session<dlgraph::cpu> s(p);
        xt::xarray<T> got;
        if (n == 1) got = s.eval(out, {{xs[0], vals[0]}});
        else if (n == 2) got = s.eval(out, {{xs[0], vals[0]}, {xs[1], vals[1]}});
        else if (n == 3) got = s.eval(out, {{xs[0], vals[0]}, {xs[1], vals[1]}, {xs[2], vals[2]}});
        else got = s.eval(out, {{xs[0], vals[0]}, {xs[1], vals[1]}, {xs[2], vals[2]}, {xs[3], vals[3]}});
        check_exact(got, shape, want);  // small integers: exact in every dtype
    }
}

TEST_CASE("sum: in place (Out is one of X), unknown dims and errors") {
    // Paddle accumulates gradients as sum(X=[b, a, c]) -> a: Out and one X
    // are then the same tensor.
    dlgraph::ProgramDesc desc;
    auto& blk = desc.blocks[0];
    for (auto n : {"x", "a", "b", "c"})
        blk.vars.push_back({n, dlgraph::VarType::LOD_TENSOR, dlgraph::DataType::FP64, {3}, 0, false});
    dlgraph::OpDesc copy;
    copy.type = "assign";
    copy.set_input("X", {"x"});
    copy.set_output("Out", {"a"});
    blk.ops.push_back(copy);
    dlgraph::OpDesc op;
    op.type = "sum";
    op.set_input("X", {"b", "a", "c"});
    op.set_output("Out", {"a"});
    blk.ops.push_back(op);
    Session<dlgraph::cpu> s(desc);
    xt::xarray<double> xv = {1.0, 2.0, 3.0}, bv = {10.0, 20.0, 30.0}, cv = {100.0, 200.0, 300.0};
    auto got = dlgraph::to_xarray<double>(s.eval(dlgraph::TargetRef("a", 1), {{"x", xv}, {"b", bv}, {"c", cv}}));
    check_exact(got, {3}, std::vector<double>{111.0, 222.0, 333.0});

    Program p;
    auto x = p.input<float>("x", {-1, 3});
    auto y = p.input<float>("y", {2, -1});
    CHECK(dlgraph::sum(std::vector{x, y}).shape() == Shape{2, 3});
    auto z = p.input<float>("z", {2, 4});
    check_throws<dlgraph::shape_error>([&] { dlgraph::sum(std::vector{y, z, x}); },
                                       {"dlgraph.shape.sum", "X[0] is [2,-1] but X[2] is [-1,3]"});
    auto w = p.input<float>("w", {2});
    check_throws<dlgraph::shape_error>([&] { dlgraph::sum(std::vector{z, w}); }, {"X[0] is [2,4] but X[1] is [2]"});
    auto d = p.input<double>("d", {2, 4});
    check_throws<dlgraph::type_error>([&] { p.append("sum", {{"X", {"z", "d"}}}, {{"Out", 1}}, {}); },
                                      {"X[0] is FP32 but X[1] is FP64"});
}

// ---- feed and fetch -----------------------------------------------------------------------------------

TEST_CASE("feed / fetch run a program in Paddle's shape: lists in the scope") {
    // feed(X=feed, col 0) -> x; feed(col 1) -> y; relu(x) + y -> z; fetch(z, col 0) -> fetch
    const char* text = R"({"version":1,"blocks":[{"idx":0,"parent_idx":-1,"vars":[
      {"name":"feed","type":"FEED_MINIBATCH","persistable":true},
      {"name":"fetch","type":"FETCH_LIST","persistable":true},
      {"name":"x","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP64","dims":[-1,2]},"lod_level":0}},
      {"name":"y","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP64","dims":[-1,2]},"lod_level":0}},
      {"name":"r","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP64","dims":[-1,2]},"lod_level":0}},
      {"name":"z","type":"LOD_TENSOR","persistable":false,"lod_tensor":{"tensor":{"data_type":"FP64","dims":[-1,2]},"lod_level":0}}],
      "ops":[{"type":"feed","inputs":[{"parameter":"X","arguments":["feed"]}],"outputs":[{"parameter":"Out","arguments":["x"]}],"attrs":[{"name":"col","type":"INT","i":0}]},
             {"type":"feed","inputs":[{"parameter":"X","arguments":["feed"]}],"outputs":[{"parameter":"Out","arguments":["y"]}],"attrs":[{"name":"col","type":"INT","i":1}]},
             {"type":"relu","inputs":[{"parameter":"X","arguments":["x"]}],"outputs":[{"parameter":"Out","arguments":["r"]}]},
             {"type":"elementwise_add","inputs":[{"parameter":"X","arguments":["r"]},{"parameter":"Y","arguments":["y"]}],"outputs":[{"parameter":"Out","arguments":["z"]}]},
             {"type":"fetch","inputs":[{"parameter":"X","arguments":["z"]}],"outputs":[{"parameter":"Out","arguments":["fetch"]}],"attrs":[{"name":"col","type":"INT","i":0}]}]}]})";
    dlgraph::Session<dlgraph::cpu> s(dlgraph::load_program(text));
    const auto fetch_op = dlgraph::TargetRef::op_only(4);
    check_throws<dlgraph::value_error>([&] { s.eval(fetch_op); }, {"dlgraph.value.unset", "list variable 'feed'"});

    auto& feed = s.scope().var("feed").get_mutable<dlgraph::TensorList>();
    feed = {dlgraph::to_tensor(xt::xarray<double>{{-1, 2}, {3, -4}}), dlgraph::to_tensor(xt::xarray<double>{{10, 20}, {30, 40}})};
    s.eval(fetch_op);
    auto& out = s.scope().find("fetch")->get<dlgraph::TensorList>();
    REQUIRE(out.size() == 1);
    CHECK(dlgraph::to_xarray<double>(out[0]) == xt::xarray<double>{{10, 22}, {33, 40}});

    // New list contents of another batch size: shapes follow the values.
    feed = {dlgraph::to_tensor(xt::xarray<double>{{1, 1}}), dlgraph::to_tensor(xt::xarray<double>{{2, 2}})};
    s.eval(fetch_op);
    CHECK(dlgraph::to_xarray<double>(s.scope().find("fetch")->get<dlgraph::TensorList>()[0]) ==
          xt::xarray<double>{{3, 3}});

    // A column the list does not have, and a wrong dtype in a column.
    feed.resize(1);
    check_throws<dlgraph::value_error>([&] { s.eval(fetch_op); }, {"dlgraph.value.feed", "col 1", "holds 1"});
    feed = {dlgraph::to_tensor(xt::xarray<float>{{1, 1}}), dlgraph::to_tensor(xt::xarray<double>{{2, 2}})};
    check_throws<dlgraph::type_error>([&] { s.eval(fetch_op); },
                                      {"dlgraph.type.declared", "feed (op #0) writes FP32 to 'x', which is declared FP64"});
    feed = {dlgraph::to_tensor(xt::xarray<double>{{1, 1}}), dlgraph::to_tensor(xt::xarray<double>{{2, 2}})};
    s.eval(fetch_op);  // and the session still works

    dlgraph::TensorList fetched;
    dlgraph::ops::fetch_column(feed[0], 3, fetched);
    CHECK(fetched.size() == 4);
    check_throws<dlgraph::value_error>([&] { dlgraph::ops::fetch_column(feed[0], -1, fetched); },
                                       {"dlgraph.value.fetch", "negative"});
}
