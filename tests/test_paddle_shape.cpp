// Paddle's OpTest classes (python/paddle/fluid/tests/unittests) for the
// matrix products (matmul, matmul_v2, mul), the shape ops (reshape,
// transpose, concat, split, squeeze2, unsqueeze2, slice, flip,
// flatten_contiguous_range), the index and evaluation ops (top_k,
// lookup_table, lookup_table_v2, accuracy) and the optimizers (sgd,
// momentum, adam, adamw), ported as tables: one TEST_CASE per Paddle file,
// one row per class with its shapes, attributes, dtype and input range
// (np.random.random / np.random.uniform: a seeded uniform draw;
// np.random.randint: a seeded integer draw), against the class's own NumPy
// formula written here in double precision.
//
// Copies (the shape ops, lookups, top_k, accuracy) are compared exactly;
// products and optimizer updates with a tolerance stated where it is used.
//
// Gradients: every op here whose Paddle class has check_grad already has a
// finite-difference check in FP64 elsewhere in tests/ (mul, matmul with every
// transpose and rank-1 operands, reshape, transpose, concat, split:
// test_grad_ops.cpp; squeeze2 / unsqueeze2, flip, slice: test_ops.cpp;
// flatten_contiguous_range: test_conv.cpp; lookup_table(_v2) with padding:
// test_lookup_table.cpp), so none is repeated here, except matmul_v2's:
// finite differences for three of test_matmul_v2_op.py's classes.
//
// Paddle files not ported here: test_arg_min_max_op.py is ported in
// test_index_ops.cpp ("Paddle's test_arg_min_max_op.py classes").
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

using dims = std::vector<std::int64_t>;

// n values drawn uniformly from [lo, hi), as T: integers (and bool)
// truncate, as NumPy's astype does.
template <class T> std::vector<T> draw(std::size_t n, std::mt19937& g, double lo = 0, double hi = 1) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<T>) v[i] = static_cast<T>(static_cast<std::int64_t>(std::floor(u(g))));
        else v[i] = static_cast<T>(u(g));
    }
    return v;
}

// np.random.randint(lo, hi, n): integers in [lo, hi).
std::vector<std::int64_t> randint(std::size_t n, std::mt19937& g, std::int64_t lo, std::int64_t hi) {
    std::uniform_int_distribution<std::int64_t> u(lo, hi - 1);
    std::vector<std::int64_t> v(n);
    for (auto& e : v) e = u(g);
    return v;
}


std::vector<double> as_doubles(const Tensor& t) {
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    if (t.dtype() == DataType::FP32)
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
    else if (t.dtype() == DataType::FP64)
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.data<double>()[i];
    else
        FAIL("not a floating-point tensor: " << to_string(t.dtype()));
    return v;
}

std::int64_t product(const Shape& s, int from, int to) {
    std::int64_t n = 1;
    for (int d = from; d < to; ++d) n *= s[d];
    return n;
}

// The tensors fed to one input slot (several for a duplicable slot).
struct slot_in {
    std::string slot;
    std::vector<Tensor> values;
};

struct op_run {
    std::vector<Tensor> out;     // the fetched outputs, slot by slot
    std::vector<Shape> inferred;  // every output's inferred shape, slot by slot
};

// Runs one op of `type` on fed inputs (one variable per tensor, declared with
// the tensor's dtype and shape), with output slots `outs` (name, count) and
// `attrs`; fetches the variables of the first `fetch_slots` output slots
// (all when negative).
op_run run_op(const std::string& type, const std::vector<slot_in>& ins, const std::vector<std::pair<std::string, int>>& outs,
              std::vector<Attribute> attrs, int fetch_slots = -1) {
    Program p;
    std::vector<OpSlot> slots;
    std::vector<std::string> names;
    for (const auto& in : ins) {
        OpSlot s;
        s.parameter = in.slot;
        for (std::size_t k = 0; k < in.values.size(); ++k) {
            const std::string name = in.slot + "_" + std::to_string(k);
            const Tensor& t = in.values[k];
            visit_dtype(t.dtype(), [&]<class T>(type_tag<T>) { p.input<T>(name, t.shape()); });
            s.arguments.push_back(name);
            names.push_back(name);
        }
        slots.push_back(std::move(s));
    }
    std::vector<std::vector<std::string>> out_names;
    p.append(type, slots, outs, std::move(attrs), &out_names);
    std::vector<Feed> feeds;
    std::size_t at = 0;
    for (const auto& in : ins)
        for (const auto& t : in.values) feeds.emplace_back(std::string_view(names[at++]), t);
    op_run r;
    std::vector<TargetRef> targets;
    for (std::size_t k = 0; k < out_names.size(); ++k)
        for (const auto& n : out_names[k]) {
            r.inferred.push_back(Shape(p.desc().blocks[0].find_var(n)->dims));
            if (fetch_slots < 0 || static_cast<int>(k) < fetch_slots) targets.push_back(n);
        }
    Session<cpu> s(p);
    r.out = s.eval(targets, feeds);
    return r;
}

std::string text(const Shape& s) { return to_string(s); }

// Exact comparison: dtype, shape and every element.
template <class T> void check_same(const Tensor& got, const Shape& shape, const std::vector<T>& want) {
    REQUIRE(got.dtype() == dtype_of<T>);
    CHECK_MESSAGE(got.shape() == shape, "shape " << text(got.shape()) << ", expected " << text(shape));
    REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
    const T* g = got.data<T>();
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
        if (!(g[i] == static_cast<T>(want[i])) && bad++ == 0) first = i;
    CHECK_MESSAGE(bad == 0, bad << " of " << want.size() << " elements differ, the first at " << first);
}

// |got - want| <= atol + rtol * |want| for every element.
void check_close(const Tensor& got, const Shape& shape, const std::vector<double>& want, double atol, double rtol = 0) {
    CHECK_MESSAGE(got.shape() == shape, "shape " << text(got.shape()) << ", expected " << text(shape));
    const auto g = as_doubles(got);
    REQUIRE(g.size() == want.size());
    std::size_t bad = 0, first = 0;
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double err = std::abs(g[i] - want[i]);
        worst = std::max(worst, err);
        if (!(err <= atol + rtol * std::abs(want[i])) && bad++ == 0) first = i;
    }
    CHECK_MESSAGE(bad == 0, bad << " of " << want.size() << " elements differ, the first at " << first << ": "
                                << (g.empty() ? 0.0 : g[first]) << " vs " << (want.empty() ? 0.0 : want[first])
                                << " (largest error " << worst << ")");
}

// |got - want| <= `ulps` units in the last place of want as FP32 plus
// `atol`: for FP32 results rounded once at the end (the ulps) after earlier
// roundings of at most atol.
void check_ulps(const Tensor& got, const Shape& shape, const std::vector<double>& want, double ulps, double atol) {
    REQUIRE(got.dtype() == DataType::FP32);
    CHECK_MESSAGE(got.shape() == shape, "shape " << text(got.shape()) << ", expected " << text(shape));
    REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
    const float* g = got.data<float>();
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const float w = static_cast<float>(std::abs(want[i]));
        const double ulp = static_cast<double>(std::nextafter(w, std::numeric_limits<float>::infinity())) - w;
        if (!(std::abs(g[i] - want[i]) <= ulps * ulp + atol) && bad++ == 0) first = i;
    }
    CHECK_MESSAGE(bad == 0, bad << " of " << want.size() << " elements differ, the first at " << first << ": "
                                << (want.empty() ? 0.0 : g[first]) << " vs " << (want.empty() ? 0.0 : want[first]));
}

// np.transpose(x, perm).
template <class T> std::vector<T> ref_transpose(const std::vector<T>& x, const Shape& xs, const dims& perm, Shape& out) {
    out = Shape();
    for (auto p : perm) out.push_back(xs[static_cast<int>(p)]);
    std::vector<T> y(x.size());
    dims in(perm.size());
    for (std::int64_t j = 0; j < out.numel(); ++j) {
        const dims o = unravel(j, out);
        for (std::size_t i = 0; i < perm.size(); ++i) in[static_cast<std::size_t>(perm[i])] = o[i];
        y[static_cast<std::size_t>(j)] = x[static_cast<std::size_t>(ravel(in, xs))];
    }
    return y;
}

// An array in double with its shape.
struct nd {
    Shape s;
    std::vector<double> v;
};

// reference_matmul of test_matmul_op.py: the transposes as it does them (a
// transposed 1-D X is a column, a transposed 1-D Y a row; otherwise the
// last two dims swap), then np.matmul (a 1-D operand gains a unit dim that
// Out drops; batch dims broadcast), a 0-D result as [1].
nd ref_matmul(nd x, nd y, bool tx, bool ty) {
    auto swap_last2 = [](const nd& a) {
        dims perm(static_cast<std::size_t>(a.s.rank()));
        for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(i);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        nd t;
        t.v = ref_transpose(a.v, a.s, perm, t.s);
        return t;
    };
    if (tx) x = x.s.rank() == 1 ? nd{Shape{x.s[0], 1}, x.v} : swap_last2(x);
    if (ty) y = y.s.rank() == 1 ? nd{Shape{1, y.s[0]}, y.v} : swap_last2(y);
    bool drop_m = false, drop_n = false;
    if (x.s.rank() == 1) {
        x.s = Shape{1, x.s[0]};
        drop_m = true;
    }
    if (y.s.rank() == 1) {
        y.s = Shape{y.s[0], 1};
        drop_n = true;
    }
    const int xr = x.s.rank(), yr = y.s.rank();
    const std::int64_t m = x.s[xr - 2], k = x.s[xr - 1], n = y.s[yr - 1];
    REQUIRE(y.s[yr - 2] == k);
    const int xb = xr - 2, yb = yr - 2, rb = std::max(xb, yb);
    Shape batch, xbs, ybs;
    for (int i = 0; i < xb; ++i) xbs.push_back(x.s[i]);
    for (int i = 0; i < yb; ++i) ybs.push_back(y.s[i]);
    for (int i = 0; i < rb; ++i) {
        const std::int64_t a = i - (rb - xb) >= 0 ? x.s[i - (rb - xb)] : 1, b = i - (rb - yb) >= 0 ? y.s[i - (rb - yb)] : 1;
        REQUIRE((a == b || a == 1 || b == 1));
        batch.push_back(std::max(a, b));
    }
    nd out;
    out.s = batch;
    if (!drop_m) out.s.push_back(m);
    if (!drop_n) out.s.push_back(n);
    if (out.s.rank() == 0) out.s.push_back(1);
    out.v.assign(static_cast<std::size_t>(batch.numel() * m * n), 0.0);
    for (std::int64_t b = 0; b < batch.numel(); ++b) {
        const dims bi = unravel(b, batch);
        dims xi, yi;
        for (int i = 0; i < xb; ++i) xi.push_back(x.s[i] == 1 ? 0 : bi[static_cast<std::size_t>(i + rb - xb)]);
        for (int i = 0; i < yb; ++i) yi.push_back(y.s[i] == 1 ? 0 : bi[static_cast<std::size_t>(i + rb - yb)]);
        const double* xm = x.v.data() + ravel(xi, xbs) * m * k;
        const double* ym = y.v.data() + ravel(yi, ybs) * k * n;
        double* o = out.v.data() + b * m * n;
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (std::int64_t l = 0; l < k; ++l) acc += xm[i * k + l] * ym[l * n + j];
                o[i * n + j] = acc;
            }
    }
    return out;
}

