// The kernel core of softmax and the losses (kernels/softmax.hpp) called
// directly on raw arrays, no Session: against plain double-precision loops
// written here, for FP32 and FP64, with run-time and compile-time extents,
// odd sizes (1, 7, 1023 and past a fold leaf), and the bad-label fault.
#include <doctest/doctest.h>

#include <dlgraph/kernels/softmax.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace k = dlgraph::kernels;

namespace {

template <std::int64_t N> using fixed = std::integral_constant<std::int64_t, N>;

template <class T> std::vector<T> uniform(std::size_t n, unsigned seed, double lo = -4, double hi = 4) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(rng));
    return v;
}

template <class T> double tol() { return std::is_same_v<T, float> ? 2e-5 : 1e-12; }

template <class T> void check_near(const T* got, const std::vector<double>& want, double t = tol<T>()) {
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        CHECK(std::abs(static_cast<double>(got[i]) - want[i]) <= t * (1 + std::abs(want[i])));
    }
}

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// softmax along the middle dim of [outer, d, inner], in double; lse per (o, j).
template <class T>
std::vector<double> ref_softmax(const std::vector<T>& x, std::int64_t outer, std::int64_t d, std::int64_t inner,
                                std::vector<double>* lse = nullptr) {
    std::vector<double> y(x.size());
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < inner; ++j) {
            auto at = [&](std::int64_t c) { return static_cast<std::size_t>((o * d + c) * inner + j); };
            double m = -std::numeric_limits<double>::infinity();
            for (std::int64_t c = 0; c < d; ++c) m = std::max(m, static_cast<double>(x[at(c)]));
            double s = 0;
            for (std::int64_t c = 0; c < d; ++c) s += std::exp(static_cast<double>(x[at(c)]) - m);
            for (std::int64_t c = 0; c < d; ++c) y[at(c)] = std::exp(static_cast<double>(x[at(c)]) - m) / s;
            if (lse) lse->push_back(m + std::log(s));
        }
    return y;
}

template <class T>
std::vector<double> ref_softmax_grad(const std::vector<T>& y, const std::vector<T>& dy, std::int64_t outer,
                                     std::int64_t d, std::int64_t inner) {
    std::vector<double> dx(y.size());
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < inner; ++j) {
            auto at = [&](std::int64_t c) { return static_cast<std::size_t>((o * d + c) * inner + j); };
            double dot = 0;
            for (std::int64_t c = 0; c < d; ++c) dot += static_cast<double>(y[at(c)]) * static_cast<double>(dy[at(c)]);
            for (std::int64_t c = 0; c < d; ++c)
                dx[at(c)] = static_cast<double>(y[at(c)]) * (static_cast<double>(dy[at(c)]) - dot);
        }
    return dx;
}

// Rows of probabilities (positive, each summing to 1).
template <class T> std::vector<T> prob_rows(std::int64_t rows, std::int64_t d, unsigned seed) {
    std::vector<T> p = uniform<T>(static_cast<std::size_t>(rows * d), seed, 0.05, 1.0);
    for (std::int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (std::int64_t c = 0; c < d; ++c) s += static_cast<double>(p[static_cast<std::size_t>(r * d + c)]);
        for (std::int64_t c = 0; c < d; ++c)
            p[static_cast<std::size_t>(r * d + c)] = static_cast<T>(static_cast<double>(p[static_cast<std::size_t>(r * d + c)]) / s);
    }
    return p;
}

std::vector<std::int64_t> labels(std::int64_t rows, std::int64_t d, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::int64_t> u(0, d - 1);
    std::vector<std::int64_t> l(static_cast<std::size_t>(rows));
    for (auto& v : l) v = u(rng);
    return l;
}

// A Loops that cuts every sweep into two at a whole vector, as the CPU's
// thread pool does: the core's contract is that this changes no bit.
struct halving_loops {
    static constexpr bool nothrow = true;
    template <class T> static std::int64_t cut(std::int64_t n) noexcept {
        constexpr std::int64_t W = static_cast<std::int64_t>(k::batch<T>::size);
        return n / 2 / W * W;
    }
    template <class T, class F> void unary(std::int64_t n, const T* x, T* z, F f) const noexcept {
        const std::int64_t c = cut<T>(n);
        k::unary_loop_serial(c, x, z, f);
        k::unary_loop_serial(n - c, x + c, z + c, f);
    }
    template <class T, class F>
    void binary(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) const noexcept {
        const std::int64_t c = cut<T>(n);
        k::binary_loop_serial(c, x, sx, y, sy, z, f);
        k::binary_loop_serial(n - c, x + c * sx, sx, y + c * sy, sy, z + c, f);
    }
};

}  // namespace

