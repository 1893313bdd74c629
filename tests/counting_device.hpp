// A device for tests: `counting_device` runs the ops it is told to (with
// dlgraph's CPU kernels), keeps its memory in a region of its own with a
// first-fit allocator that counts bytes and calls, and counts every copy and
// wait. Its memory is host memory, so its kernels can read it, but every
// pointer is checked: a copy to the device must land in the region and
// come from outside it, and the other way round. Copies to the host behave
// as on an asynchronous device: the destination is poisoned at once and
// filled only at the next wait, so a host step that reads it without a wait
// before it reads poison. It proves what a real device (CUDA) relies on:
// placement with fallback to the host, copies where values cross, per-place
// arenas, waits where the host needs device results, and results identical
// to the CPU's. `allocations_left` makes allocation fail on demand.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlgraph/dlgraph.hpp>

namespace test_support {

class counting_memory : public dlgraph::DeviceMemory {
public:
    explicit counting_memory(std::size_t bytes) : region_(new char[bytes + 64]), size_(bytes) {
        base_ = region_.get() + (64 - reinterpret_cast<std::uintptr_t>(region_.get()) % 64) % 64;
        free_.emplace(0, bytes);
    }
    void* allocate(std::size_t bytes) {
        std::lock_guard lock(mu_);
        const std::size_t need = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < need) continue;
            const std::size_t at = it->first, left = it->second - need;
            free_.erase(it);
            if (left) free_.emplace(at + need, left);
            used_.emplace(at, need);
            in_use += need;
            peak = std::max(peak, in_use);
            ++allocations;
            return base_ + at;
        }
        throw std::bad_alloc();
    }
    void release(void* data, std::size_t) noexcept override {
        std::lock_guard lock(mu_);
        const std::size_t at = static_cast<std::size_t>(static_cast<char*>(data) - base_);
        auto u = used_.find(at);
        if (u == used_.end()) {
            ++bad_frees;
            return;
        }
        std::size_t size = u->second;
        in_use -= size;
        used_.erase(u);
        ++frees;
        std::size_t start = at;
        auto next = free_.lower_bound(at);
        if (next != free_.end() && next->first == at + size) {  // coalesce with the block after
            size += next->second;
            next = free_.erase(next);
        }
        if (next != free_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == at) {  // and the one before
                start = prev->first;
                size += prev->second;
                free_.erase(prev);
            }
        }
        free_.emplace(start, size);
    }
    void read(void* host_dst, const void* src, std::size_t bytes) const override {
        check(owns(src, bytes) && !owns(host_dst, bytes), "read");
        std::memcpy(host_dst, src, bytes);
        ++reads;
    }
    bool owns(const void* p, std::size_t bytes = 1) const {
        const char* c = static_cast<const char*>(p);
        return c >= base_ && c + bytes <= base_ + size_;
    }
    // A wrong pointer is a bug in dlgraph's placement: counted, and the test fails on it.
    void check(bool ok, const char* what) const {
        if (!ok) ++misplaced;
        (void)what;
    }
    std::size_t blocks_free() const {
        std::lock_guard lock(mu_);
        return free_.size();
    }

    std::size_t in_use = 0, peak = 0, allocations = 0, frees = 0, bad_frees = 0;
    mutable std::size_t reads = 0, misplaced = 0;

private:
    std::unique_ptr<char[]> region_;
    char* base_;
    std::size_t size_;
    mutable std::mutex mu_;
    std::map<std::size_t, std::size_t> free_, used_;  // offset -> bytes
};

class counting_context : public dlgraph::DeviceContext {
public:
    counting_context(std::set<std::string> ops, std::size_t region_bytes)
        : memory(std::make_shared<counting_memory>(region_bytes)), ops_(std::move(ops)) {}
    std::string_view name() const noexcept override { return "test"; }
    dlgraph::KernelFn kernel(const dlgraph::OpDef& def, dlgraph::DataType t) const noexcept override {
        if (auto k = def.device_kernel(name(), t)) return k;  // a registered op's own kernel for this device
        return ops_.count(std::string(def.type)) ? def.kernel(t) : nullptr;
    }
    std::shared_ptr<dlgraph::Buffer> allocate(std::size_t bytes) override {
        if (allocations_left == 0) throw std::bad_alloc();
        if (allocations_left > 0) --allocations_left;
        void* p = memory->allocate(bytes);
        std::memset(p, 0xA5, bytes);  // never zeros: a kernel must write what it reads later
        return std::make_shared<dlgraph::Buffer>(p, bytes, memory);
    }
    // In order with the device's kernels, which run as they are called here.
    void to_device(void* dst, const void* src, std::size_t bytes) override {
        memory->check(memory->owns(dst, bytes) && !memory->owns(src, bytes), "to_device");
        std::memcpy(dst, src, bytes);
        ++to_device_copies;
    }
    void to_host(void* dst, const void* src, std::size_t bytes) override {
        memory->check(memory->owns(src, bytes) && !memory->owns(dst, bytes), "to_host");
        std::memset(dst, 0xA5, bytes);  // not there before the wait
        queued_.push_back({dst, src, bytes});
        ++to_host_copies;
    }
    void copy_on_device(void* dst, const void* src, std::size_t bytes) override {
        memory->check(memory->owns(dst, bytes) && memory->owns(src, bytes), "copy_on_device");
        std::memmove(dst, src, bytes);
        ++device_copies;
    }
    void synchronize() override {
        ++waits;
        for (auto& q : queued_) std::memcpy(q.dst, q.src, q.bytes);
        queued_.clear();
    }
    std::size_t queued() const { return queued_.size(); }

    std::size_t to_device_copies = 0, to_host_copies = 0, device_copies = 0, waits = 0;
    int allocations_left = -1;  // -1: no limit; n: allocation n + 1 throws std::bad_alloc
    std::shared_ptr<counting_memory> memory;

private:
    struct copy {
        void* dst;
        const void* src;
        std::size_t bytes;
    };
    std::set<std::string> ops_;
    std::vector<copy> queued_;
};

// The policy. The ops it runs are set per thread before a session is made
// (`counting_device::ops`); by default, every op that has a CPU kernel
// except the host-only ones (feed, fetch, save and load).
struct counting_device {
    static constexpr std::string_view name = "test";
    static inline thread_local std::set<std::string> ops;
    static inline thread_local std::size_t region_bytes = std::size_t(64) << 20;
    static std::unique_ptr<dlgraph::DeviceContext> make_context() {
        std::set<std::string> run = ops;
        if (run.empty())
            for (auto& d : dlgraph::op_table()) run.insert(std::string(d.type));
        for (const char* host_only : {"feed", "fetch", "save", "load", "save_combine", "load_combine"}) run.erase(host_only);
        return std::make_unique<counting_context>(std::move(run), region_bytes);
    }
};

inline counting_context& context_of(dlgraph::DeviceContext* d) { return dynamic_cast<counting_context&>(*d); }

}  // namespace test_support
