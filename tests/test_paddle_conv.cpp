// Paddle's OpTest classes (python/paddle/fluid/tests/unittests) for the
// window ops: conv2d (test_conv2d_op.py), depthwise_conv2d
// (test_conv2d_op_depthwise_conv.py) and pool2d (test_pool2d_op.py), ported
// as tables: one row per class with its shapes, attributes, dtype and input
// range (np.random.random: a seeded uniform draw in [0, 1);
// np.random.uniform(-1, 1): in [-1, 1)), against the class's own NumPy
// reference (conv2d_forward_naive, pool2D_forward_naive) written here in
// double precision. dlgraph's RNG is not NumPy's, so the values differ from
// Paddle's run; the configurations do not.
//
// Paddle generates most classes from a parent with helpers
// (create_test_cudnn_class, create_test_padding_SAME_class, ...); the
// tables below do the same, naming each row as Paddle names the class.
// Where the Python sets an attribute that a later init_* call overwrites,
// the row has the value Paddle's run uses (said at the row).
//
// The cuDNN classes (create_test_cudnn_class and the like, TestCUDNN*) are
// their parents' configurations with use_cudnn, Paddle's kernel choice:
// dlgraph has one kernel per device and no use_cudnn attribute (a loaded
// program's use_cudnn is dropped with LoadOptions::lenient), so those rows
// run dlgraph's kernel on the class's configuration, dtype included.
//
// The channel-last classes (data_format NHWC) draw Input or X in the NHWC
// layout and compare with the NCHW reference on the transposed values,
// transposed back, which is what Paddle's naive references do.
//
// Tolerances, relative to max(1, |want|): 1e-12 for FP64 (the reference is
// the same sum of at most 3 * 7 * 7 products of values in [-1, 1), in
// another order); 1e-6 for FP32 (the ROCm classes; the FP32 inputs are
// widened to double for the reference, so what is left is FP32 rounding of
// nine products, tighter than check_output's atol 1e-5). Max pooling is
// compared exactly (a max rounds nothing).
//
// Gradients: conv2d's gradients for strides, paddings (2 and 4 values),
// SAME, VALID, dilation, groups and the 1x1 window, and pool2d's for every
// attribute these classes use (exclusive, ceil_mode, global, adaptive,
// SAME, VALID), are checked by finite differences in tests/test_conv.cpp,
// and not repeated here. That file does not differentiate depthwise_conv2d
// (its own grad op) nor a convolution with both groups and dilation: one
// class with both, TestDepthwiseConvWithDilation_AsyPadding, is checked here.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

using ints = std::vector<std::int64_t>;

std::vector<double> uniform_draws(std::mt19937& g, std::int64_t n, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& e : v) e = u(g);
    return v;
}

// _get_padding_with_SAME for one axis: [pad_0, pad_1].
std::pair<std::int64_t, std::int64_t> same_padding(std::int64_t in, std::int64_t k, std::int64_t s) {
    const std::int64_t out = (in + s - 1) / s;
    const std::int64_t sum = std::max<std::int64_t>((out - 1) * s + k - in, 0);
    return {sum / 2, sum - sum / 2};
}

// |got - want| <= tol * max(1, |want|), element by element.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
        CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
    }
}

// ---- conv2d ------------------------------------------------------------------------------------

// An NCHW tensor (shape nchw) from its NHWC values, and back: the
// references are written for NCHW, as Paddle's transpose NHWC inputs to it.
std::vector<double> move_channels(const std::vector<double>& x, const Shape& nchw, bool to_first) {
    const std::int64_t N = nchw[0], C = nchw[1], HW = nchw[2] * nchw[3];
    std::vector<double> out(x.size());
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t i = 0; i < HW; ++i) {
                const auto first = static_cast<std::size_t>((n * C + c) * HW + i);
                const auto last = static_cast<std::size_t>((n * HW + i) * C + c);
                if (to_first) out[first] = x[last];
                else out[last] = x[first];
            }
    return out;
}
std::vector<double> channels_first(const std::vector<double>& x, const Shape& nchw) { return move_channels(x, nchw, true); }
std::vector<double> channels_last(const std::vector<double>& x, const Shape& nchw) { return move_channels(x, nchw, false); }

struct conv_class {
    std::string name;
    std::string op;  // conv2d, or depthwise_conv2d (the classes' op_type)
    Shape input, filter;  // input as NCHW, whatever data_format (Paddle's init_test_case; _2 makes it NHWC)
    ints strides, paddings, dilations;
    std::int64_t groups;
    std::string padding_algorithm;
    std::string data_format;  // TestConv2DOp's family sends AnyLayout, TestConv2DOp_v2's NCHW
    DataType dtype;
    bool fuse_relu;  // fuse_relu_before_depthwise_conv (see the depthwise table)
};

