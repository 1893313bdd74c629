// Fixed models written in C++: typed expressions with compile-time shapes.
//
//     using namespace dlgraph::fixed;
//     Var<float, 1, 784> x{input};        // views the caller's arrays
//     Var<float, 784, 256> w1{w1_data};  // (weights: constexpr arrays, in flash)
//     ...
//     auto y = softmax(matmul(relu(matmul(x, w1) + b1), w2) + b2);
//     static_assert(decltype(y)::arena_bytes <= 4096);   // a budget, at compile time
//     arena<decltype(y)> a;                               // or any 64-byte-aligned span
//     run(y, prob, a);                                    // prob: float[10]
//
// A Var's dims are in its type, and so is every op's result: matmul of
// [1,784] x [784,256] is [1,256], and operands whose shapes do not agree stop
// the build at the op (a static_assert in `shapes_agree<op, dims<...>,
// dims<...>>`, which the compiler's message shows with both shapes).
// Element-wise ops broadcast as the builder's do (NumPy: trailing dims
// aligned, a dim of 1 stretched).
//
// Each expression's type knows the arena its evaluation needs
// (`arena_bytes`), from a planner over the expression tree: an element-wise
// op writes into the buffer of its operand when that has the result's size
// (as the Session's in-place planner does), the others' operands live in the
// arena, one after another, while the op runs, and a product's workspace
// follows them. The result goes straight into the caller's array.
//
// Evaluation calls the kernel core the Session's CPU kernels call, serially,
// with constant extents, so the results are Session<cpu>'s bits. Like an
// emitted model (fixed/emit.hpp) it allocates nothing, throws nothing and
// builds with -fno-exceptions -fno-rtti. Inputs must not overlap the output.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "dlgraph/fixed/runtime.hpp"

namespace dlgraph::fixed {

// A shape in a type. Every dim is positive.
template <std::int64_t... D>
struct dims {
    static_assert(((D > 0) && ...), "dlgraph::fixed: every dim of a fixed shape is positive");
    static constexpr int rank = static_cast<int>(sizeof...(D));
    static constexpr std::int64_t numel = (std::int64_t{1} * ... * D);
    static constexpr std::array<std::int64_t, sizeof...(D)> value{D...};
};

// The ops, as they appear in messages.
namespace op {
struct add {};
struct sub {};
struct mul {};
struct div {};
struct max {};
struct min {};
struct matmul {};
struct softmax {};
}  // namespace op

// Fails to compile when Agree is false; the compiler's message names this
// template with its arguments: the op and both operands' shapes.
template <class Op, class X, class Y, bool Agree>
struct shapes_agree {
    static_assert(Agree,
                  "dlgraph::fixed: the operands' shapes do not agree (the op and both shapes are the "
                  "arguments of shapes_agree)");
    static constexpr bool value = Agree;
};
// Likewise for the operands' element types (no implicit conversions, as the builder).
template <class Op, class X, class Y, bool Agree>
struct types_agree {
    static_assert(Agree,
                  "dlgraph::fixed: the operands' element types differ (the op and both types are the "
                  "arguments of types_agree)");
    static constexpr bool value = Agree;
};

namespace detail {

// Buffers in the arena start on 64-byte lines (vector loads, and as the
// Session's planner aligns them).
constexpr std::size_t line(std::size_t bytes) noexcept { return (bytes + 63) / 64 * 64; }

template <class E>
constexpr std::size_t bytes_of() noexcept {
    return line(static_cast<std::size_t>(E::shape::numel) * sizeof(typename E::value_type));
}

// Dim i of shape S aligned to rank r at its trailing dims (1 before S's first).
template <class S>
constexpr std::int64_t aligned_dim(int r, int i) noexcept {
    return i < r - S::rank ? 1 : S::value[static_cast<std::size_t>(i - (r - S::rank))];
}
template <class X, class Y>
constexpr bool broadcastable() noexcept {
    constexpr int r = std::max(X::rank, Y::rank);
    for (int i = 0; i < r; ++i) {
        const std::int64_t a = aligned_dim<X>(r, i), b = aligned_dim<Y>(r, i);
        if (a != b && a != 1 && b != 1) return false;
    }
    return true;
}
template <class X, class Y, std::size_t... I>
auto broadcast_dims(std::index_sequence<I...>)
    -> dims<(aligned_dim<X>(sizeof...(I), I) == 1 ? aligned_dim<Y>(sizeof...(I), I)
                                                  : aligned_dim<X>(sizeof...(I), I))...>;

// The broadcast of two shapes (NumPy's rule); `agree` is false when some
// aligned pair of dims differs with neither 1 (the type is then still a
// shape, so the failed check is the only error).
template <class X, class Y>
struct broadcast {
    static constexpr bool agree = broadcastable<X, Y>();
    using type = decltype(broadcast_dims<X, Y>(
        std::make_index_sequence<static_cast<std::size_t>(std::max(X::rank, Y::rank))>{}));
};

// Dim i of S, or 1 past its rank.
template <class S>
constexpr std::int64_t dim_or_1(int i) noexcept {
    return i < S::rank ? S::value[static_cast<std::size_t>(i)] : 1;
}

template <class Op>
struct binary_fn;
template <>
struct binary_fn<op::add> {
    using type = kernels::add_fn;
};
template <>
struct binary_fn<op::sub> {
    using type = kernels::sub_fn;
};
template <>
struct binary_fn<op::mul> {
    using type = kernels::mul_fn;
};
template <>
struct binary_fn<op::div> {
    using type = kernels::div_fn;
};
template <>
struct binary_fn<op::max> {
    using type = kernels::max_fn;
};
template <>
struct binary_fn<op::min> {
    using type = kernels::min_fn;
};

}  // namespace detail

// What every fixed expression is.
template <class E>
concept expression = requires {
    typename E::value_type;
    typename E::shape;
    { E::is_leaf } -> std::convertible_to<bool>;
    { E::arena_bytes } -> std::convertible_to<std::size_t>;
};

// A variable: a view of the caller's array of Dims elements (row-major).
template <class T, std::int64_t... Dims>
class Var {
public:
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "dlgraph::fixed: expressions compute in float or double");
    using value_type = T;
    using shape = dims<Dims...>;
    static constexpr bool is_leaf = true;
    static constexpr std::size_t arena_bytes = 0;

