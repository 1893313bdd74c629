// The fixed-model emitter (dlgraph/fixed/emit.hpp): what it refuses, each
// with a clear error, and what the header it writes holds. That emitted
// models compute Session<cpu>'s bits is tests/fixed/test_fixed.cpp's job;
// the Cortex-M4 run is examples/embedded/run.sh's.
#include <doctest/doctest.h>

#include <dlgraph/builder.hpp>
#include <dlgraph/fixed/emit.hpp>

#include <map>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

// y = softmax(relu(x @ w + b)), x [2, 3].
struct small_net {
    Program p;
    Var<float> prob;
    std::map<std::string, Tensor> weights;
    small_net() {
        auto x = p.input<float>("x", {-1, 3});
        auto w = p.parameter<float>("fc.w", {3, 4}, init::constant(0));
        auto b = p.parameter<float>("fc.b", {4}, init::constant(0));
        prob = p.rename(softmax(relu(matmul(x, w) + b)), "prob");
        weights["fc.w"] = Tensor(DataType::FP32, {3, 4});
        weights["fc.b"] = Tensor(DataType::FP32, {4});
        for (int i = 0; i < 12; ++i) weights["fc.w"].data<float>()[i] = 0.25f * static_cast<float>(i - 6);
        for (int i = 0; i < 4; ++i) weights["fc.b"].data<float>()[i] = 1.5f;
    }
    fixed::EmittedModel emit(std::vector<fixed::EmitFeed> feeds, std::vector<std::string> fetches,
                             fixed::EmitOptions o = {}) const {
        return fixed::emit(p.desc(), feeds, fetches, [&](const std::string& n) { return weights.at(n); }, o);
    }
};

}  // namespace

TEST_CASE("emit: a header with the weights, the sizes and run()") {
    small_net n;
    fixed::EmitOptions o;
    o.name = "tiny";
    o.arena_budget = 4096;
    const auto m = n.emit({{"x", {2, 3}}}, {"prob"}, o);
    const std::string& h = m.header;
    CHECK(h.find("namespace tiny {") != std::string::npos);
    // Weights exactly, as hexadecimal literals: -1.5 and 1.5.
    CHECK(h.find("alignas(64) inline constexpr float fc_w[12]") != std::string::npos);
    CHECK(h.find("-0x1.8p+0f") != std::string::npos);
    CHECK(h.find("inline constexpr float fc_b[4]") != std::string::npos);
    CHECK(h.find("inline void run(const float (&x)[6], float (&prob)[8], std::span<std::byte, arena_bytes> arena) "
                 "noexcept") != std::string::npos);
    CHECK(h.find("static_assert(dlgraph::fixed::arena_within_budget<arena_bytes, 4096>::value);") != std::string::npos);
    CHECK(h.find("dlgraph::kernels::softmax(") != std::string::npos);
    CHECK(h.find("dlgraph::fixed::gemm<float>(false, false, 2, 4, 3,") != std::string::npos);
    CHECK(m.steps == 4);
    CHECK(m.weight_bytes == 64);
    CHECK(m.planned_arena_bytes <= m.session_arena_bytes);
    CHECK(m.planned_arena_bytes >= m.lower_bound);
    // No heap, strings or exceptions in run(): only kernel calls.
    const std::string run = h.substr(h.find("inline void run("));
    CHECK(run.find("new ") == std::string::npos);
    CHECK(run.find("throw") == std::string::npos);
}

TEST_CASE("emit: softmax_with_cross_entropy whose loss is not fetched needs no label") {
    Program p;
    auto x = p.input<float>("x", {-1, 4});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto [prob, loss] = softmax_with_cross_entropy(x, label);
    auto param = [](const std::string&) -> Tensor { throw std::logic_error("no weights here"); };
    const auto m = fixed::emit(p.desc(), std::vector<fixed::EmitFeed>{{"x", {1, 4}}}, std::vector<std::string>{prob.name()},
                               param, {});
    CHECK(m.header.find("dlgraph::kernels::softmax(x, ") != std::string::npos);
    // The loss itself needs the label, which a fixed model's feeds lack.
    CHECK_THROWS_CONTAINING(fixed::emit(p.desc(), std::vector<fixed::EmitFeed>{{"x", {1, 4}}},
                                        std::vector<std::string>{loss.name()}, param, {}),
                            feed_error, "[dlgraph.feed.missing]", "'label'");
}

