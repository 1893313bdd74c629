// The matrix products' kernel core called directly on raw arrays, with no
// Session and no threads: kernels/gemm.hpp (every transpose case, odd and
// blocked sizes, rectangles of C that give the bits of the whole, prepacked
// B, operands read in place, compile-time extents, refused workspaces) and kernels/matmul.hpp
// (matmul's operand view and batch walk), against double-precision loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <dlgraph/kernels/gemm.hpp>
#include <dlgraph/kernels/matmul.hpp>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "aligned_buffer.hpp"

namespace {

namespace k = dlgraph::kernels;
template <std::int64_t N> using ic = std::integral_constant<std::int64_t, N>;

template <class T> std::vector<T> rnd(std::int64_t n, std::uint64_t seed) {
    std::vector<T> v(static_cast<std::size_t>(n));
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(-1, 1);
    for (auto& x : v) x = static_cast<T>(d(g));
    return v;
}

// C = alpha * op(A) * op(B) (+ C0) in double, and the sum of |terms| per element.
struct reference {
    std::vector<double> c, mag;
};
template <class T>
reference ref_gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, double alpha, const T* A,
                   std::int64_t lda, const T* B, std::int64_t ldb, const T* C0, std::int64_t ldc) {
    reference r;
    r.c.assign(static_cast<std::size_t>(M * N), 0.0);
    r.mag.assign(r.c.size(), 0.0);
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
            double s = 0, m = 0;
            for (std::int64_t p = 0; p < K; ++p) {
                const double x = ta ? A[p * lda + i] : A[i * lda + p];
                const double y = tb ? B[j * ldb + p] : B[p * ldb + j];
                s += x * y;
                m += std::abs(x * y);
            }
            const double old = C0 ? static_cast<double>(C0[i * ldc + j]) : 0.0;
            r.c[static_cast<std::size_t>(i * N + j)] = alpha * s + old;
            r.mag[static_cast<std::size_t>(i * N + j)] = std::abs(alpha) * m + std::abs(old);
        }
    return r;
}

// Every element within (K + 2) roundings of the magnitude of its terms.
template <class T>
void check_close(const T* C, std::int64_t ldc, std::int64_t M, std::int64_t N, std::int64_t K, const reference& r) {
    const double eps = std::numeric_limits<T>::epsilon();
    std::int64_t bad = 0;
    double worst = 0;
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
            const auto at = static_cast<std::size_t>(i * N + j);
            const double err = std::abs(static_cast<double>(C[i * ldc + j]) - r.c[at]);
            const double tol = static_cast<double>(K + 2) * eps * r.mag[at] + 1e-300;
            if (!(err <= tol)) ++bad;
            worst = std::max(worst, err / tol);
        }
    INFO("worst error / tolerance " << worst);
    CHECK(bad == 0);
}

std::int64_t ld_of(bool trans, std::int64_t rows, std::int64_t cols) { return trans ? rows : cols; }

}  // namespace

TEST_CASE_TEMPLATE("kernels::gemm_serial: every transpose case on sizes 1, 7, 1023", T, float, double) {
    const std::int64_t sizes[] = {1, 7, 1023};
    std::uint64_t seed = 1;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (auto M : sizes)
                for (auto N : sizes)
                    for (auto K : sizes) {
                        if (M * N * K > 1023 * 1023 * 7) continue;  // the reference would take seconds
                        const std::int64_t lda = ld_of(ta, M, K), ldb = ld_of(tb, K, N);
                        const auto a = rnd<T>(M * K, seed++), b = rnd<T>(K * N, seed++);
                        std::vector<T> c(static_cast<std::size_t>(M * N), T(7));
                        aligned_buffer<T> ws(k::gemm_workspace_size<T>(tb, M, N, K));
                        INFO("ta " << ta << " tb " << tb << " M " << M << " N " << N << " K " << K);
                        CHECK(k::gemm_serial(ta, tb, M, N, K, T(1), a.data(), lda, b.data(), ldb, false, c.data(), N,
                                             ws.get(), ws.n));
                        check_close(c.data(), N, M, N, K,
                                    ref_gemm(ta, tb, M, N, K, 1.0, a.data(), lda, b.data(), ldb, (const T*)nullptr, N));
                    }
}

