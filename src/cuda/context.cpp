// The CUDA backend's context and memory (src/cuda/context.hpp) and the
// policy's public functions (include/dlgraph/cuda/cuda.hpp).
#include "context.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <random>

#include "dlgraph/error.hpp"

namespace dlgraph {

CudaOptions cuda::options{};

namespace cuda_detail {

void check(cudaError_t e, const char* call) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a sticky-free error so the next call starts clean
    throw session_error("dlgraph.cuda.error", std::string("cuda: ") + call + ": " + cudaGetErrorName(e) + " (" +
                                                  cudaGetErrorString(e) + ")");
}

void check(cublasStatus_t e, const char* call) {
    if (e == CUBLAS_STATUS_SUCCESS) return;
    throw session_error("dlgraph.cuda.error", std::string("cublas: ") + call + ": " + cublasGetStatusName(e) + " (" +
                                                  cublasGetStatusString(e) + ")");
}

void use_device(int device) {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now == device) return;
    check(cudaSetDevice(device), "cudaSetDevice");
}

// ---- memory ----------------------------------------------------------------------------------

void* driver_source::allocate(std::size_t bytes) {
    const device_scope on(device);
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();  // out of memory is not sticky: clear it
        throw std::bad_alloc();
    }
    return p;
}

void driver_source::free(void* p, std::size_t) noexcept {
    const device_scope on(device);
    cudaFree(p);
}