TEST_CASE_TEMPLATE("kernels::softmax_row: odd lengths, the returned log-sum-exp, in place", T, float, double) {
    for (std::int64_t n : {1, 7, 1023, 5000}) {
        CAPTURE(n);
        const std::vector<T> x = uniform<T>(static_cast<std::size_t>(n), 11u + static_cast<unsigned>(n), -20, 20);
        std::vector<double> lse;
        const std::vector<double> want = ref_softmax(x, 1, n, 1, &lse);
        std::vector<T> y(x.size());
        const T got_lse = k::softmax_row(x.data(), y.data(), n);
        check_near(y.data(), want);
        CHECK(std::abs(static_cast<double>(got_lse) - lse[0]) <= tol<T>() * (1 + std::abs(lse[0])));

        std::vector<T> inplace = x;
        CHECK(k::softmax_row(inplace.data(), inplace.data(), n) == got_lse);
        CHECK(same_bits(inplace, y));

        std::vector<T> halved(x.size());
        CHECK(k::softmax_row(x.data(), halved.data(), n, halving_loops{}) == got_lse);
        CHECK(same_bits(halved, y));
    }
}

TEST_CASE_TEMPLATE("kernels::softmax_row: large logits neither overflow nor lose the row", T, float, double) {
    const std::vector<T> x = {T(1000), T(1001), T(999), T(-1000), T(1001), T(1000), T(998)};
    const std::vector<double> want = ref_softmax(x, 1, 7, 1);
    std::vector<T> y(x.size());
    const T lse = k::softmax_row(x.data(), y.data(), fixed<7>{});
    check_near(y.data(), want);
    CHECK(std::isfinite(lse));
    CHECK(std::abs(static_cast<double>(lse) - 1001.0 - std::log(2 + 2 * std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0))) <
          1e-3);
}

// A column of a strided axis is shifted as a row is: by its max when that is
// finite, else by 0. Every column below, on the strided path (inner = 19:
// vectors of columns and single ones), gives the row path's values: close
// where finite, the same infinities and NaNs where not.
TEST_CASE_TEMPLATE("kernels::softmax and log_softmax: non-finite columns of a strided axis as rows", T, float, double) {
    const T inf = std::numeric_limits<T>::infinity();
    const std::int64_t d = 3, inner = 19;
    std::vector<T> x = uniform<T>(static_cast<std::size_t>(d * inner), 17, -3, 3);
    auto set_column = [&](std::int64_t j, T a, T b, T c) {
        x[static_cast<std::size_t>(j)] = a;
        x[static_cast<std::size_t>(inner + j)] = b;
        x[static_cast<std::size_t>(2 * inner + j)] = c;
    };
    for (std::int64_t j : {0, 5, 17}) set_column(j, -inf, -inf, -inf);  // no finite max
    for (std::int64_t j : {1, 9, 18}) set_column(j, T(1), inf, T(-2));  // a +inf max
    for (std::int64_t j : {2, 10}) set_column(j, -inf, T(2), -inf);     // a finite max among -infs
    std::vector<T> y(x.size()), ly(x.size());
    k::softmax(x.data(), y.data(), 1, d, inner);
    k::log_softmax(x.data(), ly.data(), 1, d, inner);
    for (std::int64_t j = 0; j < inner; ++j) {
        CAPTURE(j);
        std::vector<T> col(static_cast<std::size_t>(d)), row(col.size()), lrow(col.size());
        for (std::int64_t r = 0; r < d; ++r) col[static_cast<std::size_t>(r)] = x[static_cast<std::size_t>(r * inner + j)];
        k::softmax(col.data(), row.data(), 1, d, 1);
        k::log_softmax(col.data(), lrow.data(), 1, d, 1);
        for (std::int64_t r = 0; r < d; ++r) {
            const auto at = static_cast<std::size_t>(r * inner + j);
            const auto i = static_cast<std::size_t>(r);
            for (auto [got, want] : {std::pair{y[at], row[i]}, std::pair{ly[at], lrow[i]}}) {
                if (std::isfinite(want)) CHECK(std::abs(double(got) - double(want)) <= tol<T>() * (1 + std::abs(double(want))));
                else if (std::isnan(want)) CHECK(std::isnan(got));
                else CHECK(got == want);
            }
        }
    }
    // The rows' own values for the columns with a finite max: exact 0 and 1.
    CHECK(y[2] == T(0));
    CHECK(y[static_cast<std::size_t>(inner + 2)] == T(1));
    CHECK(ly[static_cast<std::size_t>(inner + 2)] == T(0));
    CHECK(ly[2] == -inf);
    // A +inf max: 0 beside it and NaN (inf / inf) at it, as the row path gives.
    CHECK(y[1] == T(0));
    CHECK(std::isnan(y[static_cast<std::size_t>(inner + 1)]));
}