TEST_CASE("emit: what a fixed model cannot be, each refused by name") {
    small_net n;
    SUBCASE("an op with no fixed-model kernel") {
        auto [v, i] = top_k(n.prob, 1);
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {i.name()}), graph_error, "[dlgraph.emit.op]", "top_k (op #",
                                "no fixed-model kernel for");
    }
    SUBCASE("no fetch, a fetch twice, an unknown feed") {
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {}), graph_error, "[dlgraph.emit.fetch]");
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob", "prob"}), graph_error, "[dlgraph.emit.fetch]",
                                "'prob' is fetched twice");
        CHECK_THROWS_CONTAINING(n.emit({{"y", {2, 3}}}, {"prob"}), feed_error, "[dlgraph.feed.unknown]", "'y'");
    }
    SUBCASE("a feed missing, or of a shape that does not fit") {
        CHECK_THROWS_CONTAINING(n.emit({}, {"prob"}), feed_error, "[dlgraph.feed.missing]", "'x'");
        CHECK_THROWS_AS(n.emit({{"x", {2, 5}}}, {"prob"}), shape_error);
        CHECK_THROWS_CONTAINING(n.emit({{"x", {0, 3}}}, {"prob"}), shape_error, "[dlgraph.emit.empty]", "'x'");
    }
    SUBCASE("a weight of the wrong shape or dtype") {
        n.weights["fc.b"] = Tensor(DataType::FP32, {5});
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}), type_error, "[dlgraph.emit.param]", "fc.b");
        n.weights["fc.b"] = Tensor(DataType::FP64, {4});
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}), type_error, "[dlgraph.emit.param]", "fc.b");
    }
    SUBCASE("a namespace that is not an identifier") {
        fixed::EmitOptions o;
        o.name = "my-model";
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), format_error, "[dlgraph.emit.name]", "my-model");
        o.name = "int";
        CHECK_THROWS_AS(n.emit({{"x", {2, 3}}}, {"prob"}, o), format_error);
    }
    SUBCASE("an integer division by a value known only at run time") {
        Program p;
        auto a = p.input<std::int32_t>("a", {4});
        auto b = p.input<std::int32_t>("b", {4});
        auto q = a / b;
        CHECK_THROWS_CONTAINING(fixed::emit(p.desc(), std::vector<fixed::EmitFeed>{{"a", {4}}, {"b", {4}}},
                                            std::vector<std::string>{q.name()}, {}, {}),
                                graph_error, "[dlgraph.emit.div]", "cannot report a division by zero");
    }
    SUBCASE("an op that writes a weight") {
        Program p;
        auto x = p.input<float>("x", {2, 3});
        auto w = p.parameter<float>("w", {2, 3}, init::constant(0.5));
        auto y = relu(w);
        ProgramDesc d = p.desc();
        OpDesc sc;  // w = scale(x), as an optimizer would update it
        sc.type = "scale";
        sc.set_input("X", {"x"});
        sc.set_output("Out", {"w"});
        auto& ops = d.blocks[0].ops;
        ops.insert(ops.begin() + y.op(), sc);
        CHECK_THROWS_CONTAINING(fixed::emit(d, std::vector<fixed::EmitFeed>{{"x", {2, 3}}},
                                            std::vector<std::string>{y.name()},
                                            [&](const std::string&) { return Tensor(DataType::FP32, {2, 3}); }, {}),
                                graph_error, "[dlgraph.emit.writes]", "writes 'w'");
    }
}

