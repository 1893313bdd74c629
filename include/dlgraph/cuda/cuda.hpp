// The CUDA device policy: Session<cuda> runs every op that has a CUDA kernel
// on one GPU and the rest (feed, fetch, save, load, and the ops listed in
// docs/design.md as host-only for now) on the host, with the copies the
// planner inserts. Link the library dlgraph::cuda (built when CMake finds
// the CUDA toolkit); this header needs no CUDA header, so g++ compiles a
// program that uses it.
//
//   dlgraph::Session<dlgraph::cuda> s(program);   // device cuda::options.device
//   auto out = s.eval({"prob"}, {{"x", x}});
//
// Each session has its own context on the device: one non-blocking stream,
// one cuBLAS handle bound to it, a cuBLAS workspace, and a caching
// allocator for the plan's device memory (see cuda/allocator.hpp).
// Matrix products are FP32 (or FP64) unless `options.tf32` allows TF32
// tensor cores, which round the inputs to 10 bits of mantissa. A plan's
// runs of device steps are replayed as CUDA graphs from their second call
// with unchanged shapes and memory (`options.graphs` turns it off).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "dlgraph/device.hpp"

namespace dlgraph {

struct CudaOptions {
    int device = 0;      // the GPU's ordinal
    bool tf32 = false;   // let cuBLAS use TF32 tensor cores for FP32 products
    std::size_t cublas_workspace_bytes = std::size_t(32) << 20;
    // Record each run of device steps as a CUDA graph once a plan has run
    // with the same tensors, and replay it after (one launch instead of one
    // per step). Recording stops where a step cannot be recorded; a plan
    // re-records after its shapes or its tensors' memory change.
    bool graphs = true;
    // Copy small feeds and fetches (up to 64 KiB each) through pinned host
    // memory the context keeps (grown at a wait to what a call needed, up
    // to 4 MiB; a call's first copies go direct): the copies are then
    // asynchronous, and a fetch is copied out at the wait. Larger copies go
    // straight from and to the caller's memory, which the driver pipelines
    // faster (bench/README.md).
    bool pinned_staging = true;
};

// What a session's CUDA context has done (cuda_stats of Session::device()).
struct CudaStats {
    std::size_t reserved_bytes = 0;       // device memory held by the allocator
    std::size_t peak_reserved_bytes = 0;
    std::size_t allocated_bytes = 0;      // of which in use
    std::size_t peak_allocated_bytes = 0;
    std::size_t device_mallocs = 0;       // cudaMalloc calls
    std::size_t device_frees = 0;         // cudaFree calls
    std::size_t synchronizations = 0;     // host waits for the stream
    std::size_t kernel_steps = 0;         // device kernels run (one per step)
    std::size_t copies_to_device = 0;
    std::size_t copies_to_host = 0;
    std::size_t staged_copies = 0;        // of those, copies through pinned staging
    std::size_t staging_bytes = 0;        // the pinned staging memory held
    std::size_t graphs_recorded = 0;      // runs of steps recorded as CUDA graphs
    std::size_t graph_replays = 0;        // launches of a recorded graph
    std::size_t graph_failures = 0;       // recordings that failed (those steps then run one by one)
    const char* graph_failure = "";       // the CUDA error of the last failed recording
};

struct cuda {
    static constexpr std::string_view name = "cuda";
    // Options for the contexts made after they are set (process-wide).
    static CudaOptions options;
    // A context on GPU options.device; throws dlgraph::session_error
    // ("dlgraph.cuda.unavailable") when there is no usable GPU.
    static std::unique_ptr<DeviceContext> make_context();
};

// The number of GPUs the CUDA runtime sees (0 where there is no GPU or no
// driver); `why`, when given, receives the runtime's reason for 0.
int cuda_device_count(std::string* why = nullptr);
inline bool cuda_available(std::string* why = nullptr) { return cuda_device_count(why) > 0; }

// Whether op `def` has a CUDA kernel at dtype `t` (else a CUDA session
// runs it on the host). Needs no GPU.
bool cuda_has_kernel(const OpDef& def, DataType t) noexcept;

// A context that plans for CUDA without a GPU: it answers name() and
// kernel() as a session's context would (so make_plan places steps and
// inserts copies as Session<cuda> does) and refuses memory, copies and
// waits (session_error "dlgraph.cuda.planning_only"). `dlgraph plan
// --device cuda` uses it.
std::unique_ptr<DeviceContext> cuda_planning_context();

// The counters of a CUDA context (a Session<cuda>'s device()); throws
// session_error when `d` is not one.
CudaStats cuda_stats(const DeviceContext* d);
// Gives a context's cached free device memory back to the driver.
void cuda_release_cached(DeviceContext* d);

}  // namespace dlgraph
