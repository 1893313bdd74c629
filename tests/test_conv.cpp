// The window ops (conv2d, depthwise_conv2d, pool2d,
// flatten_contiguous_range): results against naive double-precision
// references written here from Paddle's definitions, for every attribute
// variant; gradients against central finite differences; shape inference
// and its errors.
#include <dlgraph/kernels/conv.hpp>
#include <dlgraph/kernels/conv_gemm.hpp>
#include <dlgraph/optimizer.hpp>

#include "aligned_buffer.hpp"
#include "grad_check.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

using dims4 = std::array<std::int64_t, 4>;

// A value of a 4-D array stored row-major.
double at(const xt::xarray<double>& a, std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t l) {
    const auto& s = a.shape();
    return a.data()[((i * std::int64_t(s[1]) + j) * std::int64_t(s[2]) + k) * std::int64_t(s[3]) + l];
}

// Paddings [before, after] and the dilation along one axis, as Paddle
// resolves them (SAME: ceil(in / s) outputs, dilation 1; VALID: none).
struct axis_pad {
    std::int64_t p0, p1, d;
};
axis_pad resolve(const std::string& alg, const std::vector<std::int64_t>& pads, int axis, std::int64_t in, std::int64_t k,
                 std::int64_t s, std::int64_t d) {
    if (alg == "VALID") return {0, 0, d};
    if (alg == "SAME") {
        const std::int64_t out = (in + s - 1) / s, sum = std::max<std::int64_t>((out - 1) * s + k - in, 0);
        return {sum / 2, sum - sum / 2, 1};
    }
    if (pads.size() == 2) return {pads[std::size_t(axis)], pads[std::size_t(axis)], d};
    return {pads[std::size_t(2 * axis)], pads[std::size_t(2 * axis + 1)], d};
}

// The products of conv2d in double: visit(n, m, y, x, xi, fi) for every
// output [n][m][y][x] and every term in[xi] * f[fi] of its sum (the
// group's channels c and the window (i, j) of in[n][g*cg + c][y*s - p +
// i*d][x*s - p + j*d] * f[m][c][i][j], in that order); returns the
// output's shape.
template <class F> dims4 conv_terms(const xt::xarray<double>& x, const xt::xarray<double>& f, const Conv2d& o, F visit) {
    const std::int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const std::int64_t M = f.shape()[0], cg = f.shape()[1], KH = f.shape()[2], KW = f.shape()[3];
    const std::int64_t G = o.groups, mg = M / G;
    REQUIRE(C == cg * G);
    const axis_pad ph = resolve(o.padding_algorithm, o.paddings, 0, H, KH, o.strides[0], o.dilations[0]);
    const axis_pad pw = resolve(o.padding_algorithm, o.paddings, 1, W, KW, o.strides[1], o.dilations[1]);
    const std::int64_t OH = (H + ph.p0 + ph.p1 - (ph.d * (KH - 1) + 1)) / o.strides[0] + 1;
    const std::int64_t OW = (W + pw.p0 + pw.p1 - (pw.d * (KW - 1) + 1)) / o.strides[1] + 1;
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t m = 0; m < M; ++m)
            for (std::int64_t y = 0; y < OH; ++y)
                for (std::int64_t xo = 0; xo < OW; ++xo) {
                    const std::int64_t g = m / mg;
                    for (std::int64_t c = 0; c < cg; ++c)
                        for (std::int64_t i = 0; i < KH; ++i)
                            for (std::int64_t j = 0; j < KW; ++j) {
                                const std::int64_t iy = y * o.strides[0] - ph.p0 + i * ph.d;
                                const std::int64_t ix = xo * o.strides[1] - pw.p0 + j * pw.d;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                visit(n, m, y, xo, ((n * C + g * cg + c) * H + iy) * W + ix, ((m * cg + c) * KH + i) * KW + j);
                            }
                }
    return {N, M, OH, OW};
}

// conv2d in double.
xt::xarray<double> conv_reference(const xt::xarray<double>& x, const xt::xarray<double>& f, const Conv2d& o) {
    xt::xarray<double> out;
    const dims4 s = conv_terms(x, f, o, [](auto...) {});
    out = xt::zeros<double>({std::size_t(s[0]), std::size_t(s[1]), std::size_t(s[2]), std::size_t(s[3])});
    conv_terms(x, f, o, [&](std::int64_t n, std::int64_t m, std::int64_t y, std::int64_t xo, std::int64_t xi, std::int64_t fi) {
        out(n, m, y, xo) += x.data()[xi] * f.data()[fi];
    });
    return out;
}

// conv2d's gradients in double, Input@GRAD and Filter@GRAD for Output@GRAD dy.
std::pair<xt::xarray<double>, xt::xarray<double>> conv_grad_reference(const xt::xarray<double>& x,
                                                                      const xt::xarray<double>& f,
                                                                      const xt::xarray<double>& dy, const Conv2d& o) {
    xt::xarray<double> dx = xt::zeros<double>(x.shape()), df = xt::zeros<double>(f.shape());
    conv_terms(x, f, o, [&](std::int64_t n, std::int64_t m, std::int64_t y, std::int64_t xo, std::int64_t xi, std::int64_t fi) {
        dx.data()[xi] += dy(n, m, y, xo) * f.data()[fi];
        df.data()[fi] += dy(n, m, y, xo) * x.data()[xi];
    });
    return {dx, df};
}

// pool2d in double, from Paddle's CPU kernel: window rows [y*s - pt, +k)
// clipped to the input (adaptive: [floor(y*H/OH), ceil((y+1)*H/OH))); the
// non-exclusive average divides by the window's part inside the padded input.
xt::xarray<double> pool_reference(const xt::xarray<double>& x, const Pool2d& o) {
    const std::int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const bool global = o.global_pooling, adapt = o.adaptive;
    const std::int64_t KH = global ? H : o.ksize[0], KW = global ? W : o.ksize[1];
    const std::vector<std::int64_t> zero{0, 0};
    const std::string alg = global || adapt ? "EXPLICIT" : o.padding_algorithm;
    const axis_pad ph = resolve(alg, global || adapt ? zero : o.paddings, 0, H, KH, o.strides[0], 1);
    const axis_pad pw = resolve(alg, global || adapt ? zero : o.paddings, 1, W, KW, o.strides[1], 1);
    auto outs = [&](std::int64_t in, std::int64_t k, std::int64_t s, const axis_pad& p) {
        const std::int64_t span = in + p.p0 + p.p1 - k;
        return (o.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    };
    const std::int64_t OH = adapt ? KH : outs(H, KH, o.strides[0], ph), OW = adapt ? KW : outs(W, KW, o.strides[1], pw);
    xt::xarray<double> out = xt::zeros<double>({std::size_t(N), std::size_t(C), std::size_t(OH), std::size_t(OW)});
    struct range {
        std::int64_t lo, hi, span;
    };
    auto rows = [&](std::int64_t y, std::int64_t in, std::int64_t outn, std::int64_t k, std::int64_t s, const axis_pad& p) {
        if (adapt) {
            const auto lo = std::int64_t(std::floor(double(y) * double(in) / double(outn)));
            const auto hi = std::int64_t(std::ceil(double(y + 1) * double(in) / double(outn)));
            return range{lo, hi, hi - lo};
        }
        const std::int64_t start = y * s - p.p0, end = std::min(start + k, in + p.p1);
        return range{std::max<std::int64_t>(start, 0), std::max(std::min(end, in), std::max<std::int64_t>(start, 0)),
                     end - start};
    };
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t y = 0; y < OH; ++y)
                for (std::int64_t xo = 0; xo < OW; ++xo) {
                    const range r = rows(y, H, OH, KH, o.strides[0], ph), q = rows(xo, W, OW, KW, o.strides[1], pw);
                    double mx = std::numeric_limits<double>::lowest(), s = 0;
                    for (std::int64_t iy = r.lo; iy < r.hi; ++iy)
                        for (std::int64_t ix = q.lo; ix < q.hi; ++ix) {
                            mx = std::max(mx, at(x, n, c, iy, ix));
                            s += at(x, n, c, iy, ix);
                        }
                    const std::int64_t div = o.exclusive || adapt ? (r.hi - r.lo) * (q.hi - q.lo) : r.span * q.span;
                    out(n, c, y, xo) = o.pooling_type == "max" ? mx : (div > 0 ? s / double(div) : 0.0);
                }
    return out;
}

template <class T> Tensor tensor_of(const xt::xarray<double>& a) {
    Tensor t(dtype_of<T>, Shape(a.shape().begin(), a.shape().end()));
    for (std::size_t i = 0; i < a.size(); ++i) t.data<T>()[i] = static_cast<T>(a.data()[i]);
    return t;
}