    constexpr Var(std::span<const T, shape::numel> data) noexcept : data_(data.data()) {}
    constexpr explicit Var(const T* data) noexcept : data_(data) {}  // numel elements
    constexpr const T* data() const noexcept { return data_; }
    void eval(T* out, std::byte*) const noexcept { kernels::copy_elements(data_, shape::numel, out); }

private:
    const T* data_;
};

// Where an operand's values are while its consumer runs: a variable's own
// array, the consumer's output (`dst`) when the operand was evaluated there,
// or the arena at `offset`.
template <class E>
const typename E::value_type* operand(const E& e, typename E::value_type* dst, bool in_dst, std::byte* arena,
                                      std::size_t offset) noexcept {
    if constexpr (E::is_leaf)
        return e.data();
    else {
        using T = typename E::value_type;
        T* at = in_dst ? dst : reinterpret_cast<T*>(arena + offset);
        e.eval(at, arena + (in_dst ? 0 : offset + detail::bytes_of<E>()));
        return at;
    }
}

// z = f(x) element by element: relu, sigmoid, tanh, exp, log, sqrt, abs, square.
template <class F, expression X>
class Unary {
public:
    using value_type = typename X::value_type;
    using shape = typename X::shape;
    static constexpr bool is_leaf = false;
    static constexpr std::size_t arena_bytes = X::arena_bytes;  // X is evaluated into the output

    constexpr explicit Unary(const X& x) noexcept : x_(x) {}
    void eval(value_type* out, std::byte* arena) const noexcept {
        const value_type* x = operand(x_, out, !X::is_leaf, arena, 0);
        kernels::unary_loop_serial(shape::numel, x, out, F{});
    }

private:
    X x_;
};