TEST_CASE_TEMPLATE("kernels::softmax and softmax_grad over [outer, d, inner]", T, float, double) {
    struct geom {
        std::int64_t outer, d, inner;
    };
    for (geom g : {geom{3, 7, 1}, geom{2, 1023, 1}, geom{1, 1, 1}, geom{2, 7, 5}, geom{3, 5, 37}, geom{1, 1, 7},
                   geom{2, 3, 1023}}) {
        CAPTURE(g.outer);
        CAPTURE(g.d);
        CAPTURE(g.inner);
        const std::size_t n = static_cast<std::size_t>(g.outer * g.d * g.inner);
        const std::vector<T> x = uniform<T>(n, 5u + static_cast<unsigned>(n), -6, 6);
        std::vector<T> y(n);
        k::softmax(x.data(), y.data(), g.outer, g.d, g.inner);
        check_near(y.data(), ref_softmax(x, g.outer, g.d, g.inner));

        const std::vector<T> dy = uniform<T>(n, 99u + static_cast<unsigned>(n), -1, 1);
        std::vector<T> dx(n);
        k::softmax_grad(y.data(), dy.data(), dx.data(), g.outer, g.d, g.inner);
        check_near(dx.data(), ref_softmax_grad(y, dy, g.outer, g.d, g.inner), tol<T>() * 4);

        std::vector<T> dx2(n);
        k::softmax_grad(y.data(), dy.data(), dx2.data(), g.outer, g.d, g.inner, halving_loops{});
        CHECK(same_bits(dx, dx2));
    }
}

TEST_CASE_TEMPLATE("kernels::softmax with compile-time extents matches run-time ones bit for bit", T, float, double) {
    const std::vector<T> x = uniform<T>(3 * 7 * 5, 3);
    std::vector<T> a(x.size()), b(x.size());
    k::softmax(x.data(), a.data(), fixed<3>{}, fixed<7>{}, fixed<5>{});
    k::softmax(x.data(), b.data(), std::int64_t(3), std::int64_t(7), std::int64_t(5));
    CHECK(same_bits(a, b));
    k::softmax(x.data(), a.data(), fixed<5>{}, fixed<21>{}, fixed<1>{});
    k::softmax(x.data(), b.data(), 5, 21, 1);
    CHECK(same_bits(a, b));
    std::vector<T> ga(x.size()), gb(x.size());
    k::softmax_grad(a.data(), x.data(), ga.data(), fixed<5>{}, fixed<21>{}, fixed<1>{});
    k::softmax_grad(a.data(), x.data(), gb.data(), 5, 21, 1);
    CHECK(same_bits(ga, gb));

    // Empty arrays are left alone (no element is read).
    std::vector<T> untouched = {T(7)};
    k::softmax(x.data(), untouched.data(), fixed<0>{}, fixed<7>{}, fixed<5>{});
    k::softmax(x.data(), untouched.data(), 3, 0, 5);
    k::softmax_grad(x.data(), x.data(), untouched.data(), 3, 7, 0);
    CHECK(untouched[0] == T(7));
}

