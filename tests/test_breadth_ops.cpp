// stack / unstack, tile / expand / expand_v2, pad, gather, scatter and
// elementwise_mod / elementwise_floordiv (issue 16), against references
// written here in double from the ops' definitions (NumPy's stack, tile,
// broadcast_to, pad, take and Python's % and //); every gradient by central
// finite differences in FP64 (gather's and scatter's with repeated ids too);
// the errors by their text, an id out of range at run time leaving the
// session as it was. Paddle's own test classes for these ops are ported at
// the end.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;

__extension__ typedef __int128 wide;  // exact products of two int64 values (GCC's, hence the marker)

namespace {


// n values in [lo, hi) (integers truncate), seeded.
template <class T> std::vector<T> random_of(std::size_t n, unsigned seed, double lo, double hi) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<T> v(n);
    for (auto& e : v) e = static_cast<T>(u(g));
    return v;
}


// NumPy's tile: x (shape xs) padded with leading 1s to the longer rank,
// reps likewise.
template <class T> std::vector<T> ref_tile(const std::vector<T>& x, Shape xs, std::vector<std::int64_t> reps, Shape& out) {
    while (xs.rank() < static_cast<int>(reps.size())) {
        Shape p{1};
        for (auto d : xs) p.push_back(d);
        xs = p;
    }
    while (static_cast<int>(reps.size()) < xs.rank()) reps.insert(reps.begin(), 1);
    out = Shape();
    for (int i = 0; i < xs.rank(); ++i) out.push_back(xs[i] * reps[static_cast<std::size_t>(i)]);
    std::vector<T> y(static_cast<std::size_t>(out.numel()));
    for (std::int64_t i = 0; i < out.numel(); ++i) {
        auto idx = unravel(i, out);
        for (int d = 0; d < xs.rank(); ++d) idx[static_cast<std::size_t>(d)] %= xs[d];
        y[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(ravel(idx, xs))];
    }
    return y;
}

// NumPy's pad (constant): paddings [before0, after0, before1, ...].
template <class T>
std::vector<T> ref_pad(const std::vector<T>& x, const Shape& xs, const std::vector<std::int64_t>& p, T value, Shape& out) {
    out = Shape();
    for (int i = 0; i < xs.rank(); ++i) out.push_back(xs[i] + p[2 * static_cast<std::size_t>(i)] + p[2 * static_cast<std::size_t>(i) + 1]);
    std::vector<T> y(static_cast<std::size_t>(out.numel()), value);
    for (std::int64_t i = 0; i < xs.numel(); ++i) {
        auto idx = unravel(i, xs);
        for (int d = 0; d < xs.rank(); ++d) idx[static_cast<std::size_t>(d)] += p[2 * static_cast<std::size_t>(d)];
        y[static_cast<std::size_t>(ravel(idx, out))] = x[static_cast<std::size_t>(i)];
    }
    return y;
}

// np.take(x, ids, axis).
template <class T> std::vector<T> ref_gather(const std::vector<T>& x, const Shape& xs, const std::vector<std::int64_t>& ids, int axis) {
    Shape out = xs;
    out[axis] = static_cast<std::int64_t>(ids.size());
    std::vector<T> y(static_cast<std::size_t>(out.numel()));
    for (std::int64_t i = 0; i < out.numel(); ++i) {
        auto idx = unravel(i, out);
        idx[static_cast<std::size_t>(axis)] = ids[static_cast<std::size_t>(idx[static_cast<std::size_t>(axis)])];
        y[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(ravel(idx, xs))];
    }
    return y;
}

// Paddle's scatter on rows of `inner`: overwrite in order, or zero the
// named rows and add.
template <class T>
std::vector<T> ref_scatter(std::vector<T> x, std::int64_t inner, const std::vector<std::int64_t>& ids, const std::vector<T>& u,
                           bool overwrite) {
    if (!overwrite)
        for (auto id : ids)
            for (std::int64_t k = 0; k < inner; ++k) x[static_cast<std::size_t>(id * inner + k)] = T(0);
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::int64_t k = 0; k < inner; ++k) {
            T& o = x[static_cast<std::size_t>(ids[i] * inner + k)];
            const T v = u[i * static_cast<std::size_t>(inner) + static_cast<std::size_t>(k)];
            o = overwrite ? v : static_cast<T>(o + v);
        }
    return x;
}

// Python's % and // in exact (long double or integer) arithmetic.
template <class T> T py_mod(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
        if (b == -1) return 0;
        const T r = static_cast<T>(a % b);
        return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
    } else {
        // np.fmod(y + np.fmod(x, y), y), Paddle's own reference formula.
        return std::fmod(b + std::fmod(a, b), b);
    }
}
template <class T> T py_floordiv(T a, T b) {
    const long double q = std::floor(static_cast<long double>(a) / static_cast<long double>(b));
    return static_cast<T>(static_cast<std::int64_t>(q));
}

Tensor ids_tensor(DataType t, const Shape& s, const std::vector<std::int64_t>& v) {
    Tensor out(t, s);
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (t == DataType::INT32) out.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
        else out.data<std::int64_t>()[i] = v[i];
    }
    return out;
}

}  // namespace

// ---- stack and unstack -----------------------------------------------------------------------------

TEST_CASE_TEMPLATE("stack joins its inputs along a new dim and unstack cuts them back", T, float, double, std::int32_t,
                   std::int64_t) {
    const Shape shapes[] = {{2, 3}, {4}, {3, 1, 2}, {2, 0, 3}};
    unsigned seed = 1;
    for (const Shape& s : shapes)
        for (std::int64_t axis = -(s.rank() + 1); axis <= s.rank(); ++axis) {
            CAPTURE(to_string(s));
            CAPTURE(axis);
            Program p;
            std::vector<Var<T>> xs;
            std::vector<std::vector<T>> xv;
            std::vector<Feed> feeds;
            for (int k = 0; k < 3; ++k) {
                xs.push_back(p.input<T>("x" + std::to_string(k), s));
                xv.push_back(random_of<T>(static_cast<std::size_t>(s.numel()), seed++, -100, 100));
            }
            for (int k = 0; k < 3; ++k) feeds.emplace_back(xs[static_cast<std::size_t>(k)], tensor_of<T>(s, xv[static_cast<std::size_t>(k)]));
            auto y = stack(xs, static_cast<int>(axis));
            const int a = static_cast<int>(axis < 0 ? axis + s.rank() + 1 : axis);
            Shape want;
            for (int i = 0; i <= s.rank(); ++i) want.push_back(i == a ? 3 : s[i < a ? i : i - 1]);
            REQUIRE(y.shape() == want);
            std::vector<TargetRef> targets{y};
            std::vector<Var<T>> parts;
            if (s.rank() >= 1 && want[a] == 3) parts = unstack(y, static_cast<int>(axis));
            for (auto& q : parts) targets.push_back(q);
            Session<cpu> sess(p);
            const auto outs = sess.eval(targets, feeds);
            // np.stack: element (..., k, ...) of Y is element (...) of x[k].
            const auto got = values_of<T>(outs[0]);
            for (std::int64_t i = 0; i < want.numel(); ++i) {
                auto idx = unravel(i, want);
                const std::int64_t k = idx[static_cast<std::size_t>(a)];
                idx.erase(idx.begin() + a);
                CHECK(got[static_cast<std::size_t>(i)] == xv[static_cast<std::size_t>(k)][static_cast<std::size_t>(ravel(idx, s))]);
            }
            REQUIRE(parts.size() == 3);
            for (int k = 0; k < 3; ++k) {
                CHECK(outs[static_cast<std::size_t>(k) + 1].shape() == s);
                CHECK(values_of<T>(outs[static_cast<std::size_t>(k) + 1]) == xv[static_cast<std::size_t>(k)]);
            }
        }
}