// A tensor of FP64 values drawn from [0, 1), written in place (no copy: the
// largest of test_concat_op.py's inputs has 11 million).
Tensor random_fp64(const Shape& s, std::mt19937& g) {
    Tensor t(DataType::FP64, s);
    std::uniform_real_distribution<double> u(0, 1);
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = u(g);
    return t;
}

}  // namespace

// ---- matrix products -----------------------------------------------------------------------------

TEST_CASE("Paddle's test_matmul_op.py classes") {
    // The generated classes TestMatMulOp_dimX_{1,2,3}_dim_Y_{1,2,3}_transX_*_transY_*
    // (generate_compatible_shapes: batch 2, M 3, N 4, K 5, K 1 where a
    // vector is transposed) and the n-dim ones TestMatMulOp_dimX_4_dim_Y_4_*
    // (generate_compatible_shapes_ndim: batch dims [2, 2], M 2, N 4, K 3);
    // X and Y float32 in [0, 1). Tolerance 2e-6 (tighter than check_output's
    // atol 1e-5): with K <= 5 products of values below 1, FP32 rounding in
    // any summation order stays below K * 2^-24 * K ~ 1.5e-6.
    struct mm_class {
        std::string name;
        Shape x, y;
        bool tx, ty;
    };
    auto tf = [](bool b) { return b ? std::string("True") : std::string("False"); };
    std::vector<mm_class> classes;
    for (int dx = 1; dx <= 3; ++dx)
        for (int dy = 1; dy <= 3; ++dy)
            for (bool tx : {false, true})
                for (bool ty : {false, true}) {
                    const std::int64_t M = 3, N = 4, K = (dx == 1 && tx) || (dy == 1 && ty) ? 1 : 5;
                    Shape xs = dx == 1 ? Shape{tx ? M : K} : (tx ? Shape{K, M} : Shape{M, K});
                    Shape ys = dy == 1 ? Shape{ty ? N : K} : (ty ? Shape{N, K} : Shape{K, N});
                    if (dx == 3) xs = Shape{2, xs[0], xs[1]};
                    if (dy == 3) ys = Shape{2, ys[0], ys[1]};
                    classes.push_back({"TestMatMulOp_dimX_" + std::to_string(dx) + "_dim_Y_" + std::to_string(dy) + "_transX_" +
                                           tf(tx) + "_transY_" + tf(ty),
                                       xs, ys, tx, ty});
                }
    const std::size_t generated = classes.size();
    for (bool tx : {false, true})
        for (bool ty : {false, true}) {
            const std::int64_t M = 2, N = 4, K = 3;
            classes.push_back({"TestMatMulOp_dimX_4_dim_Y_4_transX_" + tf(tx) + "_transY_" + tf(ty),
                               tx ? Shape{2, 2, K, M} : Shape{2, 2, M, K}, ty ? Shape{2, 2, N, K} : Shape{2, 2, K, N}, tx, ty});
        }
    REQUIRE(classes.size() == 40);
    std::mt19937 g(101);
    for (std::size_t c = 0; c < classes.size(); ++c) {
        const auto& mc = classes[c];
        INFO(mc.name << ": X " << text(mc.x) << ", Y " << text(mc.y));
        const auto xv = draw<float>(static_cast<std::size_t>(mc.x.numel()), g);
        const auto yv = draw<float>(static_cast<std::size_t>(mc.y.numel()), g);
        const nd want = ref_matmul({mc.x, {xv.begin(), xv.end()}}, {mc.y, {yv.begin(), yv.end()}}, mc.tx, mc.ty);
        const auto r = run_op("matmul", {{"X", {tensor_of<float>(mc.x, xv)}}, {"Y", {tensor_of<float>(mc.y, yv)}}}, {{"Out", 1}},
                              {Attribute::make_bool("transpose_X", mc.tx), Attribute::make_bool("transpose_Y", mc.ty)});
        CHECK_MESSAGE(r.inferred[0] == want.s, "inferred " << text(r.inferred[0]) << ", expected " << text(want.s));
        check_close(r.out[0], want.s, want.v, 2e-6);

        // The generated API classes TestMatMulAPI_dimX_*_dim_Y_*_transX_*_transY_*
        // (the same 36 configurations): X and Y declared with every non-empty
        // set of dims unknown (generate_negative_dims); Out has the
        // reference's rank and its known dims agree with it. Paddle then runs
        // the program and calls np.allclose without asserting it; here the
        // values are compared as above.
        if (c >= generated) continue;
        auto unknowns = [](const Shape& s) {
            std::vector<Shape> out;
            for (unsigned mask = 1; mask < (1u << s.rank()); ++mask) {
                Shape u = s;
                for (int i = 0; i < s.rank(); ++i)
                    if (mask & (1u << i)) u[i] = -1;
                out.push_back(u);
            }
            return out;
        };
        const Tensor xt = tensor_of<float>(mc.x, xv), yt = tensor_of<float>(mc.y, yv);
        for (const Shape& ux : unknowns(mc.x))
            for (const Shape& uy : unknowns(mc.y)) {
                INFO("TestMatMulAPI: x declared " << text(ux) << ", y " << text(uy));
                Program p;
                auto x = p.input<float>("x", ux);
                auto y = p.input<float>("y", uy);
                auto z = matmul(x, y, mc.tx, mc.ty);
                const Shape zs = z.shape();
                REQUIRE(zs.rank() == want.s.rank());
                for (int i = 0; i < zs.rank(); ++i)
                    if (zs[i] != -1) CHECK(zs[i] == want.s[i]);
                Session<cpu> s(p);
                check_close(s.eval({z}, {{x, xt}, {y, yt}})[0], want.s, want.v, 2e-6);
            }
    }
    // Not ported: TestMatmulOpError, API_TestMm, Test_API_Matmul and
    // API_TestMmError test the Python API (paddle.mm) and dygraph mode.
}

namespace {

// reference_matmul of test_matmul_v2_op.py: a transposed X or Y of rank 2
// or more has its last two dims swapped, a 1-D one stays as it is
// (X.reshape((X.size,))); then np.matmul, a 0-D result as [1]. That is
// test_matmul_op.py's reference with the flags of 1-D operands dropped.
nd ref_matmul_v2(const nd& x, const nd& y, bool tx, bool ty) {
    return ref_matmul(x, y, tx && x.s.rank() > 1, ty && y.s.rank() > 1);
}

nd absolute(nd a) {
    for (auto& e : a.v) e = std::abs(e);
    return a;
}

// |got - want| <= bound[i] for every element.
void check_bounded(const Tensor& got, const Shape& shape, const std::vector<double>& want, const std::vector<double>& bound) {
    CHECK_MESSAGE(got.shape() == shape, "shape " << text(got.shape()) << ", expected " << text(shape));
    const auto g = as_doubles(got);
    REQUIRE(g.size() == want.size());
    REQUIRE(bound.size() == want.size());
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
        if (!(std::abs(g[i] - want[i]) <= bound[i]) && bad++ == 0) first = i;
    CHECK_MESSAGE(bad == 0, bad << " of " << want.size() << " elements differ, the first at " << first << ": "
                                << (g.empty() ? 0.0 : g[first]) << " vs " << (want.empty() ? 0.0 : want[first]) << " (bound "
                                << (bound.empty() ? 0.0 : bound[first]) << ")");
}

xt::xarray<double> xarray_of(const Shape& s, const std::vector<double>& v) {
    xt::xarray<double> a = xt::xarray<double>::from_shape(std::vector<std::size_t>(s.begin(), s.end()));
    std::copy(v.begin(), v.end(), a.begin());
    return a;
}

}  // namespace