// z = x op y with broadcasting.
template <class Op, expression X, expression Y>
class Binary {
public:
    using value_type = typename X::value_type;
    using shape = typename detail::broadcast<typename X::shape, typename Y::shape>::type;
    static constexpr bool is_leaf = false;

private:
    static constexpr std::int64_t n = shape::numel, xn = X::shape::numel, yn = Y::shape::numel;
    // An operand of the result's size that is computed here is computed
    // into the output (X's first), and the op runs in place.
    static constexpr bool x_in_dst = !X::is_leaf && xn == n;
    static constexpr bool y_in_dst = !Y::is_leaf && yn == n && !x_in_dst;
    // The others are computed into the arena: X's at 0, then Y's.
    static constexpr std::size_t x_bytes = X::is_leaf || x_in_dst ? 0 : detail::bytes_of<X>();
    static constexpr std::size_t y_bytes = Y::is_leaf || y_in_dst ? 0 : detail::bytes_of<Y>();

public:
    // The operand in the output is computed first (with the whole arena),
    // then X's and Y's in turn, each above what is already there.
    static constexpr std::size_t arena_bytes =
        std::max({x_in_dst ? X::arena_bytes : 0, y_in_dst ? Y::arena_bytes : 0, x_in_dst ? 0 : x_bytes + X::arena_bytes,
                  y_in_dst ? 0 : x_bytes + y_bytes + Y::arena_bytes});

    constexpr Binary(const X& x, const Y& y) noexcept : x_(x), y_(y) {}
    void eval(value_type* out, std::byte* arena) const noexcept {
        const value_type *x = nullptr, *y = nullptr;
        if constexpr (y_in_dst) {
            y = operand(y_, out, true, arena, 0);
            x = operand(x_, out, false, arena, 0);
        } else {
            x = operand(x_, out, x_in_dst, arena, 0);
            y = operand(y_, out, y_in_dst, arena, x_bytes);
        }
        using F = typename detail::binary_fn<Op>::type;
        if constexpr (xn == n && yn == n)
            kernels::binary_loop_serial(n, x, 1, y, 1, out, F{});
        else if constexpr (xn == n && yn == 1)
            kernels::binary_loop_serial(n, x, 1, y, 0, out, F{});
        else if constexpr (xn == 1 && yn == n)
            kernels::binary_loop_serial(n, x, 0, y, 1, out, F{});
        else
            fixed::broadcast(x, y, out, n, walk, F{});
    }

private:
    static constexpr kernels::broadcast_geometry walk =
        kernels::broadcast_walk_of(X::shape::value.data(), X::shape::rank, Y::shape::value.data(), Y::shape::rank, -1,
                                   shape::value.data(), shape::rank);
    X x_;
    Y y_;
};

// [M, K] x [K, N] -> [M, N].
template <expression X, expression Y>
class Matmul {
public:
    using value_type = typename X::value_type;
    static constexpr std::int64_t m = detail::dim_or_1<typename X::shape>(0),
                                  k = detail::dim_or_1<typename X::shape>(1),
                                  n = detail::dim_or_1<typename Y::shape>(1);
    using shape = dims<m, n>;
    static constexpr bool is_leaf = false;

private:
    static constexpr std::size_t x_bytes = X::is_leaf ? 0 : detail::bytes_of<X>();
    static constexpr std::size_t y_bytes = Y::is_leaf ? 0 : detail::bytes_of<Y>();
    static constexpr std::size_t ws_bytes = gemm_workspace_bytes<value_type>(false, m, n, k);

public:
    // The product reads its operands while it writes its output: both live
    // in the arena (X's, then Y's), and the workspace after them.
    static constexpr std::size_t arena_bytes = std::max(
        {x_bytes + X::arena_bytes, x_bytes + y_bytes + Y::arena_bytes, x_bytes + y_bytes + detail::line(ws_bytes)});

    constexpr Matmul(const X& x, const Y& y) noexcept : x_(x), y_(y) {}
    void eval(value_type* out, std::byte* arena) const noexcept {
        const value_type* x = operand(x_, out, false, arena, 0);
        const value_type* y = operand(y_, out, false, arena, x_bytes);
        fixed::gemm<value_type>(false, false, m, n, k, value_type(1), x, k, y, n, out, n, arena + x_bytes + y_bytes,
                                ws_bytes);
    }

private:
    X x_;
    Y y_;
};

// Softmax along the last dim, in place on its operand when that is computed here.
template <expression X>
class Softmax {
public:
    using value_type = typename X::value_type;
    using shape = typename X::shape;
    static constexpr bool is_leaf = false;
    static constexpr std::size_t arena_bytes = X::arena_bytes;

    constexpr explicit Softmax(const X& x) noexcept : x_(x) {}
    void eval(value_type* out, std::byte* arena) const noexcept {
        constexpr std::int64_t d = shape::value[shape::rank - 1];
        const value_type* x = operand(x_, out, !X::is_leaf, arena, 0);
        kernels::softmax(x, out, shape::numel / d, d, std::int64_t{1});
    }

private:
    X x_;
};

