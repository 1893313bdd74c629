// lookup_table and lookup_table_v2 (Paddle's embeddings): Out against a
// direct reference with and without padding_idx, INT64 and INT32 ids, the
// gradient of W by central finite differences in FP64 (repeated ids add up,
// padding rows get none), the builders' parameters, and the errors by
// message: bad shapes and dtypes at build time, an id out of range at run
// time without changing the session.
#include <doctest/doctest.h>

#include <set>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

// Out of a lookup: the rows of w [rows, width] at ids, 0 at the padding id.
std::vector<double> reference(const std::vector<double>& w, std::int64_t width, const std::vector<std::int64_t>& ids,
                              std::int64_t pad) {
    std::vector<double> out;
    for (std::int64_t id : ids)
        for (std::int64_t k = 0; k < width; ++k)
            out.push_back(pad != -1 && id == pad ? 0.0 : w[static_cast<std::size_t>(id * width + k)]);
    return out;
}

template <class T, class I> void check_lookup(bool v2, std::int64_t pad) {
    INFO((v2 ? "lookup_table_v2" : "lookup_table") << " padding_idx " << pad);
    const std::int64_t rows = 6, width = 5;
    const std::vector<std::int64_t> idv = {0, 5, 2, 2, 3, 1, 5, 4};
    const Shape ids_shape = v2 ? Shape{2, 4} : Shape{2, 4, 1};
    Program p;
    auto w = p.input<T>("w", {rows, width});
    auto ids = p.input<I>("ids", ids_shape);
    auto out = v2 ? embedding(ids, w, pad == -1 ? std::nullopt : std::optional<std::int64_t>(pad))
                  : lookup_table(w, ids, pad);
    CHECK(out.shape() == Shape{2, 4, width});
    CHECK(p.desc().blocks[0].ops.back().type == (v2 ? "lookup_table_v2" : "lookup_table"));
    const xt::xarray<T> wv = xt::cast<T>(random({6, 5}, 7, -2, 2));
    Session<cpu> s(p);
    auto got = s.eval(std::vector<TargetRef>{out},
                      {{w.name(), wv}, {ids.name(), tensor_of<I>(ids_shape, std::vector<I>(idv.begin(), idv.end()))}});
    const auto want = reference(std::vector<double>(wv.begin(), wv.end()), width, idv, pad);
    const auto g = to_xarray<T>(got[0]);
    REQUIRE(g.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(static_cast<double>(g.data()[i]) == want[i]);  // copies: exact
}

}  // namespace

TEST_CASE_TEMPLATE("lookup_table: Out is the rows of W at Ids, 0 at padding_idx", T, float, double) {
    for (std::int64_t pad : {-1, 2, 5}) {
        check_lookup<T, std::int64_t>(false, pad);
        check_lookup<T, std::int64_t>(true, pad);
        check_lookup<T, std::int32_t>(true, pad);
    }
}

TEST_CASE("lookup_table: gradient of W matches finite differences, padding rows get none") {
    // Repeated ids (2 and 5 twice) add their rows of Out@GRAD.
    const auto idv = tensor_of<std::int64_t>({8}, {0, 5, 2, 2, 3, 1, 5, 4});
    grad_check::check({{"w", random({6, 3}, 21)}},
                      [](P& p, const V& v) { return embedding(p.input<std::int64_t>("ids", {8}), v[0]); },
                      {{"ids", idv}});
    grad_check::check({{"w", random({6, 3}, 22)}},
                      [](P& p, const V& v) { return embedding(p.input<std::int64_t>("ids", {8}), v[0], 2); },
                      {{"ids", idv}});
    const auto id1 = tensor_of<std::int64_t>({4, 1}, {1, 3, 1, 0});
    grad_check::check({{"w", random({4, 2}, 23)}},
                      [](P& p, const V& v) {
                          auto e = lookup_table(v[0], p.input<std::int64_t>("ids", {4, 1}));
                          return tanh(e) * e;  // the output read twice
                      },
                      {{"ids", id1}});

    // The padding row's gradient is exactly 0 although its id occurs.
    Program p;
    auto w = p.parameter<double>("w", {4, 2}, init::constant(1));
    auto ids = p.input<std::int64_t>("ids", {5});
    auto grads = append_backward(reduce_sum(embedding(ids, w, -1)));  // -1: the last row, 3
    REQUIRE(grads.size() == 1);
    Session<cpu> s(p);
    auto g = s.eval(std::vector<TargetRef>{grads[0].second}, {{"ids", tensor_of<std::int64_t>({5}, {3, 0, 3, 0, 1})}});
    const auto gv = g[0].values<double>();
    CHECK(std::vector<double>(gv.begin(), gv.end()) == std::vector<double>{2, 2, 1, 1, 0, 0, 0, 0});
}