TEST_CASE("Paddle's test_matmul_v2_op.py classes") {
    // TestMatMulV2Op and its subclasses: X, Y np.random.random of the
    // class's shapes mapped to [-0.1, 0.1) (-0.1 + 0.2 * x), float64
    // (float32 where Paddle is built for ROCm: run here too), attributes
    // trans_x and trans_y; Out = reference_matmul. Tolerance, element by
    // element: 2 K u sum_k |x_k y_k| (K the summed length, u the unit
    // roundoff of the dtype), which bounds the rounding of any summation
    // order of the product and of the reference's own in double.
    struct mm2_class {
        const char* name;
        Shape x, y;
        bool tx, ty;
    };
    const mm2_class classes[] = {
        {"TestMatMulV2Op", {100}, {100}, false, false},
        {"TestMatMulOp2", {100}, {1, 3, 2, 100}, false, true},
        {"TestMatMulOp3", {100}, {1, 1, 100, 2}, false, false},
        {"TestMatMulOp4", {100}, {1, 2, 100, 2}, false, false},
        {"TestMatMulOp5", {1, 1, 100, 1}, {100}, true, false},
        {"TestMatMulOp6", {1, 2, 102, 1}, {102}, true, false},
        {"TestMatMulOp7", {1, 2, 1, 100}, {100}, false, false},
        {"TestMatMulOp8", {1, 1, 2, 100}, {1, 1, 100, 2}, false, false},
        {"TestMatMulOp9", {1, 1, 1, 100}, {2, 1, 2, 100}, false, true},
        {"TestMatMulOp10", {1, 1, 25, 4}, {1, 2, 4, 25}, false, false},
        {"TestMatMulOp11", {2, 1, 2, 100}, {1, 1, 100, 2}, false, false},
        {"TestMatMulOp12", {2, 1, 4, 25}, {1, 1, 4, 25}, true, false},
        {"TestMatMulOp13", {2, 2, 10, 10}, {2, 2, 10, 10}, true, false},
        {"TestMatMulOp14", {3, 1, 6, 6}, {1, 2, 6, 9}, true, false},
        {"TestMatMulOp15", {3, 1, 6, 6}, {1, 2, 6, 9}, false, false},
        {"TestMatMulOp16", {100}, {1, 2, 2, 100, 2}, false, false},
        {"TestMatMulOp17", {2, 1, 100}, {100}, false, false},
        {"TestMatMulOpBroadcast1", {3, 1, 10, 10}, {1, 2, 10, 10}, true, true},
        {"TestMatMulOpBroadcast2", {3, 1, 10, 10}, {1, 2, 10, 10}, false, true},
    };
    std::mt19937 g(105);
    for (const auto& c : classes) {
        for (const DataType dt : {DataType::FP64, DataType::FP32}) {
            INFO(std::string(c.name) << " (" << std::string(dt == DataType::FP64 ? "float64" : "float32, Paddle's dtype on ROCm") << "): X "
                        << text(c.x) << ", Y " << text(c.y) << ", trans_x " << c.tx << ", trans_y " << c.ty);
            auto xv = draw<double>(static_cast<std::size_t>(c.x.numel()), g), yv = draw<double>(static_cast<std::size_t>(c.y.numel()), g);
            for (auto* v : {&xv, &yv})
                for (auto& e : *v) {
                    e = -0.1 + 0.2 * e;
                    if (dt == DataType::FP32) e = static_cast<float>(e);  // .astype(float32) before the reference
                }
            const nd want = ref_matmul_v2({c.x, xv}, {c.y, yv}, c.tx, c.ty);
            const nd mags = ref_matmul_v2(absolute({c.x, xv}), absolute({c.y, yv}), c.tx, c.ty);
            const std::int64_t k = c.y.rank() == 1 ? c.y[0] : (c.ty ? c.y[c.y.rank() - 1] : c.y[c.y.rank() - 2]);
            const double u = dt == DataType::FP64 ? 0x1p-53 : 0x1p-24;
            std::vector<double> bound(mags.v.size());
            for (std::size_t i = 0; i < bound.size(); ++i) bound[i] = 2.0 * static_cast<double>(k) * u * mags.v[i];
            const std::vector<Attribute> attrs{Attribute::make_bool("trans_x", c.tx), Attribute::make_bool("trans_y", c.ty)};
            const auto r = dt == DataType::FP64
                               ? run_op("matmul_v2", {{"X", {tensor_of<double>(c.x, xv)}}, {"Y", {tensor_of<double>(c.y, yv)}}}, {{"Out", 1}}, attrs)
                               : run_op("matmul_v2",
                                        {{"X", {tensor_of<float>(c.x, {xv.begin(), xv.end()})}}, {"Y", {tensor_of<float>(c.y, {yv.begin(), yv.end()})}}},
                                        {{"Out", 1}}, attrs);
            CHECK_MESSAGE(r.inferred[0] == want.s, "inferred " << text(r.inferred[0]) << ", expected " << text(want.s));
            REQUIRE(r.out[0].dtype() == dt);
            check_bounded(r.out[0], want.s, want.v, bound);
        }
    }

    // The classes' check_grad (X@GRAD and Y@GRAD of Out) by finite
    // differences in float64, for a broadcast batch with trans_x
    // (TestMatMulOp14), a 1-D X against a 5-D Y (TestMatMulOp16, "to check
    // the gradient for special case") and a 1-D Y (TestMatMulOp17).
    unsigned grad_seed = 106;
    for (const std::string name : {"TestMatMulOp14", "TestMatMulOp16", "TestMatMulOp17"}) {
        const auto it = std::find_if(std::begin(classes), std::end(classes), [&](const mm2_class& m) { return m.name == name; });
        REQUIRE(it != std::end(classes));
        const mm2_class& c = *it;
        INFO(std::string(c.name) << " (X@GRAD, Y@GRAD)");
        std::mt19937 gg(grad_seed++);
        auto xv = draw<double>(static_cast<std::size_t>(c.x.numel()), gg, -0.1, 0.1);
        auto yv = draw<double>(static_cast<std::size_t>(c.y.numel()), gg, -0.1, 0.1);
        grad_check::check({{"x", xarray_of(c.x, xv)}, {"y", xarray_of(c.y, yv)}}, [&](Program&, const std::vector<Var<double>>& v) {
            return apply_op<double>("matmul_v2", {{"X", v[0]}, {"Y", v[1]}},
                                    {Attribute::make_bool("trans_x", c.tx), Attribute::make_bool("trans_y", c.ty)});
        });
    }
    // No class of the file sets trans_x or trans_y on a 1-D operand;
    // reference_matmul then leaves it as it is (as Paddle's kernel does):
    // X [100] with trans_x against TestMatMulOp3's Y, and TestMatMulOp17's
    // X against Y [100] with trans_y, as above.
    for (const mm2_class& c : {mm2_class{"TestMatMulOp3 with trans_x", {100}, {1, 1, 100, 2}, true, false},
                               mm2_class{"TestMatMulOp17 with trans_y", {2, 1, 100}, {100}, false, true}}) {
        INFO(std::string(c.name) << " (float64, a 1-D operand's flag)");
        auto xv = draw<double>(static_cast<std::size_t>(c.x.numel()), g, -0.1, 0.1);
        auto yv = draw<double>(static_cast<std::size_t>(c.y.numel()), g, -0.1, 0.1);
        const nd want = ref_matmul_v2({c.x, xv}, {c.y, yv}, c.tx, c.ty);
        const nd mags = ref_matmul_v2(absolute({c.x, xv}), absolute({c.y, yv}), c.tx, c.ty);
        std::vector<double> bound(mags.v.size());
        for (std::size_t i = 0; i < bound.size(); ++i) bound[i] = 2.0 * 100 * 0x1p-53 * mags.v[i];
        const auto r = run_op("matmul_v2", {{"X", {tensor_of<double>(c.x, xv)}}, {"Y", {tensor_of<double>(c.y, yv)}}}, {{"Out", 1}},
                              {Attribute::make_bool("trans_x", c.tx), Attribute::make_bool("trans_y", c.ty)});
        CHECK_MESSAGE(r.inferred[0] == want.s, "inferred " << text(r.inferred[0]) << ", expected " << text(want.s));
        check_bounded(r.out[0], want.s, want.v, bound);
    }
    // Not ported: the Fp16 and Bf16 variants (create_test_fp16_class,
    // create_test_bf16_class; CUDA only); TestComplexMatMulOp,
    // TestComplexMatMulOpBroadcast and TestMatMulTypePromotion (complex
    // dtypes, which dlgraph does not have); TestMatMulV2API (the Python API).
}

TEST_CASE("Paddle's test_mul_op.py classes") {
    // X, Y float64 in [0, 1); Out = np.dot of X and Y flattened to matrices
    // at x_num_col_dims / y_num_col_dims. Tolerance 1e-13: at most 18
    // products of values below 1, summed in double.
    struct mul_class {
        const char* name;
        Shape x, y;
        int xn, yn;
        Shape out;
    };
    const mul_class classes[] = {{"TestMulOp", {20, 5}, {5, 21}, 1, 1, {20, 21}},
                                 {"TestMulOp2", {3, 4, 2, 9}, {3, 6, 1, 2, 3}, 2, 2, {3, 4, 1, 2, 3}}};
    std::mt19937 g(111);
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        const auto xv = draw<double>(static_cast<std::size_t>(c.x.numel()), g);
        const auto yv = draw<double>(static_cast<std::size_t>(c.y.numel()), g);
        const std::int64_t m = product(c.x, 0, c.xn), k = product(c.x, c.xn, c.x.rank()), n = product(c.y, c.yn, c.y.rank());
        REQUIRE(product(c.y, 0, c.yn) == k);
        std::vector<double> want(static_cast<std::size_t>(m * n), 0.0);
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j)
                for (std::int64_t l = 0; l < k; ++l)
                    want[static_cast<std::size_t>(i * n + j)] += xv[static_cast<std::size_t>(i * k + l)] * yv[static_cast<std::size_t>(l * n + j)];
        const auto r = run_op("mul", {{"X", {tensor_of<double>(c.x, xv)}}, {"Y", {tensor_of<double>(c.y, yv)}}}, {{"Out", 1}},
                              {Attribute::make_int("x_num_col_dims", c.xn), Attribute::make_int("y_num_col_dims", c.yn)});
        CHECK(r.inferred[0] == c.out);
        check_close(r.out[0], c.out, want, 1e-13);
    }
    // Not ported: TestFP16MulOp1 and TestFP16MulOp2 (float16, CUDA only);
    // TestMulOpError tests the Python API.
}

// ---- shape ops ---------------------------------------------------------------------------------

TEST_CASE("Paddle's test_reshape_op.py classes") {
    // Paddle's classes run reshape2 (Out plus an XShape they do not check:
    // no_check_set); dlgraph's reshape is the v1 op with the same `shape`
    // attribute (0 copies a dim, one -1 is inferred) and the same Out.
    // X float32 in [0, 1), or np.random.choice([True, False]).
    struct reshape_class {
        const char* name;
        Shape ori;
        dims shape;
        Shape inferred;
        DataType t;
    };
    const reshape_class classes[] = {
        {"TestReshapeOp", {2, 60}, {12, 10}, {12, 10}, DataType::FP32},
        {"TestReshapeOpDimInfer1", {5, 25}, {5, -1, 5}, {5, 5, 5}, DataType::FP32},
        {"TestReshapeOpDimInfer2", {10, 2, 6}, {10, 0, 3, -1}, {10, 2, 3, 2}, DataType::FP32},
        {"TestReshapeOpBool", {2, 60}, {12, 10}, {12, 10}, DataType::BOOL},
    };
    std::mt19937 g(121);
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        visit_dtype(c.t, [&]<class T>(type_tag<T>) {
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bool>) {
                const auto xv = draw<T>(static_cast<std::size_t>(c.ori.numel()), g, 0, std::is_same_v<T, bool> ? 2 : 1);
                const auto r = run_op("reshape", {{"X", {tensor_of<T>(c.ori, xv)}}}, {{"Out", 1}}, {Attribute::make_ints("shape", c.shape)});
                CHECK(r.inferred[0] == c.inferred);
                check_same<T>(r.out[0], c.inferred, xv);
            }
        });
    }
    // Not ported: TestReshapeOpWithInputShape and the *_attr_OnlyShape
    // classes feed the Shape tensor, the *_attr_ShapeTensor ones ShapeTensor
    // (dlgraph's reshape takes the attribute only); TestReshapeOp_ZeroDim1..3
    // (0-D tensors, and as written they have no setUp); TestReshapeBF16Op
    // (bfloat16); TestReshapeInt8Op and TestReshapeUint8Op (dlgraph has no
    // INT8/UINT8 dtype); the rest test the Python API and dygraph mode.
}