TEST_CASE_TEMPLATE("kernels::gemm_serial: blocked sizes, padded rows, alpha and accumulate", T, float, double) {
    // The unpacked few-rows path (M = 5), the packed path with K beyond a k
    // block, M beyond an m block and N beyond a column block; rows of A, B
    // and C padded, every pointer off by one element.
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
                    const auto abuf = rnd<T>(ar * lda + 1, seed++), bbuf = rnd<T>(br * ldb + 1, seed++);
                    const auto c0 = rnd<T>(M * ldc + 1, seed++);
                    auto cbuf = c0;
                    aligned_buffer<T> ws(k::gemm_workspace_size<T>(tb, M, N, K));
                    INFO("M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb << " acc " << acc);
                    CHECK(k::gemm_serial(ta, tb, M, N, K, T(0.5), abuf.data() + 1, lda, bbuf.data() + 1, ldb, acc,
                                         cbuf.data() + 1, ldc, ws.get(), ws.n));
                    check_close(cbuf.data() + 1, ldc, M, N, K,
                                ref_gemm(ta, tb, M, N, K, 0.5, abuf.data() + 1, lda, bbuf.data() + 1, ldb,
                                         acc ? c0.data() + 1 : nullptr, ldc));
                    bool pad_kept = cbuf[0] == c0[0];
                    for (std::int64_t i = 0; i < M; ++i)
                        for (std::int64_t j = N; j < ldc; ++j)
                            pad_kept = pad_kept && cbuf[static_cast<std::size_t>(1 + i * ldc + j)] ==
                                                       c0[static_cast<std::size_t>(1 + i * ldc + j)];
                    CHECK(pad_kept);
                }
}

TEST_CASE_TEMPLATE("kernels::gemm_block: strips of whole register tiles give the bits of the whole", T, float,
                   double) {
    // As cpu/gemm.hpp splits for threads: column strips of whole nr, row
    // strips of whole mr (each strip still >= gemm_small_m rows, so it takes
    // the whole's path), each in a workspace of its own size.
    const std::int64_t M = 3 * k::gemm_mr<T> + 5, N = 3 * k::gemm_nr<T> + 7, K = 301;
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            const std::int64_t lda = ld_of(ta, M, K), ldb = ld_of(tb, K, N);
            const auto a = rnd<T>(M * K, 11), b = rnd<T>(K * N, 12);
            std::vector<T> whole(static_cast<std::size_t>(M * N)), cols(whole.size()), rows(whole.size());
            aligned_buffer<T> ws(k::gemm_workspace_size<T>(tb, M, N, K));
            REQUIRE(k::gemm_serial(ta, tb, M, N, K, T(1.5), a.data(), lda, b.data(), ldb, false, whole.data(), N,
                                   ws.get(), ws.n));
            const std::int64_t nr = k::gemm_nr<T>, mr = k::gemm_mr<T>;
            for (std::int64_t c0 = 0; c0 < N; c0 += nr) {
                const std::int64_t c1 = std::min(N, c0 + nr);
                aligned_buffer<T> w(k::gemm_workspace_size<T>(tb, M, c1 - c0, K));
                CHECK(k::gemm_block(ta, tb, K, T(1.5), a.data(), lda, b.data(), ldb, false, cols.data(), N,
                                    k::gemm_range{0, M, c0, c1}, w.get(), w.n));
            }
            for (std::int64_t r0 = 0; r0 < M; r0 += 2 * mr) {
                const std::int64_t r1 = std::min(M, r0 + 2 * mr);
                aligned_buffer<T> w(k::gemm_workspace_size<T>(tb, r1 - r0, N, K));
                CHECK(k::gemm_block(ta, tb, K, T(1.5), a.data(), lda, b.data(), ldb, false, rows.data(), N,
                                    k::gemm_range{r0, r1, 0, N}, w.get(), w.n));
            }
            INFO("ta " << ta << " tb " << tb);
            CHECK(std::memcmp(whole.data(), cols.data(), whole.size() * sizeof(T)) == 0);
            CHECK(std::memcmp(whole.data(), rows.data(), whole.size() * sizeof(T)) == 0);
        }
}

