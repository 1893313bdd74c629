// Weights kept packed for the GEMM (SessionOptions::prepack, OpDef::prepack):
// a packed run gives the same bits as packing on every call, for mul and
// matmul with odd sizes, a transposed Y and batched X, on one and two
// threads; a weight is repacked whenever its value changes (scope writes,
// training steps, Variable::touch); and only weights are packed (not feeds,
// not values the plan itself writes, not products too small to pack).
#include <doctest/doctest.h>

#include <cstring>
#include <xtensor/xrandom.hpp>

#include <dlgraph/optimizer.hpp>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

SessionOptions packing(bool on, int threads = 1) {
    SessionOptions o;
    o.threads = threads;
    o.prepack = on;
    return o;
}

template <class T> xt::xarray<T> randn(const std::vector<std::size_t>& shape, unsigned seed) {
    xt::random::seed(seed);
    return xt::random::randn<T>(shape);
}


// One weight used four ways; odd K and N that divide neither the depth block
// nor the register tile.
template <class T> struct products {
    static constexpr std::int64_t K = 300, N = 77;
    Program p;
    Var<T> x = p.input<T>("x", {-1, K});
    Var<T> xb = p.input<T>("xb", {2, -1, K});
    Var<T> w = p.parameter<T>("w", {K, N}, init::uniform(-1, 1, 5));
    Var<T> wt = p.parameter<T>("wt", {N, K}, init::uniform(-1, 1, 6));
    std::vector<TargetRef> targets{matmul(x, w), matmul(x, wt, false, true, 0.5), mul(x, w), matmul(xb, w)};
    std::vector<std::string> fed{"x", "xb"};
};

}  // namespace

TEST_CASE_TEMPLATE("prepack: packed weights give the same bits as packing on every call", T, float, double) {
    products<T> m;
    for (std::size_t rows : {8u, 13u, 64u, 200u}) {
        const auto xv = randn<T>({rows, std::size_t(products<T>::K)}, 1);
        const auto xbv = randn<T>({2, rows, std::size_t(products<T>::K)}, 2);
        const std::vector<Feed> feeds{{"x", xv}, {"xb", xbv}};
        Session<cpu> plain(m.p, packing(false));
        const std::vector<Tensor> want = plain.eval(m.targets, feeds);
        CHECK(plain.packed_steps(m.targets, m.fed).empty());
        for (int threads : {1, 2}) {
            INFO("rows " << rows << ", threads " << threads);
            Session<cpu> s(m.p, packing(true, threads));
            for (int run = 0; run < 2; ++run) {  // packs on the first run, reuses on the second
                const std::vector<Tensor> got = s.eval(m.targets, feeds);
                for (std::size_t t = 0; t < want.size(); ++t) CHECK(same_bits(got[t], want[t]));
            }
            CHECK(s.packed_steps(m.targets, m.fed).size() == 4);
        }
        // And the values themselves, against a double reference.
        const xt::xarray<T> w = plain.eval(m.w);
        const xt::xarray<T> y = to_xarray<T>(want[0]);
        for (std::size_t i = 0; i < rows; i += 7)
            for (std::size_t j = 0; j < std::size_t(products<T>::N); j += 5) {
                double r = 0;
                for (std::size_t k = 0; k < std::size_t(products<T>::K); ++k) r += double(xv(i, k)) * double(w(k, j));
                CHECK(std::abs(double(y(i, j)) - r) <= 1e-4 * (1 + std::abs(r)));
            }
    }
}