TEST_CASE("Paddle's test_transpose_op.py classes") {
    // Paddle's classes run transpose2 (Out plus an unchecked XShape, and a
    // use_mkldnn attribute, a framework attribute dlgraph's strict loader
    // refuses); dlgraph's transpose is the v1 op with the same `axis` and Out.
    // X float64 in [0, 1).
    struct transpose_class {
        const char* name;
        Shape shape;
        dims axis;
    };
    const transpose_class classes[] = {
        {"TestTransposeOp", {3, 40}, {1, 0}},
        {"TestCase0", {100}, {0}},
        {"TestCase1", {3, 4, 10}, {0, 2, 1}},
        {"TestCase2", {2, 3, 4, 5}, {0, 2, 3, 1}},
        {"TestCase3", {2, 3, 4, 5, 6}, {4, 2, 3, 1, 0}},
        {"TestCase4", {2, 3, 4, 5, 6, 1}, {4, 2, 3, 1, 0, 5}},
        {"TestCase5", {2, 16, 96}, {0, 2, 1}},
        {"TestCase6", {2, 10, 12, 16}, {3, 1, 2, 0}},
        {"TestCase7", {2, 10, 2, 16}, {0, 1, 3, 2}},
        {"TestCase8", {2, 3, 2, 3, 2, 4, 3, 3}, {0, 1, 3, 2, 4, 5, 6, 7}},
        {"TestCase9", {2, 3, 2, 3, 2, 4, 3, 3}, {6, 1, 3, 5, 0, 2, 4, 7}},
        // TestTransposeOpBool only skips check_grad: it is TestTransposeOp.
        {"TestTransposeOpBool", {3, 40}, {1, 0}},
    };
    // TestTransposeOpBool1D..8D set a bool X in initTestCase, which setUp
    // then overwrites with a float64 one: as written Paddle runs them in
    // float64. Each is run here in both: float64 (as written) and bool (as
    // named).
    const transpose_class bools[] = {
        {"TestTransposeOpBool1D", {100}, {0}},
        {"TestTransposeOpBool2D", {3, 40}, {1, 0}},
        {"TestTransposeOpBool3D", {3, 4, 10}, {0, 2, 1}},
        {"TestTransposeOpBool4D", {2, 3, 4, 5}, {0, 2, 3, 1}},
        {"TestTransposeOpBool5D", {2, 3, 4, 5, 6}, {4, 2, 3, 1, 0}},
        {"TestTransposeOpBool6D", {2, 3, 4, 5, 6, 1}, {4, 2, 3, 1, 0, 5}},
        {"TestTransposeOpBool7D", {2, 3, 2, 3, 2, 4, 3}, {0, 1, 3, 2, 4, 5, 6}},
        {"TestTransposeOpBool8D", {2, 3, 2, 3, 2, 4, 3, 3}, {6, 1, 3, 5, 0, 2, 4, 7}},
    };
    std::mt19937 g(131);
    auto run = [&]<class T>(const transpose_class& c, type_tag<T>) {
        const auto xv = draw<T>(static_cast<std::size_t>(c.shape.numel()), g, 0, std::is_same_v<T, bool> ? 2 : 1);
        Shape out;
        const auto want = ref_transpose(xv, c.shape, c.axis, out);
        const auto r = run_op("transpose", {{"X", {tensor_of<T>(c.shape, xv)}}}, {{"Out", 1}}, {Attribute::make_ints("axis", c.axis)});
        CHECK(r.inferred[0] == out);
        check_same<T>(r.out[0], out, want);
    };
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        run(c, type_tag<double>{});
    }
    for (const auto& c : bools) {
        {
            INFO(std::string(c.name) << " (float64, as written)");
            run(c, type_tag<double>{});
        }
        INFO(std::string(c.name) << " (bool, as named)");
        run(c, type_tag<bool>{});
    }
    // Not ported: TestTransposeBF16Op (bfloat16); TestTransposeOpError,
    // TestTransposeApi, TestTAPI and TestMoveAxis test the Python API.
}

TEST_CASE("Paddle's test_concat_op.py classes") {
    // x0, x1, x2 float64 in [0, 1); Out = np.concatenate along the axis
    // (a negative axis plus the rank). Checked block by block: each input's
    // slab of prod(dims from the axis) elements follows the previous one's
    // in every outer index.
    struct concat_class {
        const char* name;
        std::vector<Shape> xs;
        int axis;
        Shape out;
    };
    const concat_class classes[] = {
        {"TestConcatOp", {{5, 1, 4, 5}, {5, 2, 4, 5}, {5, 3, 4, 5}}, 1, {5, 6, 4, 5}},
        {"TestConcatOp2", {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}}, 1, {2, 9, 4, 5}},
        // 22 million doubles (178 MB) in, as many out.
        {"TestConcatOp3", {{1, 256, 170, 256}, {1, 128, 170, 256}, {1, 128, 170, 256}}, 1, {1, 512, 170, 256}},
        // An input with a dim of 0.
        {"TestConcatOp4", {{2, 3, 4, 5}, {2, 3, 4, 5}, {0, 3, 4, 5}}, 0, {4, 3, 4, 5}},
        {"TestConcatOp5", {{5, 1, 4, 5}, {5, 2, 4, 5}, {5, 3, 4, 5}}, -3, {5, 6, 4, 5}},
        // Its inputs carry a LoD [[20, 80]] and Out [[20, 80, 20, 80, 20, 80]];
        // dlgraph's tensors have no LoD, so only the values are compared.
        {"TestConcatOp6", {{100}, {100}, {100}}, 0, {300}},
    };
    std::mt19937 g(141);
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        std::vector<Tensor> xs;
        for (const auto& s : c.xs) xs.push_back(random_fp64(s, g));
        const auto r = run_op("concat", {{"X", xs}}, {{"Out", 1}}, {Attribute::make_int("axis", c.axis)});
        CHECK(r.inferred[0] == c.out);
        const Tensor& out = r.out[0];
        REQUIRE(out.dtype() == DataType::FP64);
        REQUIRE(out.shape() == c.out);
        const int a = c.axis < 0 ? c.axis + c.out.rank() : c.axis;
        const std::int64_t outer = product(c.out, 0, a);
        const double* o = out.data<double>();
        std::int64_t bad = 0, at = 0;
        for (std::int64_t i = 0; i < outer; ++i)
            for (const auto& x : xs) {
                const std::int64_t slab = product(x.shape(), a, x.shape().rank());
                const double* src = x.data<double>() + i * slab;
                for (std::int64_t j = 0; j < slab; ++j) bad += o[at + j] != src[j];
                at += slab;
            }
        CHECK(at == out.numel());
        CHECK_MESSAGE(bad == 0, bad << " elements differ");
    }
    // Not ported: the *_AxisTensor classes take the axis as a tensor
    // (dlgraph's concat takes the attribute); the *_Fp16 and *_Bf16 classes;
    // TestConcatOpError, TestConcatAPI and TestConcatAPIWithLoDTensorArray
    // test the Python API and tensor arrays.
}

TEST_CASE("Paddle's test_split_op.py classes") {
    // X float64 (4, 5, 6) in [0, 1); Out = np.split(X, indices_or_sections,
    // axis), whose parts' sizes along the axis are written out here.
    struct split_class {
        const char* name;
        int axis;
        dims sections;
        int num;
        dims sizes;  // np.split's parts along the axis
    };
    const split_class classes[] = {
        {"TestSplitOp", 1, {2, 1, 2}, 0, {2, 1, 2}},          // np.split(x, [2, 3], 1)
        {"TestSplitOp_2", 2, {}, 3, {2, 2, 2}},               // np.split(x, 3, 2)
        {"TestSplitOp_unk_section", 2, {2, 1, -1}, 0, {2, 1, 3}},  // np.split(x, [2, 3], 2)
    };
    const Shape xs{4, 5, 6};
    std::mt19937 g(151);
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        const auto xv = draw<double>(120, g);
        const int n = static_cast<int>(c.sizes.size());
        const auto r = run_op("split", {{"X", {tensor_of<double>(xs, xv)}}}, {{"Out", n}},
                              {Attribute::make_int("axis", c.axis), Attribute::make_ints("sections", c.sections),
                               Attribute::make_int("num", c.num)});
        REQUIRE(r.out.size() == c.sizes.size());
        std::int64_t start = 0;
        for (int k = 0; k < n; ++k) {
            Shape ps = xs;
            ps[c.axis] = c.sizes[static_cast<std::size_t>(k)];
            CHECK(r.inferred[static_cast<std::size_t>(k)] == ps);
            std::vector<double> want;
            for (std::int64_t i = 0; i < ps.numel(); ++i) {
                dims idx = unravel(i, ps);
                idx[static_cast<std::size_t>(c.axis)] += start;
                want.push_back(xv[static_cast<std::size_t>(ravel(idx, xs))]);
            }
            check_same<double>(r.out[static_cast<std::size_t>(k)], ps, want);
            start += ps[c.axis];
        }
    }
    // Not ported: TestSplitOp_AxisTensor and TestSplitOp_SectionsTensor take
    // the axis or sections as tensors (dlgraph's split takes attributes);
    // TestSplitByrefOp runs split_byref, an op dlgraph does not have; the
    // *_Fp16 and *_Bf16 classes; the API and dygraph classes.
}

namespace {
// A class of test_squeeze_op.py, test_squeeze2_op.py or
// test_unsqueeze2_op.py: X float64 in [0, 1), Out = X.reshape(new_shape).
struct xshape_class {
    const char* name;
    Shape ori;
    dims axes;
    Shape out;
};
void check_xshape_op(const char* op, const xshape_class& c, std::mt19937& g) {
    INFO(std::string(c.name));
    const auto xv = draw<double>(static_cast<std::size_t>(c.ori.numel()), g);
    const auto r = run_op(op, {{"X", {tensor_of<double>(c.ori, xv)}}}, {{"Out", 1}, {"XShape", 1}},
                          {Attribute::make_ints("axes", c.axes)}, 1);
    CHECK(r.inferred[0] == c.out);
    Shape xshape{0};
    for (auto d : c.ori) xshape.push_back(d);
    CHECK(r.inferred[1] == xshape);  // [0, X's dims]: Paddle's XShape (unchecked by its classes)
    check_same<double>(r.out[0], c.out, xv);
}
}  // namespace