// conv2d_forward_naive in double: paddings resolved by padding_algorithm
// (VALID: none; SAME: ceil(in / stride) outputs, dilation 1), then
// out[n][g * sub + k][i][j] = sum over the group's f_c channels and the
// dilated window of input_pad[n][g * f_c + c][i * s0 + a][j * s1 + b] *
// filter_dilation[g * sub + k][c][a][b], where the dilated filter is zero
// off the taps (a = p * d0, b = q * d1): only the taps are summed here.
std::vector<double> ref_conv(const std::vector<double>& x, const std::vector<double>& f, const conv_class& c,
                             Shape& out_shape) {
    const std::int64_t N = c.input[0], C = c.input[1], H = c.input[2], W = c.input[3];
    const std::int64_t M = c.filter[0], fc = c.filter[1], kh = c.filter[2], kw = c.filter[3];
    REQUIRE(fc * c.groups == C);
    REQUIRE(M % c.groups == 0);
    const std::int64_t sub = M / c.groups;
    ints pad = c.paddings, dil = c.dilations;
    if (c.padding_algorithm == "VALID") pad = {0, 0, 0, 0};
    if (c.padding_algorithm == "SAME") {
        dil = {1, 1};
        const auto [h0, h1] = same_padding(H, kh, c.strides[0]);
        const auto [w0, w1] = same_padding(W, kw, c.strides[1]);
        pad = {h0, h1, w0, w1};
    }
    std::int64_t ph0 = pad[0], ph1 = pad[0], pw0 = pad[1], pw1 = pad[1];
    if (pad.size() == 4) ph0 = pad[0], ph1 = pad[1], pw0 = pad[2], pw1 = pad[3];
    const std::int64_t s0 = c.strides[0], s1 = c.strides[1];
    const std::int64_t oh = 1 + (H + ph0 + ph1 - (dil[0] * (kh - 1) + 1)) / s0;
    const std::int64_t ow = 1 + (W + pw0 + pw1 - (dil[1] * (kw - 1) + 1)) / s1;
    out_shape = Shape{N, M, oh, ow};
    std::vector<double> out(static_cast<std::size_t>(N * M * oh * ow), 0.0);
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t m = 0; m < M; ++m) {
            const std::int64_t g = m / sub;
            for (std::int64_t i = 0; i < oh; ++i)
                for (std::int64_t j = 0; j < ow; ++j) {
                    double s = 0;
                    for (std::int64_t ci = 0; ci < fc; ++ci)
                        for (std::int64_t p = 0; p < kh; ++p) {
                            const std::int64_t iy = i * s0 + p * dil[0] - ph0;  // a row of input_pad, less ph0
                            if (iy < 0 || iy >= H) continue;                     // the zero padding
                            for (std::int64_t q = 0; q < kw; ++q) {
                                const std::int64_t ix = j * s1 + q * dil[1] - pw0;
                                if (ix < 0 || ix >= W) continue;
                                s += x[static_cast<std::size_t>(((n * C + g * fc + ci) * H + iy) * W + ix)] *
                                     f[static_cast<std::size_t>(((m * fc + ci) * kh + p) * kw + q)];
                            }
                        }
                    out[static_cast<std::size_t>(((n * M + m) * oh + i) * ow + j)] = s;
                }
        }
    return out;
}

std::vector<Attribute> conv_attrs(const conv_class& c) {
    return {Attribute::make_ints("strides", c.strides),
            Attribute::make_ints("paddings", c.paddings),
            Attribute::make_string("padding_algorithm", c.padding_algorithm),
            Attribute::make_int("groups", c.groups),
            Attribute::make_ints("dilations", c.dilations),
            Attribute::make_string("data_format", c.data_format)};
}

// The class's inputs: Input np.random.random, Filter np.random.uniform(-1, 1);
// with fuse_relu_before_depthwise_conv (on CUDA) Input is shifted to
// [-0.6, -0.1) U [0.1, 0.6) (input - 0.5, then 0.1 further from 0).
void draw_conv_inputs(const conv_class& c, unsigned seed, std::vector<double>& x, std::vector<double>& f) {
    std::mt19937 g(seed);
    x = uniform_draws(g, c.input.numel(), 0, 1);
    f = uniform_draws(g, c.filter.numel(), -1, 1);
    if (c.fuse_relu)
        for (auto& v : x) {
            v -= 0.5;
            v += v < 0 ? -0.1 : 0.1;
        }
    if (c.dtype == DataType::FP32) {  // astype(np.float32): the reference reads the rounded values
        for (auto& v : x) v = static_cast<double>(static_cast<float>(v));
        for (auto& v : f) v = static_cast<double>(static_cast<float>(v));
    }
}

template <class T> std::vector<T> narrowed(const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); }

// Runs one class in its dtype and compares with ref_conv.
template <class T> void run_conv_class(const conv_class& c, unsigned seed) {
    const bool nhwc = c.data_format == "NHWC";
    std::vector<double> xv, fv;
    draw_conv_inputs(c, seed, xv, fv);  // NHWC: drawn in that layout, as np.random.random([N, H, W, C])
    std::vector<double> in = nhwc ? channels_first(xv, c.input) : xv;
    if (c.fuse_relu)
        for (auto& v : in) v = std::max(v, 0.0);  // input2 = np.maximum(input, 0.0)
    Shape want_shape;
    auto want = ref_conv(in, fv, c, want_shape);
    if (nhwc) {  // the naive reference transposes the output back
        want = channels_last(want, want_shape);
        want_shape = Shape{want_shape[0], want_shape[2], want_shape[3], want_shape[1]};
    }
    const Shape input_shape = nhwc ? Shape{c.input[0], c.input[2], c.input[3], c.input[1]} : c.input;
    Program p;
    auto x = p.input<T>("input", input_shape);
    auto f = p.input<T>("filter", c.filter);
    // fuse_relu_before_depthwise_conv is no attribute of dlgraph's
    // depthwise_conv2d: the fused relu is a relu op before it.
    auto y = apply_op<T>(c.op, {{"Input", c.fuse_relu ? relu(x) : x}, {"Filter", f}}, conv_attrs(c), "Output");
    REQUIRE(y.shape() == want_shape);
    Session<cpu> s(p);
    const auto got = s.eval({y}, {{x, tensor_of<T>(input_shape, narrowed<T>(xv))}, {f, tensor_of<T>(c.filter, narrowed<T>(fv))}})[0];
    REQUIRE(got.shape() == want_shape);
    check_close(widened<T>(got), want, std::is_same_v<T, float> ? 1e-6 : 1e-12);
}

