// A 64-byte aligned buffer of n elements (a GEMM workspace or packed
// operand), for the tests that call the kernel core directly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

template <class T> struct aligned_buffer {
    struct freer {
        void operator()(T* p) const { ::operator delete(p, std::align_val_t{64}); }
    };
    std::unique_ptr<T[], freer> p;
    std::int64_t n;
    explicit aligned_buffer(std::int64_t count) : n(count) {
        p.reset(static_cast<T*>(::operator new(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T),
                                               std::align_val_t{64})));
    }
    T* get() const { return p.get(); }
};