TEST_CASE("Paddle's test_squeeze_op.py classes") {
    // These classes run squeeze, the v1 op (no XShape), which dlgraph does
    // not have; its squeeze2 gives the same Out (a listed dim other than 1
    // stays, as TestSqueezeOp4 expects), so the classes run on squeeze2.
    const xshape_class classes[] = {
        {"TestSqueezeOp", {1, 3, 1, 40}, {0, 2}, {3, 40}},
        {"TestSqueezeOp1", {1, 3, 1, 40}, {0, -2}, {3, 40}},
        {"TestSqueezeOp2", {1, 20, 1, 5}, {}, {20, 5}},
        {"TestSqueezeOp3", {6, 1, 5, 1, 4, 1}, {1, -1}, {6, 5, 1, 4}},
        {"TestSqueezeOp4", {6, 1, 5, 1, 4, 1}, {1, 2}, {6, 5, 1, 4, 1}},
    };
    std::mt19937 g(161);
    for (const auto& c : classes) check_xshape_op("squeeze2", c, g);
    // Not ported: TestSqueezeBF16Op (bfloat16); TestSqueezeOpError, the
    // API_* classes and the double/triple gradient checks (Python API and
    // dygraph mode).
}

TEST_CASE("Paddle's test_squeeze2_op.py classes") {
    const xshape_class classes[] = {
        {"TestSqueezeOp", {1, 3, 1, 40}, {0, 2}, {3, 40}},
        {"TestSqueezeOp1", {1, 20, 1, 5}, {0, -2}, {20, 5}},
        {"TestSqueezeOp2", {1, 20, 1, 5}, {}, {20, 5}},
        {"TestSqueezeOp3", {6, 1, 5, 1, 4, 1}, {1, -1}, {6, 5, 1, 4}},
    };
    std::mt19937 g(171);
    for (const auto& c : classes) check_xshape_op("squeeze2", c, g);
}

TEST_CASE("Paddle's test_unsqueeze2_op.py classes") {
    // Each axis counts in the shape so far (TestUnsqueezeOp3: a repeated
    // axis; TestUnsqueezeOp4: axes in decreasing order).
    const xshape_class classes[] = {
        {"TestUnsqueezeOp", {3, 40}, {1, 2}, {3, 1, 1, 40}},
        {"TestUnsqueezeOp1", {20, 5}, {-1}, {20, 5, 1}},
        {"TestUnsqueezeOp2", {20, 5}, {0, -1}, {1, 20, 5, 1}},
        {"TestUnsqueezeOp3", {10, 2, 5}, {0, 3, 3}, {1, 10, 2, 1, 1, 5}},
        {"TestUnsqueezeOp4", {10, 2, 5}, {3, 1, 1}, {10, 1, 1, 2, 5, 1}},
    };
    std::mt19937 g(181);
    for (const auto& c : classes) check_xshape_op("unsqueeze2", c, g);
    // Not ported: the *_AxesTensorList and *_AxesTensor classes take the
    // axes as tensors (dlgraph's unsqueeze2 takes the attribute);
    // TestUnsqueezeAPI and TestUnsqueezeInplaceAPI test the Python API.
}

TEST_CASE("Paddle's test_slice_op.py classes") {
    // Input float64 in [0, 1) (TestSliceZerosShapeTensor: float32 of shape
    // [0, 0, 0]); Out = the class's NumPy slicing expression (shown with each
    // row): Python's slice bounds (negative from the end, clamped to the
    // dim) and an integer index for each decrease_axis dim, which NumPy
    // drops. Out's shape is written out from the expression; a fully indexed
    // input[0, 1, 2, 3:4] is (1,), as dlgraph's [1] for every dim dropped.
    struct slice_class {
        const char* name;
        const char* numpy;
        Shape in;
        dims axes, starts, ends, infer_flags, decrease;
        Shape out;
        DataType t = DataType::FP64;
    };
    const slice_class classes[] = {
        {"TestSliceOp", "input[1:3, 0:3, 2:4, :]", {3, 4, 5, 6}, {0, 1, 2}, {1, 0, 2}, {3, 3, 4}, {1, 1, 1}, {}, {2, 3, 2, 6}},
        {"TestCase1", "input[-3:3, 0:100, 2:-1, :]", {3, 4, 5, 6}, {0, 1, 2}, {-3, 0, 2}, {3, 100, -1}, {1, 1, 1}, {}, {3, 4, 2, 6}},
        {"TestCase2", "input[-3:3, 0:100, :, 2:-1]", {3, 4, 5, 6}, {0, 1, 3}, {-3, 0, 2}, {3, 100, -1}, {1, 1, 1}, {}, {3, 4, 5, 3}},
        // Its use_mkldnn attribute (a framework attribute) is left out.
        {"TestSliceZerosShapeTensor", "input[1:2]", {0, 0, 0}, {0}, {1}, {2}, {}, {}, {0, 0, 0}, DataType::FP32},
        {"TestSliceOp_decs_dim", "input[1, 0:3, 2:4, :]", {3, 4, 5, 6}, {0, 1, 2}, {1, 0, 2}, {2, 3, 4}, {1, 1, 1}, {0}, {3, 2, 6}},
        {"TestSliceOp_decs_dim_2", "input[1, 0, 2:4, :]", {3, 4, 5, 6}, {0, 1, 2}, {1, 0, 2}, {2, 1, 4}, {1, 1, 1}, {0, 1}, {2, 6}},
        {"TestSliceOp_decs_dim_3", "input[-1, 0, 2:4, :]", {3, 4, 5, 6}, {0, 1, 2}, {-1, 0, 2}, {1000000, 1, 4}, {1, 1, 1}, {0, 1}, {2, 6}},
        {"TestSliceOp_decs_dim_4", "input[0, 1, 2, 3:4]", {3, 4, 5, 7}, {0, 1, 2, 3}, {0, 1, 2, 3}, {1, 2, 3, 4}, {1, 1, 1}, {0, 1, 2, 3}, {1}},
        {"TestSliceOp_decs_dim_5", "input[:, :, :, -1]", {3, 4, 5, 6}, {3}, {-1}, {1000000}, {1, 1, 1}, {3}, {3, 4, 5}},
        {"TestSliceOp_decs_dim_6", "input[0, 1, 2, 3:4]", {3, 4, 5, 6}, {0, 1, 2, 3}, {0, 1, 2, 3}, {1, 2, 3, 4}, {1, 1, 1}, {0, 1, 2, 3}, {1}},
    };
    std::mt19937 g(191);
    for (const auto& c : classes) {
        INFO(std::string(c.name) << ": " << std::string(c.numpy));
        // Python's slice bounds on each sliced dim.
        dims lo(static_cast<std::size_t>(c.in.rank()), 0), len(c.in.begin(), c.in.end());
        for (std::size_t k = 0; k < c.axes.size(); ++k) {
            const auto a = static_cast<std::size_t>(c.axes[k]);
            const std::int64_t d = c.in[static_cast<int>(a)];
            auto bound = [d](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + d : v, 0, d); };
            lo[a] = bound(c.starts[k]);
            len[a] = std::max<std::int64_t>(bound(c.ends[k]) - lo[a], 0);
        }
        const Shape box(len);
        CHECK(box.numel() == c.out.numel());
        auto run = [&]<class T>(type_tag<T>) {
            const auto xv = draw<T>(static_cast<std::size_t>(c.in.numel()), g);
            std::vector<T> want;
            for (std::int64_t i = 0; i < box.numel(); ++i) {
                dims idx = unravel(i, box);
                for (std::size_t d = 0; d < idx.size(); ++d) idx[d] += lo[d];
                want.push_back(xv[static_cast<std::size_t>(ravel(idx, c.in))]);
            }
            const auto r = run_op("slice", {{"Input", {tensor_of<T>(c.in, xv)}}}, {{"Out", 1}},
                                  {Attribute::make_ints("axes", c.axes), Attribute::make_ints("starts", c.starts),
                                   Attribute::make_ints("ends", c.ends), Attribute::make_ints("infer_flags", c.infer_flags),
                                   Attribute::make_ints("decrease_axis", c.decrease)});
            CHECK(r.inferred[0] == c.out);
            check_same<T>(r.out[0], c.out, want);
        };
        if (c.t == DataType::FP32) run(type_tag<float>{});
        else run(type_tag<double>{});
    }
    // Not ported: the *_ListTensor and *_OneTensor classes give starts or
    // ends as tensors (StartsTensor, EndsTensor and their lists; dlgraph's
    // slice takes the attributes); TestFP16, TestFP16_2 (float16, CUDA
    // only) and TestBF16; the API, dygraph, tensor-array and double/triple
    // gradient classes.
}

TEST_CASE("Paddle's test_flip.py classes") {
    // X float64 in [0, 1); Out = np.flip along each listed axis in turn.
    struct flip_class {
        const char* name;
        Shape shape;
        dims axis;
    };
    const flip_class classes[] = {
        {"TestFlipOp", {6, 4, 2, 3}, {0, 1}},         {"TestFlipOpAxis1", {2, 4, 4}, {0}},
        {"TestFlipOpAxis2", {4, 4, 6, 3}, {0, 2}},    {"TestFlipOpAxis3", {4, 3, 1}, {0, 1, 2}},
        {"TestFlipOpAxis4", {6, 4, 2, 2}, {0, 1, 2, 3}}, {"TestFlipOpEmptyAxis", {6, 4, 2, 2}, {}},
        {"TestFlipOpNegAxis", {6, 4, 2, 2}, {-1}},
    };
    std::mt19937 g(201);
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        const auto xv = draw<double>(static_cast<std::size_t>(c.shape.numel()), g);
        std::vector<double> want = xv;
        for (auto a : c.axis) {  // np.flip(res, axis), one axis at a time
            const int d = static_cast<int>(a < 0 ? a + c.shape.rank() : a);
            std::vector<double> next(want.size());
            for (std::int64_t i = 0; i < c.shape.numel(); ++i) {
                dims idx = unravel(i, c.shape);
                idx[static_cast<std::size_t>(d)] = c.shape[d] - 1 - idx[static_cast<std::size_t>(d)];
                next[static_cast<std::size_t>(i)] = want[static_cast<std::size_t>(ravel(idx, c.shape))];
            }
            want = next;
        }
        const auto r = run_op("flip", {{"X", {tensor_of<double>(c.shape, xv)}}}, {{"Out", 1}}, {Attribute::make_ints("axis", c.axis)});
        CHECK(r.inferred[0] == c.shape);
        check_same<double>(r.out[0], c.shape, want);
    }
    // Not ported: TestFlipOp_API (Python API, static and dygraph) and the
    // double/triple gradient classes.
}