TEST_CASE_TEMPLATE("kernels::cross_entropy and its gradient, hard and soft labels", T, float, double) {
    for (std::int64_t d : {1, 7, 1023}) {
        CAPTURE(d);
        const std::int64_t rows = 5;
        const std::vector<T> x = prob_rows<T>(rows, d, 21u + static_cast<unsigned>(d));
        const std::vector<std::int64_t> l = labels(rows, d, 4u + static_cast<unsigned>(d));
        const std::vector<T> soft = prob_rows<T>(rows, d, 8u + static_cast<unsigned>(d));
        const std::vector<T> dy = uniform<T>(static_cast<std::size_t>(rows), 17, -2, 2);

        std::vector<double> want_hard(rows), want_soft(rows);
        std::vector<double> want_ghard(x.size(), 0.0), want_gsoft(x.size());
        for (std::int64_t r = 0; r < rows; ++r) {
            const auto at = [&](std::int64_t c) { return static_cast<std::size_t>(r * d + c); };
            const auto ur = static_cast<std::size_t>(r);
            want_hard[ur] = -std::log(static_cast<double>(x[at(l[ur])]));
            double acc = 0;
            for (std::int64_t c = 0; c < d; ++c)
                acc += static_cast<double>(soft[at(c)]) * std::log(static_cast<double>(x[at(c)]));
            want_soft[ur] = -acc;
            want_ghard[at(l[ur])] = -static_cast<double>(dy[ur]) / static_cast<double>(x[at(l[ur])]);
            for (std::int64_t c = 0; c < d; ++c)
                want_gsoft[at(c)] =
                    -static_cast<double>(dy[ur]) * static_cast<double>(soft[at(c)]) / static_cast<double>(x[at(c)]);
        }

        std::vector<T> y(static_cast<std::size_t>(rows));
        CHECK_FALSE(k::cross_entropy_hard(x.data(), l.data(), y.data(), rows, d));
        check_near(y.data(), want_hard);
        k::cross_entropy_soft(x.data(), soft.data(), y.data(), rows, d);
        check_near(y.data(), want_soft, tol<T>() * 10);

        std::vector<T> dx(x.size(), T(9));
        CHECK_FALSE(k::cross_entropy_grad_hard(x.data(), l.data(), dy.data(), dx.data(), rows, d));
        check_near(dx.data(), want_ghard);
        k::cross_entropy_grad_soft(x.data(), soft.data(), dy.data(), dx.data(), rows, d);
        check_near(dx.data(), want_gsoft);
    }
}

TEST_CASE_TEMPLATE("kernels::softmax_with_cross_entropy and its gradient, hard and soft labels", T, float, double) {
    for (std::int64_t d : {1, 7, 1023}) {
        CAPTURE(d);
        const std::int64_t rows = 4;
        const std::vector<T> logits = uniform<T>(static_cast<std::size_t>(rows * d), 31u + static_cast<unsigned>(d), -8, 8);
        const std::vector<std::int64_t> l = labels(rows, d, 6u + static_cast<unsigned>(d));
        const std::vector<T> soft = prob_rows<T>(rows, d, 12u + static_cast<unsigned>(d));
        const std::vector<T> dl = uniform<T>(static_cast<std::size_t>(rows), 19, -2, 2);

        std::vector<double> lse;
        const std::vector<double> want_sm = ref_softmax(logits, rows, d, 1, &lse);
        std::vector<double> want_hard(rows), want_soft(rows);
        for (std::int64_t r = 0; r < rows; ++r) {
            const auto ur = static_cast<std::size_t>(r);
            want_hard[ur] = lse[ur] - static_cast<double>(logits[static_cast<std::size_t>(r * d + l[ur])]);
            double acc = 0;
            for (std::int64_t c = 0; c < d; ++c)
                acc += static_cast<double>(soft[static_cast<std::size_t>(r * d + c)]) *
                       (lse[ur] - static_cast<double>(logits[static_cast<std::size_t>(r * d + c)]));
            want_soft[ur] = acc;
        }

        std::vector<T> sm(logits.size()), loss(static_cast<std::size_t>(rows));
        CHECK_FALSE(k::softmax_with_cross_entropy_hard(logits.data(), l.data(), sm.data(), loss.data(), rows, d));
        check_near(sm.data(), want_sm);
        check_near(loss.data(), want_hard, tol<T>() * 10);
        k::softmax_with_cross_entropy_soft(logits.data(), soft.data(), sm.data(), loss.data(), rows, d);
        check_near(sm.data(), want_sm);
        check_near(loss.data(), want_soft, tol<T>() * 10);

        // Gradients from the saved softmax.
        std::vector<double> want_ghard(sm.size()), want_gsoft(sm.size());
        for (std::int64_t r = 0; r < rows; ++r) {
            const auto ur = static_cast<std::size_t>(r);
            double lsum = 0;
            for (std::int64_t c = 0; c < d; ++c) lsum += static_cast<double>(soft[static_cast<std::size_t>(r * d + c)]);
            for (std::int64_t c = 0; c < d; ++c) {
                const auto i = static_cast<std::size_t>(r * d + c);
                const double p = static_cast<double>(sm[i]), g = static_cast<double>(dl[ur]);
                want_ghard[i] = (p - (c == l[ur] ? 1.0 : 0.0)) * g;
                want_gsoft[i] = (p * lsum - static_cast<double>(soft[i])) * g;
            }
        }
        std::vector<T> dx(sm.size());
        CHECK_FALSE(k::softmax_with_cross_entropy_grad_hard(l.data(), sm.data(), dl.data(), dx.data(), rows, d));
        check_near(dx.data(), want_ghard);
        std::vector<T> dx_halved(sm.size());
        CHECK_FALSE(k::softmax_with_cross_entropy_grad_hard(l.data(), sm.data(), dl.data(), dx_halved.data(), rows, d,
                                                            halving_loops{}));
        CHECK(same_bits(dx, dx_halved));
        k::softmax_with_cross_entropy_grad_soft(soft.data(), sm.data(), dl.data(), dx.data(), rows, d);
        check_near(dx.data(), want_gsoft, tol<T>() * 4);
    }
}