// Runs a one-op program built by `build` on x (and f) in T and compares with `want`.
template <class T, class B>
void check_against(const xt::xarray<double>& x, const xt::xarray<double>* f, const xt::xarray<double>& want, B build) {
    Program p;
    auto xv = p.input<T>("x", Shape(x.shape().begin(), x.shape().end()));
    std::optional<Var<T>> fv;
    if (f) fv = p.input<T>("f", Shape(f->shape().begin(), f->shape().end()));
    Var<T> y = build(xv, fv);
    REQUIRE(y.shape() == Shape(want.shape().begin(), want.shape().end()));  // inferred at build time
    Session<cpu> s(p);
    std::vector<Feed> feeds{{"x", tensor_of<T>(x)}};
    if (f) feeds.emplace_back("f", tensor_of<T>(*f));
    const Tensor got = s.eval(std::vector<TargetRef>{y}, feeds)[0];
    REQUIRE(got.shape() == Shape(want.shape().begin(), want.shape().end()));
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        if (want.data()[i] == std::numeric_limits<double>::lowest()) {  // a max over an empty window
            CHECK(got.data<T>()[i] == std::numeric_limits<T>::lowest());
            continue;
        }
        CHECK(static_cast<double>(got.data<T>()[i]) == doctest::Approx(want.data()[i]).epsilon(tol).scale(1.0));
    }
}

struct conv_variant {
    const char* name;
    dims4 x, f;
    Conv2d o;
};

std::vector<conv_variant> conv_variants() {
    return {
        {"3x3, stride 1, no padding", {2, 3, 7, 6}, {4, 3, 3, 3}, {}},
        {"3x3, padding 1", {1, 2, 5, 5}, {3, 2, 3, 3}, {{1, 1}, {1, 1}}},
        {"stride 2, odd sizes", {2, 3, 9, 7}, {2, 3, 3, 2}, {{2, 2}, {1, 0}}},
        {"strides 2 and 3, 4 paddings", {1, 2, 8, 9}, {3, 2, 3, 3}, {{2, 3}, {0, 2, 1, 3}}},
        {"dilation 2", {2, 2, 9, 8}, {2, 2, 3, 3}, {{1, 1}, {2, 2}, {2, 2}}},
        {"dilation 2 and 1, stride 2", {1, 3, 10, 9}, {2, 3, 2, 3}, {{2, 2}, {1, 1}, {2, 1}}},
        {"SAME, stride 2 (dilation ignored)", {1, 2, 7, 8}, {3, 2, 3, 4}, {{2, 2}, {9, 9}, {2, 2}, 1, "SAME"}},
        {"SAME, stride 1", {2, 1, 5, 6}, {2, 1, 4, 3}, {{1, 1}, {0, 0}, {1, 1}, 1, "SAME"}},
        {"VALID", {1, 2, 6, 6}, {2, 2, 3, 3}, {{1, 2}, {5, 5}, {1, 1}, 1, "VALID"}},
        {"groups 2", {2, 4, 6, 5}, {6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}},
        {"groups = channels (depthwise), multiplier 2", {2, 3, 6, 6}, {6, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 3}},
        {"1x1 (no column matrix)", {2, 5, 4, 3}, {3, 5, 1, 1}, {}},
        {"1x1 stride 2", {1, 4, 5, 5}, {2, 4, 1, 1}, {{2, 2}}},
        {"window as large as the padded input", {1, 1, 3, 4}, {1, 1, 5, 4}, {{1, 1}, {1, 1, 0, 0}}},
        {"window past the padded input by less than the stride", {1, 2, 4, 4}, {2, 2, 5, 5}, {{2, 2}}},
        {"batch 0", {0, 2, 5, 5}, {3, 2, 3, 3}, {{1, 1}, {1, 1}}},
        {"batch 1, one channel, 1x1 image", {1, 1, 1, 1}, {2, 1, 1, 1}, {}},
    };
}

xt::xarray<double> random4(const dims4& d, unsigned seed) {
    return random({std::size_t(d[0]), std::size_t(d[1]), std::size_t(d[2]), std::size_t(d[3])}, seed);
}

}  // namespace

TEST_CASE("conv2d matches a double-precision reference for every attribute variant, FP32 and FP64") {
    unsigned seed = 1;
    for (const conv_variant& v : conv_variants()) {
        INFO(std::string(v.name));
        const auto x = random4(v.x, seed++), f = random4(v.f, seed++);
        const auto want = conv_reference(x, f, v.o);
        auto build = [&](auto xv, auto fv) { return conv2d(xv, *fv, v.o); };
        check_against<double>(x, &f, want, build);
        check_against<float>(x, &f, want, build);
    }
}

TEST_CASE("depthwise_conv2d is conv2d with groups = channels") {
    const auto x = random4({2, 3, 7, 5}, 11), f = random4({6, 1, 3, 3}, 12);
    Conv2d o{{2, 1}, {1, 1}};
    Conv2d g = o;
    g.groups = 3;
    check_against<double>(x, &f, conv_reference(x, f, g), [&](auto xv, auto fv) { return depthwise_conv2d(xv, *fv, o); });
    Program p;
    auto xv = p.input<float>("x", {2, 3, 7, 5});
    auto fv = p.input<float>("f", {6, 1, 3, 3});
    CHECK_THROWS_CONTAINING(p.append("depthwise_conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", 1}},
                                     {Attribute::make_int("groups", 1)}),
                            shape_error, "depthwise_conv2d needs groups equal to Input's channels (3), not 1");
    (void)xv;
    (void)fv;
}

TEST_CASE("conv2d gradients match finite differences for every attribute variant") {
    unsigned seed = 100;
    for (const conv_variant& v : conv_variants()) {
        INFO(std::string(v.name));
        grad_check::check({{"x", random4(v.x, seed)}, {"f", random4(v.f, seed + 1)}},
                          [&](P&, const V& in) { return conv2d(in[0], in[1], v.o); });
        seed += 2;
    }
    // A filter shared by two convs and an input used twice: contributions add.
    grad_check::check({{"x", random4({1, 2, 5, 5}, 7)}, {"f", random4({2, 2, 3, 3}, 8)}},
                      [](P&, const V& in) { return conv2d(in[0], in[1]) + conv2d(in[0], in[1], {{1, 1}, {0, 0}, {2, 2}}) * 0.0 + conv2d(in[0], in[1]); });
}

// Checks every element of `got` against `want` within tol (relative, at least 1 in scale).
template <class T> void check_close(const Tensor& got, const xt::xarray<double>& want, double tol) {
    REQUIRE(got.shape() == Shape(want.shape().begin(), want.shape().end()));
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
        if (std::abs(double(got.data<T>()[i]) - want.data()[i]) > tol * std::max(1.0, std::abs(want.data()[i]))) ++bad;
    CHECK(bad == 0);
}

namespace {

// conv2d and conv2d_grad (both gradients) of variant v against the
// double reference, FP32 and FP64, on each thread count.
void check_conv_and_grads(const conv_variant& v, unsigned& seed, std::initializer_list<int> thread_counts) {
    INFO(std::string(v.name));
    const auto x = random4(v.x, seed++), f = random4(v.f, seed++);
    const auto want = conv_reference(x, f, v.o);
    const dims4 ys{std::int64_t(want.shape()[0]), std::int64_t(want.shape()[1]), std::int64_t(want.shape()[2]),
                   std::int64_t(want.shape()[3])};
    const auto dy = random4(ys, seed++);
    const auto [dx, df] = conv_grad_reference(x, f, dy, v.o);
    auto run = [&]<class T>(T, double tol, int threads) {
        INFO("threads " << threads << ", " << (sizeof(T) == 4 ? "FP32" : "FP64"));
        Program p;
        auto xv = p.input<T>("x", Shape(v.x.begin(), v.x.end()));
        auto fv = p.input<T>("f", Shape(v.f.begin(), v.f.end()));
        p.input<T>("dy", Shape(ys.begin(), ys.end()));
        auto y = conv2d(xv, fv, v.o);
        std::vector<std::vector<std::string>> names;
        p.append("conv2d_grad", {{"Input", {"x"}}, {"Filter", {"f"}}, {"Output@GRAD", {"dy"}}},
                 {{"Input@GRAD", 1}, {"Filter@GRAD", 1}}, p.desc().blocks[0].ops[0].attrs, &names);
        Session<cpu> s(p, SessionOptions{.threads = threads});
        const auto got = s.eval({TargetRef(y), TargetRef(names[0][0]), TargetRef(names[1][0])},
                                {{"x", tensor_of<T>(x)}, {"f", tensor_of<T>(f)}, {"dy", tensor_of<T>(dy)}});
        check_close<T>(got[0], want, tol);
        check_close<T>(got[1], dx, tol);
        check_close<T>(got[2], df, tol);
    };
    for (int threads : thread_counts) {
        run(0.0f, 2e-5, threads);
        run(0.0, 1e-12, threads);
    }
}

}  // namespace

