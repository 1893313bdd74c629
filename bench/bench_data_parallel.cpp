// Data-parallel training across processes (issue 14's speed check): the MLP
// 784-512-512-10 (mlp_model.hpp) with SGD, one thread per process, batch
// 64 (and 256) per process. Run under mpirun; with one process it trains without
// collectives (the baseline), with more it averages the gradients over
// them (SGD::data_parallel). Every rank runs the same fixed number of
// iterations (the ranks' collective calls must pair up, so Google
// Benchmark may not choose them per process); rank 0 reports.
//   examples_per_s  examples of every process per second
//   allreduce_us    time per step in the c_allreduce_sum steps (rank 0's,
//                   from the session's per-step times: waiting for the
//                   slower rank included)
//   first_allreduce_us the first of them (the plan runs them together
//                   after the backward pass, so it takes the wait)
//   step_p10_us ... rank 0's step times, 10th, 50th and 90th percentile
//   compute_us      rank 0's step time less its all-reduces, a step;
//   slowest_compute_us the largest of every rank's
// BM_allreduce_gradients (2 or more processes): the six all-reduces of the
// MLP's gradients (2.68 MB) alone, the ranks lined up by a barrier before
// each step, with the data in the caches (cold:0) and out of them (cold:1).
// Every rank must run the benchmarks in the same order (the ranks' calls
// pair up): no --benchmark_enable_random_interleaving.
// bench/data_parallel.sh alternates 1 and 2 processes and prints the ratio.
#include <benchmark/benchmark.h>

#include <dlgraph/mpi.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "mlp_model.hpp"

using namespace dlgraph;
using train_bench::fill_batch;
using train_bench::mlp;
using train_bench::optimizer;

namespace {
std::shared_ptr<mpi::Communicator> comm;

void BM_mlp_train_data_parallel(benchmark::State& state) {
    const int size = comm->size();
    const std::int64_t batch = state.range(0);
    mlp m(optimizer::sgd, size > 1 ? size : 0);
    SessionOptions opts{1};
    if (size > 1) opts.comms = {comm};
    Session<cpu> s(m.p, opts);
    if (size > 1) broadcast_persistables(s, *comm);
    Tensor x, y;
    fill_batch(batch, x, y);
    const std::vector<TargetRef> targets = m.step.with({m.loss});
    const std::vector<Feed> feeds{{"x", x}, {"label", y}};
    std::vector<Tensor> out(targets.size());
    s.eval_into(targets, feeds, out);
    // Which steps of the plan are all-reduces.
    std::vector<bool> collective;
    const std::vector<std::string> fed{"x", "label"};
    for (auto& st : s.plan(targets, fed).steps) collective.push_back(st.def && st.def->comm_ring_attr >= 0);
    std::vector<std::chrono::nanoseconds> step_time;
    std::vector<double> whole;  // each step's time, us
    whole.reserve(static_cast<std::size_t>(state.max_iterations));
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        s.eval_into_profiled(targets, feeds, out, step_time);
        benchmark::DoNotOptimize(out.back().raw());
        whole.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    double total = 0;
    for (double w : whole) total += w;
    std::sort(whole.begin(), whole.end());
    for (int q : {10, 50, 90})
        state.counters["step_p" + std::to_string(q) + "_us"] = whole[whole.size() * static_cast<std::size_t>(q) / 100];
    std::chrono::nanoseconds reduce{0}, first{0};
    for (std::size_t k = 0; k < step_time.size() && k < collective.size(); ++k)
        if (collective[k]) {
            if (reduce.count() == 0) first = step_time[k];
            reduce += step_time[k];
        }
    const auto n = static_cast<double>(state.iterations());
    state.counters["examples_per_s"] = benchmark::Counter(n * static_cast<double>(batch * size), benchmark::Counter::kIsRate);
    state.counters["allreduce_us"] = static_cast<double>(reduce.count()) / 1e3 / n;
    state.counters["first_allreduce_us"] = static_cast<double>(first.count()) / 1e3 / n;
    state.counters["processes"] = size;
    // Each rank's compute a step (its steps' time less its all-reduces'),
    // rank 0 and the slowest: what the others wait for.
    const double compute = (total - static_cast<double>(reduce.count()) / 1e3) / n;
    double slowest = compute;
    if (size > 1) MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.counters["compute_us"] = compute;
    state.counters["slowest_compute_us"] = slowest;
}
BENCHMARK(BM_mlp_train_data_parallel)->Arg(64)->Iterations(300)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_mlp_train_data_parallel)->Arg(256)->Iterations(100)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_allreduce_gradients(benchmark::State& state) {
    if (comm->size() < 2) {
        state.SkipWithError("needs 2 or more processes");
        return;
    }
    std::vector<std::vector<float>> grads;
    for (std::int64_t n : {784 * 512, 512, 512 * 512, 512, 512 * 10, 10}) grads.emplace_back(static_cast<std::size_t>(n), 1e-3f);
    // cold: 32 MiB written between steps, so that the gradients and MPI's
    // buffers are out of the caches, as after a training step's compute.
    std::vector<char> other(state.range(0) ? std::size_t(32) << 20 : 0);
    for (auto _ : state) {
        state.PauseTiming();
        for (std::size_t i = 0; i < other.size(); i += 64) other[i] = static_cast<char>(i);
        for (auto& g : grads) std::fill(g.begin(), g.end(), 1e-3f);  // as a gradient op writes them
        MPI_Barrier(MPI_COMM_WORLD);
        state.ResumeTiming();
        for (auto& g : grads) comm->all_reduce(g.data(), static_cast<std::int64_t>(g.size()), DataType::FP32, ReduceOp::sum, "bench");
    }
}
BENCHMARK(BM_allreduce_gradients)->ArgName("cold")->Arg(0)->Arg(1)->Iterations(300)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Reports nothing (ranks other than 0).
class quiet_reporter : public benchmark::BenchmarkReporter {
public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
};
}  // namespace

int main(int argc, char** argv) {
    mpi::Environment env(argc, argv);
    comm = mpi::world();
    benchmark::Initialize(&argc, argv);
    if (comm->rank() == 0) {
        benchmark::RunSpecifiedBenchmarks();
    } else {
        quiet_reporter quiet;
        benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
    comm.reset();
    return 0;
}
