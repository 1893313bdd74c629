// The CUDA backend's context, shared by src/cuda/context.cpp (its members)
// and src/cuda/ops.cpp (the op glue, which launches on its stream and
// cuBLAS handle). Plain C++ over the CUDA runtime and cuBLAS headers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlgraph/cuda/allocator.hpp"
#include "dlgraph/cuda/cuda.hpp"
#include "dlgraph/cuda/launch.hpp"
#include "dlgraph/cuda/nccl.hpp"
#include "dlgraph/op.hpp"

namespace dlgraph::cuda_detail {

// Makes GPU `device` current for the calling thread (cudaSetDevice only when
// another one is).
void use_device(int device);

// Makes a GPU current for a scope and puts the previous one back.
struct device_scope {
    int previous = -1;
    explicit device_scope(int device) {
        if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
        if (previous != device) cudaSetDevice(device);
    }
    ~device_scope() {
        if (previous >= 0) cudaSetDevice(previous);
    }
    device_scope(const device_scope&) = delete;
    device_scope& operator=(const device_scope&) = delete;
};

// Throws session_error "dlgraph.cuda.error" naming the call when `e` is an error.
void check(cudaError_t e, const char* call);
void check(cublasStatus_t e, const char* call);

// The device memory of one context: its stream and its caching allocator.
// Buffers keep it alive (DeviceMemory), so it owns the stream they were
// allocated for and outlives the context when a tensor does.
// Segments straight from the driver (cudaMalloc / cudaFree on one device).
struct driver_source final : raw_source {
    explicit driver_source(int d) : device(d) {}
    void* allocate(std::size_t bytes) override;
    void free(void* p, std::size_t bytes) noexcept override;
    const int device;
};

class cuda_memory final : public DeviceMemory {
public:
    explicit cuda_memory(int device);
    ~cuda_memory() override;
    // A block of device memory (throws std::bad_alloc when there is none).
    void* take(std::size_t bytes);
    void release(void* data, std::size_t bytes) noexcept override;
    void read(void* host_dst, const void* src, std::size_t bytes) const override;
    void release_cached() noexcept;
    allocator_stats stats() const;

    const int device;
    cudaStream_t stream = nullptr;

private:
    mutable std::mutex mu_;
    driver_source driver_;
    caching_allocator cache_{driver_};
};

// DeviceContext::fused_code and fused_kernel of CUDA contexts (ops.cpp).
int cuda_fused_code(const OpDef& def, DataType t) noexcept;
KernelFn cuda_chain_kernel() noexcept;

class cuda_context final : public DeviceContext {
public:
    explicit cuda_context(const CudaOptions& opts);
    ~cuda_context() override;
    std::string_view name() const noexcept override { return "cuda"; }
    KernelFn kernel(const OpDef& def, DataType t) const noexcept override;
    int fused_code(const OpDef& def, DataType t) const noexcept override { return cuda_fused_code(def, t); }
    KernelFn fused_kernel() const noexcept override { return cuda_chain_kernel(); }
    std::shared_ptr<Buffer> allocate(std::size_t bytes) override;
    void to_device(void* dst, const void* host_src, std::size_t bytes) override;
    void to_host(void* host_dst, const void* src, std::size_t bytes) override;
    void copy_on_device(void* dst, const void* src, std::size_t bytes) override;
    void synchronize() override;
    bool record_begin() override;
    std::shared_ptr<void> record_end() override;
    void replay(const void* recording, KernelFault* fault) override;