TEST_CASE("Paddle's test_flatten_contiguous_range_op.py classes") {
    // X float64 (3, 2, 5, 4) in [0, 1) (SixDims: (3, 2, 3, 2, 4, 4));
    // Out = X.reshape(new_shape); XShape is not checked by Paddle, here its
    // inferred shape [0, X's dims] is.
    struct flatten_class {
        const char* name;
        Shape in;
        int start, stop;
        Shape out;
    };
    const flatten_class classes[] = {
        {"TestFlattenOp", {3, 2, 5, 4}, 0, -1, {120}},       {"TestFlattenOp_1", {3, 2, 5, 4}, 1, 2, {3, 10, 4}},
        {"TestFlattenOp_2", {3, 2, 5, 4}, 0, 1, {6, 5, 4}},  {"TestFlattenOp_3", {3, 2, 5, 4}, 0, 2, {30, 4}},
        {"TestFlattenOp_4", {3, 2, 5, 4}, -2, -1, {3, 2, 20}}, {"TestFlattenOp_5", {3, 2, 5, 4}, 2, 2, {3, 2, 5, 4}},
        {"TestFlattenOpSixDims", {3, 2, 3, 2, 4, 4}, 3, 5, {3, 2, 3, 32}},
    };
    std::mt19937 g(211);
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        const auto xv = draw<double>(static_cast<std::size_t>(c.in.numel()), g);
        const auto r = run_op("flatten_contiguous_range", {{"X", {tensor_of<double>(c.in, xv)}}}, {{"Out", 1}, {"XShape", 1}},
                              {Attribute::make_int("start_axis", c.start), Attribute::make_int("stop_axis", c.stop)}, 1);
        CHECK(r.inferred[0] == c.out);
        Shape xshape{0};
        for (auto d : c.in) xshape.push_back(d);
        CHECK(r.inferred[1] == xshape);
        check_same<double>(r.out[0], c.out, xv);
    }
    // Not ported: TestFlatten2OpError and the *PythonAPI classes test the
    // Python API (paddle.flatten, in place and dygraph).
}

// ---- index and evaluation ops -------------------------------------------------------------------

TEST_CASE("Paddle's test_top_k_op.py classes") {
    // TestTopkOp: X float64 (row 100, k 1) in [0, 1), k 1; Out =
    // np.sort(row)[::-1][:k], Indices = row.argsort()[::-1][:k] (draws in
    // [0, 1) have no ties).
    const std::int64_t row = 100, k = 1;
    const Shape xs{row, k};
    std::mt19937 g(221);
    const auto xv = draw<double>(static_cast<std::size_t>(row * k), g);
    std::vector<double> out;
    std::vector<std::int64_t> indices;
    for (std::int64_t i = 0; i < row; ++i) {
        std::vector<std::int64_t> order(static_cast<std::size_t>(k));
        for (std::int64_t j = 0; j < k; ++j) order[static_cast<std::size_t>(j)] = j;
        std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
            return xv[static_cast<std::size_t>(i * k + a)] > xv[static_cast<std::size_t>(i * k + b)];
        });
        for (std::int64_t j = 0; j < k; ++j) {
            indices.push_back(order[static_cast<std::size_t>(j)]);
            out.push_back(xv[static_cast<std::size_t>(i * k + order[static_cast<std::size_t>(j)])]);
        }
    }
    INFO("TestTopkOp");
    const auto r = run_op("top_k", {{"X", {tensor_of<double>(xs, xv)}}}, {{"Out", 1}, {"Indices", 1}}, {Attribute::make_int("k", k)});
    check_same<double>(r.out[0], xs, out);
    check_same<std::int64_t>(r.out[1], xs, indices);
    // Paddle's TestTopkOp also checks the gradient of Out; dlgraph's top_k
    // has none, because it is an evaluation op (ops/eval_ops.hpp: "Neither
    // is differentiable").
    CHECK_FALSE(find_op("top_k")->differentiable());
}

namespace {
// Out = table[ids] with the rows whose id is padding_idx zeroed (a padding
// of -1: none).
std::vector<double> ref_lookup(const std::vector<double>& table, std::int64_t width, const std::vector<std::int64_t>& ids,
                               std::int64_t padding_idx) {
    std::vector<double> out;
    for (auto id : ids)
        for (std::int64_t j = 0; j < width; ++j) out.push_back(id == padding_idx ? 0.0 : table[static_cast<std::size_t>(id * width + j)]);
    return out;
}
Tensor ids_tensor(DataType t, const Shape& s, const std::vector<std::int64_t>& ids) {
    if (t == DataType::INT32) return tensor_of<std::int32_t>(s, std::vector<std::int32_t>(ids.begin(), ids.end()));
    return tensor_of<std::int64_t>(s, ids);
}
struct lookup_class {
    const char* name;
    Shape ids;    // the Ids tensor's shape
    DataType id_type;
    bool padding;  // padding_idx = np.random.choice(ids)
};
// W float64 (17, 31) in [0, 1), ids np.random.randint(0, 17).
void check_lookup_classes(const char* op, const std::vector<lookup_class>& classes, std::mt19937& g) {
    const Shape ws{17, 31};
    for (const auto& c : classes) {
        INFO(std::string(c.name));
        const auto wv = draw<double>(17 * 31, g);
        const auto ids = randint(static_cast<std::size_t>(c.ids.numel()), g, 0, 17);
        const std::int64_t pad = c.padding ? ids[static_cast<std::size_t>(randint(1, g, 0, c.ids.numel())[0])] : -1;
        Shape out;
        const bool v1 = std::string(op) == "lookup_table";
        for (int i = 0; i < c.ids.rank() - (v1 ? 1 : 0); ++i) out.push_back(c.ids[i]);
        out.push_back(31);
        std::vector<Attribute> attrs;
        if (c.padding) attrs.push_back(Attribute::make_long("padding_idx", pad));
        const auto r = run_op(op, {{"W", {tensor_of<double>(ws, wv)}}, {"Ids", {ids_tensor(c.id_type, c.ids, ids)}}}, {{"Out", 1}}, attrs);
        CHECK(r.inferred[0] == out);
        check_same<double>(r.out[0], out, ref_lookup(wv, 31, ids, pad));
    }
}
// The *WIsSelectedRows classes: W is a SelectedRows of rows 0..6 (all of a
// height-7 table), row i all i (float32, width 12); dlgraph has no
// SelectedRows, and a SelectedRows holding every row is the dense table.
void check_selected_rows_table(const char* op, const char* name, const Tensor& ids, const std::vector<std::int64_t>& id_values) {
    INFO(std::string(name));
    std::vector<float> w;
    for (int i = 0; i < 7; ++i) w.insert(w.end(), 12, static_cast<float>(i));
    Shape out;
    const bool v1 = std::string(op) == "lookup_table";
    for (int i = 0; i < ids.shape().rank() - (v1 ? 1 : 0); ++i) out.push_back(ids.shape()[i]);
    out.push_back(12);
    std::vector<float> want;
    for (auto id : id_values) want.insert(want.end(), 12, static_cast<float>(id));
    const auto r = run_op(op, {{"W", {tensor_of<float>({7, 12}, w)}}, {"Ids", {ids}}}, {{"Out", 1}}, {});
    check_same<float>(r.out[0], out, want);
}
}  // namespace

TEST_CASE("Paddle's test_lookup_table_op.py classes") {
    std::mt19937 g(231);
    check_lookup_classes("lookup_table",
                         {{"TestLookupTableOp", {4, 1}, DataType::INT64, false},
                          {"TestLookupTableOpWithTensorIds", {2, 4, 5, 1}, DataType::INT64, false},
                          {"TestLookupTableOpWithPadding", {4, 1}, DataType::INT64, true},
                          {"TestLookupTableOpWithTensorIdsAndPadding", {2, 4, 5, 1}, DataType::INT64, true}},
                         g);
    const std::vector<std::int64_t> ids1{0, 4, 3, 5};
    check_selected_rows_table("lookup_table", "TestLookupTableWIsSelectedRows", tensor_of<std::int64_t>({4, 1}, ids1), ids1);
    const auto ids2 = randint(24, g, 0, 6);
    check_selected_rows_table("lookup_table", "TestLookupTableWithTensorIdsWIsSelectedRows", tensor_of<std::int64_t>({2, 4, 3, 1}, ids2),
                              ids2);
    // Not supported yet: TestLookupTableOpInt16, TestLookupTableOpWithTensorIdsInt16,
    // TestLookupTableOpWithPaddingInt16, TestLookupTableOpWithTensorIdsAndPaddingInt16
    // and TestLookupTableWIsSelectedRowsInt16 (and its TensorIds variant)
    // look up an INT16 table (Paddle's CPU kernel takes int8 and int16 W for
    // inference); dlgraph's lookup_table takes FP32 or FP64 W only:
    // "[dlgraph.type.op] lookup_table (op #0): W must be FP32 or FP64, not
    // INT16".
    // Not ported: the *Int8 classes (dlgraph has no INT8 dtype);
    // TestEmbedOpError and TestOutDtype test the Python API.
}

TEST_CASE("Paddle's test_lookup_table_v2_op.py classes") {
    std::mt19937 g(241);
    check_lookup_classes("lookup_table_v2",
                         {{"TestLookupTableOp", {4}, DataType::INT64, false},
                          {"TestLookupTableOpWithTensorIds", {2, 4, 5}, DataType::INT32, false},
                          {"TestLookupTableOpWithPadding", {4}, DataType::INT64, true},
                          {"TestLookupTableOpWithTensorIdsAndPadding", {2, 4, 5}, DataType::INT32, true}},
                         g);
    const std::vector<std::int64_t> ids1{0, 4, 3, 5};
    check_selected_rows_table("lookup_table_v2", "TestLookupTableWIsSelectedRows", ids_tensor(DataType::INT32, {4}, ids1), ids1);
    const auto ids2 = randint(24, g, 0, 6);
    check_selected_rows_table("lookup_table_v2", "TestLookupTableWithTensorIdsWIsSelectedRows", tensor_of<std::int64_t>({2, 4, 3}, ids2),
                              ids2);
    // Not ported: TestLookupTableOpInt16, TestLookupTableOpInt8 and
    // TestLookupTableOpUInt8 derive from OpTest, not TestLookupTableOp, so
    // as written they have no setUp and test nothing (their ids of int16,
    // int8 and uint8 dlgraph would refuse: v2's Ids are INT64 or INT32, and
    // it has no INT8/UINT8 dtype); TestLookupTableIsSparse compares sparse
    // and dense SGD through the Python API (dlgraph's W@GRAD is always
    // dense); TestStaticGraphSupportMultipleInt, TestLookupTableApi and
    // TestEmbedOpError test the Python API.
}