TEST_CASE("emit: names that are not identifiers become distinct ones") {
    Program p;
    auto x = p.input<float>("in.put", {2});
    auto y = p.rename(relu(x), "out@0");
    auto z = p.rename(relu(y), "out#0");
    const auto m = fixed::emit(p.desc(), std::vector<fixed::EmitFeed>{{"in.put", {2}}},
                               std::vector<std::string>{"out@0", "out#0"}, {}, {});
    CHECK(m.header.find("inline void run(const float (&in_put)[2], float (&out_0)[2], float (&out_0_2)[2],") !=
          std::string::npos);
    CHECK(m.header.find("fetch_names[] = {\"out@0\", \"out#0\"}") != std::string::npos);
}

TEST_CASE("emit --weights int8: INT8 products, their weights and scales, the report, and its errors") {
    small_net n;
    fixed::EmitOptions o;
    o.int8 = true;
    // Calibration rows: x's largest magnitude is 4, so x's scale is 4 / 127.
    Tensor cal(DataType::FP32, {4, 3});
    const float rows[12] = {1, -4, 0.5f, 2, 2, 2, -1, 0, 3, 0.25f, 1, -2};
    std::copy(rows, rows + 12, cal.data<float>());
    o.calibration["x"] = cal;
    const auto m = n.emit({{"x", {2, 3}}}, {"prob"}, o);
    const std::string& h = m.header;
    CHECK(m.int8.products == 1);
    CHECK(m.int8.float_products == 0);
    CHECK(m.int8.rows == 4);  // the calibration rows, two at a time
    CHECK(m.quant_bytes == 12);  // the quantized x, held in int16
    // fc.w is read by the product alone: INT8 only, channel-major. Channel 0
    // of fc.w is (-1.5, -0.5, 0.5): scale 1.5 / 127, so -127, -42 (42.33), 42.
    CHECK(h.find("inline constexpr float fc_w[") == std::string::npos);
    CHECK(h.find("alignas(64) inline constexpr std::int8_t fc_w_q[12] = {\n    -127, -42, 42,") != std::string::npos);
    CHECK(h.find("alignas(64) inline constexpr float fc_w_scale[4]") != std::string::npos);
    CHECK(h.find("inline constexpr float fc_b[4]") != std::string::npos);
    CHECK(h.find("dlgraph::kernels::quantize_s8(x, 6, ") != std::string::npos);
    CHECK(h.find("dlgraph::kernels::gemm_s8(2, 4, 3, ") != std::string::npos);
    CHECK(h.find("inline constexpr std::size_t quant_bytes = 12;") != std::string::npos);
    CHECK(m.weight_bytes == 12 + 16 + 16);

    // The reference is the INT8 arithmetic: x quantized with scale 4/127,
    // the int32 sums scaled back; here against a double-precision recomputation.
    const auto out = m.reference({{"x", cal}});
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].shape() == Shape{4, 4});
    const Tensor& w = n.weights.at("fc.w");
    for (int r = 0; r < 4; ++r) {
        double logits[4], mx = -1e300, sum = 0;
        for (int j = 0; j < 4; ++j) {
            double wmax = 0;
            for (int p = 0; p < 3; ++p) wmax = std::max(wmax, std::abs(double(w.data<float>()[p * 4 + j])));
            const double ws = wmax / 127, xs = 4.0 / 127;
            double acc = 0;
            for (int p = 0; p < 3; ++p)
                acc += std::round(rows[r * 3 + p] / xs) * std::round(w.data<float>()[p * 4 + j] / ws);
            logits[j] = std::max(0.0, acc * xs * ws + 1.5);
            mx = std::max(mx, logits[j]);
        }
        for (double& l : logits) sum += std::exp(l - mx);
        for (int j = 0; j < 4; ++j)
            CHECK(out[0].data<float>()[r * 4 + j] == doctest::Approx(std::exp(logits[j] - mx) / sum).epsilon(1e-5));
    }

    SUBCASE("labels: the accuracy of both") {
        Tensor labels(DataType::INT64, {4});
        for (int i = 0; i < 4; ++i) labels.data<std::int64_t>()[i] = i % 4;
        o.labels = labels;
        const auto ml = n.emit({{"x", {2, 3}}}, {"prob"}, o);
        CHECK(ml.int8.correct_fp32 >= 0);
        CHECK(ml.int8.correct_int8 >= 0);
        CHECK(ml.int8.correct_fp32 <= 4);
        Tensor three(DataType::INT64, {3});
        o.labels = three;
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), shape_error,
                                "[dlgraph.emit.calibrate] there are 3 labels for 4 rows of 'prob'");
        o.labels = Tensor(DataType::INT32, {5});
        std::fill_n(o.labels.data<std::int32_t>(), 5, 0);
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), shape_error,
                                "[dlgraph.emit.calibrate] there are 5 labels for 4 rows of 'prob'");
        o.labels = Tensor(DataType::FP32, {4});
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), type_error, "not INT64 or INT32 classes");
    }
    SUBCASE("calibration data missing, misnamed or of the wrong shape") {
        o.calibration.clear();
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), feed_error,
                                "[dlgraph.emit.calibrate] INT8 weights need calibration data");
        o.calibration["y"] = cal;
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), feed_error,
                                "the calibration data names 'y', which is not a feed");
        o.calibration.clear();
        o.calibration["x"] = Tensor(DataType::FP32, {3, 3});
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), shape_error,
                                "feed 'x' is [3,3], not rows of the emitted [2,3]");
        Tensor zeros(DataType::FP32, {4, 3});
        std::fill_n(zeros.data<float>(), 12, 0.0f);
        o.calibration["x"] = zeros;
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), value_error, "is 0 everywhere on the calibration data");
        Tensor nan = cal;
        nan.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
        o.calibration["x"] = nan;
        CHECK_THROWS_CONTAINING(n.emit({{"x", {2, 3}}}, {"prob"}, o), value_error, "holds nan on the calibration data");
    }
}