TEST_CASE_TEMPLATE("kernels::gemm_block: an inner rectangle writes only itself", T, float, double) {
    const std::int64_t M = 40, N = 50, K = 9;
    const auto a = rnd<T>(M * K, 21), b = rnd<T>(K * N, 22);
    std::vector<T> c(static_cast<std::size_t>(M * N), T(-3));
    const k::gemm_range r{9, 31, 13, 44};
    aligned_buffer<T> ws(k::gemm_workspace_size<T>(false, r.r1 - r.r0, r.c1 - r.c0, K));
    REQUIRE(k::gemm_block(false, false, K, T(1), a.data(), K, b.data(), N, false, c.data(), N, r, ws.get(), ws.n));
    const auto want = ref_gemm(false, false, M, N, K, 1.0, a.data(), K, b.data(), N, (const T*)nullptr, N);
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
            const double got = c[static_cast<std::size_t>(i * N + j)];
            const auto at = static_cast<std::size_t>(i * N + j);
            const bool inside = i >= r.r0 && i < r.r1 && j >= r.c0 && j < r.c1;
            if (inside ? std::abs(got - want.c[at]) > 11 * std::numeric_limits<T>::epsilon() * want.mag[at]
                       : got != -3.0)
                ++bad;
        }
    CHECK(bad == 0);
}

TEST_CASE_TEMPLATE("kernels::gemm_serial: compile-time extents and a static workspace", T, float, double) {
    // A fixed model's dense layer: sizes in the types, the workspace sized at
    // compile time.
    using M = ic<12>;
    using N = ic<40>;
    using K = ic<33>;
    constexpr std::int64_t need = k::gemm_workspace_size<T>(false, M{}, N{}, K{});
    static_assert(need > 0, "12 rows take the packed path");
    alignas(64) static T ws[need];
    const auto a = rnd<T>(M::value * K::value, 31), b = rnd<T>(K::value * N::value, 32);
    std::vector<T> c(static_cast<std::size_t>(M::value * N::value));
    CHECK(k::gemm_serial(false, false, M{}, N{}, K{}, T(1), a.data(), K::value, b.data(), N::value, false, c.data(),
                         N::value, ws, need));
    check_close(c.data(), N::value, M::value, N::value, K::value,
                ref_gemm(false, false, M::value, N::value, K::value, 1.0, a.data(), K::value, b.data(), N::value,
                         (const T*)nullptr, N::value));

    // The few-rows path needs no workspace at all.
    static_assert(k::gemm_workspace_size<T>(false, ic<1>{}, ic<7>{}, ic<1023>{}) == 0);
    const auto x = rnd<T>(1023, 33), w = rnd<T>(1023 * 7, 34);
    std::vector<T> y(7);
    CHECK(k::gemm_serial(false, false, ic<1>{}, ic<7>{}, ic<1023>{}, T(1), x.data(), 1023, w.data(), 7, false, y.data(),
                         7, static_cast<T*>(nullptr), 0));
    check_close(y.data(), 7, 1, 7, 1023,
                ref_gemm(false, false, 1, 7, 1023, 1.0, x.data(), 1023, w.data(), 7, (const T*)nullptr, 7));
}

TEST_CASE_TEMPLATE("kernels::gemm_prepacked_block: packed B gives the bits of packing per call", T, float, double) {
    const std::int64_t M = 2 * k::gemm_mr<T> + 3, N = 1023, K = 300;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (bool acc : {false, true}) {
                const std::int64_t lda = ld_of(ta, M, K), ldb = ld_of(tb, K, N);
                const auto a = rnd<T>(M * K, 41), b = rnd<T>(K * N, 42), c0 = rnd<T>(M * N, 43);
                auto plain = c0, packed = c0;
                aligned_buffer<T> ws(k::gemm_workspace_size<T>(tb, M, N, K));
                REQUIRE(k::gemm_serial(ta, tb, M, N, K, T(0.75), a.data(), lda, b.data(), ldb, acc, plain.data(), N,
                                       ws.get(), ws.n));
                aligned_buffer<T> pb(k::gemm_packed_b_size<T>(K, N));
                k::gemm_pack_b(tb, K, N, b.data(), ldb, pb.get());
                // In two row strips of whole register tiles, as threads take them.
                const std::int64_t split = k::gemm_mr<T>;
                for (auto [r0, r1] : {std::pair<std::int64_t, std::int64_t>{0, split}, {split, M}}) {
                    aligned_buffer<T> w(k::gemm_prepacked_workspace_size<T>(r1 - r0, K));
                    CHECK(k::gemm_prepacked_block(ta, N, K, T(0.75), a.data(), lda, pb.get(), acc, packed.data(), N,
                                                  r0, r1, w.get(), w.n));
                }
                INFO("ta " << ta << " tb " << tb << " acc " << acc);
                CHECK(std::memcmp(plain.data(), packed.data(), plain.size() * sizeof(T)) == 0);
                const T* old = acc ? c0.data() : nullptr;
                check_close(packed.data(), N, M, N, K,
                            ref_gemm(ta, tb, M, N, K, 0.75, a.data(), lda, b.data(), ldb, old, N));
            }
}

