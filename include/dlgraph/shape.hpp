// Shape: the dims of a tensor, stored inline (no heap) so that shape
// arithmetic on the hot path never allocates. -1 marks an unknown dim at
// build time; a tensor at run time has only known dims.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
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

// Normalises a possibly negative axis against `rank`; throws naming `what`.
inline int normalize_axis(std::int64_t axis, int rank, const std::string& what) {
    std::int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= std::max(rank, 1))
        throw shape_error("dlgraph.shape.axis", what + ": axis " + std::to_string(axis) + " is out of range for rank " +
                                                     std::to_string(rank));
    return static_cast<int>(a);
}

}  // namespace dlgraph
