// Shape: the dims of a tensor, stored inline (no heap) so that shape
// arithmetic on the hot path never allocates. -1 marks an unknown dim at
// build time; a tensor at run time has only known dims.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "dlgraph/error.hpp"

namespace dlgraph {

inline constexpr int max_rank = 8;

class Shape {
public:
    Shape() = default;
    Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
    explicit Shape(std::span<const std::int64_t> dims) { assign(dims.begin(), dims.end()); }
    explicit Shape(const std::vector<std::int64_t>& dims) { assign(dims.begin(), dims.end()); }
    template <class It> Shape(It first, It last) { assign(first, last); }

    int rank() const noexcept { return rank_; }
    std::size_t size() const noexcept { return static_cast<std::size_t>(rank_); }
    bool empty() const noexcept { return rank_ == 0; }
    std::int64_t operator[](int i) const noexcept { return d_[static_cast<std::size_t>(i)]; }
    std::int64_t& operator[](int i) noexcept { return d_[static_cast<std::size_t>(i)]; }
    const std::int64_t* begin() const noexcept { return d_.data(); }
    const std::int64_t* end() const noexcept { return d_.data() + rank_; }
    std::int64_t* begin() noexcept { return d_.data(); }
    std::int64_t* end() noexcept { return d_.data() + rank_; }
    std::int64_t back() const noexcept { return d_[static_cast<std::size_t>(rank_ - 1)]; }

    void push_back(std::int64_t v) {
        if (rank_ == max_rank)
            throw shape_error("dlgraph.shape.rank", "rank above " + std::to_string(max_rank) + " is not supported");
        d_[static_cast<std::size_t>(rank_++)] = v;
    }
    void resize(int r, std::int64_t fill = 1) {
        check_rank(r);
        for (int i = rank_; i < r; ++i) d_[static_cast<std::size_t>(i)] = fill;
        rank_ = r;
    }
    void erase(int i) {
        for (int k = i; k + 1 < rank_; ++k) d_[static_cast<std::size_t>(k)] = d_[static_cast<std::size_t>(k + 1)];
        --rank_;
    }

    // True when no dim is -1.
    bool known() const noexcept { return std::none_of(begin(), end(), [](std::int64_t v) { return v < 0; }); }
    // Number of elements; -1 when some dim is unknown.
    std::int64_t numel() const noexcept {
        std::int64_t n = 1;
        for (auto v : *this) {
            if (v < 0) return -1;
            n *= v;
        }
        return n;
    }
    std::vector<std::int64_t> vec() const { return {begin(), end()}; }

    friend bool operator==(const Shape& a, const Shape& b) noexcept {
        return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
    }

private:
    static void check_rank(std::ptrdiff_t r) {
        if (r > max_rank || r < 0)
            throw shape_error("dlgraph.shape.rank", "rank " + std::to_string(r) + " is not supported (at most " +
                                                        std::to_string(max_rank) + ")");
    }
    template <class It> void assign(It first, It last) {
        check_rank(std::distance(first, last));
        rank_ = 0;
        for (; first != last; ++first) d_[static_cast<std::size_t>(rank_++)] = static_cast<std::int64_t>(*first);
    }
    std::array<std::int64_t, max_rank> d_{};
    int rank_ = 0;
};

// "[64,784]"; unknown dims print as -1.
inline std::string to_string(const Shape& s) {
    std::string out = "[";
    for (int i = 0; i < s.rank(); ++i) {
        if (i) out += ",";
        out += std::to_string(s[i]);
    }
    return out + "]";
}

// The most bytes any one tensor shape may describe: 2^62, or half the
// address space where size_t is narrower, so that element counts, byte sizes
// and products of any subset of dims fit in int64_t and size_t.
inline constexpr std::uint64_t max_shape_bytes =
    std::min<std::uint64_t>(std::uint64_t(1) << 62, std::numeric_limits<std::size_t>::max() / 2);

// "16 GiB": a byte count for messages.
inline std::string bytes_text(std::uint64_t b) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    double v = static_cast<double>(b);
    while (v >= 1024 && u < 6) {
        v /= 1024;
        ++u;
    }
    std::string n = std::to_string(v);
    if (u == 0) n = std::to_string(b);
    else n = n.substr(0, n.find('.') + 2);
    return n + " " + units[u];
}

// Checks a shape before anything is sized from it: every dim is -1 or at
// least 0, and the product of its known dims (zero dims counted as one, so
// that every partial product is bounded too) times `elem_size` is at most
// `max_bytes`. Throws naming `what`; [dlgraph.shape.dim] for a bad dim,
// [dlgraph.resource.size] for a size over the limit.
inline void check_shape_size(const Shape& s, std::size_t elem_size, std::uint64_t max_bytes, const std::string& what) {
    std::uint64_t bytes = elem_size;
    bool wraps = false;
    for (auto d : s) {
        if (d < -1)
            throw shape_error("dlgraph.shape.dim", what + ": dim " + std::to_string(d) + " in " + to_string(s) +
                                                       " is invalid (-1 marks an unknown dim)");
        if (d > 0) wraps = wraps || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes);
    }
    if (wraps || bytes > max_bytes)
        throw resource_error("dlgraph.resource.size",
                             what + ": shape " + to_string(s) + " of " + std::to_string(elem_size) +
                                 "-byte elements needs " + (wraps ? std::string("over 16 EiB") : bytes_text(bytes)) +
                                 ", more than the limit of " + bytes_text(max_bytes));
}

// Normalises a possibly negative axis against `rank`; throws naming `what`.
inline int normalize_axis(std::int64_t axis, int rank, const std::string& what) {
    std::int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= std::max(rank, 1))
        throw shape_error("dlgraph.shape.axis", what + ": axis " + std::to_string(axis) + " is out of range for rank " +
                                                     std::to_string(rank));
    return static_cast<int>(a);
}

}  // namespace dlgraph