TEST_CASE("embedding: a named table, shared by name, trained") {
    Program p;
    auto ids = p.input<std::int64_t>("ids", {-1, 7});
    auto e = embedding<double>(ids, "tok", Embedding{.rows = 11, .width = 4, .padding_idx = 0});
    CHECK(embedding(ids, "tokf", Embedding{.rows = 3, .width = 2}).shape() == Shape{-1, 7, 2});  // float by default
    CHECK(e.shape() == Shape{-1, 7, 4});
    auto e2 = embedding<double>(ids, "tok", Embedding{.rows = 11, .width = 4});
    CHECK(p.desc().blocks[0].find_var("tok.w")->dims == std::vector<std::int64_t>{11, 4});
    CHECK(p.desc().blocks[0].ops.back().attr("padding_idx")->i == -1);
    auto grads = append_backward(reduce_sum(e * e2));
    std::set<std::string> got;
    for (auto& [param, g] : grads) got.insert(param.name());
    CHECK(got == std::set<std::string>{"tok.w"});
    CHECK_THROWS_CONTAINING(embedding<double>(ids, "tok", Embedding{.rows = 11, .width = 5}), graph_error, "tok.w");
    CHECK_THROWS_CONTAINING(embedding<double>(ids, "bad", Embedding{.rows = 0, .width = 5}), shape_error,
                            "rows and width must be > 0");
}

TEST_CASE("lookup_table: errors name the slot, the shape and the id") {
    Program p;
    auto w = p.input<float>("w", {10, 4});
    auto ids = p.input<std::int64_t>("ids", {3, 2});
    check_throws<shape_error>([&] { (void)lookup_table(w, ids); },
                              {"[dlgraph.shape.lookup_table]", "Ids is [3,2]", "one id per row ([..., 1]"});
    check_throws<shape_error>([&] { (void)lookup_table(p.input<float>("w3", {2, 3, 4}), ids); },
                              {"W is [2,3,4]: it must be [rows, width]"});
    check_throws<type_error>([&] { (void)lookup_table(w, p.input<std::int32_t>("i32", {3, 1})); },
                             {"Ids must be INT64, not INT32"});
    check_throws<type_error>([&] { (void)embedding(p.input<float>("fi", {3}), w); }, {"Ids must be", "not FP32"});
    check_throws<shape_error>([&] { (void)lookup_table(w, p.input<std::int64_t>("i1", {3, 1}), 10); },
                              {"padding_idx 10 is out of range for W of shape [10,4]", "-1 (none) or in [0, 10)"});
    check_throws<shape_error>([&] { (void)embedding(ids, w, -11); },
                              {"embedding: padding_idx -11 is out of range for W of shape [10,4]"});
    CHECK(embedding(ids, w, -10).shape() == Shape{3, 2, 4});  // -10: row 0

    // An id out of range fails the run, names the id and where it is, and
    // leaves the session as it was.
    auto ok = embedding(ids, w);
    Session<cpu> s(p);
    const xt::xarray<float> wv = xt::ones<float>({10, 4});
    check_throws<value_error>(
        [&] {
            s.eval(std::vector<TargetRef>{ok}, {{"w", wv}, {"ids", tensor_of<std::int64_t>({3, 2}, {0, 1, 2, 10, 4, -1})}});
        },
        {"[dlgraph.value.id]", "lookup_table_v2", "id 10 (at 3) is out of range [0, 10)"});
    auto good = s.eval(std::vector<TargetRef>{ok}, {{"w", wv}, {"ids", tensor_of<std::int64_t>({3, 2}, {0, 1, 2, 9, 4, 5})}});
    CHECK(good[0].shape() == Shape{3, 2, 4});
}