TEST_CASE("conv2d and its gradients match the reference where the column matrix is made in several chunks") {
    // cpu/conv.hpp makes the column matrix a few output rows at a time
    // (column_chunk_bytes of them): these are wide enough for 2 chunks in
    // FP32 and 3 in FP64 (the shifted-copy im2col), and for 2 in each with
    // stride 2, dilation 2 and groups 2 (the row-by-row im2col).
    const conv_variant variants[] = {
        {"3x3, padding 1", {2, 32, 6, 80}, {4, 32, 3, 3}, {{1, 1}, {1, 1}}},
        {"stride 2, dilation 2, groups 2", {1, 128, 13, 90}, {4, 64, 3, 3}, {{2, 2}, {1, 1}, {2, 2}, 2}},
    };
    unsigned seed = 300;
    for (const conv_variant& v : variants) check_conv_and_grads(v, seed, {1});
}

TEST_CASE("conv2d and its gradients match the reference where they read the image itself") {
    // Stride 1, an output as wide as the input and 8 or more channels (and
    // filters) per group: the forward reads its column matrix from the
    // image (kernels::conv_shifted_product, the last narrow tile
    // transposed), Filter@GRAD packs col^T from the image and Input@GRAD is
    // the adjoint convolution of Output@GRAD. Extra top or bottom padding
    // (an output taller or shorter than the input), asymmetric left and
    // right padding, dilation, groups; on one thread and two.
    const conv_variant variants[] = {
        {"3x3, padding 1, 196 columns", {2, 32, 14, 14}, {64, 32, 3, 3}, {{1, 1}, {1, 1}}},
        {"dilation 2, paddings 3, 1 / 1, 3", {2, 12, 9, 11}, {20, 12, 3, 3}, {{1, 1}, {3, 1, 1, 3}, {2, 2}}},
        {"5x3, groups 2, paddings 0, 4 / 2, 0", {1, 16, 7, 13}, {24, 8, 5, 3}, {{1, 1}, {0, 4, 2, 0}, {1, 1}, 2}},
        {"SAME 4x4, 9 channels", {3, 9, 6, 17}, {10, 9, 4, 4}, {{1, 1}, {0, 0}, {1, 1}, 1, "SAME"}},
        // Top and bottom padding beyond the window: the adjoint's are negative.
        {"3x3, paddings 4, 3 / 1, 1", {2, 8, 6, 10}, {8, 8, 3, 3}, {{1, 1}, {4, 3, 1, 1}}},
        // K = 9 and 8 (the direct product), 20 and 32 filters (a block of 16 partly used).
        {"one channel, 3x3, 20 filters", {3, 1, 9, 13}, {20, 1, 3, 3}, {{1, 1}, {1, 1}}},
        {"2 channels, 2x2 SAME, 32 filters", {2, 2, 7, 28}, {32, 2, 2, 2}, {{1, 1}, {0, 0}, {1, 1}, 1, "SAME"}},
        // Filters a multiple of 16 (the filters-as-vectors product): in
        // bands of 6 output rows (128 channels of 64 padded columns), the
        // rows split over two threads at batch 1.
        {"3x3, 128 channels, 16 filters, 3 bands", {1, 128, 13, 62}, {16, 128, 3, 3}, {{1, 1}, {1, 1}}},
    };
    unsigned seed = 400;
    for (const conv_variant& v : variants) {
        const dims4 out = conv_terms(random4(v.x, 0), random4(v.f, 0), v.o, [](auto...) {});
        CHECK(out[3] == v.x[3]);  // as wide as the input
        check_conv_and_grads(v, seed, {1, 2});
    }
    kernels::window2d g;  // the band of the last variant
    g.c = 128, g.h = 13, g.w = 62, g.kh = g.kw = 3, g.pt = g.pl = g.pb = g.pr = 1, g.oh = 13, g.ow = 62;
    CHECK(kernels::conv_rows_band<float>(g) == 6);
    // Stride 1 and VALID (narrower than the input): the filters as vectors
    // (32 filters), the shifted product (20), im2col (FP64).
    const conv_variant valid[] = {
        {"VALID 3x3, 32 filters", {2, 8, 9, 12}, {32, 8, 3, 3}, {{1, 1}, {0, 0}}},
        {"VALID 2x4, dilation 2, 20 filters", {2, 8, 9, 12}, {20, 8, 2, 4}, {{1, 1}, {0, 0}, {2, 2}}},
    };
    for (const conv_variant& v : valid) check_conv_and_grads(v, seed, {1, 2});
}

TEST_CASE("im2col and col2im_add match a direct reference for random windows, whole and a few output rows at a time") {
    // Integer values, so that the sums are exact whatever their order; a
    // third of the windows SAME with stride 1 (the shifted-run paths).
    std::mt19937 rng(5);
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    int checked = 0, shifted = 0;
    for (int it = 0; it < 3000; ++it) {
        kernels::window2d g;
        g.c = draw(1, 3), g.h = draw(1, 9), g.w = draw(1, 9), g.kh = draw(1, 4), g.kw = draw(1, 4);
        g.sh = draw(1, 3), g.sw = draw(1, 3), g.dh = draw(1, 2), g.dw = draw(1, 2);
        g.pt = draw(0, 3), g.pl = draw(0, 3), g.pb = draw(0, 3), g.pr = draw(0, 3);
        if (it % 3 == 0) {
            g.sh = g.sw = 1;
            g.pt = (g.kh - 1) * g.dh / 2, g.pb = (g.kh - 1) * g.dh - g.pt;
            g.pl = (g.kw - 1) * g.dw / 2, g.pr = (g.kw - 1) * g.dw - g.pl;
        }
        const std::int64_t eh = g.h + g.pt + g.pb - (g.dh * (g.kh - 1) + 1), ew = g.w + g.pl + g.pr - (g.dw * (g.kw - 1) + 1);
        if (eh < 0 || ew < 0) continue;
        g.oh = eh / g.sh + 1, g.ow = ew / g.sw + 1;
        ++checked;
        shifted += g.sh == 1 && g.sw == 1 && g.ow == g.w;
        const std::int64_t kk = g.col_rows(), ohw = g.col_cols();
        std::vector<double> image(std::size_t(g.c * g.h * g.w)), want(std::size_t(kk * ohw)), cols(want.size());
        for (auto& v : image) v = double(draw(1, 1000));
        for (auto& v : cols) v = double(draw(1, 1000));
        std::vector<double> want_image(image.size(), 0.0);
        for (std::int64_t ci = 0; ci < g.c; ++ci)
            for (std::int64_t i = 0; i < g.kh; ++i)
                for (std::int64_t j = 0; j < g.kw; ++j)
                    for (std::int64_t y = 0; y < g.oh; ++y)
                        for (std::int64_t x = 0; x < g.ow; ++x) {
                            const std::int64_t iy = y * g.sh - g.pt + i * g.dh, ix = x * g.sw - g.pl + j * g.dw;
                            const std::size_t e = std::size_t(((ci * g.kh + i) * g.kw + j) * ohw + y * g.ow + x);
                            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                            const std::size_t at = std::size_t((ci * g.h + iy) * g.w + ix);
                            want[e] = image[at];
                            want_image[at] += cols[e];
                        }
        const std::int64_t rows = draw(1, 4);
        std::vector<double> got(want.size(), -7.0), got_image(image.size(), 0.0);
        kernels::im2col(g, image.data(), got.data());
        std::vector<double> scratch = cols;
        kernels::col2im_add(g, scratch.data(), got_image.data());
        bool same = got == want && got_image == want_image;
        // The same by chunks of output rows.
        std::fill(got_image.begin(), got_image.end(), 0.0);
        for (std::int64_t y0 = 0; y0 < g.oh; y0 += rows) {
            const kernels::window2d part = kernels::output_rows(g, y0, std::min(g.oh, y0 + rows));
            const std::int64_t n = part.col_cols();
            std::vector<double> chunk(std::size_t(kk * n), -7.0);
            kernels::im2col(part, image.data(), chunk.data());
            for (std::int64_t k = 0; k < kk; ++k)
                for (std::int64_t q = 0; q < n; ++q) {
                    same = same && chunk[std::size_t(k * n + q)] == want[std::size_t(k * ohw + y0 * g.ow + q)];
                    chunk[std::size_t(k * n + q)] = cols[std::size_t(k * ohw + y0 * g.ow + q)];
                }
            kernels::col2im_add(part, chunk.data(), got_image.data());
        }
        same = same && got_image == want_image;
        if (!same) {
            INFO("c " << g.c << " h " << g.h << " w " << g.w << " k " << g.kh << "x" << g.kw << " s " << g.sh << "," << g.sw
                      << " d " << g.dh << "," << g.dw << " p " << g.pt << "," << g.pl << "," << g.pb << "," << g.pr
                      << " rows " << rows);
            CHECK(same);
            break;
        }
    }
    CHECK(checked > 2000);
    CHECK(shifted > 500);
}