// Paddle's class generators, for a parent row.
conv_class derived(const conv_class& parent, const std::string& suffix) {
    conv_class c = parent;
    c.name = parent.name + "_" + suffix;
    return c;
}
conv_class cudnn_class(const conv_class& p) { return derived(p, "CUDNN"); }  // use_cudnn, float64
conv_class padding_same(const conv_class& p) {  // create_test_padding_SAME_class: pad [0, 0], SAME
    conv_class c = derived(p, "PaddingSAMEOp");
    c.paddings = {0, 0};
    c.padding_algorithm = "SAME";
    return c;
}
conv_class padding_valid(const conv_class& p) {  // create_test_padding_VALID_class: pad [1, 1], VALID
    conv_class c = derived(p, "PaddingVALIDOp");
    c.paddings = {1, 1};
    c.padding_algorithm = "VALID";
    return c;
}
conv_class cudnn_padding_same(const conv_class& p) {  // pad [1, 1] (ignored), SAME, use_cudnn
    conv_class c = derived(p, "CudnnPaddingSAMEOp");
    c.paddings = {1, 1};
    c.padding_algorithm = "SAME";
    return c;
}
conv_class cudnn_padding_valid(const conv_class& p) {  // pad [1, 1], VALID, use_cudnn
    conv_class c = derived(p, "CudnnPaddingVALIDOp");
    c.paddings = {1, 1};
    c.padding_algorithm = "VALID";
    return c;
}

conv_class channel_last(const conv_class& p) {  // create_test_channel_last_class: NHWC
    conv_class c = derived(p, "ChannelLast");
    c.data_format = "NHWC";
    return c;
}
conv_class cudnn_channel_last(const conv_class& p) {  // the same with use_cudnn (float64; float32 on ROCm)
    conv_class c = derived(p, "CudnnChannelLast");
    c.data_format = "NHWC";
    return c;
}

const conv_class& find_class(const std::vector<conv_class>& v, const std::string& name) {
    for (const auto& c : v)
        if (c.name == name) return c;
    FAIL("no class " << name);
    return v.front();
}

constexpr DataType f64 = DataType::FP64;

// A TestConv2DOp-family row: data_format AnyLayout, float64, EXPLICIT.
conv_class v1(std::string name, Shape input, Shape filter, ints strides, ints pad, ints dil, std::int64_t groups,
              std::string op = "conv2d", bool fuse = false) {
    return {std::move(name), std::move(op), input, filter, strides, pad, dil, groups, "EXPLICIT", "AnyLayout", f64, fuse};
}
// A TestConv2DOp_v2-family row: data_format NCHW, float64, EXPLICIT.
conv_class v2(std::string name, Shape input, Shape filter, ints strides, ints pad, ints dil, std::int64_t groups,
              std::string op = "conv2d", bool fuse = false) {
    return {std::move(name), std::move(op), input, filter, strides, pad, dil, groups, "EXPLICIT", "NCHW", f64, fuse};
}

}  // namespace