TEST_CASE_TEMPLATE("kernels::gemm_prepacked_a_block: packed A gives the bits of packing per call", T, float, double) {
    // M past one mc block, K past one kc block, N in two strips of whole panels.
    const std::int64_t M = 200, N = 3 * k::gemm_nr<T> + 5, K = 300, split = k::gemm_nr<T>;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (bool acc : {false, true}) {
                const std::int64_t lda = ld_of(ta, M, K), ldb = ld_of(tb, K, N);
                const auto a = rnd<T>(M * K, 44), b = rnd<T>(K * N, 45), c0 = rnd<T>(M * N, 46);
                auto plain = c0, packed = c0;
                aligned_buffer<T> ws(k::gemm_workspace_size<T>(tb, M, N, K));
                REQUIRE(k::gemm_serial(ta, tb, M, N, K, T(0.75), a.data(), lda, b.data(), ldb, acc, plain.data(), N,
                                       ws.get(), ws.n));
                aligned_buffer<T> pa(k::gemm_packed_a_size<T>(M, K));
                k::gemm_pack_a(ta, M, K, a.data(), lda, pa.get());
                for (auto [c0_, c1_] : {std::pair<std::int64_t, std::int64_t>{0, split}, {split, N}}) {
                    aligned_buffer<T> w(k::gemm_prepacked_a_workspace_size<T>(c1_ - c0_, K));
                    CHECK_FALSE(k::gemm_prepacked_a_block(M, tb, K, T(0.75), pa.get(), b.data(), ldb, acc, packed.data(),
                                                          N, c0_, c1_, w.get(), w.n - 1));
                    CHECK(k::gemm_prepacked_a_block(M, tb, K, T(0.75), pa.get(), b.data(), ldb, acc, packed.data(), N,
                                                    c0_, c1_, w.get(), w.n));
                }
                INFO("ta " << ta << " tb " << tb << " acc " << acc);
                CHECK(std::memcmp(plain.data(), packed.data(), plain.size() * sizeof(T)) == 0);
                const T* old = acc ? c0.data() : nullptr;
                check_close(packed.data(), N, M, N, K,
                            ref_gemm(ta, tb, M, N, K, 0.75, a.data(), lda, b.data(), ldb, old, N));
            }
}

TEST_CASE_TEMPLATE("kernels::gemm_serial: operands read in place give the bits of packed ones", T, float, double) {
    // A product whose columns fit in one panel reads a transposed A in place,
    // and one with few rows reads a row-major B in place (only a last,
    // partial panel is packed); a wider product of the same A packs it. The
    // narrow product's columns must be the wide one's to the bit, and both
    // within rounding of double precision: M across several m blocks and a
    // partial last panel, K across k blocks, N = 10 (a 10-class layer).
    const std::int64_t Nw = 3 * k::gemm_nr<T> + 5, Nn = 10;
    std::uint64_t seed = 300;
    for (std::int64_t M : {std::int64_t(20), std::int64_t(131), std::int64_t(400)})
        for (std::int64_t K : {std::int64_t(64), std::int64_t(300)})
            for (bool ta : {false, true})
                for (bool tb : {false, true}) {
                    const std::int64_t lda = ld_of(ta, M, K), ldb = ld_of(tb, K, Nw);
                    const auto a = rnd<T>(M * K, seed++), b = rnd<T>(K * Nw, seed++);
                    std::vector<T> wide(static_cast<std::size_t>(M * Nw)), narrow(static_cast<std::size_t>(M * Nn));
                    aligned_buffer<T> ww(k::gemm_workspace_size<T>(tb, M, Nw, K));
                    aligned_buffer<T> wn(k::gemm_workspace_size<T>(tb, M, Nn, K));
                    REQUIRE(k::gemm_serial(ta, tb, M, Nw, K, T(1), a.data(), lda, b.data(), ldb, false, wide.data(), Nw,
                                           ww.get(), ww.n));
                    // The first Nn columns of op(B): the same storage and leading dimension.
                    REQUIRE(k::gemm_serial(ta, tb, M, Nn, K, T(1), a.data(), lda, b.data(), ldb, false, narrow.data(),
                                           Nn, wn.get(), wn.n));
                    INFO("M " << M << " K " << K << " ta " << ta << " tb " << tb);
                    bool same = true;
                    for (std::int64_t i = 0; i < M; ++i)
                        same = same && std::memcmp(&narrow[static_cast<std::size_t>(i * Nn)],
                                                   &wide[static_cast<std::size_t>(i * Nw)], Nn * sizeof(T)) == 0;
                    CHECK(same);
                    check_close(narrow.data(), Nn, M, Nn, K,
                                ref_gemm(ta, tb, M, Nn, K, 1.0, a.data(), lda, b.data(), ldb, (const T*)nullptr, Nn));
                    check_close(wide.data(), Nw, M, Nw, K,
                                ref_gemm(ta, tb, M, Nw, K, 1.0, a.data(), lda, b.data(), ldb, (const T*)nullptr, Nw));
                }
}