TEST_CASE_TEMPLATE("kernels losses with compile-time extents, soft rows of no classes", T, float, double) {
    const std::vector<T> logits = uniform<T>(3 * 7, 41);
    const std::vector<std::int64_t> l = {6, 0, 3};
    std::vector<T> sm_a(21), sm_b(21), loss_a(3), loss_b(3);
    CHECK_FALSE(k::softmax_with_cross_entropy_hard(logits.data(), l.data(), sm_a.data(), loss_a.data(), fixed<3>{}, fixed<7>{}));
    CHECK_FALSE(k::softmax_with_cross_entropy_hard(logits.data(), l.data(), sm_b.data(), loss_b.data(), 3, 7));
    CHECK(same_bits(sm_a, sm_b));
    CHECK(same_bits(loss_a, loss_b));

    // Labels of another integer type are class indices too.
    const std::int32_t l32[3] = {6, 0, 3};
    std::vector<T> loss_c(3);
    CHECK_FALSE(k::softmax_with_cross_entropy_hard(logits.data(), l32, sm_b.data(), loss_c.data(), fixed<3>{}, fixed<7>{}));
    CHECK(same_bits(loss_a, loss_c));

    std::vector<T> loss(2, T(5));
    k::softmax_with_cross_entropy_soft(logits.data(), logits.data(), sm_a.data(), loss.data(), fixed<2>{}, fixed<0>{});
    CHECK(loss[0] == T(0));
    CHECK(loss[1] == T(0));
}

TEST_CASE_TEMPLATE("kernels losses: a hard label out of range is a fault with its facts", T, float, double) {
    const std::int64_t rows = 4, d = 7;
    const std::vector<T> x = prob_rows<T>(rows, d, 2);
    const std::vector<T> dy(static_cast<std::size_t>(rows), T(1));
    const T sentinel = T(-123);

    struct bad {
        std::int64_t row, label;
    };
    for (bad b : {bad{0, -1}, bad{2, 7}, bad{3, 1000}}) {
        CAPTURE(b.row);
        CAPTURE(b.label);
        std::vector<std::int64_t> l = {1, 2, 3, 4};
        l[static_cast<std::size_t>(b.row)] = b.label;
        auto check_fault = [&](const k::fault& f) {
            CHECK(bool(f));
            CHECK(f.code == k::fault_code::label_out_of_range);
            CHECK(f.a == b.label);
            CHECK(f.b == b.row);
            CHECK(f.c == d);
        };
        // Rows before the bad one are written, the bad one and later ones are not.
        auto check_rows = [&](const std::vector<T>& out, std::int64_t per_row) {
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = 0; c < per_row; ++c) {
                    const bool written = out[static_cast<std::size_t>(r * per_row + c)] != sentinel;
                    CHECK(written == (r < b.row));
                }
        };

        std::vector<T> y(static_cast<std::size_t>(rows), sentinel);
        check_fault(k::cross_entropy_hard(x.data(), l.data(), y.data(), rows, d));
        check_rows(y, 1);

        std::vector<T> dx(x.size(), sentinel);
        check_fault(k::cross_entropy_grad_hard(x.data(), l.data(), dy.data(), dx.data(), fixed<4>{}, fixed<7>{}));
        check_rows(dx, d);

        std::vector<T> sm(x.size(), sentinel), loss(static_cast<std::size_t>(rows), sentinel);
        check_fault(k::softmax_with_cross_entropy_hard(x.data(), l.data(), sm.data(), loss.data(), rows, d));
        check_rows(sm, d);
        check_rows(loss, 1);

        std::fill(dx.begin(), dx.end(), sentinel);
        check_fault(k::softmax_with_cross_entropy_grad_hard(l.data(), x.data(), dy.data(), dx.data(), rows, d));
        check_rows(dx, d);
    }

    // No classes: every label is out of range.
    const std::int64_t zero_label = 0;
    T y0 = sentinel;
    const k::fault f = k::cross_entropy_hard(x.data(), &zero_label, &y0, fixed<1>{}, fixed<0>{});
    CHECK(f.code == k::fault_code::label_out_of_range);
    CHECK(f.a == 0);
    CHECK(f.b == 0);
    CHECK(f.c == 0);
    CHECK(y0 == sentinel);
}