TEST_CASE("emit --weights int8: products of other forms stay in floating point") {
    Program p;
    auto x = p.input<float>("x", {2, 3});
    auto w = p.parameter<float>("w", {4, 3}, init::constant(0));
    auto v = p.parameter<float>("v", {4, 4}, init::constant(0));
    auto h = matmul(x, w, false, true);  // a transposed weight: floating point
    auto y = p.rename(matmul(h, v) + matmul(x, w, false, true) * h, "y");  // h v in INT8
    (void)y;
    std::map<std::string, Tensor> weights{{"w", Tensor(DataType::FP32, {4, 3})}, {"v", Tensor(DataType::FP32, {4, 4})}};
    for (int i = 0; i < 12; ++i) weights["w"].data<float>()[i] = 0.1f * static_cast<float>(i + 1);
    for (int i = 0; i < 16; ++i) weights["v"].data<float>()[i] = 0.05f * static_cast<float>(i - 8);
    fixed::EmitOptions o;
    o.int8 = true;
    Tensor cal(DataType::FP32, {2, 3});
    for (int i = 0; i < 6; ++i) cal.data<float>()[i] = static_cast<float>(i) - 2.5f;
    o.calibration["x"] = cal;
    const auto m = fixed::emit(p.desc(), std::vector<fixed::EmitFeed>{{"x", {2, 3}}}, std::vector<std::string>{"y"},
                               [&](const std::string& n) { return weights.at(n); }, o);
    CHECK(m.int8.products == 1);
    CHECK(m.int8.float_products == 2);
    CHECK(m.header.find("inline constexpr float w[12]") != std::string::npos);  // still read in FP32
    CHECK(m.header.find("inline constexpr float v[") == std::string::npos);
    CHECK(m.header.find("std::int8_t v_q[16]") != std::string::npos);
}