TEST_CASE_TEMPLATE("kernels::gemm: K = 0 zeroes C unless accumulating, empty products touch nothing", T, float,
                   double) {
    std::vector<T> c(6, T(5));
    CHECK(k::gemm_workspace_size<T>(false, 2, 3, 0) == 0);
    CHECK(k::gemm_serial(false, false, 2, 3, 0, T(1), (const T*)nullptr, 0, (const T*)nullptr, 3, true, c.data(), 3,
                         (T*)nullptr, 0));
    CHECK(c == std::vector<T>(6, T(5)));
    CHECK(k::gemm_serial(true, true, 2, 3, 0, T(1), (const T*)nullptr, 2, (const T*)nullptr, 0, false, c.data(), 3,
                         (T*)nullptr, 0));
    CHECK(c == std::vector<T>(6, T(0)));
    std::vector<T> d(4, T(9));
    CHECK(k::gemm_serial(false, false, 0, 2, 5, T(1), (const T*)nullptr, 5, (const T*)nullptr, 2, false, d.data(), 2,
                         (T*)nullptr, 0));
    CHECK(k::gemm_prepacked_block(false, ic<2>{}, ic<5>{}, T(1), (const T*)nullptr, 5, (const T*)nullptr, false,
                                  d.data(), 2, 1, 1, (T*)nullptr, 0));
    CHECK(d == std::vector<T>(4, T(9)));
}

TEST_CASE_TEMPLATE("kernels::gemm: a workspace too small or misaligned is refused, C untouched", T, float, double) {
    const std::int64_t M = 20, N = 33, K = 17;
    const auto a = rnd<T>(M * K, 51), b = rnd<T>(K * N, 52);
    const std::int64_t need = k::gemm_workspace_size<T>(false, M, N, K);
    REQUIRE(need > 0);
    aligned_buffer<T> ws(need + 64);
    std::vector<T> c(static_cast<std::size_t>(M * N), T(2));
    CHECK_FALSE(k::gemm_serial(false, false, M, N, K, T(1), a.data(), K, b.data(), N, false, c.data(), N, ws.get(),
                               need - 1));
    CHECK_FALSE(k::gemm_serial(false, false, M, N, K, T(1), a.data(), K, b.data(), N, false, c.data(), N,
                               ws.get() + 1, need));
    aligned_buffer<T> pb(k::gemm_packed_b_size<T>(K, N));
    k::gemm_pack_b(false, K, N, b.data(), N, pb.get());
    const std::int64_t need_a = k::gemm_prepacked_workspace_size<T>(M, K);
    REQUIRE(need_a > 0);
    CHECK(need_a < need);  // no room for B
    CHECK_FALSE(k::gemm_prepacked_block(false, N, K, T(1), a.data(), K, pb.get(), false, c.data(), N, 0, M, ws.get(),
                                        need_a - 1));
    CHECK(c == std::vector<T>(c.size(), T(2)));
    CHECK(k::gemm_serial(false, false, M, N, K, T(1), a.data(), K, b.data(), N, false, c.data(), N, ws.get(), need));
    check_close(c.data(), N, M, N, K,
                ref_gemm(false, false, M, N, K, 1.0, a.data(), K, b.data(), N, (const T*)nullptr, N));
}