TEST_CASE("stack and unstack: gradients by finite differences, and their errors") {
    for (int axis : {0, 1, -1, 2}) {
        CAPTURE(axis);
        grad_check::check({{"a", random({2, 3}, 1)}, {"b", random({2, 3}, 2)}, {"c", random({2, 3}, 3)}},
                          [axis](Program&, const std::vector<Var<double>>& v) { return stack(v, axis); });
        // unstack's parts recombined unevenly, one of them unused.
        grad_check::check({{"x", random({3, 4, 2}, 4)}}, [axis](Program&, const std::vector<Var<double>>& v) {
            auto parts = unstack(v[0], axis == 2 ? 2 : axis == -1 ? -1 : axis);
            return parts[0] * parts[1] + parts[0];
        });
    }
    Program p;
    auto x = p.input<float>("x", {2, 3});
    auto y = p.input<float>("y", {3, 2});
    auto z = p.input<double>("z", {2, 3});
    auto v = p.input<float>("v", {5});
    check_throws<shape_error>([&] { stack(std::vector<Var<float>>{x, y}); },
                              {"dlgraph.shape.stack", "input 0 is [2,3] but input 1 is [3,2]", "all must have one shape"});
    check_throws<shape_error>([&] { stack(std::vector<Var<float>>{x, x}, 3); },
                              {"dlgraph.shape.axis", "axis 3 is out of range for stacking parts of shape [2,3]", "[-3, 2]"});
    check_throws<type_error>([&] { apply_op<float>("stack", {{"X", x, z}}, {}, "Y"); }, {"input 0 is FP32 but input 1 is FP64"});
    check_throws<shape_error>([&] { unstack(v); }, {"dlgraph.shape.stack", "the input is [5]", "no 0-D tensors"});
    check_throws<shape_error>([&] { unstack(p.input<float>("u", {-1, 3})); }, {"unstack: axis 0 of [-1,3] must name a dim of known size"});
    // num must match the outputs and the dim.
    Program q;
    auto w = q.input<float>("w", {2, 3});
    check_throws<shape_error>(
        [&] { q.append("unstack", {{"X", {w.name()}}}, {{"Y", 3}}, {Attribute::make_int("axis", 0), Attribute::make_int("num", 3)}); },
        {"dlgraph.shape.stack", "dim 0 is 2 but there are 3 outputs"});
    check_throws<shape_error>(
        [&] { q.append("unstack", {{"X", {w.name()}}}, {{"Y", 2}}, {Attribute::make_int("axis", 0), Attribute::make_int("num", 5)}); },
        {"num is 5 but there are 2 Y"});
}

// ---- tile, expand, expand_v2 ----------------------------------------------------------------------------

TEST_CASE_TEMPLATE("tile, expand and expand_v2 repeat X as np.tile and np.broadcast_to do", T, float, double, std::int32_t,
                   std::int64_t) {
    struct tile_case {
        const char* op;
        const char* attr;
        Shape x;
        std::vector<std::int64_t> v;
        std::vector<std::int64_t> reps;  // np.tile's reps that give the same result
    };
    const tile_case cases[] = {
        {"tile", "repeat_times", {2, 3}, {2, 2}, {2, 2}},
        {"tile", "repeat_times", {5}, {3, 1, 2}, {3, 1, 2}},
        {"tile", "repeat_times", {2, 1, 3}, {4}, {4}},
        {"tile", "repeat_times", {1, 257}, {9, 1}, {9, 1}},
        {"tile", "repeat_times", {3, 1, 2, 1, 2}, {2, 3, 1, 4, 1}, {2, 3, 1, 4, 1}},
        {"tile", "repeat_times", {0, 3}, {2, 2}, {2, 2}},
        {"tile", "repeat_times", {4}, {1}, {1}},
        {"expand", "expand_times", {3, 1, 2}, {1, 4, 3}, {1, 4, 3}},
        {"expand", "expand_times", {2, 2}, {3, 1}, {3, 1}},
        {"expand_v2", "shape", {6, 1}, {6, 7}, {1, 7}},
        {"expand_v2", "shape", {3}, {2, 4, -1}, {2, 4, 1}},
        {"expand_v2", "shape", {1, 5}, {3, -1}, {3, 1}},
        {"expand_v2", "shape", {2, 1, 3}, {2, 2, 5, 3}, {2, 1, 5, 1}},
    };
    unsigned seed = 11;
    for (const auto& c : cases) {
        CAPTURE(c.op);
        CAPTURE(to_string(c.x));
        const auto xv = random_of<T>(static_cast<std::size_t>(c.x.numel()), seed++, -50, 50);
        Program p;
        auto x = p.input<T>("x", c.x);
        auto y = apply_op<T>(c.op, {{"X", x}}, {Attribute::make_ints(c.attr, c.v)});
        Shape want;
        const auto ref = ref_tile(xv, c.x, c.reps, want);
        REQUIRE(y.shape() == want);
        Session<cpu> s(p);
        CHECK(values_of<T>(s.eval({y}, {{x, tensor_of<T>(c.x, xv)}})[0]) == ref);
    }
}

TEST_CASE("tile, expand and expand_v2: gradients by finite differences, unknown batch dims, and errors") {
    grad_check::check({{"x", random({2, 3}, 5)}}, [](Program&, const std::vector<Var<double>>& v) { return tile(v[0], {2, 3}); });
    grad_check::check({{"x", random({3, 1, 2}, 6)}},
                      [](Program&, const std::vector<Var<double>>& v) { return tile(v[0], {2, 1, 4, 1}); });
    grad_check::check({{"x", random({2, 1, 3}, 7)}}, [](Program&, const std::vector<Var<double>>& v) {
        return apply_op<double>("expand", {{"X", v[0]}}, {Attribute::make_ints("expand_times", {1, 5, 2})});
    });
    grad_check::check({{"x", random({4, 1}, 8)}}, [](Program&, const std::vector<Var<double>>& v) { return expand(v[0], {3, 4, 6}); });
    grad_check::check({{"x", random({1, 5}, 9)}}, [](Program&, const std::vector<Var<double>>& v) { return expand(v[0], {7, -1}); });

    // A batch dim unknown when built: tile gives -1 there, expand_v2 the target.
    Program p;
    auto x = p.input<float>("x", {-1, 1});
    auto t = tile(x, {2, 3});
    auto e = expand(x, {-1, 4});
    CHECK(t.shape() == Shape{-1, 3});
    CHECK(e.shape() == Shape{-1, 4});
    Session<cpu> s(p);
    const auto outs = s.eval({t, e}, {{x, tensor_of<float>({2, 1}, {1.5f, -2.0f})}});
    CHECK(outs[0].shape() == Shape{4, 3});
    CHECK(values_of<float>(outs[0]) == std::vector<float>{1.5f, 1.5f, 1.5f, -2, -2, -2, 1.5f, 1.5f, 1.5f, -2, -2, -2});
    CHECK(values_of<float>(outs[1]) == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, -2, -2, -2, -2});

    auto y = p.input<float>("y", {2, 3});
    check_throws<shape_error>([&] { tile(y, {2, 0}); }, {"dlgraph.shape.attr", "repeat_times [2,0] for X of shape [2,3]", "at least 1"});
    check_throws<shape_error>([&] { tile(y, {1, 1, 1, 1, 1, 1, 1, 1, 2}); }, {"more than 8 dims"});
    check_throws<shape_error>([&] { apply_op<float>("expand", {{"X", y}}, {Attribute::make_ints("expand_times", {2})}); },
                              {"expand_times [2] for X of shape [2,3]", "one entry per dim of X"});
    check_throws<shape_error>([&] { expand(y, {3}); }, {"shape [3] for X of shape [2,3]", "at least X's rank"});
    check_throws<shape_error>([&] { expand(y, {2, 4}); }, {"dim 1 of X (padded) is 3, which cannot become 4", "only dims of 1"});
    check_throws<shape_error>([&] { expand(y, {-1, 2, 3}); }, {"entry -1 (keep X's dim) names no dim of X"});
    check_throws<shape_error>([&] { expand(y, {0, 3}); }, {"entry 0 must be positive or -1"});
    check_throws<shape_error>([&] { tile(y, {1 << 20, 1 << 20, 1 << 20}); }, {"dlgraph.resource.size"});
}

// ---- pad ------------------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("pad surrounds X with pad_value as np.pad does", T, float, double, std::int32_t, std::int64_t) {
    struct pad_case {
        Shape x;
        std::vector<std::int64_t> p;
        double value;
    };
    const pad_case cases[] = {{{3, 4}, {1, 2, 0, 3}, 0.0},   {{2, 3, 5}, {0, 1, 2, 0, 1, 1}, -2.0}, {{4}, {0, 0}, 1.0},
                              {{0, 2}, {1, 1, 2, 0}, 7.0},   {{1, 1, 1, 1}, {1, 0, 0, 1, 2, 2, 1, 1}, 3.0}};
    unsigned seed = 21;
    for (const auto& c : cases) {
        CAPTURE(to_string(c.x));
        const auto xv = random_of<T>(static_cast<std::size_t>(c.x.numel()), seed++, -50, 50);
        Program p;
        auto x = p.input<T>("x", c.x);
        auto y = pad(x, c.p, c.value);
        Shape want;
        const auto ref = ref_pad(xv, c.x, c.p, static_cast<T>(c.value), want);
        REQUIRE(y.shape() == want);
        Session<cpu> s(p);
        CHECK(values_of<T>(s.eval({y}, {{x, tensor_of<T>(c.x, xv)}})[0]) == ref);
    }
}