namespace {

// A random window with stride 1 and the output as wide as the input:
// channels, height, width and window sides drawn from the ranges given,
// dilation 1 or 2, any left / right split of the padding across, top and
// bottom paddings up to one past the window (oh may then be 0 or less).
kernels::window2d same_width_window(std::mt19937& rng, std::pair<int, int> c, std::pair<int, int> h,
                                    std::pair<int, int> w, std::pair<int, int> k) {
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    kernels::window2d g;
    g.c = draw(c.first, c.second), g.h = draw(h.first, h.second), g.w = draw(w.first, w.second);
    g.kh = draw(k.first, k.second), g.kw = draw(k.first, k.second);
    g.dh = draw(1, 2), g.dw = draw(1, 2);
    const std::int64_t across = (g.kw - 1) * g.dw;
    g.pl = draw(0, int(across)), g.pr = across - g.pl;
    g.pt = draw(0, int((g.kh - 1) * g.dh + 1)), g.pb = draw(0, int((g.kh - 1) * g.dh + 1));
    g.oh = g.h + g.pt + g.pb - (g.kh - 1) * g.dh, g.ow = g.w;
    return g;
}

// A product to check for window g and m filters: random image and filters
// in [-1, 1], the filters packed as A, what im2col and
// gemm_prepacked_a_block make of them (want), the tables of the shifted
// product, and an output to fill (got, -7 everywhere).
template <class T> struct shifted_case {
    const kernels::window2d& g;
    std::int64_t m, K, N;
    std::vector<T> image, filters, want, got;
    aligned_buffer<T> packed;
    std::vector<std::int64_t> offsets;
    std::vector<std::uint16_t> masks;
    kernels::conv_shifted_tables tables;
    shifted_case(std::mt19937& rng, const kernels::window2d& win, std::int64_t filters_m)
        : g(win), m(filters_m), K(win.col_rows()), N(win.col_cols()), image(std::size_t(win.c * win.h * win.w)),
          filters(std::size_t(m * K)), want(std::size_t(m * N), T(7)), got(want.size(), T(-7)),
          packed(kernels::gemm_packed_a_size<T>(m, K)), offsets(std::size_t(kernels::conv_shifted_offsets_size<T>(win))),
          masks(std::size_t(kernels::conv_shifted_masks_size<T>(win))),
          tables(kernels::conv_shifted_tables_make<T>(win, offsets.data(), masks.data())) {
        std::uniform_real_distribution<double> u(-1, 1);
        for (auto& v : image) v = T(u(rng));
        for (auto& v : filters) v = T(u(rng));
        std::vector<T> col(std::size_t(K * N));
        kernels::im2col(g, image.data(), col.data());
        kernels::gemm_pack_a(false, m, K, filters.data(), K, packed.get());
        const std::int64_t ws_size = kernels::gemm_prepacked_a_workspace_size<T>(N, K);
        aligned_buffer<T> ws(ws_size);
        REQUIRE(kernels::gemm_prepacked_a_block(m, false, K, T(1), packed.get(), col.data(), N, false, want.data(), N, 0,
                                                N, ws.get(), ws_size));
    }
    bool same() const { return std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0; }
    // The column where the strips split: a multiple of gemm_nr near the middle.
    std::int64_t mid() const { return N / kernels::gemm_nr<T> / 2 * kernels::gemm_nr<T>; }
    void report() const {
        MESSAGE("c " << g.c << " h " << g.h << " w " << g.w << " k " << g.kh << "x" << g.kw << " d " << g.dh << ","
                     << g.dw << " p " << g.pt << "," << g.pl << "," << g.pb << "," << g.pr << " m " << m);
    }
};

// One random window of conv_shifted_serves' kind (stride 1, the output as
// wide as the input, any top and bottom padding), m filters: the product
// read from the image, in two strips of columns, against im2col and
// gemm_prepacked_a_block, bit for bit. `big`: 29 to 40 channels and a 3x3
// window or larger (K past one k block of 256, so blocks start
// mid-channel) and 100 to 250 filters (past one block of A's rows). False
// when the draw does not serve.
template <class T> bool shifted_product_matches(std::mt19937& rng, bool big, bool& served, int& edges) {
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    // big: K > 256, two k blocks or more
    const kernels::window2d g = big ? same_width_window(rng, {29, 40}, {1, 5}, {1, 20}, {3, 4})
                                    : same_width_window(rng, {1, 7}, {1, 9}, {1, 40}, {1, 4});
    served = g.oh > 0 && kernels::conv_shifted_serves<T>(g);
    if (!served) return true;
    shifted_case<T> c(rng, g, big ? draw(100, 250) : draw(1, 40));
    const std::int64_t m = c.m, K = c.K, N = c.N, mid = c.mid();
    aligned_buffer<T> work(kernels::conv_shifted_workspace_size<T>(g));
    kernels::conv_shifted_product<T>(g, m, c.packed.get(), c.tables, c.image.data(), c.got.data(), N, 0, mid, work.get());
    kernels::conv_shifted_product<T>(g, m, c.packed.get(), c.tables, c.image.data(), c.got.data(), N, mid, N, work.get());
    bool same = c.same();
    if (kernels::conv_shifted_has_edge<T>(g)) {  // again, the last tile transposed
        ++edges;
        aligned_buffer<T> packed_t(kernels::gemm_packed_b_size<T>(K, m));
        kernels::gemm_pack_b(true, K, m, c.filters.data(), K, packed_t.get());
        std::fill(c.got.begin(), c.got.end(), T(-7));
        const T* at = packed_t.get();
        kernels::conv_shifted_product<T>(g, m, c.packed.get(), c.tables, c.image.data(), c.got.data(), N, 0, mid,
                                         work.get(), at);
        kernels::conv_shifted_product<T>(g, m, c.packed.get(), c.tables, c.image.data(), c.got.data(), N, mid, N,
                                         work.get(), at);
        same = same && c.same();
    }
    if (!same) c.report();
    return same;
}

}  // namespace

namespace {
// One random window of conv_direct_serves' kind (K = c * kh * kw at most
// conv_direct_max_k), m filters: the direct product in two strips of
// columns against im2col and gemm_prepacked_a_block, bit for bit.
bool direct_product_matches(std::mt19937& rng, bool& served) {
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    const kernels::window2d g = same_width_window(rng, {1, 3}, {1, 12}, {1, 40}, {1, 3});
    served = g.oh > 0 && kernels::conv_direct_serves<float>(g);
    if (!served) return true;
    shifted_case<float> c(rng, g, draw(1, 40));
    std::vector<float> direct(std::size_t(kernels::conv_direct_filters_size<float>(c.m, g)));
    kernels::conv_direct_pack_filters(c.m, g, c.filters.data(), direct.data());
    kernels::conv_direct_product<float>(g, c.m, direct.data(), c.tables, c.image.data(), c.got.data(), c.N, 0, c.mid());
    kernels::conv_direct_product<float>(g, c.m, direct.data(), c.tables, c.image.data(), c.got.data(), c.N, c.mid(), c.N);
    if (!c.same()) c.report();
    return c.same();
}
}  // namespace

TEST_CASE("kernels::conv_direct_product gives the bits of im2col and the packed GEMM, in strips of columns") {
    if (!kernels::conv_shifted_built) {
        MESSAGE("not built here (it needs AVX-512): convolutions take im2col");
        return;
    }
    std::mt19937 rng(23);
    int served = 0;
    for (int it = 0; it < 1500; ++it) {
        bool s = false;
        REQUIRE(direct_product_matches(rng, s));
        served += s;
    }
    CHECK(served > 800);
    kernels::window2d g;  // conv1 of the demo: one channel, 3x3, padding 1
    g.c = 1, g.h = g.w = 28, g.kh = g.kw = 3, g.pt = g.pl = g.pb = g.pr = 1, g.oh = g.ow = 28;
    CHECK(kernels::conv_direct_serves<float>(g));
    CHECK_FALSE(kernels::conv_direct_serves<double>(g));
    g.c = 2;  // K = 18
    CHECK_FALSE(kernels::conv_direct_serves<float>(g));
}

