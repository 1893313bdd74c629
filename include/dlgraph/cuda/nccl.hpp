// Collective communication between GPUs over NVIDIA's NCCL, for the
// collective ops (c_allreduce_*, c_broadcast, c_allgather) of a
// Session<cuda>: a ring whose communicator is a dlgraph::nccl::Communicator
// runs its collective steps on the session's stream, on device memory, with
// no copy to the host (SessionOptions::comms; a host communicator such as
// MPI's makes them host steps with copies around them instead).
//
//   dlgraph::mpi::Environment env(argc, argv);
//   auto world = dlgraph::mpi::world();                        // one process per GPU
//   auto gpus = std::make_shared<dlgraph::nccl::Communicator>(*world, local_gpu);
//   dlgraph::cuda::options.device = local_gpu;
//   dlgraph::Session<dlgraph::cuda> s(program, {.comms = {gpus}});
//
// dlgraph links no NCCL: the library is loaded when the first communicator
// is made, from Options::library, else $DLGRAPH_NCCL_LIBRARY, else
// "libnccl.so.2" on the loader's path (the CUDA toolkit's lib64, or the
// copy a PyTorch wheel ships in site-packages/nvidia/nccl/lib). A machine
// without NCCL builds and runs everything else; making a communicator there
// is comm_error [dlgraph.comm.nccl] naming what was tried.
//
// Rank 0 makes NCCL's unique id and the bootstrap communicator (any
// dlgraph::Communicator of the same processes: MPI's) broadcasts it; then
// every rank joins the NCCL group on its GPU. NCCL puts at most one rank
// of a group on one GPU.
//
// Calls are queued on a stream and do not wait. A session waits once per
// eval, as it always does, and while it waits it watches the communicators
// its steps used: an error NCCL reports (a peer's connection lost), or no
// completion within Options::timeout (a peer that never joined the call),
// aborts the communicator (ncclCommAbort, which ends the queued kernels) and
// throws comm_error [dlgraph.comm.nccl] or [dlgraph.comm.timeout]; the
// communicator is then broken and refuses further calls
// ([dlgraph.comm.broken]). Collective steps are not recorded into CUDA
// graphs: the runs of device steps around them are replayed, they launch
// one by one.
//
// Sessions on several threads may share a communicator: its NCCL calls
// are made one at a time. As with MPI, every rank must queue the same
// collectives in the same order, so such sessions must take their turns
// alike on every rank.
//
// This header needs no CUDA or NCCL header: g++ compiles a program that
// uses it, and links dlgraph::cuda.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "dlgraph/comm.hpp"

namespace dlgraph::nccl {

struct Options {
    // How long a wait for the queued collectives may take before the
    // communicator is aborted.
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
    // The NCCL library to load ("": $DLGRAPH_NCCL_LIBRARY, else
    // "libnccl.so.2"). The first communicator of the process loads it;
    // later ones use that one.
    std::string library = "";
};

// NCCL_VERSION_CODE of the NCCL library `library` (as Options::library),
// e.g. 22809 for 2.28.9, loading it. Needs no GPU. Throws comm_error
// [dlgraph.comm.nccl] when it cannot be loaded or lacks a function dlgraph
// calls.
int library_version(const std::string& library = "");

namespace detail {
struct state;
}
class Communicator;

// For the CUDA backend: waits for `stream` as Communicator::wait does,
// watching each of comms[0, n) (the least timeout of theirs), and aborts
// all of them on an error or a timeout.
void wait_all(void* stream, Communicator* const* comms, std::size_t n, const char* what);

class Communicator final : public dlgraph::Communicator {
public:
    // One rank of the group of `bootstrap`'s processes, on GPU `device`;
    // every rank of `bootstrap` must make one (a collective call).
    Communicator(dlgraph::Communicator& bootstrap, int device, Options opts = {});
    // The group of one rank, on GPU `device` (a data-parallel program then
    // runs unchanged on one GPU).
    explicit Communicator(int device, Options opts = {});
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    ~Communicator() override;

    int rank() const noexcept override;
    int size() const noexcept override;
    std::string describe() const override;
    std::string_view memory() const noexcept override { return "cuda"; }
    int device() const noexcept;
    const Options& options() const noexcept;
    // Whether a wait saw an error or a timeout (then every call throws).
    bool broken() const noexcept;

    // The dlgraph::Communicator calls, on device memory of GPU device(),
    // each queued on the communicator's own stream and waited for (at most
    // the timeout): for programs that call NCCL outside a session. A host
    // pointer is comm_error [dlgraph.comm.memory].
    void all_reduce(void* data, std::int64_t count, DataType t, ReduceOp op, const char* what) override;
    void broadcast(void* data, std::int64_t count, DataType t, int root, const char* what) override;
    void all_gather(const void* send, std::int64_t count, DataType t, void* recv, const char* what) override;
    // Aborts the NCCL communicator, then ends the process with `code` (the
    // peers' waits then fail, or time out, and end theirs).
    [[noreturn]] void abort(int code) noexcept override;

    // For the CUDA backend's kernels: the same calls queued on `stream` (a
    // cudaStream_t of GPU device()), out of place where send != recv, not
    // waited for. `what` names the caller in errors.
    void all_reduce_on(const void* send, void* recv, std::int64_t count, DataType t, ReduceOp op, void* stream,
                       const char* what);
    void broadcast_on(const void* send, void* recv, std::int64_t count, DataType t, int root, void* stream,
                      const char* what);
    void all_gather_on(const void* send, void* recv, std::int64_t count, DataType t, void* stream, const char* what);
    // Waits until `stream` has done its work, at most the timeout, watching
    // NCCL's asynchronous errors; on an error or a timeout aborts the
    // communicator and throws (see above). `what` names the waiter.
    void wait(void* stream, const char* what);

private:
    friend void wait_all(void*, Communicator* const*, std::size_t, const char*);
    std::unique_ptr<detail::state> s_;
};

}  // namespace dlgraph::nccl
