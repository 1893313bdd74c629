// Intra-op parallelism: one process-wide pool of worker threads shared by
// every kernel, and `parallel_for`, which kernels call to split their work.
//
// How many threads a kernel may use is the calling thread's "parallelism",
// set for the duration of a session run by a `parallelism_scope` (the
// session's `threads` option); it is 1 unless set, so a kernel called from
// user code outside a session runs inline. The pool runs one parallel region
// at a time: a second caller that finds it busy (another session on another
// thread) runs its region inline instead of queueing, so the machine is
// never oversubscribed. Idle workers sleep on a condition variable; nothing
// spins.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace dlgraph {

class ThreadPool {
public:
    explicit ThreadPool(int workers) {
        workers_.reserve(static_cast<std::size_t>(std::max(workers, 0)));
        for (int w = 0; w < workers; ++w) workers_.emplace_back([this] { worker_loop(); });
    }
    ~ThreadPool() {
        {
            std::lock_guard lock(m_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : workers_) t.join();
    }
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int workers() const { return static_cast<int>(workers_.size()); }
    // Regions that ran on more than the calling thread (tests use it to
    // check that work they meant to split was split).
    std::uint64_t regions() const { return regions_.load(std::memory_order_relaxed); }

    // Runs f(i) for every i in [0, n), on the caller and up to n - 1 workers;
    // returns when all are done. f must not throw.
    template <class F> void run(int n, F& f) {
        if (n <= 1 || workers_.empty() || !region_.try_lock()) {
            for (int i = 0; i < n; ++i) f(i);
            return;
        }
        std::lock_guard region(region_, std::adopt_lock);
        regions_.fetch_add(1, std::memory_order_relaxed);
        {
            std::lock_guard lock(m_);
            fn_ = [](void* ctx, int i) { (*static_cast<F*>(ctx))(i); };
            ctx_ = &f;
            n_ = n;
            next_.store(0, std::memory_order_relaxed);
            busy_ = std::min(n - 1, workers());
            wanted_ = busy_;
            ++generation_;
        }
        wake_.notify_all();
        drain();
        std::unique_lock lock(m_);
        done_.wait(lock, [this] { return busy_ == 0; });
    }

private:
    void drain() {
        for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < n_; i = next_.fetch_add(1, std::memory_order_relaxed))
            fn_(ctx_, i);
    }

    void worker_loop() {
        std::uint64_t seen = 0;
        std::unique_lock lock(m_);
        for (;;) {
            wake_.wait(lock, [&] { return stop_ || (generation_ != seen && wanted_ > 0); });
            if (stop_) return;
            seen = generation_;
            --wanted_;  // only as many workers join as the region has tasks for
            lock.unlock();
            drain();
            lock.lock();
            if (--busy_ == 0) done_.notify_one();
        }
    }

    std::vector<std::thread> workers_;
    std::mutex region_;  // held for the length of one parallel region
    std::mutex m_;
    std::condition_variable wake_, done_;
    void (*fn_)(void*, int) = nullptr;
    void* ctx_ = nullptr;
    int n_ = 0;
    std::atomic<int> next_{0};
    int busy_ = 0, wanted_ = 0;
    std::uint64_t generation_ = 0;
    bool stop_ = false;
    std::atomic<std::uint64_t> regions_{0};
};

namespace detail {
inline thread_local int parallelism = 1;
}

// The process-wide pool, started on first use with one worker fewer than the
// machine has hardware threads (the caller is the last one).
inline ThreadPool& default_pool() {
    static ThreadPool pool(std::max(1, static_cast<int>(std::thread::hardware_concurrency())) - 1);
    return pool;
}

// How many threads kernels called from this thread may use.
inline int parallelism() { return detail::parallelism; }

// Sets this thread's parallelism until the scope ends (0: every hardware thread).
class parallelism_scope {
public:
    explicit parallelism_scope(int threads) : saved_(detail::parallelism) {
        detail::parallelism = threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    }
    ~parallelism_scope() { detail::parallelism = saved_; }
    parallelism_scope(const parallelism_scope&) = delete;
    parallelism_scope& operator=(const parallelism_scope&) = delete;

private:
    int saved_;
};

// Runs f(i) for i in [0, n) with up to parallelism() threads of the default
// pool (inline when that is 1). f must not throw.
template <class F> void parallel_for(int n, F&& f) {
    if (n <= 1 || parallelism() <= 1) {
        for (int i = 0; i < n; ++i) f(i);
        return;
    }
    auto& pool = default_pool();
    const int tasks = std::min(n, parallelism());
    if (tasks == n) {
        pool.run(n, f);
        return;
    }
    // More items than threads: each task takes a contiguous share.
    auto chunk = [&](int t) {
        const int b = static_cast<int>(std::int64_t(n) * t / tasks), e = static_cast<int>(std::int64_t(n) * (t + 1) / tasks);
        for (int i = b; i < e; ++i) f(i);
    };
    pool.run(tasks, chunk);
}

}  // namespace dlgraph
