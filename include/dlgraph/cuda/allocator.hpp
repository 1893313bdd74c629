// The caching allocator of the CUDA backend, written over any raw memory so
// it can be tested on the host. Device memory is taken from the raw source
// (cudaMalloc) in segments and kept: a freed block goes back to the cache,
// not to the driver, so a session that runs the same plan again allocates
// nothing from the driver. PyTorch's CUDA caching allocator is the model:
//
//  * best fit: a request takes the smallest cached free block of its stream
//    that holds it (ties: the lowest address), split when the rest is worth
//    keeping (at least `min_split` bytes), else taken whole;
//  * coalescing: a freed block merges with free neighbours of its segment;
//  * streams: a block belongs to the stream it was allocated for and is
//    only reused for that stream, so memory freed by one stream's work is
//    never handed to another stream while that work may still run;
//  * a request the cache cannot serve takes a new segment (the request
//    rounded up to `segment_round`); when the raw source refuses, the cache
//    gives its whole free segments back and tries once more.
//
// Sizes are rounded up to `alignment` (512 bytes, as cudaMalloc's pointers
// and cuBLAS's operands like). Not thread-safe by itself: its owner locks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <new>
#include <set>
#include <tuple>
#include <unordered_map>

namespace dlgraph::cuda_detail {

// Where segments come from: allocate throws std::bad_alloc (or returns
// null) when the memory is not there; free never throws.
struct raw_source {
    virtual ~raw_source() = default;
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void free(void* p, std::size_t bytes) noexcept = 0;
};

// The allocator's counters.
struct allocator_stats {
    std::size_t allocated = 0;       // bytes in blocks handed out
    std::size_t peak_allocated = 0;
    std::size_t reserved = 0;        // bytes in segments taken from the raw source
    std::size_t peak_reserved = 0;
    std::size_t raw_allocs = 0;      // segments taken (cudaMalloc calls that succeeded)
    std::size_t raw_frees = 0;       // segments given back
    std::size_t requests = 0;        // allocate calls
    std::size_t cache_hits = 0;      // requests served from the cache
};

class caching_allocator {
public:
    static constexpr std::size_t alignment = 512;
    static constexpr std::size_t min_split = 512;
    static constexpr std::size_t segment_round = std::size_t(2) << 20;  // 2 MiB

    explicit caching_allocator(raw_source& raw) : raw_(raw) {}
    caching_allocator(const caching_allocator&) = delete;
    caching_allocator& operator=(const caching_allocator&) = delete;
    ~caching_allocator() { release_cached(); }

    // A block of at least `bytes` for `stream` (an opaque key). Zero bytes
    // get a block too (of `alignment` bytes): every pointer is distinct.
    void* allocate(std::size_t bytes, const void* stream = nullptr) {
        ++stats_.requests;
        const std::size_t need = round_up(std::max<std::size_t>(bytes, 1), alignment);
        if (need < bytes) throw std::bad_alloc();  // the rounding wrapped
        block* b = take_cached(need, stream);
        if (b) ++stats_.cache_hits;
        else b = new_segment(need, stream);
        b->free = false;
        split(b, need);
        used_.emplace(b->ptr, b);
        stats_.allocated += b->size;
        stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
        return b->ptr;
    }

    // Gives a block back to the cache. A pointer it did not hand out is
    // ignored and counted (bad_frees).
    void free(void* p) noexcept {
        auto it = used_.find(p);
        if (it == used_.end()) {
            ++bad_frees_;
            return;
        }
        block* b = it->second;
        used_.erase(it);
        stats_.allocated -= b->size;
        b->free = true;
        if (b->next && b->next->free) b = merge(b, b->next);
        if (b->prev && b->prev->free) b = merge(b->prev, b);
        free_.insert(b);
    }

    // Gives every whole free segment back to the raw source.
    void release_cached() noexcept {
        for (auto it = free_.begin(); it != free_.end();) {
            block* b = *it;
            if (b->prev || b->next) {
                ++it;
                continue;
            }
            it = free_.erase(it);
            raw_.free(b->ptr, b->size);
            stats_.reserved -= b->size;
            ++stats_.raw_frees;
            delete b;
        }
    }

    const allocator_stats& stats() const noexcept { return stats_; }
    std::size_t bad_frees() const noexcept { return bad_frees_; }
    std::size_t blocks_in_use() const noexcept { return used_.size(); }
    std::size_t free_blocks() const noexcept { return free_.size(); }
    // The size of the block at `p` (for tests), or 0.
    std::size_t block_size(const void* p) const noexcept {
        auto it = used_.find(const_cast<void*>(p));
        return it == used_.end() ? 0 : it->second->size;
    }

private:
    struct block {
        char* ptr;
        std::size_t size;
        const void* stream;
        bool free = true;
        block* prev = nullptr;  // neighbours in the same segment
        block* next = nullptr;
    };
    // By stream, then size, then address (as integers: < on unrelated pointers is unspecified).
    struct by_fit {
        bool operator()(const block* a, const block* b) const {
            const auto key = [](const block* x) {
                return std::tuple{reinterpret_cast<std::uintptr_t>(x->stream), x->size, reinterpret_cast<std::uintptr_t>(x->ptr)};
            };
            return key(a) < key(b);
        }
    };

    static std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

    block* take_cached(std::size_t need, const void* stream) {
        block key{nullptr, need, stream};
        auto it = free_.lower_bound(&key);
        if (it == free_.end() || (*it)->stream != stream) return nullptr;
        block* b = *it;
        free_.erase(it);
        return b;
    }

    block* new_segment(std::size_t need, const void* stream) {
        std::size_t size = need <= segment_round ? segment_round : round_up(need, segment_round);
        if (size < need) throw std::bad_alloc();
        void* p = try_raw(size);
        if (!p && size > need) p = try_raw(size = need);  // not enough for the rounding: the request alone
        if (!p) {
            release_cached();
            p = try_raw(size = need);
        }
        if (!p) throw std::bad_alloc();
        stats_.reserved += size;
        stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
        ++stats_.raw_allocs;
        return new block{static_cast<char*>(p), size, stream};
    }

    void* try_raw(std::size_t size) {
        try {
            return raw_.allocate(size);
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
    }

    // Cuts `b` (taken) to `need` bytes when the rest is worth a block of its own.
    void split(block* b, std::size_t need) {
        if (b->size - need < min_split) return;
        block* rest = new block{b->ptr + need, b->size - need, b->stream, true, b, b->next};
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = need;
        free_.insert(rest);
    }

    // Joins free neighbour `b` (a's next) into `a`; a may be in the free set.
    block* merge(block* a, block* b) {
        free_.erase(a);
        free_.erase(b);
        a->size += b->size;
        a->next = b->next;
        if (b->next) b->next->prev = a;
        delete b;
        return a;
    }

    raw_source& raw_;
    std::set<block*, by_fit> free_;
    std::unordered_map<void*, block*> used_;
    allocator_stats stats_;
    std::size_t bad_frees_ = 0;
};

}  // namespace dlgraph::cuda_detail