namespace {
// A random window with stride 1 (any padding on each side, dilation 1 or
// 2; the output may be narrower or wider than the input), or none where
// the output would be empty.
std::optional<kernels::window2d> stride1_window(std::mt19937& rng, std::pair<int, int> c, std::pair<int, int> k) {
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    kernels::window2d g;
    g.c = draw(c.first, c.second), g.h = draw(1, 12), g.w = draw(1, 40);
    g.kh = draw(k.first, k.second), g.kw = draw(k.first, k.second);
    g.dh = draw(1, 2), g.dw = draw(1, 2);
    g.pt = draw(0, 3), g.pb = draw(0, 3), g.pl = draw(0, 3), g.pr = draw(0, 3);
    g.oh = g.h + g.pt + g.pb - (g.kh - 1) * g.dh, g.ow = g.w + g.pl + g.pr - (g.kw - 1) * g.dw;
    if (g.oh <= 0 || g.ow <= 0) return std::nullopt;
    return g;
}

// One random window of conv_rows_serves' kind, m filters (any number: a
// last block of 16 partly used): the product in two strips of output rows,
// in bands of `band` rows (1 to 3, or conv_rows_band's), against im2col and
// gemm_prepacked_a_block, bit for bit. `big`: 29 to 40 channels and a 3x3
// window or larger, K past one k block of 256. False when the draw does
// not serve.
bool rows_product_matches(std::mt19937& rng, bool big, bool& served) {
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    const auto w = big ? stride1_window(rng, {29, 40}, {3, 4}) : stride1_window(rng, {1, 9}, {1, 4});
    served = w && kernels::conv_rows_serves<float>(*w);
    if (!served) return true;
    const kernels::window2d& g = *w;
    shifted_case<float> c(rng, g, draw(1, 70));
    const std::int64_t band = draw(0, 3) == 0 ? kernels::conv_rows_band<float>(g) : draw(1, 3);
    aligned_buffer<float> filters(kernels::conv_rows_filters_size<float>(c.m, g));
    float* const packed = filters.get();
    kernels::conv_rows_pack_filters(c.m, g, c.filters.data(), packed);
    std::vector<std::int64_t> offsets(std::size_t(kernels::conv_rows_offsets_size<float>(g)));
    kernels::conv_rows_offsets_make<float>(g, band, offsets.data());
    aligned_buffer<float> work(kernels::conv_rows_workspace_size<float>(g, c.m, band));
    const std::int64_t mid = draw(0, int(g.oh));
    kernels::conv_rows_product<float>(g, c.m, packed, offsets.data(), band, c.image.data(), c.got.data(), c.N, 0, mid,
                                      work.get());
    kernels::conv_rows_product<float>(g, c.m, packed, offsets.data(), band, c.image.data(), c.got.data(), c.N, mid,
                                      g.oh, work.get());
    if (!c.same()) {
        c.report();
        MESSAGE("band " << band << ", rows split at " << mid);
    }
    return c.same();
}
}  // namespace

TEST_CASE("kernels::conv_rows_product gives the bits of im2col and the packed GEMM, in strips and bands of rows") {
    if (!kernels::conv_rows_built) {
        MESSAGE("not built here (it needs AVX-512): convolutions take im2col");
        return;
    }
    std::mt19937 rng(29);
    int served = 0, big = 0;
    for (int it = 0; it < 1500; ++it) {
        bool s = false;
        const bool large = it % 50 == 0;
        REQUIRE(rows_product_matches(rng, large, s));
        served += s;
        big += large && s;
    }
    CHECK(served > 1000);
    CHECK(big >= 15);
    // Where it does not serve: a stride, the image as it is, FP64.
    kernels::window2d g;
    g.c = 2, g.h = g.w = 6, g.kh = g.kw = 3, g.oh = g.ow = 4;  // VALID
    CHECK(kernels::conv_rows_serves<float>(g));
    CHECK_FALSE(kernels::conv_rows_serves<double>(g));
    kernels::window2d strided = g;
    strided.sh = 2, strided.oh = 2;
    CHECK_FALSE(kernels::conv_rows_serves<float>(strided));
    kernels::window2d one = g;
    one.kh = one.kw = 1, one.oh = one.ow = 6;
    CHECK_FALSE(kernels::conv_rows_serves<float>(one));
}

TEST_CASE("kernels::conv_shifted_product gives the bits of im2col and the packed GEMM, in strips of columns") {
    if (!kernels::conv_shifted_built) {
        MESSAGE("not built here (it needs AVX-512): convolutions take im2col");
        return;
    }
    std::mt19937 rng(11);
    int served = 0, big = 0, edges = 0;
    for (int it = 0; it < 1500; ++it) {
        bool s32 = false, s64 = false;
        const bool large = it % 50 == 0;
        REQUIRE(shifted_product_matches<float>(rng, large, s32, edges));
        REQUIRE(shifted_product_matches<double>(rng, large, s64, edges));
        served += s32 + s64;
        big += large && (s32 || s64);
    }
    CHECK(served > 2500);
    CHECK(big >= 20);
    CHECK(edges > 1000);
    // Where it does not serve: a stride, an output narrower than the input,
    // the image as it is.
    kernels::window2d g;
    g.c = 2, g.h = g.w = 6, g.kh = g.kw = 3, g.pt = g.pl = g.pb = g.pr = 1, g.oh = g.ow = 6;
    CHECK(kernels::conv_shifted_serves<float>(g));
    kernels::window2d strided = g;
    strided.sh = strided.sw = 2, strided.oh = strided.ow = 3;
    CHECK_FALSE(kernels::conv_shifted_serves<float>(strided));
    kernels::window2d valid = g;
    valid.pt = valid.pl = valid.pb = valid.pr = 0, valid.oh = valid.ow = 4;
    CHECK_FALSE(kernels::conv_shifted_serves<float>(valid));
    kernels::window2d one = g;
    one.kh = one.kw = 1, one.pt = one.pl = one.pb = one.pr = 0;
    CHECK_FALSE(kernels::conv_shifted_serves<float>(one));
}