TEST_CASE("pad: gradient by finite differences and errors") {
    grad_check::check({{"x", random({2, 3, 2}, 10)}},
                      [](Program&, const std::vector<Var<double>>& v) { return pad(v[0], {1, 0, 2, 1, 0, 3}, 0.5); });
    Program p;
    auto x = p.input<float>("x", {2, 3});
    check_throws<shape_error>([&] { pad(x, {1, 1}); }, {"dlgraph.shape.attr", "paddings [1,1] must have 2 entries per dim (4)"});
    check_throws<shape_error>([&] { pad(x, {1, -1, 0, 0}); }, {"paddings [1,-1,0,0]: entries must not be negative"});
    auto b = p.input<bool>("b", {2});
    check_throws<type_error>([&] { pad(b, {1, 1}); }, {"pad"});
}

// ---- gather ----------------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("gather takes X's slices at Index along an axis, as np.take does", T, float, double, std::int32_t,
                   std::int64_t) {
    struct gather_case {
        Shape x;
        Shape index;
        int axis;
        DataType id_type;
    };
    const gather_case cases[] = {{{10, 20}, {4}, 0, DataType::INT64},     {{3, 7, 2}, {9}, 1, DataType::INT32},
                                 {{5, 3}, {6, 1}, 0, DataType::INT64},    {{4, 33}, {40}, -1, DataType::INT32},
                                 {{6}, {0}, 0, DataType::INT64},          {{2, 3, 4}, {2}, 2, DataType::INT64}};
    unsigned seed = 31;
    for (const auto& c : cases) {
        CAPTURE(to_string(c.x));
        CAPTURE(c.axis);
        const int a = c.axis < 0 ? c.axis + c.x.rank() : c.axis;
        const auto xv = random_of<T>(static_cast<std::size_t>(c.x.numel()), seed++, -50, 50);
        std::vector<std::int64_t> ids;
        std::mt19937 g(seed++);
        for (std::int64_t i = 0; i < c.index.numel(); ++i) ids.push_back(static_cast<std::int64_t>(g() % static_cast<unsigned>(c.x[a])));
        Program p;
        auto x = p.input<T>("x", c.x);
        Tensor it = ids_tensor(c.id_type, c.index, ids);
        auto run = [&](auto idx) {
            auto y = gather(x, idx, c.axis);
            Shape want = c.x;
            want[a] = c.index[0];
            REQUIRE(y.shape() == want);
            Session<cpu> s(p);
            CHECK(values_of<T>(s.eval({y}, {{x, tensor_of<T>(c.x, xv)}, {idx, it}})[0]) == ref_gather(xv, c.x, ids, a));
        };
        if (c.id_type == DataType::INT32) run(p.input<std::int32_t>("index", c.index));
        else run(p.input<std::int64_t>("index", c.index));
    }
}