TEST_CASE("Paddle's test_accuracy_op.py classes") {
    // TestAccuracyOp: n 8192; Out float32 (n, 1) in [0, 1), Indices and
    // Label np.random.randint(0, 2, (n, 1)) int64. Accuracy = the share of
    // rows whose label is among their indices (float32, exact: n is a power
    // of two), Correct and Total int32.
    const std::int64_t n = 8192;
    std::mt19937 g(251);
    const auto out = draw<float>(static_cast<std::size_t>(n), g);
    const auto indices = randint(static_cast<std::size_t>(n), g, 0, 2);
    const auto label = randint(static_cast<std::size_t>(n), g, 0, 2);
    std::int32_t correct = 0;
    for (std::size_t i = 0; i < indices.size(); ++i) correct += indices[i] == label[i];
    INFO("TestAccuracyOp");
    const auto r = run_op("accuracy",
                          {{"Out", {tensor_of<float>({n, 1}, out)}},
                           {"Indices", {tensor_of<std::int64_t>({n, 1}, indices)}},
                           {"Label", {tensor_of<std::int64_t>({n, 1}, label)}}},
                          {{"Accuracy", 1}, {"Correct", 1}, {"Total", 1}}, {});
    check_same<float>(r.out[0], {1}, {static_cast<float>(correct) / static_cast<float>(n)});
    check_same<std::int32_t>(r.out[1], {1}, {correct});
    check_same<std::int32_t>(r.out[2], {1}, {static_cast<std::int32_t>(n)});
    // Not ported: TestAccuracyOpFp16 (float16); TestAccuracyOpError and
    // TestAccuracyAPI* test the Python API.
}

// ---- optimizers -------------------------------------------------------------------------------------
//
// Each class is one op call on fed FP32 tensors (ParamOut and the other
// outputs as new variables, as OpTest binds them), against the class's
// NumPy update computed here in double from the same FP32 inputs.

TEST_CASE("Paddle's test_sgd_op.py classes") {
    // Param, Grad float32 (h, w) in [0, 1), LearningRate [0.1];
    // ParamOut = w - lr * g. Tolerance 1 FP32 ulp of ParamOut plus 4e-9
    // (Paddle's atol is 1e-5): the last rounding is half an ulp, the one of
    // lr * g (below 0.1) at most 2^-28.
    struct sgd_class {
        const char* name;
        std::int64_t h, w;
    };
    std::mt19937 g(261);
    for (const sgd_class& c : {sgd_class{"TestSGDOp", 102, 105}, sgd_class{"TestSGDOpCase8X", 10, 64}}) {
        INFO(std::string(c.name));
        const Shape s{c.h, c.w};
        const auto n = static_cast<std::size_t>(c.h * c.w);
        const auto w = draw<float>(n, g), gr = draw<float>(n, g);
        const float lr = 0.1f;
        const auto r = run_op("sgd",
                              {{"Param", {tensor_of<float>(s, w)}}, {"Grad", {tensor_of<float>(s, gr)}}, {"LearningRate", {tensor_of<float>({1}, {lr})}}},
                              {{"ParamOut", 1}}, {});
        std::vector<double> want(n);
        for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<double>(w[i]) - static_cast<double>(lr) * gr[i];
        check_ulps(r.out[0], s, want, 1, 4e-9);
    }
    // Not ported: TestSparseSGDOp, TestSparseSGDOpCase8X and
    // TestSGDOpOptimizeSelectedRows (SelectedRows Grad or Param: dlgraph's
    // gradients are dense); TestSGDOpWithLargeInput, TestSGDV2 and the
    // multi-precision classes test the Python optimizer API.
}

TEST_CASE("Paddle's test_momentum_op.py classes") {
    // Param, Grad float32 (123, 321) in [0, 1), Velocity 0, LearningRate
    // [0.001], mu 0.0001; calculate_momentum_by_numpy: v' = mu v + g, p' =
    // p - lr v' (Nesterov: p - g lr - v' mu lr). Tolerance 1 FP32 ulp of
    // the result plus 2e-10: v' = g exactly (v is 0), and the roundings
    // before the last subtraction are below 2e-10 (the term subtracted is
    // below 1e-3). Paddle's atol 1e-5 could not tell the two classes apart:
    // Nesterov's extra term lr mu v' is at most 1e-7, about one ulp of
    // ParamOut.
    //
    // The WithDecay classes set regularization_method 'l2_decay' and
    // regularization_coeff 0.9: the class's g is Grad + 0.9 Param (as the
    // op's rescale_grad * Grad + coeff * Param, rescale_grad 1), then the
    // same update. Here g in FP32 is off the double reference by its last
    // rounding (half an ulp) plus 0.9's FP32 rounding times Param and that
    // product's rounding (5.4e-8 together): v' = g within 1 ulp + 6e-8, and
    // p' within 1 ulp + 4e-10 (lr times g's error, plus the roundings of
    // the products, each below 1.2e-10).
    struct momentum_class {
        const char* name;
        bool nesterov;
        bool decay;
    };
    std::mt19937 g(271);
    for (const momentum_class& c : {momentum_class{"TestMomentumOp1", false, false}, momentum_class{"TestMomentumOp2", true, false},
                                    momentum_class{"TestMomentumOpWithDecay", true, true},
                                    momentum_class{"TestMomentumOpWithDecay2", false, true}}) {
        INFO(std::string(c.name));
        const Shape s{123, 321};
        const std::size_t n = 123 * 321;
        const auto p = draw<float>(n, g), gr = draw<float>(n, g);
        const std::vector<float> v(n, 0.0f);
        const float lr = 0.001f;
        const double mu = 0.0001, coeff = 0.9;
        std::vector<Attribute> attrs{Attribute::make_float("mu", mu), Attribute::make_bool("use_nesterov", c.nesterov)};
        if (c.decay) {
            attrs.push_back(Attribute::make_string("regularization_method", "l2_decay"));
            attrs.push_back(Attribute::make_float("regularization_coeff", coeff));
        }
        const auto r = run_op("momentum",
                              {{"Param", {tensor_of<float>(s, p)}},
                               {"Grad", {tensor_of<float>(s, gr)}},
                               {"Velocity", {tensor_of<float>(s, v)}},
                               {"LearningRate", {tensor_of<float>({1}, {lr})}}},
                              {{"ParamOut", 1}, {"VelocityOut", 1}}, attrs);
        std::vector<double> po(n), vo(n);
        for (std::size_t i = 0; i < n; ++i) {
            const double gi = c.decay ? gr[i] + coeff * p[i] : gr[i];
            vo[i] = mu * v[i] + gi;
            po[i] = c.nesterov ? p[i] - gi * static_cast<double>(lr) - vo[i] * mu * lr : p[i] - static_cast<double>(lr) * vo[i];
        }
        if (c.decay) {
            check_ulps(r.out[0], s, po, 1, 4e-10);
            check_ulps(r.out[1], s, vo, 1, 6e-8);
        } else {
            check_ulps(r.out[0], s, po, 1, 2e-10);
            check_ulps(r.out[1], s, vo, 0, 0);  // g itself
        }
    }

    // TestSparseMomentumOp, ...Op2 (use_nesterov), ...OpWithDecay and
    // ...OpWithDecay2 (use_nesterov; both regularization_method 'l2_decay',
    // regularization_coeff 0.9; the first two '' and 1.0, all given to the
    // op): Param 5.0 (10, 12), Velocity 1.0, LearningRate 2.0, mu 1.0; Grad
    // a SelectedRows of rows [0, 4, 7] holding ones with [0, 0] = 2 and
    // [2, 8] = 4. dlgraph's gradients are dense: the Grad is given as the
    // dense tensor the class's reference builds (_grad_np_array, zero
    // outside those rows), which is what Paddle's sparse kernel computes
    // with (a missing row's gradient is 0, decay still applied). Compared
    // exactly, as the class does: every value is a small binary fraction.
    struct sparse_class {
        const char* name;
        bool nesterov;
        bool decay;
    };
    for (const sparse_class& c : {sparse_class{"TestSparseMomentumOp", false, false}, sparse_class{"TestSparseMomentumOp2", true, false},
                                  sparse_class{"TestSparseMomentumOpWithDecay", false, true},
                                  sparse_class{"TestSparseMomentumOpWithDecay2", true, true}}) {
        INFO(std::string(c.name) << " (a dense Grad)");
        const Shape s{10, 12};
        const std::size_t n = 120;
        const std::vector<float> p(n, 5.0f), v(n, 1.0f);
        std::vector<float> gr(n, 0.0f);
        const std::int64_t rows[] = {0, 4, 7};
        std::vector<float> grad_rows(3 * 12, 1.0f);
        grad_rows[0 * 12 + 0] = 2.0f;
        grad_rows[2 * 12 + 8] = 4.0f;
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t j = 0; j < 12; ++j) gr[static_cast<std::size_t>(rows[i]) * 12 + j] = grad_rows[i * 12 + j];
        const float lr = 2.0f;
        const double mu = 1.0, coeff = c.decay ? 0.9 : 1.0;
        const auto r = run_op("momentum",
                              {{"Param", {tensor_of<float>(s, p)}},
                               {"Grad", {tensor_of<float>(s, gr)}},
                               {"Velocity", {tensor_of<float>(s, v)}},
                               {"LearningRate", {tensor_of<float>({1}, {lr})}}},
                              {{"ParamOut", 1}, {"VelocityOut", 1}},
                              {Attribute::make_float("mu", mu), Attribute::make_bool("use_nesterov", c.nesterov),
                               Attribute::make_string("regularization_method", c.decay ? "l2_decay" : ""),
                               Attribute::make_float("regularization_coeff", coeff)});
        // calculate_momentum_by_numpy with the class's regularization.
        std::vector<double> po(n), vo(n);
        for (std::size_t i = 0; i < n; ++i) {
            const double gi = c.decay ? gr[i] + coeff * p[i] : gr[i];
            vo[i] = mu * v[i] + gi;
            if (c.decay) po[i] = c.nesterov ? p[i] - (gi + vo[i] * mu) * lr : p[i] - lr * vo[i];
            else po[i] = c.nesterov ? p[i] - gi * lr - vo[i] * mu * lr : p[i] - lr * vo[i];
        }
        check_same<float>(r.out[0], s, std::vector<float>(po.begin(), po.end()));
        check_same<float>(r.out[1], s, std::vector<float>(vo.begin(), vo.end()));
        // Exactly representable: the reference needs no rounding to float.
        for (std::size_t i = 0; i < n; ++i)
            REQUIRE((static_cast<double>(static_cast<float>(po[i])) == po[i] && static_cast<double>(static_cast<float>(vo[i])) == vo[i]));
    }
    // Not supported yet: multi_precision true (FP16 parameters with FP32
    // master copies), which TestSparseMomentumOpWithMultiPrecision and
    // ...WithMultiPrecision2 set (with rescale_grad 1.0; CUDA only). dlgraph
    // refuses it:
    {
        INFO("multi_precision");
        const Shape s{10, 12};
        const std::vector<float> ones(120, 1.0f);
        check_throws<shape_error>(
            [&] {
                (void)run_op("momentum",
                             {{"Param", {tensor_of<float>(s, ones)}},
                              {"Grad", {tensor_of<float>(s, ones)}},
                              {"Velocity", {tensor_of<float>(s, ones)}},
                              {"LearningRate", {tensor_of<float>({1}, {2.0f})}}},
                             {{"ParamOut", 1}, {"VelocityOut", 1}},
                             {Attribute::make_float("mu", 1.0), Attribute::make_bool("multi_precision", true),
                              Attribute::make_float("rescale_grad", 1.0)});
            },
            {"[dlgraph.shape.attr]", "multi_precision (FP32 master copies of FP16 parameters) is not supported"});
    }
    // Not ported: TestMomentumOpFp16 and TestMomentumOpWithDecayFP16
    // (float16); TestLarsMomentumOp and TestLarsMomentumOpWithMP run
    // lars_momentum, an op dlgraph does not have; the API, dygraph and
    // multi-tensor classes. No OpTest class of the file sets rescale_grad
    // other than 1.
}

