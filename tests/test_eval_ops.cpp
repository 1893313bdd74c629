// top_k and accuracy through the public builder, against plain references
// written here (a stable sort per row; a loop over the rows), and their
// errors by message.
#include "test_helpers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace dlgraph;

namespace {

// Values with many ties: integers in [lo, hi] (as T).
template <class T> std::vector<T> random_values(std::size_t n, unsigned seed, int lo = -4, int hi = 4) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(rng));
    return v;
}

// The reference: per row of `n`, the indices stably sorted by value, largest first.
template <class T>
void reference_top_k(const std::vector<T>& x, std::int64_t n, std::int64_t k, std::vector<T>& vals,
                     std::vector<std::int64_t>& idx) {
    vals.clear();
    idx.clear();
    for (std::size_t r = 0; r * static_cast<std::size_t>(n) < x.size(); ++r) {
        std::vector<std::int64_t> order(static_cast<std::size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        const T* row = x.data() + r * static_cast<std::size_t>(n);
        std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
        for (std::int64_t j = 0; j < k; ++j) {
            idx.push_back(order[static_cast<std::size_t>(j)]);
            vals.push_back(row[order[static_cast<std::size_t>(j)]]);
        }
    }
}

template <class T> void check_top_k(const Shape& shape, int k, unsigned seed) {
    INFO("dtype " << to_string(dtype_of<T>) << " shape " << to_string(shape) << " k " << k);
    const std::int64_t n = shape[shape.rank() - 1];
    auto xv = random_values<T>(static_cast<std::size_t>(shape.numel()), seed);
    Program p;
    auto x = p.input<T>("x", shape);
    auto [vals, idx] = top_k(x, k);
    Shape want = shape;
    want[want.rank() - 1] = k;
    CHECK(vals.shape() == want);
    CHECK(idx.shape() == want);
    Session<cpu> s(p);
    Tensor xt = tensor_of(shape, xv);
    auto got = s.eval(std::vector<TargetRef>{vals, idx}, std::vector<Feed>{Feed("x", xt)});
    std::vector<T> rv;
    std::vector<std::int64_t> ri;
    reference_top_k(xv, n, k, rv, ri);
    REQUIRE(got[0].shape() == want);
    REQUIRE(got[1].dtype() == DataType::INT64);
    auto gv = got[0].values<T>();
    auto gi = got[1].values<std::int64_t>();
    CHECK(std::vector<T>(gv.begin(), gv.end()) == rv);
    CHECK(std::vector<std::int64_t>(gi.begin(), gi.end()) == ri);
}

// The reference accuracy: rows whose label is among their k indices.
std::int64_t reference_correct(const std::vector<std::int64_t>& idx, std::int64_t k, const std::vector<std::int64_t>& label) {
    std::int64_t c = 0;
    for (std::size_t r = 0; r < label.size(); ++r)
        for (std::int64_t j = 0; j < k; ++j)
            if (idx[r * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)] == label[r]) {
                ++c;
                break;
            }
    return c;
}

// The name of output `slot` of the op that produced `v`.
template <class T> std::string sibling(const Program& p, const Var<T>& v, const std::string& slot) {
    return p.desc().blocks[0].ops.at(static_cast<std::size_t>(v.op())).output(slot)->arguments.at(0);
}

}  // namespace

TEST_CASE("top_k matches a stable sort for every dtype, rank and k") {
    unsigned seed = 1;
    for (int k : {1, 3, 9}) {
        check_top_k<float>({5, 9}, k, seed++);
        check_top_k<double>({5, 9}, k, seed++);
        check_top_k<std::int32_t>({5, 9}, k, seed++);
        check_top_k<std::int64_t>({5, 9}, k, seed++);
    }
    check_top_k<double>({6}, 2, seed++);           // rank 1
    check_top_k<float>({2, 3, 7}, 4, seed++);      // rank 3
    check_top_k<double>({3, 100}, 10, seed++);     // long rows, many ties
    check_top_k<std::int64_t>({4, 33}, 33, seed++);  // k = the whole row: a full sort
    check_top_k<float>({0, 5}, 2, seed++);         // no rows
}

TEST_CASE("top_k breaks ties by lower index and ranks NaN first") {
    Program p;
    auto x = p.input<double>("x", {2, 5});
    auto [vals, idx] = top_k(x, 3);
    Session<cpu> s(p);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Tensor xv = tensor_of<double>({2, 5}, {1, 2, 2, 1, 2, 0.5, nan, 3, nan, -1});
    auto got = s.eval(std::vector<TargetRef>{vals, idx}, std::vector<Feed>{Feed("x", xv)});
    auto gi = got[1].values<std::int64_t>();
    CHECK(std::vector<std::int64_t>(gi.begin(), gi.end()) == std::vector<std::int64_t>{1, 2, 4, 1, 3, 2});
    auto gv = got[0].values<double>();
    CHECK(gv[0] == 2);
    CHECK(gv[2] == 2);
    CHECK(std::isnan(gv[3]));
    CHECK(std::isnan(gv[4]));
    CHECK(gv[5] == 3);
}

