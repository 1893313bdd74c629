// The kernel core of the shape and fill ops (kernels/shape.hpp,
// kernels/fill.hpp) called directly on raw arrays, without a Session,
// against plain reference loops: what a device or a fixed model built on
// the core gets. Last, the CPU kernels' handling of more parts than one
// call of the core takes (cpu/shape_ops.hpp), through a Session.
#include <doctest/doctest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlgraph/dlgraph.hpp"
#include "dlgraph/kernels/fill.hpp"
#include "dlgraph/kernels/shape.hpp"
#include "test_helpers.hpp"

namespace {

namespace k = dlgraph::kernels;
template <std::int64_t N> using ic = std::integral_constant<std::int64_t, N>;

// A heap array of T (std::vector<bool> has no bool array inside).
template <class T> class buf {
public:
    explicit buf(std::size_t n = 0, T v = T()) : n_(n), p_(new T[n]) { std::fill(begin(), end(), v); }
    buf(const buf& o) : buf(o.n_) { std::copy(o.begin(), o.end(), begin()); }
    buf(buf&&) noexcept = default;
    buf& operator=(buf o) noexcept {
        std::swap(n_, o.n_);
        std::swap(p_, o.p_);
        return *this;
    }
    std::size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    T* data() { return p_.get(); }
    const T* data() const { return p_.get(); }
    T& operator[](std::size_t i) { return p_[i]; }
    const T& operator[](std::size_t i) const { return p_[i]; }
    T* begin() { return data(); }
    T* end() { return data() + n_; }
    const T* begin() const { return data(); }
    const T* end() const { return data() + n_; }

private:
    std::size_t n_;
    std::unique_ptr<T[]> p_;
};

// Distinct values of T for element i (bool alternates).
template <class T> T value_at(std::int64_t i) {
    if constexpr (std::is_same_v<T, bool>) return (i * 7 + 3) % 3 == 0;
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(i) * T(0.37) - T(11.5);
    else return static_cast<T>((i * 7919) % 30011 - 15000);
}
template <class T> buf<T> values(std::int64_t n, std::int64_t salt = 0) {
    buf<T> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value_at<T>(i + salt * 1009);
    return v;
}
template <class T> bool same_bits(const buf<T>& a, const buf<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
std::int64_t product(const std::vector<std::int64_t>& d) {
    return std::accumulate(d.begin(), d.end(), std::int64_t(1), std::multiplies<>());
}

// y[j] = x[i] with i[perm[k]] = j[k], by a full odometer over y.
template <class T>
buf<T> transpose_ref(const buf<T>& x, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& perm) {
    const int r = static_cast<int>(dims.size());
    std::vector<std::int64_t> ydims(dims.size()), xstride(dims.size());
    for (int i = 0; i < r; ++i) ydims[i] = dims[static_cast<std::size_t>(perm[i])];
    std::int64_t st = 1;
    for (int i = r - 1; i >= 0; --i) {
        xstride[i] = st;
        st *= dims[i];
    }
    buf<T> y(x.size());
    std::vector<std::int64_t> j(dims.size(), 0);
    for (std::size_t o = 0; o < y.size(); ++o) {
        std::int64_t xi = 0;
        for (int q = 0; q < r; ++q) xi += j[q] * xstride[static_cast<std::size_t>(perm[q])];
        y[o] = x[static_cast<std::size_t>(xi)];
        for (int q = r - 1; q >= 0; --q) {
            if (++j[q] < ydims[q]) break;
            j[q] = 0;
        }
    }
    return y;
}

template <class T> void check_transpose(const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& perm) {
    const buf<T> x = values<T>(product(dims));
    buf<T> y(x.size());
    k::transpose(x.data(), dims.data(), static_cast<int>(dims.size()), perm.data(), y.data());
    CHECK(same_bits(y, transpose_ref(x, dims, perm)));
}

// Every permutation of every rank 1..4 over `dims` (its first r entries),
// plus a few of rank 5 and 6.
template <class T> void transposes_over(const std::vector<std::int64_t>& dims) {
    for (std::size_t r = 1; r <= 4; ++r) {
        std::vector<std::int64_t> d(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(r)), p(r);
        std::iota(p.begin(), p.end(), 0);
        do {
            CAPTURE(r);
            check_transpose<T>(d, p);
        } while (std::next_permutation(p.begin(), p.end()));
    }
    check_transpose<T>({2, 3, 1, 4, 5}, {4, 2, 0, 3, 1});
    check_transpose<T>({3, 1, 2, 2, 5, 3}, {5, 0, 3, 1, 4, 2});
    check_transpose<T>({2, 2, 2, 2, 2, 2, 2, 3}, {7, 6, 5, 4, 3, 2, 1, 0});
}

TEST_CASE_TEMPLATE("kernels::transpose: every permutation up to rank 4, against an odometer", T, float, double,
                   std::int16_t, std::int32_t, std::int64_t, bool) {
    transposes_over<T>({3, 5, 2, 7});
    transposes_over<T>({1, 7, 1, 3});  // unit dims dropped
    transposes_over<T>({4, 1, 6, 1});
    // Tiled: both contiguous axes move, sizes not multiples of the tile.
    check_transpose<T>({33, 65}, {1, 0});
    check_transpose<T>({1023, 3}, {1, 0});
    check_transpose<T>({7, 40, 37}, {2, 1, 0});
    check_transpose<T>({2, 35, 33}, {0, 2, 1});
    // Empty and one element.
    check_transpose<T>({0, 4}, {1, 0});
    check_transpose<T>({1}, {0});
    check_transpose<T>({1, 1, 1}, {2, 0, 1});
}

TEST_CASE_TEMPLATE("kernels::copy_elements: sizes 0, 1, 7, 1023 and compile-time sizes", T, float, double,
                   std::int32_t, std::int64_t) {
    for (std::int64_t n : {0, 1, 7, 1023}) {
        const buf<T> x = values<T>(n);
        buf<T> y(static_cast<std::size_t>(n), T(0));
        k::copy_elements(x.data(), n, y.data());
        CHECK(same_bits(x, y));
    }
    const buf<T> x = values<T>(7);
    buf<T> y(7, T(0));
    k::copy_elements(x.data(), ic<7>{}, y.data());
    CHECK(same_bits(x, y));
    k::copy_elements<T>(nullptr, 0, nullptr);  // no memcpy on null pointers
}

// The parts' d along `axis` of a 3-D array of `dims` with that dim replaced.
struct split3 {
    std::vector<std::int64_t> dims;  // the joined array
    int axis;
    std::vector<std::int64_t> parts;  // d of each part along axis
    std::int64_t outer() const { return axis == 0 ? 1 : axis == 1 ? dims[0] : dims[0] * dims[1]; }
    std::int64_t inner() const { return axis == 2 ? 1 : axis == 1 ? dims[2] : dims[1] * dims[2]; }
    std::vector<std::int64_t> part_dims(std::size_t k) const {
        auto d = dims;
        d[static_cast<std::size_t>(axis)] = parts[k];
        return d;
    }
};

// The joined array from its parts, element by element through indices.
template <class T> buf<T> concat_ref(const split3& s, const std::vector<buf<T>>& xs) {
    buf<T> y(static_cast<std::size_t>(product(s.dims)));
    const auto& d = s.dims;
    for (std::int64_t i = 0; i < d[0]; ++i)
        for (std::int64_t j = 0; j < d[1]; ++j)
            for (std::int64_t l = 0; l < d[2]; ++l) {
                std::int64_t idx[3] = {i, j, l};
                std::size_t part = 0;
                while (idx[s.axis] >= s.parts[part]) idx[s.axis] -= s.parts[part++];
                const auto pd = s.part_dims(part);
                y[static_cast<std::size_t>((i * d[1] + j) * d[2] + l)] =
                    xs[part][static_cast<std::size_t>((idx[0] * pd[1] + idx[1]) * pd[2] + idx[2])];
            }
    return y;
}

template <class T> void check_concat_split(const split3& s) {
    CAPTURE(s.axis);
    const int n = static_cast<int>(s.parts.size());
    std::vector<buf<T>> xs;
    for (int p = 0; p < n; ++p) xs.push_back(values<T>(product(s.part_dims(static_cast<std::size_t>(p))), p + 1));
    std::vector<const T*> xp;
    for (auto& x : xs) xp.push_back(x.data());
    const buf<T> want = concat_ref(s, xs);
    const std::int64_t row = s.dims[static_cast<std::size_t>(s.axis)] * s.inner();

    buf<T> y(want.size());
    k::concat(s.outer(), s.inner(), n, xp.data(), s.parts.data(), y.data(), row);
    CHECK(same_bits(y, want));

    // The same join a part at a time, each call given the row of the whole.
    buf<T> y1(want.size());
    std::int64_t at = 0;
    for (int p = 0; p < n; ++p) {
        k::concat(s.outer(), s.inner(), 1, xp.data() + p, s.parts.data() + p, y1.data() + at * s.inner(), row);
        at += s.parts[static_cast<std::size_t>(p)];
    }
    CHECK(same_bits(y1, want));

    // split is its inverse, whole and a part at a time.
    std::vector<buf<T>> outs, outs1;
    for (auto& x : xs) {
        outs.emplace_back(x.size());
        outs1.emplace_back(x.size());
    }
    std::vector<T*> op, op1;
    for (int p = 0; p < n; ++p) {
        op.push_back(outs[static_cast<std::size_t>(p)].data());
        op1.push_back(outs1[static_cast<std::size_t>(p)].data());
    }
    k::split(s.outer(), s.inner(), n, want.data(), row, op.data(), s.parts.data());
    at = 0;
    for (int p = 0; p < n; ++p) {
        k::split(s.outer(), s.inner(), 1, want.data() + at * s.inner(), row, op1.data() + p, s.parts.data() + p);
        at += s.parts[static_cast<std::size_t>(p)];
    }
    for (int p = 0; p < n; ++p) {
        CHECK(same_bits(outs[static_cast<std::size_t>(p)], xs[static_cast<std::size_t>(p)]));
        CHECK(same_bits(outs1[static_cast<std::size_t>(p)], xs[static_cast<std::size_t>(p)]));
    }
}

TEST_CASE_TEMPLATE("kernels::concat and split: along every axis of a 3-D array", T, float, double, std::int16_t,
                   std::int32_t, std::int64_t, bool) {
    for (int axis = 0; axis < 3; ++axis) {
        std::vector<std::int64_t> dims = {3, 5, 7};
        // Parts of 1, 0 (an empty one) and the rest along the axis.
        const std::int64_t d = dims[static_cast<std::size_t>(axis)];
        check_concat_split<T>({dims, axis, {1, 0, d - 1}});
        check_concat_split<T>({dims, axis, {d}});  // one part: a copy
        dims[static_cast<std::size_t>(axis)] = 1023;
        check_concat_split<T>({dims, axis, {7, 1, 1015}});
        dims = {1, 7, 1};
        dims[static_cast<std::size_t>(axis)] = 9;
        check_concat_split<T>({dims, axis, {2, 3, 4}});
    }
}

TEST_CASE("kernels::concat and split: compile-time extents (a fixed model)") {
    // [2, 3 + 1, 4]: two float parts along dim 1.
    buf<float> a = values<float>(2 * 3 * 4, 1), b = values<float>(2 * 1 * 4, 2);
    const float* xs[] = {a.data(), b.data()};
    const std::int64_t dims[] = {3, 1};
    buf<float> y(32);
    k::concat(ic<2>{}, ic<4>{}, 2, xs, dims, y.data(), ic<16>{});
    CHECK(same_bits(y, concat_ref<float>({{2, 4, 4}, 1, {3, 1}}, {a, b})));
    buf<float> a1(a.size()), b1(b.size());
    float* ys[] = {a1.data(), b1.data()};
    k::split(ic<2>{}, ic<4>{}, 2, y.data(), ic<16>{}, ys, dims);
    CHECK(same_bits(a1, a));
    CHECK(same_bits(b1, b));
}

template <class T, class U> void check_cast(std::int64_t n) {
    CAPTURE(n);
    buf<T> x = values<T>(n);
    buf<U> y(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<U>(x[i]);
    k::cast(x.data(), n, y.data());
    CHECK(same_bits(y, want));
}

TEST_CASE("kernels::cast: between the element types, sizes 1, 7, 1023") {
    for (std::int64_t n : {0, 1, 7, 1023}) {
        check_cast<float, double>(n);
        check_cast<double, float>(n);
        check_cast<float, float>(n);
        check_cast<double, double>(n);
        check_cast<float, std::int32_t>(n);
        check_cast<double, std::int64_t>(n);
        check_cast<double, std::int16_t>(n);
        check_cast<std::int32_t, float>(n);
        check_cast<std::int64_t, double>(n);
        check_cast<std::int32_t, std::int16_t>(n);
        check_cast<std::int16_t, std::int64_t>(n);
        check_cast<std::int64_t, std::int64_t>(n);
        check_cast<float, bool>(n);
        check_cast<bool, double>(n);
        check_cast<bool, std::int32_t>(n);
    }
    buf<double> x = values<double>(7);
    buf<float> y(7), want(7);
    for (std::size_t i = 0; i < 7; ++i) want[i] = static_cast<float>(x[i]);
    k::cast(x.data(), ic<7>{}, y.data());
    CHECK(same_bits(y, want));
}

// ((x0 + x1) + x2) + ... one scalar addition at a time.
template <class T> buf<T> sum_ref(const std::vector<buf<T>>& xs, const buf<T>* first) {
    buf<T> y = first ? *first : xs[0];
    for (std::size_t k = first ? 0 : 1; k < xs.size(); ++k)
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<T>(y[i] + xs[k][i]);
    return y;
}

TEST_CASE_TEMPLATE("kernels::sum: k inputs added from the left, in place or not, cut anywhere on whole vectors", T,
                   float, double, std::int32_t, std::int64_t) {
    for (std::int64_t n : {1, 7, 1023}) {
        for (int count = 1; count <= 5; ++count) {
            CAPTURE(n);
            CAPTURE(count);
            std::vector<buf<T>> xs;
            std::vector<const T*> xp;
            for (int p = 0; p < count; ++p) xs.push_back(values<T>(n, p + 3));
            for (auto& x : xs) xp.push_back(x.data());
            buf<T> y(static_cast<std::size_t>(n));
            k::sum(n, count, xp.data(), y.data(), false);
            CHECK(same_bits(y, sum_ref<T>(xs, nullptr)));

            // Accumulated onto a first term already in y.
            const buf<T> first = values<T>(n, 99);
            y = first;
            k::sum(n, count, xp.data(), y.data(), true);
            CHECK(same_bits(y, sum_ref<T>(xs, &first)));

            // In pieces starting on whole vectors (as the CPU threads cut it).
            if (count >= 2) {
                std::int64_t W = 1;
                if constexpr (k::simd_type<T>) W = static_cast<std::int64_t>(k::batch<T>::size);
                buf<T> yp(static_cast<std::size_t>(n));
                const std::int64_t cut = n / 2 / W * W;
                using range = std::pair<std::int64_t, std::int64_t>;
                for (auto [b, e] : {range{0, cut}, range{cut, n}}) {
                    std::vector<const T*> xb;
                    for (auto* x : xp) xb.push_back(x + b);
                    k::sum(e - b, count, xb.data(), yp.data() + b, false);
                }
                CHECK(same_bits(yp, sum_ref<T>(xs, nullptr)));
            }
        }
    }
    // No inputs: zeros. Compile-time size.
    buf<T> z(7, T(1));
    k::sum<T>(ic<7>{}, 0, nullptr, z.data(), false);
    CHECK(same_bits(z, buf<T>(7, T(0))));
    buf<T> a = values<T>(7, 1), b = values<T>(7, 2), y(7);
    const T* ab[] = {a.data(), b.data()};
    k::sum(ic<7>{}, 2, ab, y.data(), false);
    CHECK(same_bits(y, sum_ref<T>({a, b}, nullptr)));
}

TEST_CASE_TEMPLATE("kernels::fill_constant", T, float, double, std::int16_t, std::int32_t, std::int64_t, bool) {
    for (std::int64_t n : {0, 1, 7, 1023}) {
        buf<T> y(static_cast<std::size_t>(n), T(0));
        k::fill_constant(y.data(), n, value_at<T>(5));
        CHECK(same_bits(y, buf<T>(static_cast<std::size_t>(n), value_at<T>(5))));
    }
    buf<T> y(7, T(0));
    k::fill_constant(y.data(), ic<7>{}, value_at<T>(3));
    CHECK(same_bits(y, buf<T>(7, value_at<T>(3))));
}

TEST_CASE_TEMPLATE("kernels::fill_uniform and fill_gaussian: mt19937_64 through the standard distributions", T, float,
                   double) {
    for (std::int64_t n : {1, 7, 1023}) {
        buf<T> u(static_cast<std::size_t>(n)), g(u.size()), wu(u.size()), wg(u.size());
        k::fill_uniform(u.data(), n, 17, -2.0, 3.0);
        k::fill_gaussian(g.data(), n, 17, 1.0, 2.0);
        std::mt19937_64 gu(17), gg(17);
        std::uniform_real_distribution<double> du(-2.0, 3.0);
        std::normal_distribution<double> dg(1.0, 2.0);
        for (std::size_t i = 0; i < u.size(); ++i) {
            wu[i] = static_cast<T>(du(gu));
            wg[i] = static_cast<T>(dg(gg));
        }
        CHECK(same_bits(u, wu));
        CHECK(same_bits(g, wg));
        for (T v : u) CHECK((v >= T(-2) && v <= T(3)));
    }
    // The same seed gives the same values; another seed others.
    buf<T> a(7), b(7), c(7);
    k::fill_uniform(a.data(), ic<7>{}, 5, 0.0, 1.0);
    k::fill_uniform(b.data(), 7, 5, 0.0, 1.0);
    k::fill_uniform(c.data(), 7, 6, 0.0, 1.0);
    CHECK(same_bits(a, b));
    CHECK(!same_bits(a, c));
    // A zero deviation gives the mean.
    k::fill_gaussian(a.data(), 7, 4, -1.5, 0.0);
    CHECK(same_bits(a, buf<T>(7, T(-1.5))));
}

// ---- the CPU kernels over many parts ---------------------------------------------------------

// A program of uniform_random inputs (seed k + 1 for input k, in [-1, 1))
// and the ops under test.
struct many_parts {
    dlgraph::ProgramDesc desc;
    dlgraph::BlockDesc& blk = desc.blocks[0];
    void var(const std::string& n, std::vector<std::int64_t> dims) {
        blk.vars.push_back({n, dlgraph::VarType::LOD_TENSOR, dlgraph::DataType::FP32, std::move(dims), 0, false});
    }
    void input(const std::string& n, const std::vector<std::int64_t>& dims, int seed) {
        var(n, dims);
        dlgraph::OpDesc op;
        op.type = "uniform_random";
        op.set_output("Out", {n});
        op.set_attr(dlgraph::Attribute::make_ints("shape", dims)).set_attr(dlgraph::Attribute::make_int("seed", seed));
        blk.ops.push_back(op);
    }
    static buf<float> values(const std::vector<std::int64_t>& dims, int seed) {
        buf<float> v(static_cast<std::size_t>(product(dims)));
        k::fill_uniform(v.data(), product(dims), static_cast<std::uint64_t>(seed), -1.0, 1.0);
        return v;
    }
};

buf<float> values_of(const dlgraph::Tensor& t) {
    buf<float> v(static_cast<std::size_t>(t.numel()));
    std::copy(t.data<float>(), t.data<float>() + t.numel(), v.data());
    return v;
}

TEST_CASE("cpu kernels: concat, split and sum of more parts than one call of the core takes") {
    const int n = 75;  // over two runs of cpu_ops::parts_per_call
    SUBCASE("concat along dim 1, cut back by concat_grad; split into equal parts") {
        many_parts p;
        std::vector<std::string> xs, dxs, outs;
        std::vector<std::int64_t> widths;
        std::vector<buf<float>> parts;
        for (int q = 0; q < n; ++q) {
            xs.push_back("x" + std::to_string(q));
            dxs.push_back("dx" + std::to_string(q));
            outs.push_back("s" + std::to_string(q));
            widths.push_back(q % 4);  // some empty
            const std::vector<std::int64_t> d = {2, q % 4, 3};
            p.input(xs.back(), d, q + 1);
            parts.push_back(many_parts::values(d, q + 1));
            p.var(dxs.back(), d);
            p.var(outs.back(), {2, 2, 3});
        }
        const std::int64_t total = std::accumulate(widths.begin(), widths.end(), std::int64_t(0));
        p.var("cat", {2, total, 3});
        dlgraph::OpDesc cat;
        cat.type = "concat";
        cat.set_input("X", xs).set_output("Out", {"cat"});
        cat.set_attr(dlgraph::Attribute::make_int("axis", 1));
        p.blk.ops.push_back(cat);
        dlgraph::OpDesc cut = cat;
        cut.type = "concat_grad";
        cut.outputs.clear();
        cut.set_input("Out@GRAD", {"cat"}).set_output("X@GRAD", dxs);
        p.blk.ops.push_back(cut);
        // split by num: split's inference formats `sections` as a Shape for
        // its messages, so more than 8 sections fail there (max_rank).
        p.input("y", {2, 2 * n, 3}, 99);
        dlgraph::OpDesc split;
        split.type = "split";
        split.set_input("X", {"y"}).set_output("Out", outs);
        split.set_attr(dlgraph::Attribute::make_int("axis", -2)).set_attr(dlgraph::Attribute::make_int("num", n));
        p.blk.ops.push_back(split);

        dlgraph::Session<dlgraph::cpu> s(p.desc);
        std::vector<dlgraph::TargetRef> targets = {"cat"};
        for (auto& o : dxs) targets.emplace_back(o);
        for (auto& o : outs) targets.emplace_back(o);
        const std::vector<dlgraph::Tensor> got = s.eval(std::span<const dlgraph::TargetRef>(targets), {});
        CHECK(same_bits(values_of(got[0]), concat_ref<float>({{2, total, 3}, 1, widths}, parts)));
        const buf<float> y = many_parts::values({2, 2 * n, 3}, 99);
        for (int q = 0; q < n; ++q) {
            const std::size_t dq = static_cast<std::size_t>(q) + 1, sq = static_cast<std::size_t>(n + q) + 1;
            CHECK(same_bits(values_of(got[dq]), parts[static_cast<std::size_t>(q)]));
            buf<float> want(12);
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t j = 0; j < 6; ++j)
                    want[i * 6 + j] = y[i * static_cast<std::size_t>(6 * n) + static_cast<std::size_t>(q) * 6 + j];
            CHECK(same_bits(values_of(got[sq]), want));
        }
    }
    SUBCASE("sum on two threads, into a new tensor and in place (Out is one of the X)") {
        const std::int64_t len = 150001;  // two threads' worth, not a whole number of vectors
        for (int alias : {-1, 0, 40, n - 1}) {
            CAPTURE(alias);
            many_parts p;
            std::vector<std::string> xs;
            std::vector<buf<float>> vals;
            for (int q = 0; q < n; ++q) {
                xs.push_back("x" + std::to_string(q));
                p.input(xs.back(), {len}, q + 1);
                vals.push_back(many_parts::values({len}, q + 1));
            }
            const std::string out = alias < 0 ? "total" : xs[static_cast<std::size_t>(alias)];
            if (alias < 0) p.var(out, {len});
            dlgraph::OpDesc sum;
            sum.type = "sum";
            sum.set_input("X", xs).set_output("Out", {out});
            p.blk.ops.push_back(sum);
            dlgraph::SessionOptions opts;
            opts.threads = 2;
            dlgraph::Session<dlgraph::cpu> s(p.desc, opts);
            const dlgraph::Tensor got = s.eval(dlgraph::TargetRef(out, static_cast<int>(p.blk.ops.size()) - 1));
            // ((first + x) + x) + ... in input order, the aliased input first.
            buf<float> want = vals[static_cast<std::size_t>(alias < 0 ? 0 : alias)];
            for (int q = alias < 0 ? 1 : 0; q < n; ++q) {
                if (q == alias) continue;
                for (std::size_t i = 0; i < want.size(); ++i) want[i] += vals[static_cast<std::size_t>(q)][i];
            }
            CHECK(same_bits(values_of(got), want));
        }
    }
}

// Errors the kernels threw at run time are inference errors now: the op
// is refused where it is built.
TEST_CASE("fill_any_like and cast refuse FP16 outputs when built") {
    dlgraph::Program p;
    auto x = p.input<float>("x", {2, 3});
    check_throws<dlgraph::type_error>(
        [&] {
            p.append("fill_any_like", {{"X", {"x"}}}, {{"Out", 1}},
                     {dlgraph::Attribute::make_float("value", 1.0), dlgraph::Attribute::make_int("dtype", 4)});
        },
        {"dlgraph.type.kernel", "fill_any_like", "FP16 output is not supported"});
    check_throws<dlgraph::type_error>(
        [&] {
            p.append("cast", {{"X", {"x"}}}, {{"Out", 1}},
                     {dlgraph::Attribute::make_int("in_dtype", 5), dlgraph::Attribute::make_int("out_dtype", 4)});
        },
        {"dlgraph.type.op", "cast", "FP16 has no conversions yet"});
}

}  // namespace