TEST_CASE("kernels::matmul_view: rank-1 operands, transposes and row strides") {
    const std::int64_t x3[] = {4, 5, 6}, y2[] = {6, 7}, v6[] = {6};
    const k::matmul_view a(x3, 3, y2, 2, false, false);
    CHECK((a.m == 5 && a.k == 6 && a.yk == 6 && a.n == 7 && a.lda == 6 && a.ldb == 7 && !a.ta && !a.tb));
    CHECK((a.xk_dim == 2 && a.yk_dim == 0));
    const k::matmul_view t(x3, 3, y2, 2, true, true);  // op(X) is 6 x 5, op(Y) is 7 x 6
    CHECK((t.m == 6 && t.k == 5 && t.yk == 7 && t.n == 6 && t.lda == 6 && t.ldb == 7 && t.ta && t.tb));
    CHECK((t.xk_dim == 1 && t.yk_dim == 1));
    const k::matmul_view v(v6, 1, v6, 1, false, false);  // a row times a column
    CHECK((v.m == 1 && v.k == 6 && v.n == 1 && v.yk == 6 && v.lda == 6 && v.ldb == 1 && !v.ta && !v.tb));
    CHECK((v.xk_dim == 0 && v.yk_dim == 0));
    // Transposed vectors (Paddle): X a column [6, 1], Y a row [1, 6]; stored
    // contiguous, so neither is a transposed matrix.
    const k::matmul_view o(v6, 1, v6, 1, true, true);
    CHECK((o.m == 6 && o.k == 1 && o.n == 6 && o.yk == 1 && o.lda == 1 && o.ldb == 6 && !o.ta && !o.tb));
    CHECK((o.xk_dim == -1 && o.yk_dim == -1));
    CHECK((k::matmul_out_keeps_m(1, 6) && !k::matmul_out_keeps_m(1, 1) && k::matmul_out_keeps_m(2, 1)));
    CHECK((k::matmul_out_keeps_n(1, -1) && !k::matmul_out_keeps_n(1, 1) && k::matmul_out_keeps_n(3, 1)));
}

TEST_CASE("kernels::matmul_batches: broadcast batch dims, offsets and which batches add") {
    // X [2, 1, 3, 4] (batch dims 2 x 1), Y [3, 4, 5] (batch dim 3): Out's
    // batches are 2 x 3; X's matrix repeats along the second, Y's along the first.
    const std::int64_t xs[] = {2, 1, 3, 4}, ys[] = {3, 4, 5};
    const k::matmul_batches bt(xs, 4, ys, 3, 12, 20);
    CHECK(bt.rb == 2);
    CHECK(bt.nb == 6);
    CHECK((bt.dims[0] == 2 && bt.dims[1] == 3));
    CHECK((bt.xst[0] == 12 && bt.xst[1] == 0 && bt.yst[0] == 0 && bt.yst[1] == 20));
    CHECK_FALSE(bt.one_product(false));
    struct visit {
        std::int64_t b, ox, oy;
        bool ax, ay;
    };
    std::vector<visit> seen;
    bt.for_each([&](std::int64_t b, std::int64_t ox, std::int64_t oy, bool ax, bool ay) {
        seen.push_back({b, ox, oy, ax, ay});
    });
    REQUIRE(seen.size() == 6);
    for (std::int64_t b = 0; b < 6; ++b) {
        const auto& s = seen[static_cast<std::size_t>(b)];
        const std::int64_t i = b / 3, j = b % 3;
        INFO("batch " << b);
        CHECK(s.b == b);
        CHECK(s.ox == 12 * i);
        CHECK(s.oy == 20 * j);
        CHECK(s.ax == (j != 0));  // X's matrix i was reached at (i, 0)
        CHECK(s.ay == (i != 0));  // Y's matrix j was reached at (0, j)
    }

    // Y shared by all batches of a contiguous X: one tall product (unless X is transposed).
    const std::int64_t xt[] = {2, 3, 3, 4}, y2[] = {4, 5};
    const k::matmul_batches tall(xt, 4, y2, 2, 12, 20);
    CHECK(tall.nb == 6);
    CHECK(tall.one_product(false));
    CHECK_FALSE(tall.one_product(true));
    // A zero batch dim: no batches.
    const std::int64_t x0[] = {0, 3, 4};
    CHECK(k::matmul_batches(x0, 3, y2, 2, 12, 20).nb == 0);
}