cuda_memory::cuda_memory(int d) : device(d), driver_(d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

cuda_memory::~cuda_memory() {
    const device_scope on(device);
    cudaStreamSynchronize(stream);  // nothing queued may still use the memory
    {
        std::lock_guard lock(mu_);
        cache_.release_cached();
    }
    cudaStreamDestroy(stream);
}

void* cuda_memory::take(std::size_t bytes) {
    std::lock_guard lock(mu_);
    return cache_.allocate(bytes, stream);
}

// A block freed here may still be read by work queued on the stream; it
// is reused only for work queued on the same stream later, which runs after.
void cuda_memory::release(void* data, std::size_t) noexcept {
    std::lock_guard lock(mu_);
    cache_.free(data);
}

void cuda_memory::read(void* host_dst, const void* src, std::size_t bytes) const {
    const device_scope on(device);
    check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

void cuda_memory::release_cached() noexcept {
    cudaStreamSynchronize(stream);
    std::lock_guard lock(mu_);
    cache_.release_cached();
}

allocator_stats cuda_memory::stats() const {
    std::lock_guard lock(mu_);
    return cache_.stats();
}

// ---- context ---------------------------------------------------------------------------------

cuda_context::cuda_context(const CudaOptions& opts) {
    std::string why;
    const int n = cuda_device_count(&why);
    if (n == 0) throw session_error("dlgraph.cuda.unavailable", "cuda: no GPU is usable here (" + why + ")");
    if (opts.device < 0 || opts.device >= n)
        throw session_error("dlgraph.cuda.unavailable", "cuda: device " + std::to_string(opts.device) +
                                                            " does not exist (" + std::to_string(n) + " GPUs)");
    memory_ = std::make_shared<cuda_memory>(opts.device);
    graphs_ = opts.graphs;
    pinned_ = opts.pinned_staging;
    try {
        check(cublasCreate(&blas_), "cublasCreate");
        check(cublasSetStream(blas_, memory_->stream), "cublasSetStream");
        check(cublasSetMathMode(blas_, opts.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
              "cublasSetMathMode");
        // The cuBLAS workspace is also the kernels' scratch, which some need (sum_scratch_bytes).
        workspace_bytes_ = std::max(opts.cublas_workspace_bytes, cuda_kernels::sum_scratch_bytes);
        workspace_ = memory_->take(workspace_bytes_);
        if (opts.cublas_workspace_bytes)
            check(cublasSetWorkspace(blas_, workspace_, opts.cublas_workspace_bytes), "cublasSetWorkspace");
        constexpr std::size_t slot_bytes = fault_slots * sizeof(cuda_kernels::device_fault);
        void* h = nullptr;
        check(cudaHostAlloc(&h, 2 * slot_bytes, cudaHostAllocDefault), "cudaHostAlloc");
        fault_host_ = static_cast<cuda_kernels::device_fault*>(h);
        fault_clean_ = fault_host_ + fault_slots;
        std::memset(h, 0, 2 * slot_bytes);
        for (int k = 0; k < fault_slots; ++k) fault_clean_[k].first_row = ~0ull;
        fault_device_ = static_cast<cuda_kernels::device_fault*>(memory_->take(slot_bytes));
        check(cudaMemcpyAsync(fault_device_, fault_clean_, slot_bytes, cudaMemcpyHostToDevice, memory_->stream),
              "cudaMemcpyAsync");
        seed_state_ = static_cast<std::uint64_t*>(memory_->take(sizeof(std::uint64_t)));
        const std::uint64_t seed0 = (std::uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
        check(cudaMemcpy(seed_state_, &seed0, sizeof(seed0), cudaMemcpyHostToDevice), "cudaMemcpy");
        check(cudaStreamSynchronize(memory_->stream), "cudaStreamSynchronize");
    } catch (...) {
        free_resources();  // those made so far
        throw;
    }
}

cuda_context::~cuda_context() { free_resources(); }

void cuda_context::free_resources() noexcept {
    if (!memory_) return;
    const device_scope on(memory_->device);
    cudaStreamSynchronize(memory_->stream);
    if (fault_device_) memory_->release(fault_device_, fault_slots * sizeof(cuda_kernels::device_fault));
    fault_device_ = nullptr;
    if (seed_state_) memory_->release(seed_state_, sizeof(std::uint64_t));
    seed_state_ = nullptr;
    if (blas_) cublasDestroy(blas_);
    blas_ = nullptr;
    if (workspace_) memory_->release(workspace_, workspace_bytes_);
    workspace_ = nullptr;
    if (fault_host_) cudaFreeHost(fault_host_);
    fault_host_ = nullptr;
    if (staging_) cudaFreeHost(staging_);
    staging_ = nullptr;
    memory_.reset();  // freed when the last buffer goes
}

KernelFn cuda_context::kernel(const OpDef& def, DataType t) const noexcept { return cuda_kernel(def, t); }

std::shared_ptr<Buffer> cuda_context::allocate(std::size_t bytes) {
    void* p = memory_->take(bytes);
    try {
        return std::make_shared<Buffer>(p, bytes, memory_);
    } catch (...) {
        memory_->release(p, bytes);
        throw;
    }
}

// ---- pinned staging ------------------------------------------------------------------------------

// Only small copies are staged. On an H200 (bench_cuda BM_feed_fetch, one
// feed and one fetch of n floats), staging took a call from 21.4 to 17.7 us
// at n = 1024, but from 236 to 273 us at 2^18 and from 18.5 to 28.7 ms at
// 2^24: the driver's own staging of pageable memory overlaps the host's
// copy with the transfer, where ours does one after the other.
constexpr std::size_t staging_align = 256, staging_copy_max = std::size_t(64) << 10,
                      staging_max = std::size_t(4) << 20;

// A copy larger than staging_copy_max always goes direct; one that does
// not fit now goes direct this time, and the next wait grows the staging
// to what the copies since the last wait needed together (up to staging_max).
void* cuda_context::stage(std::size_t bytes) noexcept {
    if (!pinned_ || bytes > staging_copy_max) return nullptr;
    const std::size_t block = (bytes + staging_align - 1) / staging_align * staging_align;
    staging_wanted_ += block;
    if (staging_used_ + block > staging_bytes_) return nullptr;
    void* p = staging_ + staging_used_;
    staging_used_ += block;
    ++staged_;
    return p;
}

// After the stream's work is done (or failed): fetches copied out, every
// block free again, and the staging grown to what the last call wanted.
void cuda_context::finish_staging(bool copy_out) noexcept {
    if (copy_out)
        for (const staged_fetch& f : fetches_) std::memcpy(f.dst, staging_ + f.offset, f.bytes);
    fetches_.clear();
    staging_used_ = 0;
    const std::size_t want = std::min(std::max(staging_wanted_, 2 * staging_bytes_), staging_max);
    const bool grow = staging_wanted_ > staging_bytes_ && want > staging_bytes_;  // at the cap: as it is
    staging_wanted_ = 0;
    if (!grow) return;
    if (staging_) cudaFreeHost(staging_);
    staging_ = nullptr;
    staging_bytes_ = 0;
    void* h = nullptr;
    if (cudaHostAlloc(&h, want, cudaHostAllocDefault) != cudaSuccess) {  // no pinned memory: copies go direct
        cudaGetLastError();
        pinned_ = false;
        return;
    }
    staging_ = static_cast<char*>(h);
    staging_bytes_ = want;
}

void cuda_context::to_device(void* dst, const void* host_src, std::size_t bytes) {
    make_current();
    ++to_device_;
    if (void* st = stage(bytes)) {  // the caller's bytes are read now; the copy is asynchronous
        std::memcpy(st, host_src, bytes);
        host_src = st;
    }
    check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, memory_->stream), "cudaMemcpyAsync");
}

void cuda_context::to_host(void* host_dst, const void* src, std::size_t bytes) {
    make_current();
    ++to_host_;
    if (char* st = static_cast<char*>(stage(bytes))) {  // copied out at the wait (once queued)
        check(cudaMemcpyAsync(st, src, bytes, cudaMemcpyDeviceToHost, memory_->stream), "cudaMemcpyAsync");
        fetches_.push_back({host_dst, static_cast<std::size_t>(st - staging_), bytes});
        return;
    }
    check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, memory_->stream), "cudaMemcpyAsync");
}