TEST_CASE("accuracy counts rows whose label is among the top k") {
    for (int k : {1, 2, 5}) {
        INFO("k " << k);
        const std::int64_t rows = 7, classes = 5;
        std::vector<double> scores;
        {
            std::mt19937 rng(40u + static_cast<unsigned>(k));
            std::uniform_real_distribution<double> d(0, 1);
            for (std::int64_t i = 0; i < rows * classes; ++i) scores.push_back(d(rng));
        }
        std::vector<std::int64_t> labels = {0, 4, 2, 2, 1, 3, 0};
        Program p;
        auto x = p.input<double>("x", {-1, classes});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        auto [vals, idx] = top_k(x, k);
        auto acc = accuracy(vals, idx, label);
        CHECK(acc.shape() == Shape{1});
        Session<cpu> s(p);
        std::vector<Feed> feeds{Feed("x", tensor_of<double>({rows, classes}, scores)),
                                Feed("label", tensor_of<std::int64_t>({rows, 1}, labels))};
        auto got = s.eval(std::vector<TargetRef>{idx, acc, TargetRef(sibling(p, acc, "Correct")),
                                                 TargetRef(sibling(p, acc, "Total"))},
                          feeds);
        std::vector<double> rv;
        std::vector<std::int64_t> ri;
        reference_top_k(scores, classes, k, rv, ri);
        const std::int64_t correct = reference_correct(ri, k, labels);
        CHECK(got[1].dtype() == DataType::FP32);
        CHECK(got[1].item<float>() == doctest::Approx(static_cast<double>(correct) / rows));
        CHECK(got[2].dtype() == DataType::INT32);
        CHECK(got[2].item<std::int32_t>() == correct);
        CHECK(got[3].item<std::int32_t>() == rows);
        if (k == classes) CHECK(correct == rows);  // every label is among all classes
    }
}

TEST_CASE("accuracy: all right, all wrong, FP32 scores and an empty batch") {
    Program p;
    auto x = p.input<float>("x", {-1, 3});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto [vals, idx] = top_k(x, 1);
    auto acc = accuracy(vals, idx, label);
    Session<cpu> s(p);
    Tensor scores = tensor_of<float>({3, 3}, {0.1f, 0.7f, 0.2f, 0.9f, 0.05f, 0.05f, 0.3f, 0.3f, 0.4f});
    auto eval = [&](const Tensor& xs, const Tensor& ls) {
        return s.eval(std::vector<TargetRef>{acc}, std::vector<Feed>{Feed("x", xs), Feed("label", ls)})[0].item<float>();
    };
    CHECK(eval(scores, tensor_of<std::int64_t>({3, 1}, {1, 0, 2})) == 1.0f);
    CHECK(eval(scores, tensor_of<std::int64_t>({3, 1}, {0, 2, 1})) == 0.0f);
    CHECK(eval(scores, tensor_of<std::int64_t>({3, 1}, {1, 1, 2})) == doctest::Approx(2.0 / 3.0));
    CHECK(eval(tensor_of<float>({0, 3}, {}), tensor_of<std::int64_t>({0, 1}, {})) == 0.0f);
}

TEST_CASE("top_k and accuracy errors name the shapes") {
    Program p;
    auto x = p.input<double>("x", {4, 5});
    CHECK_THROWS_CONTAINING(top_k(x, 6), shape_error, "[dlgraph.shape.top_k]", "k is 6", "[4,5]",
                            "must not exceed the last dim (5)");
    CHECK_THROWS_CONTAINING(top_k(x, 0), shape_error, "[dlgraph.shape.top_k]", "k is 0", "at least 1");
    const std::size_t ops = p.op_count();

    auto [vals, idx] = top_k(x, 2);
    auto bad_rows = p.input<std::int64_t>("bad_rows", {3, 1});
    CHECK_THROWS_CONTAINING(accuracy(vals, idx, bad_rows), shape_error, "[dlgraph.shape.accuracy]", "[4,2]", "[3,1]",
                            "Label must be [N, 1]");
    auto bad_cols = p.input<std::int64_t>("bad_cols", {4, 2});
    CHECK_THROWS_CONTAINING(accuracy(vals, idx, bad_cols), shape_error, "[dlgraph.shape.accuracy]", "[4,2]",
                            "Label must be [N, 1]");
    auto flat = p.input<std::int64_t>("flat", {4});
    CHECK_THROWS_CONTAINING(accuracy(vals, idx, flat), shape_error, "Label is [4]", "Label must be [N, 1]");
    auto [v3, i3] = top_k(x, 3);
    auto label = p.input<std::int64_t>("label", {4, 1});
    CHECK_THROWS_CONTAINING(accuracy(vals, i3, label), shape_error, "Out is [4,2] but Indices is [4,3]");
    (void)v3;
    // A label of the wrong dtype, through the generic append.
    auto l32 = p.input<std::int32_t>("l32", {4, 1});
    CHECK_THROWS_CONTAINING(p.append("accuracy", {{"Out", {vals.name()}}, {"Indices", {idx.name()}}, {"Label", {l32.name()}}},
                                     {{"Accuracy", 1}, {"Correct", 1}, {"Total", 1}}, {}),
                            type_error, "Label must be INT64, not INT32");
    CHECK(p.op_count() == ops + 2);  // only the two good top_k ops were added

    // An unknown last dim is checked when the run knows it.
    Program q;
    auto u = q.input<double>("u", {-1, -1});
    auto [uv, ui] = top_k(u, 3);
    (void)ui;
    Session<cpu> s(q);
    CHECK_THROWS_CONTAINING(s.eval(uv, {{"u", tensor_of<double>({2, 2}, {1, 2, 3, 4})}}), shape_error,
                            "[dlgraph.shape.top_k]", "k is 3", "must not exceed the last dim (2)");
}

TEST_CASE("top_k and accuracy are not differentiated") {
    Program p;
    auto w = p.parameter<double>("w", {2, 3}, init::uniform(-1, 1, 1));
    auto label = p.input<std::int64_t>("label", {2, 1});
    auto [vals, idx] = top_k(w, 2);
    auto acc = accuracy(vals, idx, label);
    (void)acc;
    auto loss = reduce_sum(square(w));
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    CHECK(find_op("top_k")->differentiable() == false);
    CHECK(find_op("accuracy")->differentiable() == false);
}
