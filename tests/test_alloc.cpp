// Steady state allocates nothing: heap allocations are counted over repeated
// eval_into calls with new feed values of the same shape.
#include <dlgraph/dlgraph.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "test_helpers.hpp"

// The replaced operator new below allocates with malloc, so operator delete
// must free; GCC cannot see that pairing and warns.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {
std::atomic<long> g_allocations{0};
thread_local bool g_counting = false;
void* counted(std::size_t n, std::size_t align) {
    if (g_counting) ++g_allocations;
    void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                                : std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
// The nothrow forms too (std::stable_sort's buffer uses them): every new
// in this binary must allocate with malloc, since every delete frees.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try { return counted(n, 0); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    try { return counted(n, 0); } catch (...) { return nullptr; }
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try { return counted(n, static_cast<std::size_t>(a)); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try { return counted(n, static_cast<std::size_t>(a)); } catch (...) { return nullptr; }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace dlgraph;

namespace {
long count_allocations(const std::function<void()>& f) {
    g_allocations = 0;
    g_counting = true;
    f();
    g_counting = false;
    return g_allocations.load();
}
}  // namespace

TEST_CASE("repeated eval of the same targets with new feed values allocates nothing") {
    Program p;
    auto x = p.input<float>("x", {-1, 8});
    auto w = p.parameter<float>("w", {8}, init::uniform(-1, 1, 3));
    auto b = p.parameter<float>("b", {1}, init::constant(0.5));
    auto h = relu(x * w + b);
    auto y = tanh(h) - 0.5f;
    Session<cpu> s(p);
    xt::xarray<float> xv = xt::ones<float>({16, 8});
    const std::vector<TargetRef> targets{y, h};
    const std::vector<Feed> feeds{{x.name(), xv}};
    std::vector<Tensor> out(2);
    s.eval_into(targets, feeds, out);  // plans, initializes, allocates
    s.eval_into(targets, feeds, out);
    long n = count_allocations([&] {
        for (int i = 0; i < 50; ++i) {
            xv(0, 0) = static_cast<float>(i);  // new values, same shape
            s.eval_into(targets, feeds, out);
        }
    });
    CHECK(n == 0);
    CHECK(out[1].data<float>()[0] >= 0.0f);
}

TEST_CASE("profiled evaluation allocates nothing either, once its step times are sized") {
    Program p;
    auto x = p.input<float>("x", {-1, 8});
    auto y = sigmoid(x * 3.0f) + x;
    Session<cpu> s(p);
    xt::xarray<float> xv = xt::ones<float>({4, 8});
    const std::vector<TargetRef> targets{y};
    const std::vector<Feed> feeds{{x.name(), xv}};
    std::vector<Tensor> out(1);
    std::vector<std::chrono::nanoseconds> step_time;
    s.eval_into_profiled(targets, feeds, out, step_time);
    s.eval_into_profiled(targets, feeds, out, step_time);
    CHECK(count_allocations([&] {
              for (int i = 0; i < 20; ++i) s.eval_into_profiled(targets, feeds, out, step_time);
          }) == 0);
    CHECK(step_time.size() == s.plan(targets, std::vector<std::string>{x.name()}).steps.size());
}

TEST_CASE("a feed of a new shape re-plans memory once, then is steady again") {
    Program p;
    auto x = p.input<double>("x", {-1});
    auto y = exp(x) * x;
    Session<cpu> s(p);
    const std::vector<TargetRef> targets{y};
    std::vector<Tensor> out(1);
    xt::xarray<double> small = xt::ones<double>({4}), big = xt::ones<double>({64});
    const std::vector<Feed> f1{{x.name(), small}}, f2{{x.name(), big}};
    s.eval_into(targets, f1, out);
    s.eval_into(targets, f2, out);
    s.eval_into(targets, f1, out);
    CHECK(count_allocations([&] {
              for (int i = 0; i < 10; ++i) s.eval_into(targets, f1, out);
          }) == 0);
    CHECK(out[0].numel() == 4);
}

TEST_CASE("packed weights: steady evaluation allocates nothing, nor does repacking a changed weight") {
    Program p;
    auto x = p.input<float>("x", {-1, 64});
    auto w = p.parameter<float>("w", {64, 48}, init::uniform(-1, 1, 3));
    auto y = relu(matmul(x, w));
    Session<cpu> s(p);
    xt::xarray<float> xv = xt::ones<float>({16, 64});
    const std::vector<TargetRef> targets{y};
    const std::vector<Feed> feeds{{x.name(), xv}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    s.eval_into(targets, feeds, out);
    REQUIRE(s.packed_steps(targets, std::vector<std::string>{x.name()}).size() == 1);
    CHECK(count_allocations([&] {
              for (int i = 0; i < 20; ++i) s.eval_into(targets, feeds, out);
          }) == 0);
    Tensor& wt = s.scope().var(w.name()).get_mutable<Tensor>();
    CHECK(count_allocations([&] {
              for (int i = 0; i < 5; ++i) {
                  wt.data<float>()[0] = static_cast<float>(i);
                  s.scope().var(w.name()).touch();
                  s.eval_into(targets, feeds, out);
              }
          }) == 0);
}