void cuda_context::copy_on_device(void* dst, const void* src, std::size_t bytes) {
    make_current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, memory_->stream), "cudaMemcpyAsync");
}

// Waits for the stream; the fault record comes back with the same wait
// (one small copy queued last) and is reset for the work queued after.
// cudaGetLastError reports launches of this thread that failed before they
// were queued (it is per thread, not per stream).
void cuda_context::synchronize() {
    make_current();
    ++syncs_;
    const int used = slots_used_;
    const std::size_t bytes = static_cast<std::size_t>(used) * sizeof(cuda_kernels::device_fault);
    const cudaError_t copy =
        used ? cudaMemcpyAsync(fault_host_, fault_device_, bytes, cudaMemcpyDeviceToHost, memory_->stream) : cudaSuccess;
    // Collectives queued: wait watching their communicators (an error or a
    // timeout aborts them, which ends their kernels; the wait below then
    // returns).
    const cudaError_t queued = cudaGetLastError();  // a failed launch, before the polls below
    std::exception_ptr comm_failure;
    if (!watched_.empty()) {
        try {
            nccl::wait_all(memory_->stream, watched_.data(), watched_.size(), "waiting for the session's stream");
        } catch (...) {
            comm_failure = std::current_exception();
        }
        watched_.clear();
    }
    const cudaError_t e = cudaStreamSynchronize(memory_->stream);
    const cudaError_t after = cudaGetLastError();
    const cudaError_t launch = queued != cudaSuccess ? queued : after;
    finish_staging(!comm_failure && copy == cudaSuccess && e == cudaSuccess && launch == cudaSuccess);
    if (comm_failure) std::rethrow_exception(comm_failure);
    check(copy, "cudaMemcpyAsync");
    check(e, "cudaStreamSynchronize");
    check(launch, "kernel launch");
    for (int k = 0; k < used; ++k) {  // the first step's fault, as the CPU's loop stops there
        const cuda_kernels::device_fault& f = fault_host_[k];
        if (f.code == 0) continue;
        if (fault_target_)
            fault_target_->raise(static_cast<kernels::fault_code>(f.code), f.a, f.b, f.c, k < fault_slots - 1 ? k : -1);
        check(cudaMemcpyAsync(fault_device_, fault_clean_, bytes, cudaMemcpyHostToDevice, memory_->stream),
              "cudaMemcpyAsync");
        break;
    }
}

