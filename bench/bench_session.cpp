// Session benchmarks for the core: per-op overhead of a cached plan, and
// element-wise bandwidth through a Session next to a hand-written loop.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include <dlgraph/dlgraph.hpp>

using namespace dlgraph;

// A cached plan of N element-wise ops on one-element tensors: the cost of
// the run loop itself (kernel dispatch, no allocation, no names).
static void BM_chain_of_elementwise_ops(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    Program p;
    auto x = p.input<float>("x", {1});
    auto c = p.constant<float>(1.0f, {1});
    Var<float> h = x;
    for (int i = 0; i < n; ++i) h = (i % 2) ? h * c : h + c;
    Session<cpu> s(p);
    xt::xarray<float> xv = {0.5f};
    const std::vector<TargetRef> targets{h};
    const std::vector<Feed> feeds{{x.name(), xv}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
    }
    state.counters["ns_per_op"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_chain_of_elementwise_ops)->Arg(1000)->Unit(benchmark::kMicrosecond);

constexpr std::int64_t triad_n = 16 * 1024 * 1024;

// Times `z = expr(a, b, c)` on 16M floats each through a Session, counting
// 16 bytes per element: reading the inputs once and writing z once.
template <class Expr> void run_abc(benchmark::State& state, Expr expr, SessionOptions opts) {
    Program p;
    auto a = p.input<float>("a", {-1});
    auto b = p.input<float>("b", {-1});
    auto c = p.input<float>("c", {-1});
    auto z = expr(a, b, c);
    Session<cpu> s(p, opts);
    xt::xarray<float> av = xt::ones<float>({triad_n}), bv = xt::ones<float>({triad_n}), cv = xt::ones<float>({triad_n});
    const std::vector<TargetRef> targets{z};
    const std::vector<Feed> feeds{{a.name(), av}, {b.name(), bv}, {c.name(), cv}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
    }
    state.SetBytesProcessed(state.iterations() * triad_n * 16);
}

// z = a * b + c (three reads, one write, as in the issue).
static void BM_session_a_times_b_plus_c(benchmark::State& state) {
    run_abc(state, [](auto a, auto b, auto c) { return a * b + c; }, SessionOptions{});
}
BENCHMARK(BM_session_a_times_b_plus_c)->Unit(benchmark::kMillisecond)->UseRealTime();

// A five-op chain over the same three inputs, z = (relu(a*b + c) * a) - b,
// fused into one pass; compare with the hand loop below. Threads 1 and 2,
// and unfused (fuse = 0) for reference.
static void BM_session_five_op_chain(benchmark::State& state) {
    run_abc(state, [](auto a, auto b, auto c) { return relu(a * b + c) * a - b; },
            SessionOptions{static_cast<int>(state.range(0)), state.range(1) != 0});
}
BENCHMARK(BM_session_five_op_chain)
    ->ArgNames({"threads", "fuse"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A chain of three activations' gradients (what the backward pass of
// relu(sigmoid(tanh(.))) runs), each reading Out@GRAD and its forward Out:
// dt = tanh_grad(Out c, Out@GRAD a), ds = sigmoid_grad(Out b, ds = dt),
// z = relu_grad(Out a, ds). Fused, a pass reads a, b, c once and writes z;
// unfused (fuse = 0), each grad reads two arrays and writes one.
static void BM_session_grad_chain(benchmark::State& state) {
    run_abc(
        state,
        [](auto a, auto b, auto c) {
            auto dt = apply_op<float>("tanh_grad", {{"X", b}, {"Out", c}, {"Out@GRAD", a}}, {}, "X@GRAD");
            auto ds = apply_op<float>("sigmoid_grad", {{"X", a}, {"Out", b}, {"Out@GRAD", dt}}, {}, "X@GRAD");
            return apply_op<float>("relu_grad", {{"X", c}, {"Out", a}, {"Out@GRAD", ds}}, {}, "X@GRAD");
        },
        SessionOptions{static_cast<int>(state.range(0)), state.range(1) != 0});
}
BENCHMARK(BM_session_grad_chain)
    ->ArgNames({"threads", "fuse"})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({2, 1})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same computation as one hand-written loop into a reused buffer: the
// ceiling a fused kernel could reach on this machine.
static void BM_loop_a_times_b_plus_c(benchmark::State& state) {
    std::vector<float> a(triad_n, 1.0f), b(triad_n, 1.0f), c(triad_n, 1.0f), z(triad_n);
    for (auto _ : state) {
        for (std::int64_t i = 0; i < triad_n; ++i) z[i] = a[i] * b[i] + c[i];
        benchmark::DoNotOptimize(z.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * triad_n * 16);
}
BENCHMARK(BM_loop_a_times_b_plus_c)->Unit(benchmark::kMillisecond)->UseRealTime();

// Hand-written loops over n floats for the comparisons below.
static void five_op_loop(const float* __restrict a, const float* __restrict b, const float* __restrict c,
                         float* __restrict z, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) z[i] = std::max(a[i] * b[i] + c[i], 0.0f) * a[i] - b[i];
}
static void triad_loop(const float* __restrict a, const float* __restrict b, const float* __restrict c,
                       float* __restrict z, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) z[i] = a[i] * b[i] + c[i];
}

// The fused five-op chain, the same chain as one hand-written loop, and the
// hand-written triad (the same three reads and one write: the bandwidth
// needed to read the inputs once and write the output once), timed in turn
// within each iteration so that all three see the same neighbours on a
// shared machine. Counters: each one's GB/s (16 bytes per element), and the
// chain over the triad loop (the measure, target >= 0.8 on one
// thread) and over its own hand-written loop.
static void BM_five_op_chain_vs_loops(benchmark::State& state) {
    Program p;
    auto a = p.input<float>("a", {-1});
    auto b = p.input<float>("b", {-1});
    auto c = p.input<float>("c", {-1});
    auto z = relu(a * b + c) * a - b;
    Session<cpu> s(p, SessionOptions{static_cast<int>(state.range(0))});
    xt::xarray<float> av = xt::ones<float>({triad_n}), bv = xt::ones<float>({triad_n}), cv = xt::ones<float>({triad_n});
    xt::xarray<float> zl = xt::zeros<float>({triad_n});
    const std::vector<TargetRef> targets{z};
    const std::vector<Feed> feeds{{a.name(), av}, {b.name(), bv}, {c.name(), cv}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    using clock = std::chrono::steady_clock;
    clock::duration fused{}, five{}, triad{};
    for (auto _ : state) {
        const auto t0 = clock::now();
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
        const auto t1 = clock::now();
        five_op_loop(av.data(), bv.data(), cv.data(), zl.data(), triad_n);
        benchmark::DoNotOptimize(zl.data());
        benchmark::ClobberMemory();
        const auto t2 = clock::now();
        triad_loop(av.data(), bv.data(), cv.data(), zl.data(), triad_n);
        benchmark::DoNotOptimize(zl.data());
        benchmark::ClobberMemory();
        fused += t1 - t0;
        five += t2 - t1;
        triad += clock::now() - t2;
    }
    const double bytes = static_cast<double>(state.iterations()) * triad_n * 16;
    auto secs = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
    state.counters["fused_GBps"] = bytes / secs(fused) / 1e9;
    state.counters["five_loop_GBps"] = bytes / secs(five) / 1e9;
    state.counters["triad_loop_GBps"] = bytes / secs(triad) / 1e9;
    state.counters["fused_over_triad"] = secs(triad) / secs(fused);
    state.counters["fused_over_five_loop"] = secs(five) / secs(fused);
}
BENCHMARK(BM_five_op_chain_vs_loops)->ArgName("threads")->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// Loading, validating and planning large programs from JSON (the hostile-
// input issue's linear-time cases): a chain of N relu ops, and a split into
// N outputs. Each iteration parses, validates, plans and runs once.
static std::string chain_json(int n) {
    Program p;
    auto x = p.constant<float>(1.0f, {4});
    Var<float> h = x;
    for (int i = 0; i < n; ++i) h = relu(h);
    return p.to_json();
}
static void BM_load_plan_run_chain(benchmark::State& state) {
    const std::string text = chain_json(static_cast<int>(state.range(0)));
    const std::string last = "relu_" + std::to_string(state.range(0) - 1);
    for (auto _ : state) {
        Session<cpu> s(load_program(text));
        benchmark::DoNotOptimize(s.eval(TargetRef(last)).raw());
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_load_plan_run_chain)->Arg(10'000)->Arg(40'000)->Unit(benchmark::kMillisecond)->UseRealTime();

static void BM_load_plan_run_split(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    Program p;
    auto x = p.constant<float>(1.0f, {n});
    auto parts = split(x, n, 0);
    const std::string text = p.to_json(), first = parts[0].name();
    for (auto _ : state) {
        Session<cpu> s(load_program(text));
        benchmark::DoNotOptimize(s.eval(TargetRef(first)).raw());
    }
}
BENCHMARK(BM_load_plan_run_split)->Arg(65'537)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
