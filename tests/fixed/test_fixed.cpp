// Fixed models (dlgraph emit) against Session<cpu>: every case of cases.hpp,
// emitted at build time by gen_models into fixed_models.hpp, gives the same
// bits as the session on 100 random inputs, and its arena is no larger than
// the session's. One case has names that clash with a model's own and the
// default namespace `model`.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "cases.hpp"
#include "fixed_models.hpp"
#include "mlp_int8.hpp"

using namespace dlgraph;

namespace {

template <class T> void fill_random(fixed_cases::rng& r, Tensor& t) {
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(r.uniform(-3, 3));
}

}  // namespace

TEST_CASE("fixed models give Session<cpu>'s bits (generated programs, the demo's MLP and CNN)") {
    static_assert(std::size(fixed_entries) == fixed_cases::count);
    int compared = 0;
    for (int i = 0; i < fixed_cases::count; ++i) {
        CAPTURE(i);
        const fixed_cases::fixed_case c = fixed_cases::make_case(i, fixed_models_small);
        const fixed_entry& e = fixed_entries[i];
        CHECK(e.planned_bytes <= e.session_arena_bytes);
        auto session = make_session(c.program);
        for (auto& [name, t] : c.weights) session.scope().var(name).get_mutable<Tensor>() = t;
        std::vector<TargetRef> targets(c.fetches.begin(), c.fetches.end());
        struct alignas(64) line {
            std::byte b[64];
        };
        std::vector<line> arena(e.arena_bytes / 64 + 1);  // 64-byte aligned, as a model asks
        fixed_cases::rng r(1000 + static_cast<std::uint64_t>(i));
        for (int run = 0; run < 100; ++run) {
            std::vector<Feed> feeds;
            std::vector<Tensor> inputs;
            const DataType dt = c.program.desc().blocks[0].find_var(c.feeds[0].name)->data_type;
            for (auto& f : c.feeds) {
                inputs.emplace_back(dt, f.shape);
                if (dt == DataType::FP32) fill_random<float>(r, inputs.back());
                else fill_random<double>(r, inputs.back());
            }
            for (std::size_t k = 0; k < c.feeds.size(); ++k) feeds.emplace_back(c.feeds[k].name, inputs[k]);
            for (auto& [name, t] : c.extra_feeds) feeds.emplace_back(name, t);
            const std::vector<Tensor> want = session.eval(targets, feeds);
            std::vector<Tensor> got;
            std::vector<const void*> in;
            std::vector<void*> out;
            for (auto& t : inputs) in.push_back(t.raw());
            for (auto& w : want) {
                got.emplace_back(w.dtype(), w.shape());
                out.push_back(got.back().raw());
            }
            e.run(in.data(), out.data(), arena.data()->b);
            for (std::size_t k = 0; k < want.size(); ++k) {
                CAPTURE(c.fetches[k]);
                REQUIRE(want[k].bytes() == got[k].bytes());
                CHECK(std::memcmp(want[k].raw(), got[k].raw(), want[k].bytes()) == 0);
            }
            ++compared;
        }
    }
    CHECK(compared == fixed_cases::count * 100);
}

TEST_CASE("an INT8 fixed model gives its host reference's bits (the demo's MLP)") {
    const fixed::EmittedModel m = fixed_cases::emit_int8_case(fixed_models_small);
    CHECK(m.int8.products == 2);
    CHECK(m.int8.float_products == 0);
    CHECK(m.int8.rows == 64);
    // Calibrated on these rows: the classes mostly agree with FP32.
    CHECK(m.int8.same_class >= 56);
    CHECK(m.int8.max_abs_diff < 0.1);
    CHECK(m.int8.correct_fp32 == -1);
    MESSAGE("INT8 MLP on its 64 calibration rows: same class " << m.int8.same_class << ", largest |difference| "
                                                               << m.int8.max_abs_diff);
    static_assert(mlp_int8::quant_bytes == 784 * sizeof(kernels::s8_wide));
    CHECK(mlp_int8::weight_bytes == m.weight_bytes);
    fixed_cases::rng r(31);
    struct alignas(64) line {
        std::byte b[64];
    };
    std::vector<line> arena(mlp_int8::arena_bytes / 64 + 1);
    for (int run = 0; run < 100; ++run) {
        // Inputs past the calibrated range too: quantization clamps them.
        const Tensor x = fixed_cases::random_tensor<float>(r, Shape{1, 784}, run % 2 ? 0 : -1, run % 2 ? 1 : 2);
        const Tensor want = m.reference({{"x", x}})[0];
        float prob[10];
        mlp_int8::run(*reinterpret_cast<const float(*)[784]>(x.data<float>()), prob,
                      std::span<std::byte, mlp_int8::arena_bytes>(arena.data()->b, mlp_int8::arena_bytes));
        REQUIRE(want.numel() == 10);
        CHECK(std::memcmp(want.data<float>(), prob, sizeof prob) == 0);
    }
}