// Recording is per thread (cudaStreamCaptureModeThreadLocal): another
// thread's session on this GPU goes on as usual meanwhile. A call that
// cannot be recorded (a cudaMalloc, a wait) fails the recording, whose work
// then never ran; the session runs the steps again without recording.
bool cuda_context::record_begin() {
    if (!graphs_) return false;
    make_current();
    return cudaStreamBeginCapture(memory_->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
}

std::shared_ptr<void> cuda_context::record_end() {
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(memory_->stream, &graph);
    cudaGraphExec_t exec = nullptr;
    if (e == cudaSuccess && graph) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess || !exec) {
        ++record_failures_;
        record_error_ = cudaGetErrorName(e);
        cudaGetLastError();  // the failed recording's error is not the next call's
        return nullptr;
    }
    ++recorded_;
    const int device = memory_->device;
    return std::shared_ptr<void>(exec, [device](void* x) {
        const device_scope on(device);
        cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(x));
    });
}

void cuda_context::replay(const void* recording, KernelFault* fault) {
    make_current();
    fault_target_ = fault;  // the recorded kernels write the context's fault slot
    check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(const_cast<void*>(recording)), memory_->stream),
          "cudaGraphLaunch");
    ++replays_;
}

CudaStats cuda_context::stats() const {
    const allocator_stats a = memory_->stats();
    CudaStats s;
    s.reserved_bytes = a.reserved;
    s.peak_reserved_bytes = a.peak_reserved;
    s.allocated_bytes = a.allocated;
    s.peak_allocated_bytes = a.peak_allocated;
    s.device_mallocs = a.raw_allocs;
    s.device_frees = a.raw_frees;
    s.synchronizations = syncs_;
    s.kernel_steps = kernel_steps;
    s.copies_to_device = to_device_;
    s.copies_to_host = to_host_;
    s.staged_copies = staged_;
    s.staging_bytes = staging_bytes_;
    s.graphs_recorded = recorded_;
    s.graph_replays = replays_;
    s.graph_failures = record_failures_;
    s.graph_failure = record_error_;
    return s;
}

}  // namespace cuda_detail

std::unique_ptr<DeviceContext> cuda::make_context() { return std::make_unique<cuda_detail::cuda_context>(options); }

int cuda_device_count(std::string* why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (why) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
        return 0;
    }
    if (n == 0 && why) *why = "the CUDA runtime sees no device";
    return n;
}

namespace {
class planning_context final : public DeviceContext {
public:
    std::string_view name() const noexcept override { return "cuda"; }
    KernelFn kernel(const OpDef& def, DataType t) const noexcept override { return cuda_detail::cuda_kernel(def, t); }
    int fused_code(const OpDef& def, DataType t) const noexcept override { return cuda_detail::cuda_fused_code(def, t); }
    KernelFn fused_kernel() const noexcept override { return cuda_detail::cuda_chain_kernel(); }
    std::shared_ptr<Buffer> allocate(std::size_t) override { refuse(); }
    void to_device(void*, const void*, std::size_t) override { refuse(); }
    void to_host(void*, const void*, std::size_t) override { refuse(); }
    void copy_on_device(void*, const void*, std::size_t) override { refuse(); }
    void synchronize() override { refuse(); }

private:
    [[noreturn]] static void refuse() {
        throw session_error("dlgraph.cuda.planning_only", "cuda: this context only plans; it has no GPU memory");
    }
};
}  // namespace

std::unique_ptr<DeviceContext> cuda_planning_context() { return std::make_unique<planning_context>(); }

namespace {
const cuda_detail::cuda_context& as_cuda(const DeviceContext* d) {
    auto* c = dynamic_cast<const cuda_detail::cuda_context*>(d);
    if (!c) throw session_error("dlgraph.cuda.context", "cuda: this session has no CUDA context");
    return *c;
}
}  // namespace

bool cuda_has_kernel(const OpDef& def, DataType t) noexcept { return cuda_detail::cuda_kernel(def, t) != nullptr; }

CudaStats cuda_stats(const DeviceContext* d) { return as_cuda(d).stats(); }

void cuda_release_cached(DeviceContext* d) { const_cast<cuda_detail::cuda_context&>(as_cuda(d)).release_cached(); }

}  // namespace dlgraph