namespace {
struct adam_state {
    std::vector<float> param, grad, m1, m2;
    float lr, beta1_pow, beta2_pow;
};
struct adam_attrs {
    double beta1, beta2, epsilon;
    bool adamw = false;
    double coeff = 0.01, lr_ratio = 1.0;
    bool with_decay = false;
};
struct adam_result {
    std::vector<double> param, m1, m2;
};
// adam_step / adamw_step of the classes in double, with one change: the
// epsilon. Paddle's TestAdamOp1 (and every class of test_adam_op.py and
// test_adamw_op.py, through adam_step / adamw_step) expects p - lr_t * m1 /
// (sqrt(m2) + epsilon); dlgraph adds epsilon * sqrt(1 - Beta2Pow) instead,
// because that is what Paddle's own kernel computes (AdamFunctor in
// adam_op.h: "p -= lr * (mom1 / (sqrt(mom2) + epsilon_ * sqrt(1 -
// beta2_pow)))", which its CPU adamw kernel runs after the decay), as do
// Paddle's other references (TestAdamOptimizer of
// test_optimizer_in_control_flow.py, adam_step of test_adam_op_xpu.py).
// With epsilon 1e-8 the two agree within the tolerance; with 1e-4
// (TestAdamOp1, TestAdamW) they need not where Moment2 is small: with
// these draws, two elements of TestAdamW differ by 2.5e-5.
adam_result adam_reference(const adam_state& in, const adam_attrs& a) {
    const std::size_t n = in.param.size();
    adam_result r{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
    double lr = in.lr;
    if (a.adamw) lr *= a.lr_ratio;
    const double lr_t = lr * std::sqrt(1 - static_cast<double>(in.beta2_pow)) / (1 - static_cast<double>(in.beta1_pow));
    const double eps_t = a.epsilon * std::sqrt(1 - static_cast<double>(in.beta2_pow));
    for (std::size_t i = 0; i < n; ++i) {
        double p = in.param[i];
        if (a.adamw && a.with_decay) p = p * (1.0 - lr * a.coeff);
        const double g = in.grad[i];
        r.m1[i] = a.beta1 * in.m1[i] + (1 - a.beta1) * g;
        r.m2[i] = a.beta2 * in.m2[i] + (1 - a.beta2) * g * g;
        r.param[i] = p - lr_t * (r.m1[i] / (std::sqrt(r.m2[i]) + eps_t));
    }
    return r;
}
// One adam / adamw op on `in`; checks every output against the reference
// (ParamOut and the moments to Paddle's atol 1e-5: the division by
// sqrt(Moment2) amplifies FP32 rounding where Moment2 is small; the beta
// powers to FP32 rounding) and returns the reference.
adam_result check_adam_step(const Shape& s, const adam_state& in, const adam_attrs& a) {
    std::vector<Attribute> attrs{Attribute::make_float("beta1", a.beta1), Attribute::make_float("beta2", a.beta2),
                                 Attribute::make_float("epsilon", a.epsilon)};
    if (a.adamw) {
        attrs.push_back(Attribute::make_float("coeff", a.coeff));
        attrs.push_back(Attribute::make_bool("with_decay", a.with_decay));
        attrs.push_back(Attribute::make_float("lr_ratio", a.lr_ratio));
    }
    const auto r = run_op(a.adamw ? "adamw" : "adam",
                          {{"Param", {tensor_of<float>(s, in.param)}},
                           {"Grad", {tensor_of<float>(s, in.grad)}},
                           {"LearningRate", {tensor_of<float>({1}, {in.lr})}},
                           {"Moment1", {tensor_of<float>(s, in.m1)}},
                           {"Moment2", {tensor_of<float>(s, in.m2)}},
                           {"Beta1Pow", {tensor_of<float>({1}, {in.beta1_pow})}},
                           {"Beta2Pow", {tensor_of<float>({1}, {in.beta2_pow})}}},
                          {{"ParamOut", 1}, {"Moment1Out", 1}, {"Moment2Out", 1}, {"Beta1PowOut", 1}, {"Beta2PowOut", 1}}, attrs);
    const adam_result want = adam_reference(in, a);
    check_close(r.out[0], s, want.param, 1e-5);
    check_close(r.out[1], s, want.m1, 1e-5);
    check_close(r.out[2], s, want.m2, 1e-5);
    check_close(r.out[3], {1}, {static_cast<double>(in.beta1_pow) * a.beta1}, 1e-7);
    check_close(r.out[4], {1}, {static_cast<double>(in.beta2_pow) * a.beta2}, 1e-7);
    return want;
}
// Param, Grad, Moment1 float32 uniform(-1, 1), Moment2 random [0, 1); the
// beta powers beta^10 (float32).
adam_state adam_inputs(std::size_t n, std::mt19937& g, float lr, double beta1, double beta2) {
    adam_state s;
    s.param = draw<float>(n, g, -1, 1);
    s.grad = draw<float>(n, g, -1, 1);
    s.m1 = draw<float>(n, g, -1, 1);
    s.m2 = draw<float>(n, g, 0, 1);
    s.lr = lr;
    s.beta1_pow = static_cast<float>(std::pow(beta1, 10));
    s.beta2_pow = static_cast<float>(std::pow(beta2, 10));
    return s;
}
std::vector<float> as_floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }
}  // namespace

TEST_CASE("Paddle's test_adam_op.py classes") {
    const Shape s{102, 105};
    const std::size_t n = 102 * 105;
    std::mt19937 g(281);
    {
        INFO("TestAdamOp1");
        const adam_attrs a{0.78, 0.836, 1e-4};
        check_adam_step(s, adam_inputs(n, g, 0.004f, a.beta1, a.beta2), a);
    }
    {
        INFO("TestAdamOp2");
        const adam_attrs a{0.9, 0.999, 1e-8};
        check_adam_step(s, adam_inputs(n, g, 0.001f, a.beta1, a.beta2), a);
    }
    {
        // Ten steps; each step's reference outputs (as float32) and beta
        // powers times the betas are the next step's inputs, with a new
        // gradient uniform(-1, 1).
        const adam_attrs a{0.9, 0.999, 1e-8};
        adam_state in = adam_inputs(n, g, 0.001f, a.beta1, a.beta2);
        for (int step = 0; step < 10; ++step) {
            INFO("TestAdamOpMultipleSteps, step " << step);
            const adam_result out = check_adam_step(s, in, a);
            in.param = as_floats(out.param);
            in.m1 = as_floats(out.m1);
            in.m2 = as_floats(out.m2);
            in.beta1_pow = static_cast<float>(in.beta1_pow * a.beta1);
            in.beta2_pow = static_cast<float>(in.beta2_pow * a.beta2);
            in.grad = draw<float>(n, g, -1, 1);
        }
    }
    // Not ported: TestSparseAdamOp (SelectedRows Grad, lazy_mode);
    // TestAdamOpBetaVariable, TestAdamOpBetaEpsilonVariable,
    // TestAdamOpWithGlobalBetaPow and TestAdamOpWithSkipUpdate give beta1,
    // beta2, epsilon or SkipUpdate as tensors (Beta1Tensor, EpsilonTensor,
    // ...; the last two with use_global_beta_pow), which dlgraph's adam does
    // not take; TestAdamOpV2, TestAdamOptimizer and TestAdamOpV2Group test
    // the Python optimizer API.
}

TEST_CASE("Paddle's test_adamw_op.py classes") {
    std::mt19937 g(291);
    {
        // Param (102, 105); lr 0.004, beta1 0.78, beta2 0.836, epsilon 1e-4,
        // coeff 0.5, with_decay.
        INFO("TestAdamW");
        adam_attrs a{0.78, 0.836, 1e-4};
        a.adamw = true;
        a.coeff = 0.5;
        a.with_decay = true;
        check_adam_step({102, 105}, adam_inputs(102 * 105, g, 0.004f, a.beta1, a.beta2), a);
    }
    {
        // The same on a (2, 2) Param with lr_ratio 0.1, which adamw_step
        // applies to the learning rate of both the decay and Adam's step;
        // Paddle runs this class on CUDA only (its CPU kernel scales only the
        // decay), dlgraph scales both, as its NumPy reference does.
        INFO("TestAdamW2");
        adam_attrs a{0.78, 0.836, 1e-4};
        a.adamw = true;
        a.coeff = 0.5;
        a.with_decay = true;
        a.lr_ratio = 0.1;
        check_adam_step({2, 2}, adam_inputs(4, g, 0.004f, a.beta1, a.beta2), a);
    }
    // Not ported: TestAdamWOp, TestAdamWOpGroup, TestAdamWOpGroupWithLR and
    // TestAdamWOpLayerwiseLR test the Python optimizer API.
}