TEST_CASE("prepack: a weight is repacked when its value changes") {
    Program p;
    auto x = p.input<float>("x", {-1, 40});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto w = p.parameter<float>("w", {40, 10}, init::uniform(-1, 1, 3));
    auto logits = matmul(x, w);
    auto loss = mean(softmax_with_cross_entropy(logits, label).second);
    const TrainStep step = SGD(0.5).minimize(loss);
    const auto xv = randn<float>({16, 40}, 4);
    xt::xarray<std::int64_t> lv = xt::zeros<std::int64_t>({16, 1});
    for (std::size_t i = 0; i < 16; ++i) lv(i, 0) = static_cast<std::int64_t>(i % 10);
    const std::vector<TargetRef> forward{logits};
    const std::vector<Feed> feeds{{"x", xv}, {"label", lv}};

    // The same sequence of changes in a packing and a non-packing session:
    // every forward result must agree bit for bit.
    Session<cpu> packed(p, packing(true)), plain(p, packing(false));
    auto both = [&](auto&& f) {
        f(packed);
        f(plain);
    };
    auto check_forward = [&] {
        const std::vector<Tensor> a = packed.eval(forward, feeds), b = plain.eval(forward, feeds);
        CHECK(same_bits(a[0], b[0]));
    };
    check_forward();
    CHECK(packed.packed_steps(forward, std::vector<std::string>{"x", "label"}) == std::vector<int>{0});

    SUBCASE("training steps change it") {
        for (int i = 0; i < 3; ++i) {
            both([&](Session<cpu>& s) { s.eval(step.targets(), feeds); });
            check_forward();
        }
        // The training plan writes w, so it never packs it.
        CHECK(packed.packed_steps(step.targets(), std::vector<std::string>{"x", "label"}).empty());
    }
    SUBCASE("a write through the scope changes it") {
        both([&](Session<cpu>& s) { s.scope().var("w").get_mutable<Tensor>().data<float>()[7] = 3.0f; });
        check_forward();
    }
    SUBCASE("a kept reference needs touch()") {
        both([&](Session<cpu>& s) {
            Variable& v = s.scope().var("w");
            Tensor& t = v.get_mutable<Tensor>();
            s.eval(forward, feeds);
            t.data<float>()[3] = -2.0f;
            v.touch();
        });
        check_forward();
    }
    SUBCASE("a checkpoint load changes it") {
        test_temp_dir tmp;
        const std::string dir = tmp.file("ckpt");
        Session<cpu> other(p, packing(true));
        other.eval(step.targets(), feeds);  // different weights from the two above
        save_checkpoint(other, dir);
        both([&](Session<cpu>& s) { load_checkpoint(s, dir); });
        check_forward();
        CHECK(same_bits(packed.eval(forward, feeds)[0], other.eval(forward, feeds)[0]));
    }
}

TEST_CASE("prepack: only weights of products large enough are packed") {
    Program p;
    auto x = p.input<float>("x", {-1, 64});
    auto w = p.parameter<float>("w", {64, 32}, init::uniform(-1, 1, 3));
    auto y = matmul(x, w);
    const std::vector<TargetRef> targets{y};
    Session<cpu> s(p);
    const auto big = randn<float>({16, 64}, 1), small = randn<float>({3, 64}, 2), wv = randn<float>({64, 32}, 3);
    s.eval(y, {{x, big}});
    CHECK(s.packed_steps(targets, std::vector<std::string>{"x"}).size() == 1);
    // Fewer than 8 rows: the unpacked small-product path, nothing packed.
    s.eval(y, {{x, small}});
    CHECK(s.packed_steps(targets, std::vector<std::string>{"x"}).empty());
    // A fed weight is not a persistable of the plan: never packed.
    const xt::xarray<float> got = s.eval(y, {{x, big}, {w, wv}});
    CHECK(s.packed_steps(targets, std::vector<std::string>{"x", w.name()}).empty());
    for (std::size_t i = 0; i < 16; ++i)
        for (std::size_t j = 0; j < 32; ++j) {
            double r = 0;
            for (std::size_t k = 0; k < 64; ++k) r += double(big(i, k)) * double(wv(k, j));
            CHECK(std::abs(double(got(i, j)) - r) <= 1e-4 * (1 + std::abs(r)));
        }
}