TEST_CASE("Paddle's test_conv2d_op.py classes") {
    std::vector<conv_class> rows;
    // TestConv2DOp: Input [2, 3, 5, 5], Filter [6, 3 / groups, 3, 3], stride
    // 1, pad 0, dilation 1, groups 1, float64, data_format AnyLayout.
    rows.push_back(v1("TestConv2DOp", {2, 3, 5, 5}, {6, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1));
    rows.push_back(v1("TestWithPad", {2, 3, 5, 5}, {6, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1));
    rows.push_back(v1("TestWithStride", {2, 3, 6, 6}, {6, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1));
    // TestWithGroup sets `self.group = 3` (not groups), so its groups stay 1
    // and its Filter is [18, 3, 3, 3]: what Paddle runs.
    rows.push_back(v1("TestWithGroup", {2, 3, 5, 5}, {18, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1));
    rows.push_back(v1("TestWith1x1", {2, 3, 5, 5}, {120, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 3));
    rows.push_back(v1("TestWithDepthWise3x3", {3, 4, 10, 10}, {12, 1, 3, 3}, {1, 1}, {1, 1}, {2, 2}, 4));
    rows.push_back(v1("TestWithDepthWise5x5", {2, 4, 10, 10}, {8, 1, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 4));
    rows.push_back(v1("TestWithDepthWise7x7", {2, 8, 10, 10}, {16, 1, 7, 7}, {2, 2}, {1, 1}, {1, 1}, 8));
    rows.push_back(v1("TestWithDilation", {2, 3, 10, 10}, {12, 1, 3, 3}, {1, 1}, {0, 0}, {2, 2}, 3));
    rows.push_back(v1("TestWithInput1x1Filter1x1", {100, 3, 1, 1}, {120, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 3));
    for (const char* p : {"TestConv2DOp", "TestWithPad", "TestWithStride", "TestWithGroup", "TestWith1x1",
                          "TestWithInput1x1Filter1x1"})
        rows.push_back(cudnn_class(find_class(rows, p)));
    {
        conv_class c = find_class(rows, "TestConv2DOp");  // use_cudnn, exhaustive_search, float64
        c.name = "TestCUDNNExhaustiveSearch";
        rows.push_back(c);
    }

    // TestConv2DOp_v2: Input [2, 3, 5, 5], Filter [6, 3, 4, 3], strides
    // [1, 2], pad [0, 0] EXPLICIT, float64, data_format NCHW; init_paddings
    // runs after init_test_case, so its pad is the row's.
    rows.push_back(v2("TestConv2DOp_v2", {2, 3, 5, 5}, {6, 3, 4, 3}, {1, 2}, {0, 0}, {1, 1}, 1));
    rows.push_back(v2("TestConv2DOp_AsyPadding", {2, 3, 5, 5}, {6, 3, 4, 3}, {1, 2}, {0, 0, 1, 2}, {1, 1}, 1));
    rows.push_back(v2("TestWithPad_AsyPadding", {2, 3, 5, 5}, {6, 3, 3, 3}, {1, 1}, {2, 1, 3, 2}, {1, 1}, 1));
    rows.push_back(v2("TestWithStride_AsyPadding", {2, 3, 6, 6}, {6, 3, 3, 3}, {2, 2}, {2, 1, 3, 2}, {1, 1}, 1));
    // `self.group = 3` again: groups 1, Filter [24, 3, 4, 3], pad [0, 0].
    rows.push_back(v2("TestWithGroup_AsyPadding", {2, 3, 5, 5}, {24, 3, 4, 3}, {1, 2}, {0, 0}, {1, 1}, 1));
    rows.push_back(v2("TestWith1x1_AsyPadding", {2, 3, 5, 5}, {120, 1, 1, 1}, {1, 1}, {2, 2, 4, 0}, {1, 1}, 3));
    rows.push_back(v2("TestWithDepthWise3x3_AsyPadding", {3, 4, 10, 10}, {16, 1, 3, 3}, {1, 1}, {1, 3, 2, 1}, {2, 2}, 4));
    rows.push_back(v2("TestWithDepthWise5x5_AsyPadding", {2, 4, 10, 10}, {8, 1, 5, 5}, {1, 1}, {0, 1, 1, 0}, {1, 1}, 4));
    rows.push_back(v2("TestWithDepthWise7x7_AsyPadding", {2, 8, 10, 10}, {16, 1, 7, 7}, {2, 2}, {1, 3, 4, 1}, {1, 1}, 8));
    rows.push_back(v2("TestWithDilation_AsyPadding", {2, 3, 10, 10}, {24, 1, 3, 3}, {1, 1}, {0, 1, 3, 0}, {2, 2}, 3));
    rows.push_back(v2("TestWithInput1x1Filter1x1_AsyPadding", {40, 3, 1, 1}, {120, 1, 1, 1}, {1, 1}, {0, 3, 4, 0}, {1, 1}, 3));
    for (const char* p : {"TestConv2DOp_AsyPadding", "TestWithPad_AsyPadding", "TestWithStride_AsyPadding",
                          "TestWithGroup_AsyPadding", "TestWith1x1_AsyPadding", "TestWithInput1x1Filter1x1_AsyPadding"})
        rows.push_back(cudnn_class(find_class(rows, p)));
    const char* same_valid_parents[] = {"TestConv2DOp_AsyPadding", "TestWithPad_AsyPadding", "TestWithStride_AsyPadding",
                                        "TestWithGroup_AsyPadding", "TestWithInput1x1Filter1x1_AsyPadding"};
    for (auto gen : {padding_same, padding_valid, cudnn_padding_same, cudnn_padding_valid})
        for (const char* p : same_valid_parents) rows.push_back(gen(find_class(rows, p)));

    for (const char* p : {"TestConv2DOp_AsyPadding", "TestWithPad_AsyPadding", "TestWithGroup_AsyPadding",
                          "TestWith1x1_AsyPadding", "TestWithInput1x1Filter1x1_AsyPadding"})
        rows.push_back(channel_last(find_class(rows, p)));
    for (const char* p : {"TestConv2DOp_AsyPadding", "TestWithPad_AsyPadding", "TestWithStride_AsyPadding",
                          "TestWithGroup_AsyPadding", "TestWithDilation_AsyPadding"})
        rows.push_back(cudnn_channel_last(find_class(rows, p)));

    CHECK(rows.size() == 64);
    unsigned seed = 1000;
    for (const auto& c : rows) {
        INFO(c.name);
        run_conv_class<double>(c, seed++);
    }
    // Not ported: the *_CUDNNFp16, *_CUDNNBF16 and *_CudnnChannelLastFp16
    // classes (no FP16 or BF16 kernels); TestConv2DOpError (the Python API's
    // type checks).
}

TEST_CASE("Paddle's test_conv2d_op_depthwise_conv.py classes") {
    // op_type depthwise_conv2d, Input [2, 3, 5, 5], groups 3, float64.
    // The *andFuse classes set fuse_relu_before_depthwise_conv, which Paddle
    // honours only on CUDA (on a CPU place setUp turns it off and they are
    // their parents): their CUDA configuration is ported, Input shifted
    // away from 0 and the reference convolving relu(Input), with a relu op
    // before dlgraph's depthwise_conv2d (which has no such attribute).
    const std::string dw = "depthwise_conv2d";
    std::vector<conv_class> rows;
    const Shape x{2, 3, 5, 5};
    for (bool fuse : {false, true}) {
        const std::string and_fuse = fuse ? "andFuse" : "";
        // Based on TestConv2DOp: data_format AnyLayout, pad [1, 1].
        rows.push_back(v1("TestDepthwiseConv" + and_fuse, x, {12, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, dw, fuse));
        rows.push_back(v1("TestDepthwiseConv2" + and_fuse, x, {12, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3, dw, fuse));
        rows.push_back(v1("TestDepthwiseConv3" + and_fuse, x, {24, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3, dw, fuse));
        rows.push_back(v1("TestDepthwiseConvWithDilation" + and_fuse, x, {24, 1, 3, 3}, {2, 2}, {1, 1}, {2, 2}, 3, dw, fuse));
        rows.push_back(v1("TestDepthwiseConvWithDilation2" + and_fuse, x, {24, 1, 3, 3}, {1, 1}, {1, 1}, {2, 2}, 3, dw, fuse));
    }
    // Based on TestConv2DOp_v2: data_format NCHW; init_paddings (after
    // init_test_case) gives the pad.
    rows.push_back(v2("TestDepthwiseConv_AsyPadding", x, {12, 1, 3, 3}, {2, 2}, {1, 1, 0, 1}, {1, 1}, 3, dw));
    rows.push_back(v2("TestDepthwiseConv2_AsyPadding", x, {12, 1, 3, 3}, {1, 1}, {0, 1, 0, 2}, {1, 1}, 3, dw));
    rows.push_back(v2("TestDepthwiseConv3_AsyPadding", x, {24, 1, 3, 3}, {1, 1}, {1, 1, 0, 0}, {1, 1}, 3, dw));
    rows.push_back(v2("TestDepthwiseConvWithDilation_AsyPadding", x, {24, 1, 3, 3}, {2, 2}, {1, 1, 2, 1}, {2, 2}, 3, dw));
    rows.push_back(v2("TestDepthwiseConvWithDilation2_AsyPadding", x, {24, 1, 3, 3}, {1, 1}, {0, 1, 1, 0}, {2, 2}, 3, dw));
    rows.push_back(v2("TestDepthwiseConvandFuse_AsyPadding", x, {12, 1, 3, 3}, {2, 2}, {2, 1, 2, 3}, {1, 1}, 3, dw, true));
    rows.push_back(v2("TestDepthwiseConv2andFuse_AsyPadding", x, {12, 1, 3, 3}, {1, 1}, {1, 1, 1, 2}, {1, 1}, 3, dw, true));
    rows.push_back(v2("TestDepthwiseConv3andFuse_AsyPadding", x, {24, 1, 3, 3}, {1, 1}, {1, 2, 0, 2}, {1, 1}, 3, dw, true));
    rows.push_back(v2("TestDepthwiseConvWithDilationandFuse_AsyPadding", x, {24, 1, 3, 3}, {2, 2}, {2, 1, 1, 0}, {2, 2}, 3, dw, true));
    rows.push_back(v2("TestDepthwiseConvWithDilation2andFuse_AsyPadding", x, {24, 1, 3, 3}, {1, 1}, {1, 3, 1, 3}, {2, 2}, 3, dw, true));
    const char* parents[] = {"TestDepthwiseConv_AsyPadding", "TestDepthwiseConvWithDilation_AsyPadding",
                             "TestDepthwiseConvandFuse_AsyPadding", "TestDepthwiseConvWithDilationandFuse_AsyPadding"};
    for (auto gen : {padding_same, padding_valid})
        for (const char* p : parents) rows.push_back(gen(find_class(rows, p)));  // SAME drops the dilation
    // Defined only on ROCm, where the cuDNN (MIOpen) classes are float32.
    for (const char* p : {"TestDepthwiseConv_AsyPadding", "TestDepthwiseConvWithDilation_AsyPadding"}) {
        conv_class c = cudnn_padding_same(find_class(rows, p));
        c.dtype = DataType::FP32;
        rows.push_back(c);
    }

    for (const char* p : {"TestDepthwiseConv_AsyPadding", "TestDepthwiseConvWithDilation2_AsyPadding",
                          "TestDepthwiseConvandFuse_AsyPadding", "TestDepthwiseConvWithDilationandFuse_AsyPadding"})
        rows.push_back(channel_last(find_class(rows, p)));
    for (const char* p : {"TestDepthwiseConv_AsyPadding", "TestDepthwiseConvWithDilation2_AsyPadding"}) {  // ROCm
        conv_class c = cudnn_channel_last(find_class(rows, p));
        c.dtype = DataType::FP32;
        rows.push_back(c);
    }

    CHECK(rows.size() == 36);
    unsigned seed = 2000;
    for (const auto& c : rows) {
        INFO(c.name);
        if (c.dtype == DataType::FP32)
            run_conv_class<float>(c, seed++);
        else
            run_conv_class<double>(c, seed++);
    }

    // check_grad (Input and Filter) of one class with groups, dilation,
    // stride 2 and 4 paddings, by central finite differences in FP64.
    const conv_class& g = find_class(rows, "TestDepthwiseConvWithDilation_AsyPadding");
    INFO(g.name << " (gradients)");
    std::vector<double> xv, fv;
    draw_conv_inputs(g, 77, xv, fv);
    auto as_array = [](const std::vector<double>& v, const Shape& s) {
        xt::xarray<double> a = xt::xarray<double>::from_shape(std::vector<std::size_t>(s.begin(), s.end()));
        std::copy(v.begin(), v.end(), a.begin());
        return a;
    };
    grad_check::check({{"input", as_array(xv, g.input)}, {"filter", as_array(fv, g.filter)}},
                      [&](Program&, const std::vector<Var<double>>& in) {
                          return apply_op<double>(g.op, {{"Input", in[0]}, {"Filter", in[1]}}, conv_attrs(g), "Output");
                      });
    // Not ported: the *_ChannelLastFp16 classes (no FP16 kernels). The ROCm
    // block's create_test_padding_VALID_class calls define the VALID classes
    // above again.
}

// ---- pool2d -------------------------------------------------------------------------------------

namespace {

struct pool_class {
    std::string name;
    Shape x;  // as NCHW, whatever data_format
    std::string type;  // max or avg
    ints ksize, strides, paddings;
    bool global, ceil_mode, exclusive, adaptive;
    std::string padding_algorithm;
    std::string data_format = "NCHW";
};

// pool2D_forward_naive in double (NCHW): paddings by padding_algorithm
// (VALID: none; SAME: from ksize and strides), then global pooling takes
// the whole image with no padding; adaptive windows are
// [floor(i * H / oh), ceil((i + 1) * H / oh)); other windows are
// [i * s - pad_up, i * s - pad_up + k) clipped to the input, and the
// average divides by the clipped window's size when exclusive or adaptive,
// else by the whole window's (ksize[0] * ksize[1]).
std::vector<double> ref_pool(const std::vector<double>& x, const pool_class& c, Shape& out_shape) {
    const std::int64_t N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3];
    ints k = c.ksize, pad = c.paddings;
    if (c.padding_algorithm == "VALID") {
        pad = {0, 0, 0, 0};
        REQUIRE_FALSE(c.ceil_mode);  // the reference refuses VALID with ceil_mode
    } else if (c.padding_algorithm == "SAME") {
        const auto [h0, h1] = same_padding(H, k[0], c.strides[0]);
        const auto [w0, w1] = same_padding(W, k[1], c.strides[1]);
        pad = {h0, h1, w0, w1};
    }
    const bool sys = pad.size() == 2;
    if (c.global) {
        k = {H, W};
        std::fill(pad.begin(), pad.end(), 0);
    }
    const std::int64_t up = pad[0], down = sys ? pad[0] : pad[1], left = sys ? pad[1] : pad[2], right = sys ? pad[1] : pad[3];
    const std::int64_t s0 = c.strides[0], s1 = c.strides[1];
    std::int64_t oh, ow;
    if (c.adaptive) {
        oh = k[0];
        ow = k[1];
    } else {
        oh = (H - k[0] + up + down + (c.ceil_mode ? s0 - 1 : 0)) / s0 + 1;
        ow = (W - k[1] + left + right + (c.ceil_mode ? s1 - 1 : 0)) / s1 + 1;
    }
    out_shape = Shape{N, C, oh, ow};
    std::vector<double> out(static_cast<std::size_t>(N * C * oh * ow));
    for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
            std::int64_t h0, h1, w0, w1, field;
            if (c.adaptive) {
                h0 = i * H / k[0];
                h1 = ((i + 1) * H + k[0] - 1) / k[0];
                w0 = j * W / k[1];
                w1 = ((j + 1) * W + k[1] - 1) / k[1];
                field = (h1 - h0) * (w1 - w0);
            } else {
                h0 = i * s0 - up;
                h1 = i * s0 + k[0] - up;
                w0 = j * s1 - left;
                w1 = j * s1 + k[1] - left;
                field = (h1 - h0) * (w1 - w0);
                h0 = std::max<std::int64_t>(h0, 0);
                w0 = std::max<std::int64_t>(w0, 0);
                h1 = std::min(h1, H);
                w1 = std::min(w1, W);
                if (c.exclusive) field = (h1 - h0) * (w1 - w0);
            }
            REQUIRE(h1 > h0);  // np.max of an empty window would raise: no class has one
            REQUIRE(w1 > w0);
            for (std::int64_t n = 0; n < N; ++n)
                for (std::int64_t ch = 0; ch < C; ++ch) {
                    const double* plane = x.data() + (n * C + ch) * H * W;
                    double sum = 0, mx = plane[h0 * W + w0];
                    for (std::int64_t r = h0; r < h1; ++r)
                        for (std::int64_t q = w0; q < w1; ++q) {
                            sum += plane[r * W + q];
                            mx = std::max(mx, plane[r * W + q]);
                        }
                    out[static_cast<std::size_t>(((n * C + ch) * oh + i) * ow + j)] =
                        c.type == "max" ? mx : sum / static_cast<double>(field);
                }
        }
    return out;
}

pool_class derived(const pool_class& parent, const std::string& suffix) {
    pool_class c = parent;
    c.name = parent.name + "_" + suffix;
    return c;
}

const pool_class& find_class(const std::vector<pool_class>& v, const std::string& name) {
    for (const auto& c : v)
        if (c.name == name) return c;
    FAIL("no class " << name);
    return v.front();
}

}  // namespace

TEST_CASE("Paddle's test_pool2d_op.py classes") {
    // TestPool2D_Op_Mixin: X [2, 3, 5, 5] np.random.random float64, ksize
    // [3, 3], strides [1, 1], paddings [0, 0] EXPLICIT, global pooling, avg,
    // ceil_mode off, exclusive, not adaptive, NCHW. setUp calls
    // init_test_case and then init_paddings, so paddings set in
    // init_test_case (the *_AsyPadding classes' [1, 0, 1, 2] and the like,
    // TestAvgPoolAdaptiveAsyOutSize's [0, 0, 0, 0]) are overwritten by the
    // parent's init_paddings: the rows have the paddings Paddle runs with.
    std::vector<pool_class> rows;
    auto row = [&](std::string name, Shape x, std::string type, ints ksize, ints strides, ints paddings, bool global,
                   bool ceil_mode = false, bool exclusive = true, bool adaptive = false) {
        rows.push_back({std::move(name), x, std::move(type), std::move(ksize), std::move(strides), std::move(paddings),
                        global, ceil_mode, exclusive, adaptive, "EXPLICIT"});
    };
    const Shape x5{2, 3, 5, 5}, x7{2, 3, 7, 7};
    row("TestPool2D_Op", x5, "avg", {3, 3}, {1, 1}, {0, 0}, true);
    row("TestCase1", x7, "avg", {3, 3}, {1, 1}, {0, 0}, false);
    row("TestCase2", x7, "avg", {3, 3}, {1, 1}, {1, 1}, false);
    row("TestCase3", x5, "max", {3, 3}, {1, 1}, {0, 0}, true);
    row("TestCase4", x7, "max", {3, 3}, {1, 1}, {0, 0}, false);
    row("TestCase5", x7, "max", {3, 3}, {1, 1}, {1, 1}, false);
    const char* base6[] = {"TestPool2D_Op", "TestCase1", "TestCase2", "TestCase3", "TestCase4", "TestCase5"};
    for (const char* p : base6) rows.push_back(derived(find_class(rows, p), "CUDNNOp"));
    for (const char* p : {"TestPool2D_Op", "TestCase1"}) {
        pool_class c = derived(find_class(rows, p), "CUDNNOpCeilMode");
        c.ceil_mode = true;
        rows.push_back(c);
    }
    for (const char* p : {"TestCase1", "TestCase2"}) {
        pool_class c = derived(find_class(rows, p), "CeilModeCast");
        c.ceil_mode = true;
        rows.push_back(c);
    }
    row("TestAvgInclude", x7, "avg", {3, 3}, {1, 1}, {1, 1}, false, false, false);
    row("TestCUDNNAvgInclude", x7, "avg", {3, 3}, {1, 1}, {1, 1}, false, false, false);
    row("TestAvgPoolAdaptive", x7, "avg", {3, 3}, {1, 1}, {0, 0}, false, false, true, true);
    row("TestAvgPoolAdaptiveAsyOutSize", {8, 3, 6, 6}, "avg", {2, 3}, {1, 1}, {0, 0}, false, false, true, true);

    // The *_AsyPadding classes: their parents' paddings (see above).
    row("TestPool2D_AsyPadding", x5, "avg", {3, 3}, {1, 1}, {0, 0}, true);
    row("TestCase1_AsyPadding", x7, "avg", {3, 3}, {1, 1}, {0, 0}, false);
    row("TestCase2_AsyPadding", x7, "avg", {3, 3}, {1, 1}, {1, 1}, false);
    row("TestCase3_AsyPadding", x5, "max", {3, 3}, {1, 1}, {0, 0}, true);
    row("TestCase4_AsyPadding", x7, "max", {3, 3}, {1, 1}, {0, 0}, false);
    row("TestCase5_AsyPadding", x7, "max", {3, 3}, {1, 1}, {1, 1}, false);
    for (const char* p : {"TestPool2D_AsyPadding", "TestCase1_AsyPadding", "TestCase2_AsyPadding", "TestCase3_AsyPadding",
                          "TestCase4_AsyPadding", "TestCase5_AsyPadding"})
        rows.push_back(derived(find_class(rows, p), "CUDNNOp"));
    for (const char* p : {"TestPool2D_AsyPadding", "TestCase1_AsyPadding"}) {
        pool_class c = derived(find_class(rows, p), "CUDNNOpCeilMode");
        c.ceil_mode = true;
        rows.push_back(c);
    }
    for (const char* p : {"TestCase1_AsyPadding", "TestCase2_AsyPadding"}) {
        pool_class c = derived(find_class(rows, p), "CeilModeCast");
        c.ceil_mode = true;
        rows.push_back(c);
    }
    row("TestAvgInclude_AsyPadding", x7, "avg", {3, 3}, {1, 1}, {1, 1}, false, false, false);
    row("TestCUDNNAvgInclude_AsyPadding", x7, "avg", {3, 3}, {1, 1}, {1, 1}, false, false, false);
    row("TestAvgPoolAdaptive_AsyPadding", x7, "avg", {3, 3}, {1, 1}, {0, 0}, false, false, true, true);
    row("TestCase5_Max", x7, "max", {3, 3}, {1, 1}, {1, 1}, false);
    rows.push_back(derived(find_class(rows, "TestCase5_Max"), "CUDNNOp"));

    // create_test_padding_SAME_class: paddings [0, 0], SAME; the cuDNN
    // one: paddings [1, 1] (ignored), SAME; both VALID ones: [1, 1], VALID.
    // (SAME and VALID with global pooling: the whole image, no padding.)
    struct alg_gen {
        const char* suffix;
        ints paddings;
        const char* alg;
    };
    const alg_gen algs[] = {{"PaddingSAMEOp", {0, 0}, "SAME"},
                            {"CudnnPaddingSAMEOp", {1, 1}, "SAME"},
                            {"PaddingVALIDOp", {1, 1}, "VALID"},
                            {"CudnnPaddingVALIDOp", {1, 1}, "VALID"}};
    for (const auto& a : algs)
        for (const char* p : base6) {
            pool_class c = derived(find_class(rows, p), a.suffix);
            c.paddings = a.paddings;
            c.padding_algorithm = a.alg;
            rows.push_back(c);
        }
    row("TestCase1_strides", {2, 3, 4, 5}, "avg", {3, 3}, {1, 2}, {0, 0}, false);
    rows.push_back(derived(find_class(rows, "TestCase1_strides"), "CUDNNOp"));
    for (const auto& a : {algs[0], algs[1]}) {
        pool_class c = derived(find_class(rows, "TestCase1_strides"), a.suffix);
        c.paddings = a.paddings;
        c.padding_algorithm = a.alg;
        rows.push_back(c);
    }

    // ----------- test channel_last: a class of the tables above with
    // data_format NHWC and X [N, H, W, C] (init_shape), named as Paddle's.
    auto channel_last = [&](const std::string& parent, const std::string& name) {
        pool_class c = find_class(rows, parent);
        c.name = name;
        c.data_format = "NHWC";
        rows.push_back(c);
    };
    auto with_suffix = [&](const std::string& parent, const std::string& suffix, bool ceil_mode) {
        pool_class c = derived(find_class(rows, parent), suffix);
        c.ceil_mode = c.ceil_mode || ceil_mode;
        rows.push_back(c);
    };
    for (const std::string asy : {"", "_AsyPadding"}) {
        channel_last((asy.empty() ? "TestPool2D_Op" : "TestPool2D" + asy), "TestPool2D" + asy + "_channel_last");
        for (const char* k : {"TestCase1", "TestCase2", "TestCase3", "TestCase4", "TestCase5"})
            channel_last(k + asy, k + asy + "_channel_last");
        for (const char* k : {"TestPool2D", "TestCase1", "TestCase2", "TestCase3", "TestCase4", "TestCase5"})
            with_suffix(k + asy + "_channel_last", "CUDNNOp", false);
        for (const char* k : {"TestPool2D", "TestCase1"}) with_suffix(k + asy + "_channel_last", "CUDNNOpCeilMode", true);
        for (const char* k : {"TestCase1", "TestCase2"}) with_suffix(k + asy + "_channel_last", "CeilModeCast", true);
        if (asy.empty()) {
            channel_last("TestCase5_Max", "TestCase5_channel_last_Max");
            with_suffix("TestCase5_channel_last_Max", "CUDNNOp", false);
        }
        for (const char* k : {"TestAvgInclude", "TestCUDNNAvgInclude", "TestAvgPoolAdaptive"})
            channel_last(k + asy, k + asy + "_channel_last");
    }
    for (const auto& a : algs)
        for (const char* k : {"TestPool2D", "TestCase1", "TestCase2", "TestCase3", "TestCase4", "TestCase5"}) {
            pool_class c = derived(find_class(rows, std::string(k) + "_channel_last"), a.suffix);
            c.paddings = a.paddings;
            c.padding_algorithm = a.alg;
            rows.push_back(c);
        }

    CHECK(rows.size() == 69 + 64);
    unsigned seed = 3000;
    for (const auto& c : rows) {
        INFO(c.name);
        const bool nhwc = c.data_format == "NHWC";
        std::mt19937 g(seed++);
        const auto xv = uniform_draws(g, c.x.numel(), 0, 1);  // NHWC: in that layout
        Shape want_shape;
        auto want = ref_pool(nhwc ? channels_first(xv, c.x) : xv, c, want_shape);
        if (nhwc) {
            want = channels_last(want, want_shape);
            want_shape = Shape{want_shape[0], want_shape[2], want_shape[3], want_shape[1]};
        }
        const Shape x_shape = nhwc ? Shape{c.x[0], c.x[2], c.x[3], c.x[1]} : c.x;
        Program p;
        auto x = p.input<double>("x", x_shape);
        auto y = pool2d(x, Pool2d{c.type, c.ksize, c.strides, c.paddings, c.global, c.exclusive, c.adaptive, c.ceil_mode,
                                  c.padding_algorithm, c.data_format});
        REQUIRE(y.shape() == want_shape);
        Session<cpu> s(p);
        const auto got = values_of<double>(s.eval({y}, {{x, tensor_of<double>(x_shape, xv)}})[0]);
        if (c.type == "max")
            CHECK(got == want);
        else
            check_close(got, want, 1e-12);
    }
    // Not ported: the *_CUDNNFp16Op and *_Fp16Op classes (no FP16 kernels).
    // Gradients (the avg classes' check_grad and TestCase5_Max's):
    // tests/test_conv.cpp, NHWC against NCHW there too.
}
