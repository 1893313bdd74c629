// Small helpers shared by the op families (axis checks with op-labelled
// messages, products of dims that may be unknown, an odometer over a
// multi-index): kept apart so each family header stays about its math.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/elementwise.hpp"

namespace dlgraph::ops {

// Normalises a possibly negative `axis` for a tensor of shape `s`; the
// message names the operand and its shape, not just the rank.
inline int infer_axis(const InferContext& c, std::int64_t axis, const Shape& s, const std::string& what,
                      const std::string& attr = "axis") {
    const std::int64_t r = s.rank();
    const std::int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r)
        c.fail("dlgraph.shape.axis", attr + " " + std::to_string(axis) + " is out of range for " + what + " of shape " +
                                         to_string(s) + " (rank " + std::to_string(r) + ")");
    return static_cast<int>(a);
}

// "[1,2,3]" for a list attribute of any length (Shape holds at most 8).
inline std::string ints_text(const std::vector<std::int64_t>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
    return out + "]";
}

// Sums and products of dims taken from attributes or added across inputs,
// checked: past max_shape_bytes elements is [dlgraph.resource.size] (every
// input shape is already within it, so its own products cannot overflow).
inline std::int64_t dim_add(const InferContext& c, std::int64_t a, std::int64_t b, const std::string& what) {
    std::int64_t r;
    if (__builtin_add_overflow(a, b, &r) || static_cast<std::uint64_t>(r) > max_shape_bytes)
        c.fail("dlgraph.resource.size", what + " add up to more than " + std::to_string(max_shape_bytes) + " elements");
    return r;
}
inline std::int64_t dim_mul(const InferContext& c, std::int64_t a, std::int64_t b, const std::string& what) {
    std::int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || static_cast<std::uint64_t>(r) > max_shape_bytes)
        c.fail("dlgraph.resource.size", what + " multiply to more than " + std::to_string(max_shape_bytes) + " elements");
    return r;
}

// Element count of a known shape built from attributes, checked.
inline std::int64_t checked_numel(const InferContext& c, const Shape& s, const std::string& what) {
    std::int64_t n = 1;
    for (auto d : s) n = dim_mul(c, n, d, what);
    return n;
}

// Product of dims [from, to); -1 when one of them is unknown.
inline std::int64_t dim_product(const Shape& s, int from, int to) {
    std::int64_t n = 1;
    for (int i = from; i < to; ++i) {
        if (s[i] < 0) return -1;
        n *= s[i];
    }
    return n;
}

// Outer, axis and inner extents of a known shape `s` around `axis` (may be
// negative): the [outer, d, inner] view the kernels along one axis take.
struct axis_split {
    std::int64_t outer, d, inner;
};
inline axis_split split_at_axis(const Shape& s, std::int64_t axis) {
    const int a = static_cast<int>(axis < 0 ? axis + s.rank() : axis);
    return {dim_product(s, 0, a), s[a], dim_product(s, a + 1, s.rank())};
}
// As split_at_axis, or all of s as [1, numel, 1] when `flatten` (arg_max's
// and cumsum's attribute).
inline axis_split split_or_flatten(const Shape& s, std::int64_t axis, bool flatten) {
    return flatten ? axis_split{1, s.numel(), 1} : split_at_axis(s, axis);
}

// Steps a row-major multi-index over `dims` (rank r); false once it wraps.
inline bool next_index(std::int64_t* idx, const std::int64_t* dims, int r) {
    for (int i = r - 1; i >= 0; --i) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

// Unknown dims (-1) agree with anything; two known dims must be equal.
inline bool dims_agree(std::int64_t a, std::int64_t b) { return a < 0 || b < 0 || a == b; }
// The better-known of two agreeing dims.
inline std::int64_t merge_dim(std::int64_t a, std::int64_t b) { return a >= 0 ? a : b; }

}  // namespace dlgraph::ops