TEST_CASE("gather: gradients by finite differences (repeated ids add), Paddle's overwrite, errors and a bad id at run time") {
    const Tensor ids = ids_tensor(DataType::INT64, {5}, {2, 0, 2, 3, 2});
    for (int axis : {0, 1}) {
        CAPTURE(axis);
        grad_check::check({{"x", random({4, 4, 3}, 11)}},
                          [axis](Program& p, const std::vector<Var<double>>& v) {
                              return gather(v[0], p.input<std::int64_t>("ids", {5}), axis);
                          },
                          {{"ids", ids}});
    }
    // overwrite = true (Paddle's default for the op): the last row written wins.
    Program p;
    auto x = p.input<double>("x", {4, 2});
    auto idx = p.input<std::int64_t>("ids", {3});
    auto dout = p.input<double>("dout", {3, 2});
    auto dx = p.input<double>("dx_slot", {4, 2});  // only to name the output
    (void)dx;
    Program q;
    auto qx = q.input<double>("x", {4, 2});
    auto qi = q.input<std::int64_t>("ids", {3});
    auto qd = q.input<double>("dout", {3, 2});
    std::vector<std::vector<std::string>> names;
    q.append("gather_grad", {{"X", {qx.name()}}, {"Index", {qi.name()}}, {"Out@GRAD", {qd.name()}}}, {{"X@GRAD", 1}},
             {Attribute::make_bool("overwrite", true), Attribute::make_int("axis", 0)}, &names);
    Session<cpu> s(q);
    const auto got = values_of<double>(s.eval({names[0][0]}, {{qx, tensor_of<double>({4, 2}, std::vector<double>(8, 9.0))},
                                                               {qi, ids_tensor(DataType::INT64, {3}, {1, 3, 1})},
                                                               {qd, tensor_of<double>({3, 2}, {1, 2, 3, 4, 5, 6})}})[0]);
    CHECK(got == std::vector<double>{0, 0, 5, 6, 0, 0, 3, 4});
    // Along another axis Paddle's gradient adds, overwrite or not.
    Program r;
    auto rx = r.input<double>("x", {2, 4});
    auto ri = r.input<std::int64_t>("ids", {3});
    auto rd = r.input<double>("dout", {2, 3});
    std::vector<std::vector<std::string>> rn;
    r.append("gather_grad", {{"X", {rx.name()}}, {"Index", {ri.name()}}, {"Out@GRAD", {rd.name()}}}, {{"X@GRAD", 1}},
             {Attribute::make_bool("overwrite", true), Attribute::make_int("axis", 1)}, &rn);
    Session<cpu> rs(r);
    CHECK(values_of<double>(rs.eval({rn[0][0]}, {{rx, tensor_of<double>({2, 4}, std::vector<double>(8, 9.0))},
                                                 {ri, ids_tensor(DataType::INT64, {3}, {1, 3, 1})},
                                                 {rd, tensor_of<double>({2, 3}, {1, 2, 3, 4, 5, 6})}})[0]) ==
          std::vector<double>{0, 4, 0, 2, 0, 10, 0, 5});

    check_throws<shape_error>([&] { gather(x, p.input<std::int64_t>("m", {2, 2})); },
                              {"dlgraph.shape.index", "Index is [2,2]: it must be [N] or [N, 1]"});
    check_throws<type_error>([&] { gather(x, p.input<double>("f", {2})); }, {"Index must be INT64 or INT32"});
    check_throws<shape_error>([&] { gather(x, idx, 2); }, {"dlgraph.shape.axis", "axis 2 is out of range for X of shape [4,2]"});

    // An id out of range: a value error naming it; the session stays usable.
    auto y = gather(x, idx);
    Session<cpu> t(p);
    const Tensor xv = tensor_of<double>({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
    check_throws<value_error>([&] { t.eval({y}, {{x, xv}, {idx, ids_tensor(DataType::INT64, {3}, {0, 4, 1})}}); },
                              {"dlgraph.value.id", "gather", "id 4 (at 1) is out of range [0, 4)"});
    check_throws<value_error>([&] { t.eval({y}, {{x, xv}, {idx, ids_tensor(DataType::INT64, {3}, {0, -1, 1})}}); },
                              {"id -1 (at 1) is out of range [0, 4)"});
    CHECK(values_of<double>(t.eval({y}, {{x, xv}, {idx, ids_tensor(DataType::INT64, {3}, {3, 0, 3})}})[0]) ==
          std::vector<double>{6, 7, 0, 1, 6, 7});
    (void)dout;
}

// ---- scatter ---------------------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("scatter writes Updates into X's rows, overwriting or adding as Paddle does", T, float, double, std::int32_t,
                   std::int64_t) {
    struct scatter_case {
        Shape x;
        std::vector<std::int64_t> ids;
        bool overwrite;
    };
    const scatter_case cases[] = {{{8, 5}, {1, 6, 2, 7}, true},     {{8, 5}, {3, 3, 0, 3, 7}, false},
                                  {{4, 2, 3}, {2, 0, 2}, true},      {{9}, {4, 4, 1, 8, 4}, false},
                                  {{3, 3}, {1, 1}, true},            {{5, 2}, {}, false}};
    unsigned seed = 41;
    for (const auto& c : cases) {
        CAPTURE(to_string(c.x));
        CAPTURE(c.overwrite);
        const std::int64_t n = static_cast<std::int64_t>(c.ids.size()), inner = c.x.numel() / c.x[0];
        Shape us = c.x;
        us[0] = n;
        const auto xv = random_of<T>(static_cast<std::size_t>(c.x.numel()), seed++, -50, 50);
        const auto uv = random_of<T>(static_cast<std::size_t>(us.numel()), seed++, -50, 50);
        Program p;
        auto x = p.input<T>("x", c.x);
        auto ids = p.input<std::int32_t>("ids", {n});
        auto u = p.input<T>("u", us);
        auto y = scatter(x, ids, u, c.overwrite);
        REQUIRE(y.shape() == c.x);
        Session<cpu> s(p);
        CHECK(values_of<T>(s.eval({y}, {{x, tensor_of<T>(c.x, xv)}, {ids, ids_tensor(DataType::INT32, {n}, c.ids)}, {u, tensor_of<T>(us, uv)}})[0]) ==
              ref_scatter(xv, inner, c.ids, uv, c.overwrite));
    }
}

TEST_CASE("scatter: gradients by finite differences (X and Updates), Paddle's gradient for overwritten updates, errors") {
    // Distinct ids (overwrite: the true gradient) and repeated ids added.
    const Tensor distinct = ids_tensor(DataType::INT64, {3}, {4, 0, 2});
    const Tensor repeated = ids_tensor(DataType::INT64, {4}, {1, 3, 1, 1});
    grad_check::check({{"x", random({5, 3}, 12)}, {"u", random({3, 3}, 13)}},
                      [](Program& p, const std::vector<Var<double>>& v) {
                          return scatter(v[0], p.input<std::int64_t>("ids", {3}), v[1], true);
                      },
                      {{"ids", distinct}});
    grad_check::check({{"x", random({5, 3}, 14)}, {"u", random({4, 3}, 15)}},
                      [](Program& p, const std::vector<Var<double>>& v) {
                          return scatter(v[0], p.input<std::int64_t>("ids", {4}), v[1], false);
                      },
                      {{"ids", repeated}});
    // With overwrite and repeated ids Paddle gives every update its row's
    // gradient, also those a later update overwrote (not the true gradient).
    Program q;
    auto qi = q.input<std::int64_t>("ids", {3});
    auto qu = q.input<double>("u", {3, 2});
    auto qd = q.input<double>("dout", {3, 2});
    std::vector<std::vector<std::string>> names;
    q.append("scatter_grad", {{"Ids", {qi.name()}}, {"Updates", {qu.name()}}, {"Out@GRAD", {qd.name()}}},
             {{"X@GRAD", 1}, {"Updates@GRAD", 1}}, {Attribute::make_bool("overwrite", true)}, &names);
    Session<cpu> s(q);
    const auto outs = s.eval({names[0][0], names[1][0]}, {{qi, ids_tensor(DataType::INT64, {3}, {2, 0, 2})},
                                                          {qu, tensor_of<double>({3, 2}, std::vector<double>(6, 0.0))},
                                                          {qd, tensor_of<double>({3, 2}, {1, 2, 3, 4, 5, 6})}});
    CHECK(values_of<double>(outs[0]) == std::vector<double>{0, 0, 3, 4, 0, 0});
    CHECK(values_of<double>(outs[1]) == std::vector<double>{5, 6, 1, 2, 5, 6});

    Program p;
    auto x = p.input<float>("x", {4, 3});
    auto ids = p.input<std::int64_t>("ids", {2});
    check_throws<shape_error>([&] { scatter(x, ids, p.input<float>("u", {3, 3})); },
                              {"dlgraph.shape.scatter", "X is [4,3], Ids [2] and Updates [3,3]", "[N, X's dims after the first]"});
    check_throws<shape_error>([&] { scatter(x, ids, p.input<float>("u2", {2, 4})); }, {"Updates must be [N, X's dims after the first]"});
    check_throws<type_error>([&] { apply_op<float>("scatter", {{"X", x}, {"Ids", ids}, {"Updates", p.input<double>("u3", {2, 3})}}); },
                             {"X is FP32 but Updates is FP64"});
    auto u = p.input<float>("u4", {2, 3});
    auto y = scatter(x, ids, u);
    Session<cpu> t(p);
    const Tensor xv = tensor_of<float>({4, 3}, std::vector<float>(12, 1.0f));
    const Tensor uv = tensor_of<float>({2, 3}, std::vector<float>(6, 2.0f));
    check_throws<value_error>([&] { t.eval({y}, {{x, xv}, {ids, ids_tensor(DataType::INT64, {2}, {1, 9})}, {u, uv}}); },
                              {"dlgraph.value.id", "scatter", "id 9 (at 1) is out of range [0, 4)"});
    CHECK(values_of<float>(t.eval({y}, {{x, xv}, {ids, ids_tensor(DataType::INT64, {2}, {3, 1})}, {u, uv}})[0]) ==
          std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
}

TEST_CASE("scatter: integer sums wrap, a program that names Ids as Out writes nothing outside it") {
    Program p;
    auto x = p.input<std::int32_t>("x", {1});
    auto ids = p.input<std::int64_t>("ids", {2});
    auto u = p.input<std::int32_t>("u", {2});
    auto y = scatter(x, ids, u, false);
    Session<cpu> s(p);
    CHECK(values_of<std::int32_t>(s.eval({y}, {{x, tensor_of<std::int32_t>({1}, {5})}, {ids, ids_tensor(DataType::INT64, {2}, {0, 0})},
                                                {u, tensor_of<std::int32_t>({2}, {2147483647, 1})}})[0]) ==
          std::vector<std::int32_t>{-2147483647 - 1});
    // X, Ids and Out one INT64 variable: the first update rewrites an id
    // before it is used (a program can say this; the kernel must not write
    // outside Out).
    for (bool overwrite : {true, false}) {
        Program q;
        auto v = q.input<std::int64_t>("v", {2});
        auto up = q.input<std::int64_t>("up", {2});
        q.append("scatter", {{"X", {v.name()}}, {"Ids", {v.name()}}, {"Updates", {up.name()}}}, {},
                 {Attribute::make_bool("overwrite", overwrite)}, nullptr, {{"Out", {v.name()}}});
        Session<cpu> t(q);
        const auto out = t.eval({v.name()}, {{v, tensor_of<std::int64_t>({2}, {1, 0})}, {up, tensor_of<std::int64_t>({2}, {100000, 5})}});
        CHECK(out[0].numel() == 2);
    }
}

// ---- elementwise_mod, elementwise_floordiv ------------------------------------------------------------

TEST_CASE_TEMPLATE("elementwise_mod and elementwise_floordiv follow Python's % and //", T, float, double, std::int32_t,
                   std::int64_t) {
    std::vector<T> xv, yv;
    if constexpr (std::is_integral_v<T>) {
        const T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
        xv = {7, -7, 7, -7, 0, 5, -5, lo, lo, hi, hi, lo, 3, -3, 1};
        yv = {3, 3, -3, -3, 4, 5, -5, -1, 3, -1, 7, lo, hi, hi, lo};
        for (auto v : random_of<T>(200, 51, -10000, 10000)) xv.push_back(v);
        for (auto v : random_of<T>(200, 52, 1, 100)) yv.push_back(static_cast<T>(yv.size() % 2 ? v : -v));
    } else {
        xv = {T(7.5), T(-7.5), T(7.5), T(-7.5), T(0), T(-3.3), T(11.5), T(-2), T(3.5), T(6), T(-0.0)};
        yv = {T(2), T(2), T(-2), T(-2), T(3), T(-1.2), T(2.0), T(3.3), T(-2.3), T(3), T(5)};
        for (auto v : random_of<T>(200, 53, -1000, 1000)) xv.push_back(v);
        for (auto v : random_of<T>(200, 54, 0.5, 100)) yv.push_back(yv.size() % 2 ? v : -v);
    }
    const Shape s{static_cast<std::int64_t>(xv.size())};
    Program p;
    auto x = p.input<T>("x", s);
    auto y = p.input<T>("y", s);
    auto m = mod(x, y);
    auto f = floordiv(x, y);
    Session<cpu> sess(p);
    const auto outs = sess.eval({m, f}, {{x, tensor_of<T>(s, xv)}, {y, tensor_of<T>(s, yv)}});
    const auto gm = values_of<T>(outs[0]), gf = values_of<T>(outs[1]);
    for (std::size_t i = 0; i < xv.size(); ++i) {
        CAPTURE(xv[i]);
        CAPTURE(yv[i]);
        if constexpr (std::is_integral_v<T>) {
            // x == (x // y) * y + x % y exactly, with x % y of y's sign and
            // smaller than |y|: these fix both results.
            const wide q = gf[i], r = gm[i], a = xv[i], b = yv[i];
            CHECK((r == 0 || (r < 0) == (b < 0)));
            CHECK((r < 0 ? -r : r) < (b < 0 ? -b : b));
            if (!(xv[i] == std::numeric_limits<T>::min() && yv[i] == -1)) CHECK(q * b + r == a);
            else CHECK(gf[i] == std::numeric_limits<T>::min());  // -min wraps to min, as NumPy's
        } else {
            // Paddle's reference formula rounds y + fmod(x, y) once: within
            // an ulp of 2|y| of the exact remainder dlgraph gives.
            const double tol = 2 * std::abs(static_cast<double>(yv[i])) * std::numeric_limits<T>::epsilon();
            CHECK(std::abs(static_cast<double>(gm[i]) - static_cast<double>(py_mod(xv[i], yv[i]))) <= tol);
            CHECK((gm[i] == 0 || (gm[i] < 0) == (yv[i] < 0)));
            CHECK(std::abs(gm[i]) < std::abs(yv[i]));
            // x // y is the whole number of y's that x % y leaves over.
            CHECK(gf[i] == std::floor(gf[i]));
            const double back = static_cast<double>(gf[i]) * static_cast<double>(yv[i]) + static_cast<double>(gm[i]);
            CHECK(std::abs(back - static_cast<double>(xv[i])) <=
                  4 * (std::abs(static_cast<double>(xv[i])) + std::abs(static_cast<double>(yv[i]))) * std::numeric_limits<T>::epsilon());
        }
    }
    if constexpr (!std::is_integral_v<T>) {
        // Python's own answers where floor(x / y) would differ: 1.0 // 0.1 is 9.
        Program q;
        auto a = q.input<T>("a", {6});
        auto b = q.input<T>("b", {6});
        auto f2 = floordiv(a, b);
        Session<cpu> t(q);
        const auto got = values_of<T>(t.eval({f2}, {{a, tensor_of<T>({6}, {T(1), T(-1), T(7.5), T(-7.5), T(7.5), T(-7.5)})},
                                                    {b, tensor_of<T>({6}, {T(0.1), T(0.1), T(2), T(2), T(-2), T(-2)})}})[0]);
        CHECK(got == std::vector<T>{T(9), T(-10), T(3), T(-4), T(-4), T(3)});
    }
    // Broadcasting, and Paddle's TestRemainderOp examples.
    Program q;
    auto a = q.input<T>("a", {2, 1, 3});
    auto b = q.input<T>("b", {3});
    auto r = mod(a, b);
    CHECK(r.shape() == Shape{2, 1, 3});
    Session<cpu> t(q);
    if constexpr (std::is_integral_v<T>) {
        const auto got = values_of<T>(t.eval({r}, {{a, tensor_of<T>({2, 1, 3}, {-3, 11, -2, 3, 8, 7})}, {b, tensor_of<T>({3}, {-1, 2, 3})}})[0]);
        CHECK(got == std::vector<T>{0, 1, 1, 0, 0, 1});
    } else {
        const auto got = values_of<T>(t.eval({r}, {{a, tensor_of<T>({2, 1, 3}, {T(-3.3), T(11.5), T(-2), T(3.5), T(1), T(2)})},
                                                   {b, tensor_of<T>({3}, {T(-1.2), T(2.0), T(3.3)})}})[0]);
        const double want[] = {-0.9, 1.5, 1.3, -0.1, 1, 2};  // 3.5 % -1.2 == -0.1
        for (int i = 0; i < 6; ++i) CHECK(static_cast<double>(got[static_cast<std::size_t>(i)]) == doctest::Approx(want[i]).epsilon(1e-5));
    }
}

TEST_CASE("elementwise_mod and elementwise_floordiv: an integer divisor of zero is an error, no gradient") {
    for (const char* op : {"elementwise_mod", "elementwise_floordiv"}) {
        CAPTURE(op);
        Program p;
        auto x = p.input<std::int32_t>("x", {3});
        auto y = p.input<std::int32_t>("y", {3});
        auto z = apply_op<std::int32_t>(op, {{"X", x}, {"Y", y}});
        Session<cpu> s(p);
        check_throws<value_error>([&] { s.eval({z}, {{x, tensor_of<std::int32_t>({3}, {1, 2, 3})}, {y, tensor_of<std::int32_t>({3}, {1, 0, 3})}}); },
                                  {"dlgraph.value.div0", op, "integer division by zero"});
        CHECK(values_of<std::int32_t>(s.eval({z}, {{x, tensor_of<std::int32_t>({3}, {1, -7, 3})}, {y, tensor_of<std::int32_t>({3}, {1, 2, 3})}})[0]) ==
              (std::string(op) == "elementwise_mod" ? std::vector<std::int32_t>{0, 1, 0} : std::vector<std::int32_t>{1, -4, 1}));
        CHECK_FALSE(find_op(op)->differentiable());
    }
    // A float divisor of zero follows IEEE: NaN for mod, inf for floordiv.
    Program p;
    auto x = p.input<double>("x", {2});
    auto y = p.input<double>("y", {2});
    auto m = mod(x, y);
    auto f = floordiv(x, y);
    Session<cpu> s(p);
    const auto outs = s.eval({m, f}, {{x, tensor_of<double>({2}, {1, -1})}, {y, tensor_of<double>({2}, {0, 0})}});
    CHECK(std::isnan(values_of<double>(outs[0])[0]));
    CHECK(values_of<double>(outs[1]) == std::vector<double>{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
}

// ---- Paddle's own configurations ---------------------------------------------------------------------
//
// The OpTest classes of Paddle's python/paddle/fluid/tests/unittests for
// these ops, each with its shapes, attributes, dtypes and input ranges
// (np.random.random: [0, 1)), against the class's NumPy formula, written
// here as the references above. Their check_grad is covered by the finite
// differences above on the same op and attributes.

TEST_CASE("Paddle's test_stack_op.py and test_unstack_op.py classes") {
    struct stack_class {
        const char* name;
        int num_inputs;
        int axis;
    };
    // TestStackOpBase: 4 inputs of (5, 6, 7), axis 0, float64.
    const stack_class stacks[] = {{"TestStackOpBase", 4, 0}, {"TestStackOp1", 8, 0},  {"TestStackOp2", 10, 0},
                                  {"TestStackOp3", 4, -1},   {"TestStackOp4", 4, -4}, {"TestStackOp5", 4, 1},
                                  {"TestStackOp6", 4, 3}};
    const Shape dim{5, 6, 7};
    unsigned seed = 61;
    for (const auto& c : stacks) {
        INFO(c.name);
        Program p;
        std::vector<Var<double>> xs;
        std::vector<std::vector<double>> xv;
        std::vector<Feed> feeds;
        for (int k = 0; k < c.num_inputs; ++k) {
            xs.push_back(p.input<double>("x" + std::to_string(k), dim));
            xv.push_back(random_of<double>(210, seed++, 0, 1));
        }
        for (int k = 0; k < c.num_inputs; ++k) feeds.emplace_back(xs[static_cast<std::size_t>(k)], tensor_of<double>(dim, xv[static_cast<std::size_t>(k)]));
        auto y = stack(xs, c.axis);
        Session<cpu> s(p);
        const auto got = values_of<double>(s.eval(std::vector<TargetRef>{y}, feeds)[0]);
        const int a = c.axis < 0 ? c.axis + 4 : c.axis;
        for (std::int64_t i = 0; i < y.shape().numel(); ++i) {
            auto idx = unravel(i, y.shape());
            const auto k = static_cast<std::size_t>(idx[static_cast<std::size_t>(a)]);
            idx.erase(idx.begin() + a);
            REQUIRE(got[static_cast<std::size_t>(i)] == xv[k][static_cast<std::size_t>(ravel(idx, dim))]);
        }
    }
    // Not ported: TestStackOp_ZeroDim and TestStackAPI_ZeroDim stack 0-D
    // tensors (dlgraph has none); TestStackBF16Op (no BF16); the LoDTensorArray
    // classes (no tensor arrays).

    // test_unstack_op.py: X (5, 6, 7) float32, num = X's dim at axis.
    const std::pair<const char*, int> unstacks[] = {
        {"TestUnStackOpBase", 0}, {"TestStackOp3", -1}, {"TestStackOp4", -3}, {"TestStackOp5", 1}, {"TestStackOp6", 2}};
    for (const auto& [name, axis] : unstacks) {
        INFO(name);
        const auto xv = random_of<float>(210, seed++, 0, 1);
        Program p;
        auto x = p.input<float>("x", dim);
        auto ys = unstack(x, axis);
        const int a = axis < 0 ? axis + 3 : axis;
        REQUIRE(static_cast<std::int64_t>(ys.size()) == dim[a]);
        std::vector<TargetRef> targets(ys.begin(), ys.end());
        Session<cpu> s(p);
        const auto outs = s.eval(targets, {{x, tensor_of<float>(dim, xv)}});
        for (std::size_t k = 0; k < ys.size(); ++k)
            for (std::int64_t i = 0; i < outs[k].numel(); ++i) {
                auto idx = unravel(i, outs[k].shape());
                idx.insert(idx.begin() + a, static_cast<std::int64_t>(k));
                REQUIRE(outs[k].data<float>()[i] == xv[static_cast<std::size_t>(ravel(idx, dim))]);
            }
    }
}

TEST_CASE("Paddle's test_tile_op.py and test_expand_v2_op.py classes") {
    struct tile_class {
        const char* name;
        const char* op;
        Shape x;
        std::vector<std::int64_t> attr;
        std::vector<std::int64_t> reps;  // the class's np.tile reps
        DataType dtype;
    };
    const tile_class cases[] = {
        {"TestTileOpRank1", "tile", {100}, {2}, {2}, DataType::FP64},
        {"TestTileOpRank2Expanding", "tile", {120}, {2, 2}, {2, 2}, DataType::FP64},
        {"TestTileOpRank2", "tile", {12, 14}, {2, 3}, {2, 3}, DataType::FP64},
        {"TestTileOpRank3_Corner", "tile", {2, 10, 5}, {1, 1, 1}, {1, 1, 1}, DataType::FP64},
        {"TestTileOpRank3_Corner2", "tile", {2, 10, 5}, {2, 2}, {2, 2}, DataType::FP64},
        {"TestTileOpRank3", "tile", {2, 4, 15}, {2, 1, 4}, {2, 1, 4}, DataType::FP64},
        {"TestTileOpRank4", "tile", {2, 4, 5, 7}, {3, 2, 1, 2}, {3, 2, 1, 2}, DataType::FP64},
        {"TestTileOpInteger", "tile", {4, 4, 5}, {2, 1, 4}, {2, 1, 4}, DataType::INT32},
        {"TestTileOpBoolean", "tile", {2, 4, 5}, {2, 1, 4}, {2, 1, 4}, DataType::BOOL},
        {"TestTileOpInt64_t", "tile", {2, 4, 5}, {2, 1, 4}, {2, 1, 4}, DataType::INT64},
        {"TestExpandV2OpRank1", "expand_v2", {100}, {100}, {1}, DataType::FP64},
        {"TestExpandV2OpRank2_DimExpanding", "expand_v2", {120}, {2, 120}, {2, 1}, DataType::FP64},
        {"TestExpandV2OpRank2", "expand_v2", {1, 140}, {12, 140}, {12, 1}, DataType::FP64},
        {"TestExpandV2OpRank3_Corner", "expand_v2", {2, 10, 5}, {2, 10, 5}, {1, 1, 1}, DataType::FP64},
        {"TestExpandV2OpRank4", "expand_v2", {2, 4, 5, 7}, {-1, -1, -1, -1}, {1, 1, 1, 1}, DataType::FP64},
        {"TestExpandV2OpInteger", "expand_v2", {2, 4, 5}, {2, 4, 5}, {1, 1, 1}, DataType::INT32},
        {"TestExpandV2OpBoolean", "expand_v2", {2, 4, 5}, {2, 4, 5}, {1, 1, 1}, DataType::BOOL},
        {"TestExpandV2OpInt64_t", "expand_v2", {2, 4, 5}, {2, 4, 5}, {1, 1, 1}, DataType::INT64},
    };
    unsigned seed = 71;
    for (const auto& c : cases) {
        INFO(c.name);
        visit_dtype(c.dtype, [&]<class T>(type_tag<T>) {
            if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
                          std::is_same_v<T, bool>) {
                // np.random.random, or np.random.randint(10) (randint(2) for bool).
                std::vector<T> xv;
                for (double v : random_of<double>(static_cast<std::size_t>(c.x.numel()), seed++, 0, std::is_same_v<T, double> ? 1 : std::is_same_v<T, bool> ? 2 : 10))
                    xv.push_back(static_cast<T>(v));
                Program p;
                auto x = p.input<T>("x", c.x);
                auto y = apply_op<T>(c.op, {{"X", x}}, {Attribute::make_ints(std::string(c.op) == "tile" ? "repeat_times" : "shape", c.attr)});
                Shape want;
                const auto ref = ref_tile(xv, c.x, c.reps, want);
                REQUIRE(y.shape() == want);
                Session<cpu> s(p);
                CHECK(values_of<T>(s.eval({y}, {{x, tensor_of<T>(c.x, xv)}})[0]) == ref);
            }
        });
    }
    // Not ported: the ZeroDim classes (0-D tensors); the *_tensor and
    // *_tensor_attr classes take repeat_times or shape as tensors, which
    // dlgraph's attribute-only ops refuse (unknown slot).
}

TEST_CASE("Paddle's test_pad_op.py, test_gather_op.py and test_scatter_op.py classes") {
    // test_pad_op.py, float64.
    struct pad_class {
        const char* name;
        Shape x;
        std::vector<std::int64_t> p;
        double value;
    };
    const pad_class pads[] = {{"TestPadOp", {16, 16}, {0, 1, 2, 3}, 0.0},
                              {"TestCase1", {2, 3, 4, 5}, {0, 1, 2, 3, 2, 1, 1, 1}, 0.5},
                              {"TestCase2", {5, 5, 5}, {0, 0, 0, 0, 1, 2}, 1.0},
                              {"TestCase3", {100}, {0, 1}, 0.9}};
    unsigned seed = 81;
    for (const auto& c : pads) {
        INFO(c.name);
        const auto xv = random_of<double>(static_cast<std::size_t>(c.x.numel()), seed++, 0, 1);
        Program p;
        auto x = p.input<double>("x", c.x);
        auto y = pad(x, c.p, c.value);
        Shape want;
        const auto ref = ref_pad(xv, c.x, c.p, c.value, want);
        REQUIRE(y.shape() == want);
        Session<cpu> s(p);
        CHECK(values_of<double>(s.eval({y}, {{x, tensor_of<double>(c.x, xv)}})[0]) == ref);
    }

    // test_gather_op.py: X float64, Out = X[Index] (axis 0).
    struct gather_class {
        const char* name;
        Shape x;
        std::vector<std::int64_t> index;
        DataType index_type;
        bool overwrite;  // the class's attrs (true: Paddle's default)
    };
    const gather_class gathers[] = {{"TestGatherOp", {10, 20}, {1, 3, 5}, DataType::INT32, true},
                                    {"TestCase1", {100}, {1, 3, 5}, DataType::INT32, true},
                                    {"TestCase2", {100}, {1, 3, 5}, DataType::INT64, true},
                                    {"TestCase3", {10, 20}, {1, 3, 5}, DataType::INT64, true},
                                    {"TestCase4", {10, 20}, {1, 1}, DataType::INT32, false},
                                    {"TestCase5", {10, 20}, {1, 1, 3}, DataType::INT32, false},
                                    {"TestCase6", {10, 20}, {1, 3}, DataType::INT32, true}};
    for (const auto& c : gathers) {
        INFO(c.name);
        const auto xv = random_of<double>(static_cast<std::size_t>(c.x.numel()), seed++, 0, 1);
        const Shape is{static_cast<std::int64_t>(c.index.size())};
        Program p;
        auto x = p.input<double>("x", c.x);
        auto run = [&](auto idx) {
            auto y = apply_op<double>("gather", {{"X", x}, {"Index", idx}}, {Attribute::make_bool("overwrite", c.overwrite)});
            Session<cpu> s(p);
            CHECK(values_of<double>(s.eval({y}, {{x, tensor_of<double>(c.x, xv)}, {idx, ids_tensor(c.index_type, is, c.index)}})[0]) ==
                  ref_gather(xv, c.x, c.index, 0));
        };
        if (c.index_type == DataType::INT32) run(p.input<std::int32_t>("index", is));
        else run(p.input<std::int64_t>("index", is));
        // check_grad: Paddle's numeric gradient is the true one, so only
        // overwrite = false, or distinct ids, may pass it: all classes do.
        if (c.x.rank() == 2)
            grad_check::check({{"x", random({10, 20}, seed++)}},
                              [&](Program& q, const std::vector<Var<double>>& v) {
                                  auto i = q.input<std::int64_t>("index", is);
                                  return apply_op<double>("gather", {{"X", v[0]}, {"Index", i}},
                                                          {Attribute::make_bool("overwrite", c.overwrite)});
                              },
                              {{"index", ids_tensor(DataType::INT64, is, c.index)}});
    }

    // test_scatter_op.py: X = ones, float32.
    struct scatter_class {
        const char* name;
        Shape x;
        std::vector<std::int64_t> ids;
        DataType ids_type;
        bool overwrite;
    };
    const scatter_class scatters[] = {{"TestScatterOp", {3, 50}, {1, 2}, DataType::INT32, true},
                                      {"TestScatterOp0", {3, 3}, {1, 2}, DataType::INT32, true},
                                      {"TestScatterOp1", {3, 3}, {1, 1}, DataType::INT32, false},
                                      {"TestScatterOp4", {3, 3}, {1, 2}, DataType::INT64, true}};
    for (const auto& c : scatters) {
        INFO(c.name);
        const std::int64_t n = static_cast<std::int64_t>(c.ids.size());
        Shape us = c.x;
        us[0] = n;
        const std::vector<float> xv(static_cast<std::size_t>(c.x.numel()), 1.0f);
        const auto uv = random_of<float>(static_cast<std::size_t>(us.numel()), seed++, 0, 1);
        Program p;
        auto x = p.input<float>("x", c.x);
        auto u = p.input<float>("u", us);
        auto run = [&](auto ids) {
            auto y = scatter(x, ids, u, c.overwrite);
            Session<cpu> s(p);
            CHECK(values_of<float>(s.eval({y}, {{x, tensor_of<float>(c.x, xv)}, {ids, ids_tensor(c.ids_type, {n}, c.ids)},
                                                {u, tensor_of<float>(us, uv)}})[0]) == ref_scatter(xv, c.x[1], c.ids, uv, c.overwrite));
        };
        if (c.ids_type == DataType::INT32) run(p.input<std::int32_t>("ids", {n}));
        else run(p.input<std::int64_t>("ids", {n}));
    }
    // Not ported: the FP16 and BF16 classes (no such kernels), and those
    // that run only on a GPU (TestScatterOp2, TestScatterOp3: the same
    // configurations as Op0 and Op1).
}

TEST_CASE("Paddle's test_elementwise_mod_op.py and test_elementwise_floordiv_op.py classes") {
    std::mt19937 g(91);
    // TestElementwiseModOp (and floordiv's): int32 [10, 10], X uniform in
    // [0, 10000), Y in [0, 1000) truncated (a 0 would be Paddle's error too:
    // its draws never hit one, ours are redrawn).
    auto ints = [&](std::size_t n, double lo, double hi) {
        std::uniform_real_distribution<double> u(lo, hi);
        std::vector<std::int32_t> v(n);
        for (auto& e : v)
            do e = static_cast<std::int32_t>(u(g));
            while (lo == 0 && hi == 1000 && e == 0);
        return v;
    };
    // _scalar: X (2, 3, 4) * a scale up to 1e8, Y (1) * scale + 1.
    struct mod_class {
        const char* name;
        Shape x, y;
        double xlo, xhi, ylo, yhi;
    };
    const mod_class classes[] = {{"TestElementwiseModOp", {10, 10}, {10, 10}, 0, 10000, 0, 1000},
                                 {"TestElementwiseModOp_scalar", {2, 3, 4}, {1}, 0, 1e8, 1, 1e8}};
    for (const auto& c : classes)
        for (const char* op : {"elementwise_mod", "elementwise_floordiv"}) {
            INFO(c.name << " (" << op << ")");
            const auto xv = ints(static_cast<std::size_t>(c.x.numel()), c.xlo, c.xhi);
            const auto yv = ints(static_cast<std::size_t>(c.y.numel()), c.ylo, c.yhi);
            Program p;
            auto x = p.input<std::int32_t>("x", c.x);
            auto y = p.input<std::int32_t>("y", c.y);
            auto z = apply_op<std::int32_t>(op, {{"X", x}, {"Y", y}});
            Session<cpu> s(p);
            const auto got = values_of<std::int32_t>(s.eval({z}, {{x, tensor_of<std::int32_t>(c.x, xv)}, {y, tensor_of<std::int32_t>(c.y, yv)}})[0]);
            for (std::size_t i = 0; i < xv.size(); ++i) {
                const std::int32_t b = yv[yv.size() == 1 ? 0 : i];
                CHECK(got[i] == (std::string(op) == "elementwise_mod" ? py_mod(xv[i], b) : py_floordiv(xv[i], b)));
            }
        }
    // TestElementwiseModOpFloat / Double: X uniform in [-1000, 1000), Y in
    // [-100, 100), Out = np.fmod(y + np.fmod(x, y), y).
    for (DataType t : {DataType::FP32, DataType::FP64}) {
        visit_dtype(t, [&]<class T>(type_tag<T>) {
            if constexpr (std::is_floating_point_v<T>) {
                INFO((t == DataType::FP32 ? "TestElementwiseModOpFloat" : "TestElementwiseModOpDouble"));
                const auto xv = random_of<T>(100, 92, -1000, 1000);
                const auto yv = random_of<T>(100, 93, -100, 100);
                Program p;
                auto x = p.input<T>("x", {10, 10});
                auto y = p.input<T>("y", {10, 10});
                auto z = mod(x, y);
                Session<cpu> s(p);
                const auto got = values_of<T>(s.eval({z}, {{x, tensor_of<T>({10, 10}, xv)}, {y, tensor_of<T>({10, 10}, yv)}})[0]);
                for (std::size_t i = 0; i < xv.size(); ++i) {
                    // assert_allclose's rtol 1e-7 (float64) / check_output's atol 1e-5 (float32), on values up to 100.
                    const double want = std::fmod(static_cast<double>(yv[i]) + std::fmod(static_cast<double>(xv[i]), static_cast<double>(yv[i])), static_cast<double>(yv[i]));
                    CHECK(std::abs(static_cast<double>(got[i]) - want) <= (std::is_same_v<T, float> ? 1e-5 : 1e-12));
                }
            }
        });
    }
    // Not ported: TestElementwiseModOpFp16 (no FP16 kernels).
}

// ---- range (paddle.arange) --------------------------------------------------

namespace {
template <class T> Tensor one(T v) { return tensor_of<T>({1}, {v}); }
}  // namespace

TEST_CASE("Paddle's test_arange.py classes") {
    // Start, End and Step fed as [1] tensors of the class's dtype; the
    // reference is np.arange on the class's numbers (float64), cast to the dtype.
    struct arange_class {
        const char* name;
        DataType dtype;
        double start, end, step;
    };
    const arange_class cases[] = {
        {"TestArangeOp", DataType::FP32, 0, 1, 0.2},         {"TestFloatArangeOp", DataType::FP32, 0, 5, 1},
        {"TestInt32ArangeOp", DataType::INT32, 0, 5, 2},     {"TestFloat64ArangeOp", DataType::FP64, 10, 1, -2},
        {"TestInt64ArangeOp", DataType::INT64, -1, -10, -2}, {"TestZeroSizeArangeOp", DataType::INT32, 0, 0, 1},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        visit_dtype(c.dtype, [&]<class T>(type_tag<T>) {
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                          std::is_same_v<T, std::int64_t>) {
                std::vector<double> want;  // np.arange: ceil((end - start) / step) values start + i * step
                const auto n = static_cast<std::int64_t>(std::ceil((c.end - c.start) / c.step));
                for (std::int64_t i = 0; i < n; ++i) want.push_back(c.start + static_cast<double>(i) * c.step);
                Program p;
                auto start = p.input<T>("start", {1});
                auto end = p.input<T>("end", {1});
                auto step = p.input<T>("step", {1});
                auto out = arange(start, end, step);
                CHECK(out.shape() == Shape{-1});  // not known before the values
                Session<cpu> s(p);
                const Tensor got = s.eval({out}, {{start, one(static_cast<T>(c.start))}, {end, one(static_cast<T>(c.end))},
                                                  {step, one(static_cast<T>(c.step))}})[0];
                REQUIRE(got.shape() == Shape{n});
                for (std::int64_t i = 0; i < n; ++i)  // float32: the inputs are rounded to float first (0.2f)
                    CHECK(static_cast<double>(got.data<T>()[i]) ==
                          doctest::Approx(static_cast<double>(static_cast<T>(want[static_cast<std::size_t>(i)]))).epsilon(1e-7));
            }
        });
    }
    // Not ported: TestArangeOpError (int8, which dlgraph has no dtype for),
    // and the API / imperative classes.
}

TEST_CASE("range: lengths exact at the integer limits, a float length as Paddle computes it, values not a running sum") {
    using L = std::numeric_limits<std::int64_t>;
    Program p;
    auto a = p.input<std::int64_t>("a", {1});
    auto b = p.input<std::int64_t>("b", {1});
    auto c = p.input<std::int64_t>("c", {1});
    auto r = arange(a, b, c);
    Session<cpu> s(p);
    // |End - Start| = 2^64 - 1 does not fit in int64: 4 steps of 2^62.
    auto got = values_of<std::int64_t>(s.eval({r}, {{a, one(L::min())}, {b, one(L::max())}, {c, one(std::int64_t{1} << 62)}})[0]);
    CHECK(got == std::vector<std::int64_t>{L::min(), -(std::int64_t{1} << 62), 0, std::int64_t{1} << 62});
    got = values_of<std::int64_t>(s.eval({r}, {{a, one<std::int64_t>(L::max())}, {b, one<std::int64_t>(L::max() - 7)}, {c, one<std::int64_t>(-3)}})[0]);
    CHECK(got == std::vector<std::int64_t>{L::max(), L::max() - 3, L::max() - 6});

    // 0.1 * 30 steps: start + i * step, rounded once (a running sum drifts).
    Program q;
    auto fa = q.input<double>("a", {1});
    auto fb = q.input<double>("b", {1});
    auto fc = q.input<double>("c", {1});
    auto fr = arange(fa, fb, fc);
    Session<cpu> t(q);
    const auto f = values_of<double>(t.eval({fr}, {{fa, one(0.0)}, {fb, one(3.0)}, {fc, one(0.1)}})[0]);
    REQUIRE(f.size() == 30);  // 3 / 0.1 rounds to 30 in double
    for (std::size_t i = 0; i < f.size(); ++i) CHECK(f[i] == static_cast<double>(i) * 0.1);
}

TEST_CASE("range: constants fold while planning, a new fed value gives a new length, scope values") {
    // arange(p, ...) makes its values with fill_constant: the planner runs it.
    {
        Program p;
        auto r = arange<std::int32_t>(p, 3, 11, 2);
        auto x = p.input<std::int32_t>("x", {4});
        auto y = r * x;  // shapes meet while planning: [-1] before, [4] then
        Session<cpu> s(p);
        const auto got = values_of<std::int32_t>(s.eval({y}, {{x, tensor_of<std::int32_t>({4}, {1, 2, 3, 4})}})[0]);
        CHECK(got == std::vector<std::int32_t>{3, 10, 21, 36});
    }
    // A fed End: each run's value sets that run's length, also back and forth
    // at one shape ([1]), and a constant fed over is the fed value.
    {
        Program p;
        auto start = p.constant<float>(1.0f);
        auto end = p.input<float>("end", {1});
        auto step = p.constant<float>(0.5f);
        auto r = arange(start, end, step);
        Session<cpu> s(p);
        for (float e : {3.0f, 5.0f, 3.0f, 1.0f, 2.2f}) {
            CAPTURE(e);
            const Tensor got = s.eval({r}, {{end, one(e)}})[0];
            const auto n = static_cast<std::int64_t>(std::ceil((e - 1.0f) / 0.5f));
            REQUIRE(got.shape() == Shape{n});
            for (std::int64_t i = 0; i < n; ++i) CHECK(got.data<float>()[i] == 1.0f + 0.5f * static_cast<float>(i));
        }
        CHECK(s.eval({r}, {{end, one(2.0f)}, {step, one(0.25f)}})[0].shape() == Shape{4});
    }
    // A persistable in the scope: changing its value changes the length.
    {
        Program p;
        auto n = p.parameter<std::int64_t>("n", {1}, init::constant(4), false);
        auto zero = p.constant<std::int64_t>(0);
        auto one_ = p.constant<std::int64_t>(1);
        auto r = arange(zero, n, one_);
        Session<cpu> s(p);
        CHECK(values_of<std::int64_t>(s.eval({r})[0]) == std::vector<std::int64_t>{0, 1, 2, 3});
        s.scope().var("n").get_mutable<Tensor>() = one<std::int64_t>(2);
        CHECK(values_of<std::int64_t>(s.eval({r})[0]) == std::vector<std::int64_t>{0, 1});
    }
}

TEST_CASE("range: errors by their text, a refused run leaves the session as it was") {
    Program p;
    auto a = p.input<double>("a", {1});
    auto b = p.input<double>("b", {1});
    auto c = p.input<double>("c", {1});
    auto r = arange(a, b, c);
    Session<cpu> s(p);
    auto run = [&](double x, double y, double z) { return s.eval({r}, {{a, one(x)}, {b, one(y)}, {c, one(z)}})[0]; };
    CHECK(run(0, 3, 1).numel() == 3);
    check_throws<shape_error>([&] { run(0, 3, 0); }, {"[dlgraph.shape.value]", "range", "Start 0, End 3, Step 0: Step must not be 0"});
    check_throws<shape_error>([&] { run(0, 3, -1); }, {"[dlgraph.shape.value]", "Step must point from Start towards End"});
    check_throws<shape_error>([&] { run(5, 3, 1); }, {"[dlgraph.shape.value]", "Step must point from Start towards End"});
    check_throws<shape_error>([&] { run(0, std::nan(""), 1); }, {"[dlgraph.shape.value]", "a value is not a number"});
    check_throws<shape_error>([&] { run(0, std::numeric_limits<double>::infinity(), 1); }, {"[dlgraph.resource.size]", "more than 2^62 elements"});
    check_throws<resource_error>([&] { run(0, 1e17, 1); }, {"[dlgraph.resource.size]"});  // 800 PB
    CHECK(values_of<double>(run(2, 3.5, 0.5)) == std::vector<double>{2, 2.5, 3});

    // Shapes and dtypes, while building.
    Program q;
    auto x = q.input<double>("x", {2});
    auto i = q.input<std::int32_t>("i", {1});
    auto f = q.input<double>("f", {1});
    CHECK_THROWS_WITH_AS(arange(x, f, f), doctest::Contains("Start must hold one value (shape [1]), not [2]"), shape_error);
    CHECK_THROWS_AS(apply_op<double>("range", {{"Start", f}, {"End", i}, {"Step", f}}), type_error);
    auto bl = q.input<bool>("bl", {1});
    CHECK_THROWS_AS(apply_op<bool>("range", {{"Start", bl}, {"End", bl}, {"Step", bl}}), type_error);

    // A value the program computes is not known while planning.
    Program u;
    auto e = u.constant<double>(2.0) + u.constant<double>(3.0);
    auto ur = arange(u.constant<double>(0.0), e, u.constant<double>(1.0));
    Session<cpu> us(u);
    check_throws<shape_error>([&] { us.eval({ur}); },
                              {"[dlgraph.shape.value]", "End sets Out's length, so its value must be known before the run"});
}

TEST_CASE("range: a constant written again before range is no longer known while planning, after range it is") {
    // n = fill_constant(5), then increment(n) -> n: the folded 5 is stale, and
    // the new value is only known after that step runs.
    auto build = [](bool increment_first, Program& p) {
        auto n = p.constant<std::int64_t>(5, {1}, "n");
        if (increment_first) p.append("increment", {{"X", {"n"}}}, {}, {Attribute::make_float("step", 1.0)}, nullptr, {{"Out", {"n"}}});
        auto r = arange(p.constant<std::int64_t>(0), n, p.constant<std::int64_t>(1));
        if (!increment_first) p.append("increment", {{"X", {"n"}}}, {}, {Attribute::make_float("step", 1.0)}, nullptr, {{"Out", {"n"}}});
        return r;
    };
    {
        Program p;
        auto r = build(true, p);
        Session<cpu> s(p);
        check_throws<shape_error>([&] { s.eval({r}); },
                                  {"[dlgraph.shape.value]", "End sets Out's length, so its value must be known before the run"});
    }
    {
        Program p;
        auto r = build(false, p);
        Session<cpu> s(p);
        CHECK(values_of<std::int64_t>(s.eval({r})[0]) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
    }
}
