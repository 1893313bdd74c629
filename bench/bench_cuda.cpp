// Session<cuda> on the GPU beside its references in the same binary
// (issue 15's targets):
//   BM_gemm_{dlgraph,cublas}/M/K/N      C = A B in FP32, all on the device:
//                                       one matmul step against a raw
//                                       cublasSgemm on a stream of its own
//   BM_{triad,memcpy}_{...}             d = a*b + c over 256M FP32 against a
//                                       cudaMemcpy moving the same bytes;
//                                       fused:1 one kernel, fused:0 two
//   BM_reduce_{all,rows,cols}/BM_memcpy reduce_sum over 256M FP32
//   BM_tiny_ops/1000/graphs:{0,1}       a cached plan of 1,000 scale steps
//                                       on one float: host time per op,
//                                       launched one by one or replayed as
//                                       a CUDA graph
//   BM_tiny_launches/1000               the same 1,000 scale kernels queued
//                                       by their launcher alone (no session):
//                                       the part of the above that is CUDA's
//   BM_feed_fetch/floats/staging:{0,1}  y = 2x, x fed and y fetched: the
//                                       copies through pinned staging or
//                                       from and to pageable memory
//   BM_mlp_train_{sgd,adam}_cuda/batch  the MLP of bench_train on the GPU,
//                                       feeds from the host, loss fetched
//                                       (bench/bench_train_torch_cuda.py
//                                       runs PyTorch on the same model)
// Every iteration ends with the host waiting for the GPU, on both sides
// (Session::eval waits once, and copies back the record of device faults).
// GFLOP/s and bytes/s are counters (bytes: each operand read or written
// once, as the reference moves them).
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <dlgraph/cuda/cuda.hpp>
#include <dlgraph/cuda/launch.hpp>
#include <dlgraph/dlgraph.hpp>

#include <stdexcept>
#include <string>

#include "mlp_model.hpp"

using namespace dlgraph;

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t e, const char* what) {
    if (e != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(e));
}
#define CK(call) check((call), #call)

constexpr std::int64_t big = std::int64_t(1) << 28;  // 256M elements, 1 GiB of FP32

// Appends `type` reading `inputs` and writing the persistable `out` (so
// that no result leaves the device), and returns the op as a target.
TargetRef write_into(Program& p, const std::string& type, const std::vector<OpSlot>& inputs, const Var<float>& out,
                     std::vector<Attribute> attrs = {}) {
    return TargetRef::op_only(p.append(type, inputs, {}, std::move(attrs), nullptr, {{"Out", {out.name()}}}));
}

// Runs the op targets once per iteration. eval returns when the GPU is done
// (its plan ends with device work, so it waits once at the end).
void run_ops(benchmark::State& state, Session<cuda>& s, const std::vector<TargetRef>& targets) {
    s.eval(targets, {});  // warm-up: initializers, plan, device memory
    s.eval(targets, {});  // (a CUDA graph is recorded on the second call)
    for (auto _ : state) s.eval(targets, {});
}

// ---- GEMM ---------------------------------------------------------------------------------

void set_flops(benchmark::State& state) {
    const double flops = 2.0 * static_cast<double>(state.range(0) * state.range(1) * state.range(2));
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_gemm_dlgraph(benchmark::State& state) {
    const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
    Program p;
    auto a = p.parameter<float>("a", {m, k}, init::uniform(-1, 1, 1));
    auto b = p.parameter<float>("b", {k, n}, init::uniform(-1, 1, 2));
    auto c = p.parameter<float>("c", {m, n}, init::constant(0));
    Session<cuda> s(p);
    run_ops(state, s, {write_into(p, "matmul", {{"X", {a.name()}}, {"Y", {b.name()}}}, c)});
    set_flops(state);
}

void BM_gemm_cublas(benchmark::State& state) {
    const int m = static_cast<int>(state.range(0)), k = static_cast<int>(state.range(1)),
              n = static_cast<int>(state.range(2));
    cudaStream_t stream;
    cublasHandle_t h;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cublasCreate(&h));
    CK(cublasSetStream(h, stream));
    CK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // FP32, as Session<cuda> without options.tf32
    float *a, *b, *c;
    CK(cudaMalloc(&a, sizeof(float) * m * k));
    CK(cudaMalloc(&b, sizeof(float) * k * n));
    CK(cudaMalloc(&c, sizeof(float) * m * n));
    CK(cudaMemset(a, 0, sizeof(float) * m * k));
    CK(cudaMemset(b, 0, sizeof(float) * k * n));
    const float one = 1, zero = 0;
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto gemm = [&] { CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n)); };
    gemm();
    CK(cudaStreamSynchronize(stream));
    for (auto _ : state) {
        gemm();
        CK(cudaStreamSynchronize(stream));
    }
    set_flops(state);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cublasDestroy(h));
    CK(cudaStreamDestroy(stream));
}