    cudaStream_t stream() const noexcept { return memory_->stream; }
    int device() const noexcept { return memory_->device; }
    // Makes the context's GPU current for the calling thread (a session may
    // be used from any thread; launches and cuBLAS go to the current GPU).
    void make_current() const { use_device(memory_->device); }
    cublasHandle_t blas() const noexcept { return blas_; }
    // The fault slot a kernel of plan step `step` that can meet bad data
    // writes to: one per step (the last one shared by steps from
    // fault_slots - 1 on), so that the next synchronize raises into `target`
    // (the plan's KernelFault) the fault of the first step that met one,
    // naming it, as the CPU's loop does.
    static constexpr int fault_slots = 256;
    cuda_kernels::device_fault* fault_slot(KernelFault* target, int step) noexcept {
        const int k = step >= 0 && step < fault_slots - 1 ? step : fault_slots - 1;
        fault_target_ = target;
        slots_used_ = std::max(slots_used_, k + 1);
        return fault_device_ + k;
    }
    // Device memory a reduction keeps partial results in between its two
    // kernels: the cuBLAS workspace, which no cuBLAS call touches meanwhile
    // (both run in stream order on this context's stream); at least
    // cuda_kernels::sum_scratch_bytes, also when cuBLAS gets none.
    void* scratch() const noexcept { return workspace_; }
    std::size_t scratch_bytes() const noexcept { return workspace_bytes_; }
    // Dropout's fresh seeds: a counter in device memory that each such
    // dropout advances on the stream (cuda_kernels::dropout_seed::fresh),
    // starting from a random value.
    std::uint64_t* seed_state() const noexcept { return seed_state_; }
    // An NCCL communicator whose collectives a step queued: the next
    // synchronize watches it while it waits (nccl::wait_all), so that a peer
    // that fails or never comes is an error, not a wait forever.
    void watch(nccl::Communicator* c) {
        if (std::find(watched_.begin(), watched_.end(), c) == watched_.end()) watched_.push_back(c);
    }
    CudaStats stats() const;
    void release_cached() noexcept { memory_->release_cached(); }
    std::size_t kernel_steps = 0;

private:
    void free_resources() noexcept;
    std::shared_ptr<cuda_memory> memory_;
    cublasHandle_t blas_ = nullptr;
    void* workspace_ = nullptr;
    std::size_t workspace_bytes_ = 0;
    cuda_kernels::device_fault* fault_device_ = nullptr;  // fault_slots slots where kernels record faults (device memory)
    cuda_kernels::device_fault* fault_host_ = nullptr;    // pinned: the slots read back at each synchronize
    cuda_kernels::device_fault* fault_clean_ = nullptr;   // pinned: slots with no fault, copied over fault_device_
    int slots_used_ = 0;                                  // slots [0, slots_used_) may hold a fault
    std::uint64_t* seed_state_ = nullptr;
    KernelFault* fault_target_ = nullptr;
    // Pinned staging (CudaOptions::pinned_staging): blocks taken in order
    // between waits, given back at each wait, where fetches are copied out.
    struct staged_fetch {
        void* dst;
        std::size_t offset, bytes;
    };
    void* stage(std::size_t bytes) noexcept;  // the next block, or null (then the copy goes direct)
    void finish_staging(bool copy_out) noexcept;
    bool pinned_ = true;
    char* staging_ = nullptr;
    std::size_t staging_bytes_ = 0, staging_used_ = 0, staged_ = 0;
    std::size_t staging_wanted_ = 0;  // what the copies since the last wait needed together
    std::vector<staged_fetch> fetches_;
    std::size_t syncs_ = 0, to_device_ = 0, to_host_ = 0, recorded_ = 0, replays_ = 0;
    bool graphs_ = true;  // options.graphs when made
    std::vector<nccl::Communicator*> watched_;  // since the last wait (watch)
    std::size_t record_failures_ = 0;
    const char* record_error_ = "";
};

// The CUDA kernel of `def` at dtype `t`, or nullptr (src/cuda/ops.cpp).
KernelFn cuda_kernel(const OpDef& def, DataType t) noexcept;

// The context a device step runs in.
inline cuda_context& context_of(const KernelContext& c) { return *static_cast<cuda_context*>(c.device); }

}  // namespace dlgraph::cuda_detail