TEST_CASE("kernels::conv_packed_columns packs col^T as im2col and gemm_pack_b do") {
    if (!kernels::conv_shifted_built) {
        MESSAGE("not built here (it needs AVX-512): Filter@GRAD takes im2col");
        return;
    }
    // Random windows of conv_shifted_serves' kind; every hundredth with 440-470
    // channels, so that the packed matrix has two blocks of columns (4096 each).
    std::mt19937 rng(17);
    auto draw = [&](int lo, int hi) { return std::int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    int served = 0, wide = 0, deep = 0;
    for (int it = 0; it < 3000; ++it) {
        const bool big = it % 100 == 0;
        kernels::window2d g;
        g.c = big ? draw(440, 470) : draw(1, 40), g.h = draw(1, big ? 4 : 12), g.w = draw(1, big ? 6 : 40);
        g.kh = big ? 3 : draw(1, 4), g.kw = big ? 3 : draw(1, 4), g.dh = draw(1, 2), g.dw = draw(1, 2);
        const std::int64_t across = (g.kw - 1) * g.dw;
        g.pl = draw(0, int(across)), g.pr = across - g.pl;
        g.pt = draw(0, int((g.kh - 1) * g.dh + 1)), g.pb = draw(0, int((g.kh - 1) * g.dh + 1));
        g.oh = g.h + g.pt + g.pb - (g.kh - 1) * g.dh, g.ow = g.w;
        if (g.oh <= 0 || !kernels::conv_packs_columns<float>(g)) continue;
        ++served;
        const std::int64_t K = g.col_cols(), N = g.col_rows(), size = kernels::gemm_packed_b_size<float>(K, N);
        wide += N > 4096, deep += K > 256;
        std::uniform_real_distribution<float> u(-1, 1);
        std::vector<float> image(std::size_t(g.c * g.h * g.w)), col(std::size_t(K * N));
        for (auto& v : image) v = u(rng);
        kernels::im2col(g, image.data(), col.data());
        aligned_buffer<float> want(size), got(size);
        std::fill(want.get(), want.get() + size, 7.0f);
        std::fill(got.get(), got.get() + size, -7.0f);
        kernels::gemm_pack_b(true, K, N, col.data(), K, want.get());
        kernels::conv_packed_columns<float>(g, image.data(), got.get());
        const bool same = std::memcmp(want.get(), got.get(), std::size_t(size) * sizeof(float)) == 0;
        if (!same)
            MESSAGE("c " << g.c << " h " << g.h << " w " << g.w << " k " << g.kh << "x" << g.kw << " d " << g.dh << ","
                         << g.dw << " p " << g.pt << "," << g.pl << "," << g.pb << "," << g.pr);
        REQUIRE(same);
    }
    CHECK(served > 2000);
    CHECK(wide >= 10);
    CHECK(deep > 100);
    // Not for FP64, nor for fewer rows than a panel (one channel of a 3x3 window).
    kernels::window2d g;
    g.c = 4, g.h = g.w = 6, g.kh = g.kw = 3, g.pt = g.pl = g.pb = g.pr = 1, g.oh = g.ow = 6;
    CHECK(kernels::conv_packs_columns<float>(g));
    CHECK_FALSE(kernels::conv_packs_columns<double>(g));
    g.c = 1;
    CHECK_FALSE(kernels::conv_packs_columns<float>(g));
}

TEST_CASE("conv2d_grad writes only the wanted gradient") {
    Program p;
    auto x = p.input<double>("x", {1, 2, 4, 4});
    auto f = p.parameter<double>("f", {3, 2, 3, 3}, init::constant(0.5));
    auto loss = reduce_sum(conv2d(x, f));
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    const auto& ops = p.desc().blocks[0].ops;
    const auto g = std::find_if(ops.begin(), ops.end(), [](const OpDesc& o) { return o.type == "conv2d_grad"; });
    REQUIRE(g != ops.end());
    CHECK(g->output("Input@GRAD") == nullptr);
    REQUIRE(g->output("Filter@GRAD") != nullptr);
    CHECK(g->input("Output") == nullptr);  // the forward result is not kept for it
}

namespace {

struct pool_variant {
    const char* name;
    dims4 x;
    Pool2d o;
};

std::vector<pool_variant> pool_variants() {
    std::vector<pool_variant> v;
    for (const char* type : {"max", "avg"}) {
        auto add = [&](const char* name, dims4 x, Pool2d o) {
            o.pooling_type = type;
            v.push_back({name, x, o});
        };
        add("2x2 stride 2", {2, 3, 6, 6}, {"", {2, 2}, {2, 2}});
        add("3x3 stride 1, odd sizes", {1, 2, 7, 5}, {"", {3, 3}, {1, 1}});
        add("3x3 stride 2 padding 1", {2, 2, 7, 7}, {"", {3, 3}, {2, 2}, {1, 1}});
        add("padding 1, not exclusive", {1, 2, 6, 5}, {"", {3, 2}, {2, 1}, {1, 1}, false, false});
        add("4 paddings", {1, 1, 7, 8}, {"", {3, 3}, {2, 2}, {1, 0, 2, 1}});
        add("ceil_mode", {1, 2, 7, 7}, {"", {2, 2}, {2, 2}, {0, 0}, false, true, false, true});
        add("ceil_mode, padding, not exclusive", {1, 2, 8, 7}, {"", {3, 3}, {2, 2}, {1, 1}, false, false, false, true});
        add("ceil_mode past the padded input", {1, 1, 5, 5}, {"", {1, 1}, {3, 3}, {0, 0}, false, false, false, true});
        add("global", {2, 3, 5, 4}, {"", {1, 1}, {1, 1}, {0, 0}, true});
        add("adaptive 3x2 of 7x5", {1, 2, 7, 5}, {"", {3, 2}, {1, 1}, {0, 0}, false, true, true});
        add("adaptive 4x4 of 4x4", {1, 1, 4, 4}, {"", {4, 4}, {1, 1}, {0, 0}, false, true, true});
        add("SAME stride 2", {1, 2, 7, 6}, {"", {3, 3}, {2, 2}, {0, 0}, false, true, false, false, "SAME"});
        add("VALID", {1, 1, 6, 7}, {"", {2, 3}, {2, 2}, {3, 3}, false, true, false, false, "VALID"});
        add("batch 1, 1x1", {1, 1, 1, 1}, {"", {1, 1}});
        add("window past the input by less than the stride", {1, 1, 4, 4}, {"", {5, 5}, {2, 2}});
        add("batch 0", {0, 2, 6, 6}, {"", {2, 2}, {2, 2}});
    }
    return v;
}

}  // namespace

TEST_CASE("pool2d matches a double-precision reference for every attribute variant, FP32 and FP64") {
    unsigned seed = 200;
    for (const pool_variant& v : pool_variants()) {
        INFO(v.o.pooling_type << ": " << std::string(v.name));
        const auto x = random4(v.x, seed++);
        const auto want = pool_reference(x, v.o);
        auto build = [&](auto xv, auto) { return pool2d(xv, v.o); };
        check_against<double>(x, nullptr, want, build);
        check_against<float>(x, nullptr, want, build);
    }
}

TEST_CASE("pool2d gradients match finite differences for every attribute variant") {
    unsigned seed = 300;
    for (const pool_variant& v : pool_variants()) {
        INFO(v.o.pooling_type << ": " << std::string(v.name));
        // A max over an empty window is the lowest value, whose differences overflow.
        if (v.o.pooling_type == "max" && std::string(v.name) == "ceil_mode past the padded input") continue;
        // Distinct values (a max has one argmax, so the difference quotient
        // does not straddle a tie): a random permutation of a ramp.
        xt::xarray<double> x = random4(v.x, seed++);
        std::vector<std::size_t> order(x.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), std::mt19937(seed));
        for (std::size_t i = 0; i < x.size(); ++i) x.data()[order[i]] = 0.1 * double(i) - 1;
        grad_check::check({{"x", x}}, [&](P&, const V& in) { return pool2d(in[0], v.o); });
    }
}

TEST_CASE("max pool2d's gradient goes to the first of tied inputs") {
    Program p;
    auto x = p.parameter<double>("x", {1, 1, 2, 2}, init::constant(1));
    auto loss = reduce_sum(max_pool2d(x, 2));
    auto grads = append_backward(loss);
    Session<cpu> s(p);
    const Tensor g = s.eval(std::vector<TargetRef>{grads[0].second}, std::vector<Feed>{})[0];
    const auto v = g.values<double>();
    CHECK(std::vector<double>(v.begin(), v.end()) == std::vector<double>{1, 0, 0, 0});
}

TEST_CASE("max pool2d's gradient: -0 ties +0, a NaN takes it, an Out no input equals gives none") {
    // X, Out and Out@GRAD fed as they are, as Paddle's grad kernel reads them.
    auto grad = [](std::vector<float> x, float out) {
        Program p;
        p.input<float>("x", {1, 1, 2, 2});
        p.input<float>("out", {1, 1, 1, 1});
        p.input<float>("dout", {1, 1, 1, 1});
        std::vector<std::vector<std::string>> names;
        p.append("pool2d_grad", {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"dout"}}}, {{"X@GRAD", 1}},
                 {Attribute::make_string("pooling_type", "max"), Attribute::make_ints("ksize", {2, 2}),
                  Attribute::make_ints("strides", {2, 2})},
                 &names);
        Session<cpu> s(p);
        xt::xarray<float> xv = xt::adapt(x, std::vector<std::size_t>{1, 1, 2, 2});
        xt::xarray<float> ov = xt::xarray<float>::from_shape({1, 1, 1, 1}), dv = ov;
        ov(0, 0, 0, 0) = out;
        dv(0, 0, 0, 0) = 2;
        const Tensor g = s.eval(std::vector<TargetRef>{TargetRef(names[0][0])},
                                std::vector<Feed>{{"x", xv}, {"out", ov}, {"dout", dv}})[0];
        const auto v = g.values<float>();
        return std::vector<float>(v.begin(), v.end());
    };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(grad({-1, 0.0f, -0.0f, 3}, 3) == std::vector<float>{0, 0, 0, 2});
    CHECK(grad({-1, -0.0f, 0.0f, -2}, 0.0f) == std::vector<float>{0, 2, 0, 0});  // -0 == +0: the first
    CHECK(grad({1, nan, 5, nan}, nan) == std::vector<float>{0, 2, 0, 0});         // the first NaN
    CHECK(grad({1, 2, 5, 4}, 7) == std::vector<float>{0, 0, 0, 0});              // no input equals Out
}