// M, K, N: the square case, then the MLP's products at batch 256 and 4096.
void gemm_shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"M", "K", "N"});
    b->Args({4096, 4096, 4096});
    for (std::int64_t batch : {256, 4096}) {
        b->Args({batch, 784, 512});
        b->Args({batch, 512, 512});
        b->Args({batch, 512, 10});
    }
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_gemm_dlgraph)->Apply(gemm_shapes);
BENCHMARK(BM_gemm_cublas)->Apply(gemm_shapes);

// ---- bandwidth ----------------------------------------------------------------------------

void set_bytes(benchmark::State& state, double bytes) {
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// d = a*b + c: 4 arrays of 1 GiB read or written, an elementwise_mul and an
// elementwise_add fused into one kernel (fused:1), or two kernels that
// write and read a*b in between (fused:0, 6 arrays moved).
void BM_triad_dlgraph(benchmark::State& state) {
    Program p;
    auto a = p.parameter<float>("a", {big}, init::constant(1.5));
    auto b = p.parameter<float>("b", {big}, init::constant(2.0));
    auto c = p.parameter<float>("c", {big}, init::constant(0.5));
    auto d = p.parameter<float>("d", {big}, init::constant(0));
    auto ab = a * b;
    SessionOptions opts;
    opts.fuse = state.range(0) != 0;
    Session<cuda> s(p, opts);
    run_ops(state, s, {write_into(p, "elementwise_add", {{"X", {ab.name()}}, {"Y", {c.name()}}}, d)});
    set_bytes(state, 4.0 * big * sizeof(float));
}

// A device-to-device copy of `bytes`/2: it moves `bytes` (read and written).
void memcpy_moving(benchmark::State& state, std::size_t bytes) {
    void *src, *dst;
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&src, bytes / 2));
    CK(cudaMalloc(&dst, bytes / 2));
    CK(cudaMemset(src, 0, bytes / 2));
    CK(cudaMemcpyAsync(dst, src, bytes / 2, cudaMemcpyDeviceToDevice, stream));
    CK(cudaStreamSynchronize(stream));
    for (auto _ : state) {
        CK(cudaMemcpyAsync(dst, src, bytes / 2, cudaMemcpyDeviceToDevice, stream));
        CK(cudaStreamSynchronize(stream));
    }
    set_bytes(state, static_cast<double>(bytes));
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaStreamDestroy(stream));
}

void BM_memcpy_as_triad(benchmark::State& state) { memcpy_moving(state, 4 * big * sizeof(float)); }
void BM_memcpy_as_reduce(benchmark::State& state) { memcpy_moving(state, big * sizeof(float)); }
BENCHMARK(BM_triad_dlgraph)->ArgName("fused")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_memcpy_as_triad)->Unit(benchmark::kMillisecond)->UseRealTime();

// reduce_sum of 256M FP32: to one value, over the rows of [65536, 4096]
// (each row to one value) and over its columns.
void reduce(benchmark::State& state, std::vector<std::int64_t> dims, std::vector<int> axes, bool all) {
    Program p;
    auto a = p.parameter<float>("a", Shape(dims), init::constant(0.25));
    std::vector<std::int64_t> kept;
    for (std::size_t i = 0; i < dims.size(); ++i)
        if (!all && std::find(axes.begin(), axes.end(), static_cast<int>(i)) == axes.end()) kept.push_back(dims[i]);
    if (kept.empty()) kept.push_back(1);
    auto out = p.parameter<float>("out", Shape(kept), init::constant(0));
    Session<cuda> s(p);
    run_ops(state, s,
            {write_into(p, "reduce_sum", {{"X", {a.name()}}}, out,
                        {Attribute::make_ints("dim", std::vector<std::int64_t>(axes.begin(), axes.end())),
                         Attribute::make_bool("keep_dim", false), Attribute::make_bool("reduce_all", all)})});
    set_bytes(state, static_cast<double>(big * sizeof(float)));
}
void BM_reduce_all(benchmark::State& state) { reduce(state, {big}, {0}, true); }
void BM_reduce_rows(benchmark::State& state) { reduce(state, {65536, 4096}, {1}, false); }
void BM_reduce_cols(benchmark::State& state) { reduce(state, {65536, 4096}, {0}, false); }
BENCHMARK(BM_reduce_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_reduce_rows)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_reduce_cols)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_memcpy_as_reduce)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- host overhead ------------------------------------------------------------------------

