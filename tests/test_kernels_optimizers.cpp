// The kernel core of the optimizer updates (kernels/optimizers.hpp) called
// directly on raw arrays, no Session: against plain double-precision loops
// written here, for FP32 and FP64, odd sizes, compile-time extents, updates
// in place, and sgd split into ranges at whole vectors.
#include <doctest/doctest.h>

#include <dlgraph/kernels/optimizers.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace k = dlgraph::kernels;

namespace {

template <std::int64_t N> using fixed = std::integral_constant<std::int64_t, N>;

template <class T> std::vector<T> uniform(std::size_t n, unsigned seed, double lo = -1, double hi = 1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(rng));
    return v;
}

template <class T> double tol() { return std::is_same_v<T, float> ? 1e-5 : 1e-13; }

template <class T> void check_near(const std::vector<T>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        CHECK(std::abs(static_cast<double>(got[i]) - want[i]) <= tol<T>() * (1 + std::abs(want[i])));
    }
}

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

double d_(float v) { return static_cast<double>(v); }
double d_(double v) { return v; }

}  // namespace

TEST_CASE_TEMPLATE("kernels::sgd: odd sizes, in place, split into ranges", T, float, double) {
    for (std::int64_t n : {1, 7, 1023}) {
        CAPTURE(n);
        const auto un = static_cast<std::size_t>(n);
        const std::vector<T> p = uniform<T>(un, 1), g = uniform<T>(un, 2);
        const T lr = T(0.05);
        std::vector<double> want(un);
        for (std::size_t i = 0; i < un; ++i) want[i] = d_(p[i]) - d_(lr) * d_(g[i]);

        std::vector<T> out(un);
        k::sgd(n, p.data(), g.data(), lr, out.data());
        check_near(out, want);

        std::vector<T> inplace = p;
        k::sgd(n, inplace.data(), g.data(), lr, inplace.data());
        CHECK(same_bits(inplace, out));

        // Ranges that start on whole vectors give the same bits (the CPU's threads).
        constexpr std::int64_t W = static_cast<std::int64_t>(k::batch<T>::size);
        const std::int64_t cut = n / 2 / W * W;
        std::vector<T> split(un);
        k::sgd(cut, p.data(), g.data(), lr, split.data());
        k::sgd(n - cut, p.data() + cut, g.data() + cut, lr, split.data() + cut);
        CHECK(same_bits(split, out));
    }
    const std::vector<T> p = uniform<T>(7, 3), g = uniform<T>(7, 4);
    std::vector<T> a(7), b(7);
    k::sgd(fixed<7>{}, p.data(), g.data(), T(0.5), a.data());
    k::sgd(7, p.data(), g.data(), T(0.5), b.data());
    CHECK(same_bits(a, b));
}

TEST_CASE_TEMPLATE("kernels::momentum, plain and Nesterov", T, float, double) {
    for (bool nesterov : {false, true}) {
        for (std::int64_t n : {1, 7, 1023}) {
            CAPTURE(nesterov);
            CAPTURE(n);
            const auto un = static_cast<std::size_t>(n);
            const std::vector<T> p = uniform<T>(un, 5), g = uniform<T>(un, 6), v = uniform<T>(un, 7);
            const T lr = T(0.1), mu = T(0.9);
            std::vector<double> want_p(un), want_v(un);
            for (std::size_t i = 0; i < un; ++i) {
                const double vn = d_(mu) * d_(v[i]) + d_(g[i]);
                want_v[i] = vn;
                want_p[i] = d_(p[i]) - d_(lr) * (nesterov ? d_(g[i]) + d_(mu) * vn : vn);
            }
            std::vector<T> po(un), vo(un);
            k::momentum(n, p.data(), g.data(), v.data(), lr, mu, nesterov, po.data(), vo.data());
            check_near(po, want_p);
            check_near(vo, want_v);

            std::vector<T> pi = p, vi = v;
            k::momentum(n, pi.data(), g.data(), vi.data(), lr, mu, nesterov, pi.data(), vi.data());
            CHECK(same_bits(pi, po));
            CHECK(same_bits(vi, vo));

            // Cut anywhere (threads cut at vectors): the vector body and the tail agree bit for bit.
            std::vector<T> ps(un), vs(un);
            const std::int64_t cut = n / 2 + 1;
            k::momentum(cut, p.data(), g.data(), v.data(), lr, mu, nesterov, ps.data(), vs.data());
            k::momentum(n - cut, p.data() + cut, g.data() + cut, v.data() + cut, lr, mu, nesterov, ps.data() + cut,
                        vs.data() + cut);
            CHECK(same_bits(ps, po));
            CHECK(same_bits(vs, vo));
        }
    }
    const std::vector<T> p = uniform<T>(7, 8), g = uniform<T>(7, 9), v = uniform<T>(7, 10);
    std::vector<T> pa(7), va(7), pb(7), vb(7);
    k::momentum(fixed<7>{}, p.data(), g.data(), v.data(), T(0.1), T(0.5), true, pa.data(), va.data());
    k::momentum(7, p.data(), g.data(), v.data(), T(0.1), T(0.5), true, pb.data(), vb.data());
    CHECK(same_bits(pa, pb));
    CHECK(same_bits(va, vb));
}