// ---- the ops ---------------------------------------------------------------------------------

// The checks instantiate shapes_agree / types_agree, whose static_assert
// is then the one error, with the op and both operands in its arguments.
template <class Op, expression X, expression Y>
constexpr auto binary(const X& x, const Y& y) noexcept {
    using TX = typename X::value_type;
    using TY = typename Y::value_type;
    [[maybe_unused]] constexpr bool types = types_agree<Op, TX, TY, std::is_same_v<TX, TY>>::value;
    [[maybe_unused]] constexpr bool shapes =
        shapes_agree<Op, typename X::shape, typename Y::shape,
                     detail::broadcast<typename X::shape, typename Y::shape>::agree>::value;
    return Binary<Op, X, Y>(x, y);
}
template <expression X, expression Y>
constexpr auto operator+(const X& x, const Y& y) noexcept {
    return binary<op::add>(x, y);
}
template <expression X, expression Y>
constexpr auto operator-(const X& x, const Y& y) noexcept {
    return binary<op::sub>(x, y);
}
template <expression X, expression Y>
constexpr auto operator*(const X& x, const Y& y) noexcept {
    return binary<op::mul>(x, y);
}
template <expression X, expression Y>
constexpr auto operator/(const X& x, const Y& y) noexcept {
    return binary<op::div>(x, y);
}
template <expression X, expression Y>
constexpr auto maximum(const X& x, const Y& y) noexcept {
    return binary<op::max>(x, y);
}
template <expression X, expression Y>
constexpr auto minimum(const X& x, const Y& y) noexcept {
    return binary<op::min>(x, y);
}

#define DLGRAPH_FIXED_UNARY(name)               \
    template <expression X>                     \
    constexpr auto name(const X& x) noexcept {  \
        return Unary<kernels::name##_fn, X>(x); \
    }
DLGRAPH_FIXED_UNARY(relu)
DLGRAPH_FIXED_UNARY(sigmoid)
DLGRAPH_FIXED_UNARY(tanh)
DLGRAPH_FIXED_UNARY(exp)
DLGRAPH_FIXED_UNARY(log)
DLGRAPH_FIXED_UNARY(sqrt)
DLGRAPH_FIXED_UNARY(abs)
DLGRAPH_FIXED_UNARY(square)
#undef DLGRAPH_FIXED_UNARY

template <expression X, expression Y>
constexpr auto matmul(const X& x, const Y& y) noexcept {
    using TX = typename X::value_type;
    using TY = typename Y::value_type;
    using SX = typename X::shape;
    using SY = typename Y::shape;
    [[maybe_unused]] constexpr bool types = types_agree<op::matmul, TX, TY, std::is_same_v<TX, TY>>::value;
    [[maybe_unused]] constexpr bool shapes = shapes_agree < op::matmul, SX, SY,
                                    SX::rank == 2 && SY::rank == 2 &&
                                        detail::dim_or_1<SX>(1) == detail::dim_or_1<SY>(0) > ::value;
    return Matmul<X, Y>(x, y);
}

template <expression X>
constexpr auto softmax(const X& x) noexcept {
    [[maybe_unused]] constexpr bool shapes =
        shapes_agree<op::softmax, typename X::shape, dims<>, (X::shape::rank >= 1)>::value;
    return Softmax<X>(x);
}

// ---- running ---------------------------------------------------------------------------------

// A 64-byte-aligned arena for expression E (`arena<decltype(e)>`, const or not).
template <expression E>
struct arena_storage {
    alignas(64) std::byte bytes[E::arena_bytes > 0 ? E::arena_bytes : 1];
};
template <class E>
using arena = arena_storage<std::remove_cvref_t<E>>;

// Computes e into out, with the arena (64-byte aligned, e's arena_bytes).
template <expression E>
void run(const E& e, std::span<typename E::value_type, E::shape::numel> out,
         std::span<std::byte, E::arena_bytes> arena) noexcept {
    e.eval(out.data(), arena.data());
}
template <expression E>
void run(const E& e, std::span<typename E::value_type, E::shape::numel> out, arena<E>& a) noexcept {
    e.eval(out.data(), a.bytes);
}

}  // namespace dlgraph::fixed