// 1,000 dependent scale steps on one float, the last written into a
// persistable: the time per step is the host's launch cost.
void BM_tiny_ops(benchmark::State& state) {
    Program p;
    auto x = p.parameter<float>("x", {1}, init::constant(1));
    auto out = p.parameter<float>("out", {1}, init::constant(0));
    Var<float> y = x;
    for (std::int64_t i = 0; i + 1 < state.range(0); ++i) y = scale(y, 1.0, 1e-3);
    const bool graphs = cuda::options.graphs;
    cuda::options.graphs = state.range(1) != 0;  // replayed as a CUDA graph, or launched one by one
    Session<cuda> s(p);
    cuda::options.graphs = graphs;
    run_ops(state, s, {write_into(p, "scale", {{"X", {y.name()}}}, out, {Attribute::make_float("scale", 1.0)})});
    state.counters["us/op"] =
        benchmark::Counter(static_cast<double>(state.range(0)) * 1e6,
                           benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_tiny_ops)->ArgNames({"ops", "graphs"})->Args({1000, 0})->Args({1000, 1})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_tiny_launches(benchmark::State& state) {
    float* x;
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&x, 2 * sizeof(float)));
    CK(cudaMemset(x, 0, 2 * sizeof(float)));
    for (auto _ : state) {
        for (std::int64_t i = 0; i < state.range(0); ++i)
            dlgraph::cuda_kernels::scale<float>(1, x + (i & 1), x + 1 - (i & 1), 1.0f, 1e-3f, true, stream);
        CK(cudaStreamSynchronize(stream));
    }
    state.counters["us/op"] =
        benchmark::Counter(static_cast<double>(state.range(0)) * 1e6,
                           benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    CK(cudaFree(x));
    CK(cudaStreamDestroy(stream));
}
BENCHMARK(BM_tiny_launches)->ArgName("ops")->Arg(1000)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- feeds and fetches ----------------------------------------------------------------------

// y = 2x for a fed x of n floats, y fetched into the caller's tensor: one
// copy each way and one small kernel, with the copies through the
// context's pinned staging or straight from and to the caller's (pageable)
// memory. bytes/s: the 2 n floats copied.
void BM_feed_fetch(benchmark::State& state) {
    const std::int64_t n = state.range(0);
    Program p;
    auto x = p.input<float>("x", {-1});
    auto y = scale(x, 2.0, 0.0);
    const bool staging = cuda::options.pinned_staging;
    cuda::options.pinned_staging = state.range(1) != 0;
    Session<cuda> s(p);
    cuda::options.pinned_staging = staging;
    Tensor xv(DataType::FP32, Shape{n});
    for (std::int64_t i = 0; i < n; ++i) xv.data<float>()[i] = static_cast<float>(i % 1000);
    const std::vector<TargetRef> targets{y};
    const std::vector<Feed> feeds{{"x", xv}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    s.eval_into(targets, feeds, out);  // the first call's wait sized the staging
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
    }
    if (out[0].data<float>()[n - 1] != 2.0f * static_cast<float>((n - 1) % 1000)) state.SkipWithError("wrong result");
    state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(2 * n * 4), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_feed_fetch)
    ->ArgNames({"floats", "staging"})
    ->ArgsProduct({{1024, 1 << 14, 1 << 18}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// ---- the MLP training step ----------------------------------------------------------------

void train(benchmark::State& state, train_bench::optimizer opt) {
    train_bench::mlp m(opt);
    Session<cuda> s(m.p);
    Tensor x, y;
    train_bench::fill_batch(state.range(0), x, y);
    const std::vector<TargetRef> targets = m.step.with({m.loss});
    const std::vector<Feed> feeds{{"x", x}, {"label", y}};
    std::vector<Tensor> out(targets.size());
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);  // waits once: the loss is on the host
        benchmark::DoNotOptimize(out.back().raw());
    }
}
void BM_mlp_train_sgd_cuda(benchmark::State& state) { train(state, train_bench::optimizer::sgd); }
void BM_mlp_train_adam_cuda(benchmark::State& state) { train(state, train_bench::optimizer::adam); }
BENCHMARK(BM_mlp_train_sgd_cuda)->ArgName("batch")->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_mlp_train_adam_cuda)->ArgName("batch")->Arg(256)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