TEST_CASE("conv2d, its gradients and pool2d give the same bits on one thread and two") {
    for (std::int64_t batch : {1, 3, 8}) {
        CAPTURE(batch);
        Program p;
        auto x = p.parameter<float>("x", {batch, 4, 9, 9}, init::uniform(-1, 1, 2));
        auto f = p.parameter<float>("f", {6, 4, 3, 3}, init::uniform(-0.5, 0.5, 3));
        auto y = conv2d(x, f, Conv2d{.strides = {1, 2}, .paddings = {1, 1}});
        // A product that packs its filters, read from the image (stride 1,
        // SAME), big enough for strips of columns on two threads at batch 1.
        auto x2 = p.parameter<float>("x2", {batch, 16, 32, 32}, init::uniform(-1, 1, 4));
        auto f2 = p.parameter<float>("f2", {32, 16, 3, 3}, init::uniform(-0.5, 0.5, 5));
        auto y2 = conv2d(x2, f2, Conv2d{.paddings = {1, 1}});
        auto loss = reduce_sum(max_pool2d(y * y, 2) + avg_pool2d(y, 2)) + reduce_sum(y2 * y2);
        auto grads = append_backward(loss);
        REQUIRE(grads.size() == 4);
        std::vector<TargetRef> targets{y, y2, loss};
        for (auto& g : grads) targets.push_back(g.second);
        Session<cpu> one(p, SessionOptions{.threads = 1}), two(p, SessionOptions{.threads = 2});
        const auto a = one.eval(targets, std::vector<Feed>{});
        const auto b = two.eval(targets, std::vector<Feed>{});
        REQUIRE(a.size() == targets.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            CAPTURE(k);
            REQUIRE(a[k].bytes() == b[k].bytes());
            CHECK(std::memcmp(a[k].raw(), b[k].raw(), a[k].bytes()) == 0);
        }
    }
}

TEST_CASE("flatten_contiguous_range: shapes, XShape, gradients") {
    Program p;
    auto x = p.input<float>("x", {-1, 3, 4, 5});
    CHECK(flatten(x).shape() == Shape{-1, 60});
    CHECK(flatten(x, 1, 2).shape() == Shape{-1, 12, 5});
    CHECK(flatten(x, -2, -1).shape() == Shape{-1, 3, 20});
    CHECK(flatten(x, 0, -1).shape() == Shape{-1});
    CHECK(flatten(x, 2, 2).shape() == Shape{-1, 3, 4, 5});
    CHECK_THROWS_CONTAINING(flatten(x, 2, 1), shape_error,
                            "start_axis 2 and stop_axis 1 for X of shape [-1,3,4,5]: stop_axis comes before start_axis");
    CHECK_THROWS_CONTAINING(flatten(x, 1, 4), shape_error, "axes must be in [-4, 4)");
    const auto& op = p.desc().blocks[0].ops[0];
    REQUIRE(op.output("XShape") != nullptr);
    CHECK(Shape(p.desc().blocks[0].find_var(op.output("XShape")->arguments[0])->dims) == Shape{0, -1, 3, 4, 5});

    grad_check::check({{"x", random({2, 3, 2, 2}, 5)}}, [](P&, const V& in) { return flatten(in[0]) * flatten(in[0]); });
    // A program without XShape (allowed, as in Paddle) differentiates through reshape_grad.
    grad_check::check({{"x", random({2, 3, 2}, 6)}}, [](P& q, const V& in) {
        std::vector<std::vector<std::string>> names;
        const int idx = q.append("flatten_contiguous_range", {{"X", {in[0].name()}}}, {{"Out", 1}},
                                 {Attribute::make_int("start_axis", 0), Attribute::make_int("stop_axis", 1)}, &names);
        return square(Var<double>(q.state(), names[0][0], idx));
    });
}

TEST_CASE("window ops: shape inference with unknown batch, and the errors") {
    Program p;
    auto x = p.input<float>("x", {-1, 3, 28, 28});
    auto f = p.parameter<float>("f", {8, 3, 5, 5}, init::constant(0));
    CHECK(conv2d(x, f).shape() == Shape{-1, 8, 24, 24});
    CHECK(conv2d(x, f, {{2, 2}, {2, 2}}).shape() == Shape{-1, 8, 14, 14});
    CHECK(conv2d(x, f, {{3, 3}, {0, 0}, {1, 1}, 1, "SAME"}).shape() == Shape{-1, 8, 10, 10});
    CHECK(max_pool2d(x, 2).shape() == Shape{-1, 3, 14, 14});
    CHECK(pool2d(x, {"avg", {1, 1}, {1, 1}, {0, 0}, true}).shape() == Shape{-1, 3, 1, 1});
    CHECK(pool2d(x, {"avg", {3, 3}, {2, 2}, {0, 0}, false, true, false, true}).shape() == Shape{-1, 3, 14, 14});
    CHECK(pool2d(x, {"avg", {3, 3}, {2, 2}, {0, 0}, false, true, false, false}).shape() == Shape{-1, 3, 13, 13});

    auto f2 = p.parameter<float>("f2", {8, 2, 3, 3}, init::constant(0));
    CHECK_THROWS_CONTAINING(conv2d(x, f2), shape_error,
                            "Input's 3 channels must be Filter's 2 per group times groups 1 = 2");
    auto f3 = p.parameter<float>("f3", {7, 1, 3, 3}, init::constant(0));
    CHECK_THROWS_CONTAINING(conv2d(x, f3, {{1, 1}, {0, 0}, {1, 1}, 3}), shape_error,
                            "the 7 output channels do not divide into 3 groups");
    auto big = p.parameter<float>("big", {1, 3, 31, 3}, init::constant(0));
    CHECK_THROWS_CONTAINING(conv2d(x, big, {{1, 1}, {1, 1}}), shape_error,
                            "along H the window of 31 is larger than the padded input of 30 (28 + paddings 1, 1)");
    CHECK_THROWS_CONTAINING(conv2d(x, f, {{1, 1}, {0, 0}, {8, 8}}), shape_error,
                            "along H the window of 5 (dilated: 33) is larger than the padded input of 28");
    CHECK_THROWS_CONTAINING(conv2d(x, f, {{0, 1}}), shape_error, "strides must be positive: [0,1]");
    CHECK_THROWS_CONTAINING(conv2d(x, f, {{1, 1}, {1, 1, 1}}), shape_error,
                            "paddings must have 2 values ([h, w]) or 4 ([top, bottom, left, right]), not [1,1,1]");
    CHECK_THROWS_CONTAINING(conv2d(x, f, {{1, 1}, {0, 0}, {1, 1}, 1, "FULL"}), shape_error,
                            "padding_algorithm must be EXPLICIT, SAME or VALID, not 'FULL'");
    CHECK_THROWS_CONTAINING(conv2d(x, f, {{1, 1}, {0, 0}, {1, 1}, 0}), shape_error, "groups must be at least 1, not 0");
    auto flat = p.input<float>("flat", {-1, 784});
    CHECK_THROWS_CONTAINING(conv2d(flat, f), shape_error, "both must have rank 4");
    auto xd = p.input<double>("xd", {1, 3, 8, 8});
    (void)xd;
    CHECK_THROWS_CONTAINING(p.append("conv2d", {{"Input", {"xd"}}, {"Filter", {"f"}}}, {{"Output", 1}}, {}), type_error,
                            "Input is FP64 but Filter is FP32");
    CHECK_THROWS_CONTAINING(p.append("conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", 1}},
                                     {Attribute::make_string("data_format", "NCWH")}),
                            shape_error, "data_format must be NCHW or NHWC, not 'NCWH'");
    // NHWC reads x [-1, 3, 28, 28] as 28 channels of 3 x 28.
    CHECK_THROWS_CONTAINING(p.append("conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", 1}},
                                     {Attribute::make_string("data_format", "NHWC")}),
                            shape_error, "Input's 28 channels must be Filter's 3 per group times groups 1 = 3");
    CHECK_THROWS_CONTAINING(p.append("pool2d", {{"X", {"x"}}}, {{"Out", 1}},
                                     {Attribute::make_string("pooling_type", "max"), Attribute::make_ints("ksize", {5, 5}),
                                      Attribute::make_string("data_format", "NHWC")}),
                            shape_error, "along H the window of 5 is larger than the padded input of 3");
    CHECK_THROWS_CONTAINING(pool2d(x, {"min", {2, 2}}), shape_error, "pooling_type must be max or avg, not 'min'");
    CHECK_THROWS_CONTAINING(pool2d(x, {"max", {2}}), shape_error, "ksize must have 2 values, not [2]");
    CHECK_THROWS_CONTAINING(pool2d(x, {"max", {29, 2}}), shape_error, "along H the window of 29 is larger");
    CHECK_THROWS_CONTAINING(p.append("pool2d", {{"X", {"x"}}}, {{"Out", 1}}, {Attribute::make_ints("ksize", {2, 2})}),
                            format_error, "needs attribute 'pooling_type'");
}

