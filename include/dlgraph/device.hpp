// Devices. A session runs each step of a plan in one of two places: on the
// host (the CPU, where dlgraph's own kernels run) or on the session's device
// (a GPU, or the tests' counting device), and each value lives in one of the
// two. The planner asks the device for a kernel per (op, dtype); an op the
// device has no kernel for runs on the host, with copies around it.
//
// A device policy is a type chosen as Session's template argument
// (Session<cpu>, Session<cuda>). It names the device and makes the
// DeviceContext a session works through: its memory, its queue of work
// (stream, BLAS handle) and its kernels. `cpu` makes none: a CPU session runs
// everything on the host, as one place.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "dlgraph/dtype.hpp"

namespace dlgraph {

enum class Place : std::uint8_t { host = 0, device = 1 };
inline constexpr int num_places = 2;

struct KernelContext;
struct OpDef;
struct KernelFault;
class Buffer;
using KernelFn = void (*)(const KernelContext&);

// The owner of device memory. A Buffer of device memory keeps its owner
// alive and gives the memory back through it, so a buffer may outlive the
// session that made it.
class DeviceMemory {
public:
    virtual ~DeviceMemory() = default;
    virtual void release(void* data, std::size_t bytes) noexcept = 0;
    // Copies device bytes to host memory and waits for them (reading a
    // device tensor outside a run: Tensor::copy_from, to_xarray).
    virtual void read(void* host_dst, const void* src, std::size_t bytes) const = 0;
};

// One device as one session sees it. The planner asks `kernel`; the session
// allocates the plan's device memory, queues copies and waits through it.
// Copies and kernels run in the order they were queued; `synchronize`
// returns when all of it is done and throws the first error the device
// reported.
class DeviceContext {
public:
    virtual ~DeviceContext() = default;
    virtual std::string_view name() const noexcept = 0;
    // The device's kernel for `def` at dtype `t`, or nullptr: the op then
    // runs on the host.
    virtual KernelFn kernel(const OpDef& def, DataType t) const noexcept = 0;
    virtual std::shared_ptr<Buffer> allocate(std::size_t bytes) = 0;
    virtual void to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
    virtual void to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
    // A copy within device memory, queued like the rest (the session keeps
    // its rollback copies of device persistables this way).
    virtual void copy_on_device(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void synchronize() = 0;

    // Recording the work a run of steps queues, to replay it later in one
    // launch (CUDA graphs), for devices that can. record_begin() starts
    // recording what this thread queues, and returns false when the device
    // does not record (or the user turned it off); record_end() stops and
    // returns the recording, or null when the work could not be recorded
    // (nothing recorded has run: the steps must run again); replay() queues
    // a recording, whose kernels report faults to `fault`.
    virtual bool record_begin() { return false; }
    virtual std::shared_ptr<void> record_end() { return nullptr; }
    virtual void replay(const void* recording, KernelFault* fault) {
        (void)recording;
        (void)fault;
    }

    // Element-wise chains as one kernel (plan_fusion, fusion.hpp), for
    // devices that can: fused_code is the device's code for the element
    // function of fusible op `def` (OpDef::fusible) at dtype `t`, or -1 when
    // it cannot run inside a chain; fused_kernel runs a chain
    // (KernelContext::fused, a detail::fused_chain of such codes, at most
    // max_device_chain ops).
    virtual int fused_code(const OpDef& def, DataType t) const noexcept {
        (void)def;
        (void)t;
        return -1;
    }
    virtual KernelFn fused_kernel() const noexcept { return nullptr; }
};

// The most ops one fused chain of device steps holds (the chain travels to
// the device as a kernel argument).
inline constexpr int max_device_chain = 32;

// The CPU: no device, every step on the host.
struct cpu {
    static constexpr std::string_view name = "cpu";
    static std::unique_ptr<DeviceContext> make_context() { return nullptr; }
};

template <class D>
concept device_policy = requires {
    { D::name } -> std::convertible_to<std::string_view>;
    { D::make_context() } -> std::same_as<std::unique_ptr<DeviceContext>>;
};

}  // namespace dlgraph
