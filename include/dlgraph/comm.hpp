// Communicators: how the collective ops (c_allreduce_*, c_broadcast,
// c_allgather; ops/collective.hpp) reach the other processes of a job. A
// session is given its communicators in SessionOptions::comms, indexed by
// the ops' `ring_id`. dlgraph writes no transport of its own: mpi.hpp wraps
// MPI (Open MPI), and SelfCommunicator is the one-process group that needs
// nothing. Every rank must make the same calls in the same order, as MPI
// requires; the MPI communicator checks that they do.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlgraph/dtype.hpp"
#include "dlgraph/error.hpp"

namespace dlgraph {

// The reductions of c_allreduce_{sum,max,min,prod}.
enum class ReduceOp : int { sum = 0, max = 1, min = 2, prod = 3 };
inline const char* reduce_op_name(ReduceOp op) {
    constexpr const char* names[] = {"sum", "max", "min", "prod"};
    return names[static_cast<int>(op)];
}

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int rank() const noexcept = 0;
    virtual int size() const noexcept = 0;
    // E.g. "MPI rank 1 of 4", for messages.
    virtual std::string describe() const = 0;
    // Where the buffers of its calls live: "cpu" (host memory), or the name
    // of the device whose memory it moves (NCCL's: "cuda"). A session runs
    // a collective op on its device only when the ring's communicator works
    // in that device's memory; else on the host, with copies around it.
    virtual std::string_view memory() const noexcept { return "cpu"; }
    // `what` names the caller (an op type) in errors. Each throws comm_error
    // when the ranks' calls do not match or a peer does not answer in time;
    // the communicator is then broken and refuses further calls.
    //
    // data[0, count) = op over every rank's data, on every rank (in place).
    virtual void all_reduce(void* data, std::int64_t count, DataType t, ReduceOp op, const char* what) = 0;
    // data[0, count) = root's data, on every rank.
    virtual void broadcast(void* data, std::int64_t count, DataType t, int root, const char* what) = 0;
    // recv[r * count, (r + 1) * count) = rank r's send[0, count).
    virtual void all_gather(const void* send, std::int64_t count, DataType t, void* recv, const char* what) = 0;
    // Stops every rank of the job now (MPI_Abort), for a rank that cannot go
    // on and must not leave its peers waiting.
    [[noreturn]] virtual void abort(int code) noexcept = 0;
};

// The group of one process: all-reduce and broadcast leave the data as it
// is, all-gather copies it. A data-parallel program runs unchanged on one
// process with it.
class SelfCommunicator final : public Communicator {
public:
    int rank() const noexcept override { return 0; }
    int size() const noexcept override { return 1; }
    std::string describe() const override { return "rank 0 of 1 (one process)"; }
    void all_reduce(void*, std::int64_t, DataType, ReduceOp, const char*) override {}
    void broadcast(void*, std::int64_t, DataType, int root, const char* what) override {
        if (root != 0)
            throw comm_error("dlgraph.comm.root", std::string(what) + ": root " + std::to_string(root) +
                                                      " is not a rank of a group of 1");
    }
    void all_gather(const void* send, std::int64_t count, DataType t, void* recv, const char*) override {
        if (count > 0 && send != recv) std::memmove(recv, send, static_cast<std::size_t>(count) * dtype_size(t));
    }
    [[noreturn]] void abort(int code) noexcept override { std::exit(code); }
};

}  // namespace dlgraph