TEST_CASE_TEMPLATE("kernels::adam: vector body and tail, in place", T, float, double) {
    struct hyper {
        double lr, beta1, beta2, eps;
        int step;
    };
    for (hyper h : {hyper{0.01, 0.9, 0.999, 1e-8, 1}, hyper{0.002, 0.8, 0.95, 1e-6, 10}}) {
        for (std::int64_t n : {1, 7, 1023}) {
            CAPTURE(h.step);
            CAPTURE(n);
            const auto un = static_cast<std::size_t>(n);
            const std::vector<T> p = uniform<T>(un, 11), g = uniform<T>(un, 12);
            const std::vector<T> m1 = uniform<T>(un, 13, -0.1, 0.1), m2 = uniform<T>(un, 14, 0.0, 0.01);
            const T lr = static_cast<T>(h.lr), b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2),
                    eps = static_cast<T>(h.eps);
            const T b1p = static_cast<T>(std::pow(d_(b1), h.step)), b2p = static_cast<T>(std::pow(d_(b2), h.step));

            const double lr_t = d_(lr) * std::sqrt(1 - d_(b2p)) / (1 - d_(b1p));
            const double eps_t = d_(eps) * std::sqrt(1 - d_(b2p));
            std::vector<double> want_p(un), want_m1(un), want_m2(un);
            for (std::size_t i = 0; i < un; ++i) {
                const double gi = d_(g[i]);
                want_m1[i] = d_(b1) * d_(m1[i]) + (1 - d_(b1)) * gi;
                want_m2[i] = d_(b2) * d_(m2[i]) + (1 - d_(b2)) * gi * gi;
                want_p[i] = d_(p[i]) - lr_t * want_m1[i] / (std::sqrt(want_m2[i]) + eps_t);
            }
            std::vector<T> po(un), m1o(un), m2o(un);
            k::adam(n, p.data(), g.data(), m1.data(), m2.data(), lr, b1, b2, eps, b1p, b2p, po.data(), m1o.data(),
                    m2o.data());
            check_near(po, want_p);
            check_near(m1o, want_m1);
            check_near(m2o, want_m2);

            std::vector<T> pi = p, m1i = m1, m2i = m2;
            k::adam(n, pi.data(), g.data(), m1i.data(), m2i.data(), lr, b1, b2, eps, b1p, b2p, pi.data(), m1i.data(),
                    m2i.data());
            CHECK(same_bits(pi, po));
            CHECK(same_bits(m1i, m1o));
            CHECK(same_bits(m2i, m2o));

            // Cut anywhere (threads cut at vectors): the vector body and the tail agree bit for bit.
            std::vector<T> ps(un), m1s(un), m2s(un);
            const std::int64_t cut = n / 2 + 1;
            k::adam(cut, p.data(), g.data(), m1.data(), m2.data(), lr, b1, b2, eps, b1p, b2p, ps.data(), m1s.data(),
                    m2s.data());
            k::adam(n - cut, p.data() + cut, g.data() + cut, m1.data() + cut, m2.data() + cut, lr, b1, b2, eps, b1p, b2p,
                    ps.data() + cut, m1s.data() + cut, m2s.data() + cut);
            CHECK(same_bits(ps, po));
            CHECK(same_bits(m1s, m1o));
            CHECK(same_bits(m2s, m2o));
        }
    }
    const std::vector<T> p = uniform<T>(7, 15), g = uniform<T>(7, 16), m1 = uniform<T>(7, 17), m2 = uniform<T>(7, 18, 0, 1);
    std::vector<T> pa(7), m1a(7), m2a(7), pb(7), m1b(7), m2b(7);
    k::adam(fixed<7>{}, p.data(), g.data(), m1.data(), m2.data(), T(0.01), T(0.9), T(0.999), T(1e-8), T(0.9), T(0.999),
            pa.data(), m1a.data(), m2a.data());
    k::adam(7, p.data(), g.data(), m1.data(), m2.data(), T(0.01), T(0.9), T(0.999), T(1e-8), T(0.9), T(0.999), pb.data(),
            m1b.data(), m2b.data());
    CHECK(same_bits(pa, pb));
    CHECK(same_bits(m1a, m1b));
    CHECK(same_bits(m2a, m2b));
}