TEST_CASE("a small CNN trains: conv, relu, pool, flatten, fc, loss") {
    // Two classes of 6x6 images: a bright vertical bar or a horizontal one.
    Program p;
    auto x = p.input<float>("x", {-1, 1, 6, 6});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto f = p.parameter<float>("f", {4, 1, 3, 3}, init::uniform(-0.5, 0.5, 1));
    auto w = p.parameter<float>("w", {36, 2}, init::uniform(-0.3, 0.3, 2));
    auto h = max_pool2d(relu(conv2d(x, f, {{1, 1}, {1, 1}})), 2);  // [N, 4, 3, 3]
    auto logits = matmul(flatten(h), w);
    auto avg = mean(softmax_with_cross_entropy(logits, label).second);
    auto step = SGD(0.2).minimize(avg);
    Session<cpu> s(p);
    Tensor xs(DataType::FP32, {8, 1, 6, 6}), ls(DataType::INT64, {8, 1});
    std::fill_n(xs.data<float>(), xs.numel(), 0.0f);
    for (int n = 0; n < 8; ++n) {
        const int cls = n % 2, at = 1 + n / 2;
        ls.data<std::int64_t>()[n] = cls;
        for (int k = 0; k < 6; ++k) xs.data<float>()[n * 36 + (cls ? at * 6 + k : k * 6 + at)] = 1.0f;
    }
    const std::vector<Feed> feeds{{"x", xs}, {"label", ls}};
    const double first = s.eval(std::vector<TargetRef>{avg}, feeds)[0].item<float>();
    for (int it = 0; it < 60; ++it) s.eval(step.targets(), feeds);
    const double last = s.eval(std::vector<TargetRef>{avg}, feeds)[0].item<float>();
    CHECK(last < 0.1 * first);
}

// data_format / data_layout NHWC: the same network on channels-last
// tensors gives the NCHW results transposed, gradients included. The
// convolutions and pooling run the NCHW kernels between two transposes
// (the same bits); batch norm sums its channels in another order (1e-12).
TEST_CASE("NHWC: conv2d, depthwise_conv2d, pool2d and batch_norm give the NCHW results transposed, with gradients") {
    const auto x_nchw = random4({3, 4, 9, 7}, 41);
    auto build = [](Program& p, const std::string& layout, const Shape& xs) {
        auto x = p.parameter<double>("x", xs, init::constant(0));
        auto f = p.parameter<double>("f", {6, 2, 3, 2}, init::uniform(-1, 1, 1));
        auto fd = p.parameter<double>("fd", {12, 1, 3, 3}, init::uniform(-1, 1, 2));
        auto h = conv2d(x, f, Conv2d{.strides = {2, 1}, .paddings = {1, 0, 2, 1}, .dilations = {1, 2}, .groups = 2,
                                     .data_format = layout});                       // grouped, asymmetric padding
        h = batch_norm(h, "bn", BatchNorm{.data_layout = layout});
        h = depthwise_conv2d(relu(h), fd, Conv2d{.paddings = {1, 1}, .data_format = layout});
        auto mx = pool2d(h, Pool2d{.ksize = {3, 2}, .strides = {2, 1}, .paddings = {1, 1}, .data_format = layout});
        auto av = pool2d(h, Pool2d{.pooling_type = "avg", .ksize = {2, 3}, .strides = {2, 2}, .paddings = {1, 1},
                                   .exclusive = false, .ceil_mode = true, .data_format = layout});
        auto ad = pool2d(h, Pool2d{.pooling_type = "avg", .ksize = {3, 2}, .adaptive = true, .data_format = layout});
        auto loss = reduce_sum(square(mx)) + reduce_sum(square(av)) + reduce_sum(square(ad));
        std::vector<TargetRef> targets{mx, av, ad};
        for (auto& [param, grad] : append_backward(loss)) targets.push_back(grad);  // x, f, fd, bn.scale, bn.bias
        return targets;
    };
    Program pc, pl;
    const Shape nchw{3, 4, 9, 7}, nhwc{3, 9, 7, 4};
    const auto tc = build(pc, "NCHW", nchw), tl = build(pl, "NHWC", nhwc);
    REQUIRE(tc.size() == tl.size());
    // Three threads: images and planes split over the pool, its workers
    // reading the calling thread's transposed copies.
    SessionOptions three;
    three.threads = 3;
    Session<cpu> sc(pc, three), sl(pl, three);
    const xt::xarray<double> x_cl = xt::transpose(x_nchw, {0, 2, 3, 1});
    const std::vector<Feed> fc{{"x", to_tensor(x_nchw)}}, fl{{"x", to_tensor(x_cl)}};  // a feed overrides the parameter
    const std::vector<Tensor> rc = sc.eval(tc, fc), rl = sl.eval(tl, fl);
    for (std::size_t i = 0; i < rc.size(); ++i) {
        CAPTURE(i);
        const Tensor& a = rc[i];
        const Tensor& b = rl[i];
        xt::xarray<double> want = to_xarray<double>(a), got = to_xarray<double>(b);
        if (!(a.shape() == b.shape())) got = xt::transpose(got, {0, 3, 1, 2});  // an activation's, back to NCHW
        REQUIRE(got.shape() == want.shape());
        // Outputs and gradients downstream of batch norm carry its sums' order.
        CHECK(xt::allclose(got, want, 1e-12, 1e-12));
    }
}

// batch_norm NHWC at ranks 2 to 5, and a batch of 0: channels last gives
// what NCHW gives with the channel axis moved (forward, saved statistics,
// moving statistics and the gradients of X, Scale and Bias).
TEST_CASE("NHWC: batch_norm at ranks 2 to 5 and batch 0 gives the NCHW results with the channel axis moved") {
    const std::vector<std::vector<std::int64_t>> nchw_shapes = {{5, 3}, {4, 3, 6}, {2, 3, 4, 5}, {2, 3, 2, 3, 4}, {0, 3, 4, 5}};
    unsigned seed = 90;
    for (const auto& dims : nchw_shapes) {
        const Shape nchw(dims);
        CAPTURE(to_string(nchw));
        const int r = nchw.rank();
        std::vector<std::size_t> to_last, to_first;  // the channel axis moved last, and back
        to_last.push_back(0);
        for (int i = 2; i < r; ++i) to_last.push_back(static_cast<std::size_t>(i));
        to_last.push_back(1);
        to_first.push_back(0);
        to_first.push_back(static_cast<std::size_t>(r - 1));
        for (int i = 1; i < r - 1; ++i) to_first.push_back(static_cast<std::size_t>(i));
        std::vector<std::size_t> xdims, ldims_u;
        for (auto d : dims) xdims.push_back(static_cast<std::size_t>(d));
        for (std::size_t i : to_last) ldims_u.push_back(xdims[i]);
        const bool empty = nchw.numel() == 0;  // (xtensor's views of an empty array are undefined behaviour)
        const xt::xarray<double> xv = empty ? xt::xarray<double>::from_shape(xdims) : random(xdims, seed++);
        const xt::xarray<double> xl = empty ? xt::xarray<double>::from_shape(ldims_u)
                                            : xt::xarray<double>(xt::transpose(xv, to_last));
        std::vector<std::int64_t> ldims;
        for (auto d : ldims_u) ldims.push_back(static_cast<std::int64_t>(d));
        auto run = [&](const std::string& layout, const Shape& xs, const xt::xarray<double>& x_value) {
            Program p;
            auto x = p.parameter<double>("x", xs, init::constant(0));
            auto y = batch_norm(x, "bn", BatchNorm{.data_layout = layout});
            auto loss = reduce_sum(square(y) * 0.5 + y);
            std::vector<TargetRef> targets{y, TargetRef("bn.mean"), TargetRef("bn.variance")};
            for (auto& [param, grad] : append_backward(loss)) targets.push_back(grad);  // bn.bias, bn.scale, x
            Session<cpu> s(p);
            return s.eval(targets, std::vector<Feed>{{"x", to_tensor(x_value)}});
        };
        const auto a = run("NCHW", nchw, xv), b = run("NHWC", Shape(ldims), xl);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            CAPTURE(i);
            if (a[i].numel() == 0) {  // X and Y at batch 0: nothing to compare but the shape
                CHECK(b[i].numel() == 0);
                CHECK(b[i].rank() == a[i].rank());
                continue;
            }
            xt::xarray<double> want = to_xarray<double>(a[i]), got = to_xarray<double>(b[i]);
            if (got.dimension() == static_cast<std::size_t>(r) && r > 2) got = xt::transpose(got, to_first);
            REQUIRE(got.shape() == want.shape());
            CHECK(xt::allclose(got, want, 1e-12, 1e-12));
        }
    }
}