TEST_CASE("lookup_table: every bad id is caught: negative ones, INT32 ones, v1's, and in the grad op") {
    Program p;
    auto w = p.input<double>("w", {5, 2});
    auto i64 = p.input<std::int64_t>("i64", {4});
    auto i32 = p.input<std::int32_t>("i32", {4});
    auto i1 = p.input<std::int64_t>("i1", {4, 1});
    auto e64 = embedding(i64, w);
    auto e32 = embedding(i32, w);
    auto e1 = lookup_table(w, i1, 3);
    Session<cpu> s(p);
    const Feed wf{"w", xt::xarray<double>(xt::ones<double>({5, 2}))};
    check_throws<value_error>([&] { s.eval(std::vector<TargetRef>{e64}, {wf, {"i64", tensor_of<std::int64_t>({4}, {0, 4, -1, 1})}}); },
                              {"lookup_table_v2", "id -1 (at 2) is out of range [0, 5)"});
    check_throws<value_error>([&] { s.eval(std::vector<TargetRef>{e32}, {wf, {"i32", tensor_of<std::int32_t>({4}, {0, -7, 5, 1})}}); },
                              {"id -7 (at 1) is out of range [0, 5)"});
    check_throws<value_error>([&] { s.eval(std::vector<TargetRef>{e1}, {wf, {"i1", tensor_of<std::int64_t>({4, 1}, {3, 3, 5, 0})}}); },
                              {"lookup_table", "id 5 (at 2) is out of range [0, 5)"});
    // The padding id is never checked against the rows (it is in range anyway).
    auto padded = s.eval(std::vector<TargetRef>{e1}, {wf, {"i1", tensor_of<std::int64_t>({4, 1}, {3, 3, 4, 0})}});
    CHECK(padded[0].values<double>()[0] == 0.0);

    // The grad op by itself, as a loaded program would run it.
    Program g;
    auto gw = g.input<double>("w", {5, 2});
    auto gi = g.input<std::int64_t>("ids", {3});
    auto gd = g.input<double>("d", {3, 2});
    auto dw = apply_op<double>("lookup_table_v2_grad", {{"W", gw}, {"Ids", gi}, {"Out@GRAD", gd}}, {}, "W@GRAD");
    CHECK(dw.shape() == Shape{5, 2});
    Session<cpu> gs(g);
    const Feed df{"d", xt::xarray<double>(xt::ones<double>({3, 2}))};
    check_throws<value_error>([&] { gs.eval(std::vector<TargetRef>{dw}, {wf, df, {"ids", tensor_of<std::int64_t>({3}, {1, -2, 9})}}); },
                              {"lookup_table_v2_grad", "id -2 (at 1) is out of range [0, 5)"});
    const auto res = gs.eval(std::vector<TargetRef>{dw}, {wf, df, {"ids", tensor_of<std::int64_t>({3}, {1, 4, 1})}});
    const auto ok = res[0].values<double>();
    CHECK(std::vector<double>(ok.begin(), ok.end()) == std::vector<double>{0, 0, 2, 2, 0, 0, 0, 0, 1, 1});
}

TEST_CASE("lookup_table: a table with a dim of 0 and Paddle's parameter-server settings are refused") {
    Program p;
    auto ids = p.input<std::int64_t>("ids", {3});
    check_throws<shape_error>([&] { (void)embedding(ids, p.input<float>("w0", {4, 0})); },
                              {"W is [4,0]: it must be [rows, width], neither 0"});
    auto w = p.input<float>("w", {4, 2});
    check_throws<shape_error>(
        [&] { (void)apply_op<float>("lookup_table_v2", {{"W", w}, {"Ids", ids}}, {Attribute::make_bool("is_distributed", true)}); },
        {"is_distributed is set: a table on a parameter server is not supported"});
    // The other settings of Paddle's saved programs load at their defaults.
    auto e = apply_op<float>("lookup_table_v2", {{"W", w}, {"Ids", ids}},
                             {Attribute::make_bool("is_sparse", true), Attribute::make_bool("grad_inplace", false),
                              Attribute::make_strings("table_names", {}), Attribute::make_string("entry", "none")});
    CHECK(e.shape() == Shape{3, 2});
}
