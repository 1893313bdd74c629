// Collective communication over MPI (Open MPI: Debian's libopenmpi-dev),
// for the collective ops across the processes of an `mpirun` job. Link
// dlgraph::mpi (CMake) or pass mpicxx's flags; nothing else of dlgraph needs
// MPI.
//
//   int main(int argc, char** argv) {
//       dlgraph::mpi::Environment env(argc, argv);   // MPI_Init .. MPI_Finalize
//       auto comm = dlgraph::mpi::world();            // every process of the job
//       dlgraph::Session<> s(program, {.comms = {comm}});
//
// A call waits for its peers at most Options::timeout; a peer that never
// comes (its process failed before the call) makes it throw comm_error
// [dlgraph.comm.timeout] instead of hanging. Before each collective the
// ranks exchange what they are about to do (op, dtype, count, root), so a
// rank that differs (another batch size, another program) is a clear
// [dlgraph.comm.mismatch] on every rank rather than undefined behaviour.
// After a timeout or a transport error the communicator is broken: later
// calls throw [dlgraph.comm.broken], and Environment's destructor ends the
// job with MPI_Abort (a finalize could wait forever for the lost peer).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlgraph/comm.hpp"

namespace dlgraph::mpi {

struct Options {
    // How long a call waits for every peer before it throws.
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
    // Exchange and compare each call's op, dtype, count and root first (one
    // small all-gather per call, waited for at most the timeout); the data
    // then moves with MPI's blocking collectives. Without it each call is
    // non-blocking and waited for at most the timeout (MPI's non-blocking
    // all-reduce is about half as fast).
    bool check = true;
    // The most elements one MPI call moves (MPI counts are int); larger
    // tensors go in pieces. Small values exercise the pieces in tests.
    std::int64_t max_chunk = std::int64_t(1) << 28;
};

namespace detail {
// Set when any communicator broke: finalizing could then wait forever.
inline std::atomic<bool>& broken_flag() {
    static std::atomic<bool> b{false};
    return b;
}
inline std::string mpi_error_text(int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
    return std::string(text, static_cast<std::size_t>(len));
}
inline MPI_Datatype mpi_type(DataType t) {
    switch (t) {
        case DataType::BOOL: return MPI_C_BOOL;
        case DataType::INT16: return MPI_INT16_T;
        case DataType::INT32: return MPI_INT32_T;
        case DataType::INT64: return MPI_INT64_T;
        case DataType::FP16: return MPI_UINT16_T;  // moved, never reduced
        case DataType::FP32: return MPI_FLOAT;
        case DataType::FP64: return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}
inline MPI_Op mpi_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: return MPI_SUM;
        case ReduceOp::max: return MPI_MAX;
        case ReduceOp::min: return MPI_MIN;
        case ReduceOp::prod: return MPI_PROD;
    }
    return MPI_OP_NULL;
}
}  // namespace detail

// MPI_Init_thread (MPI_THREAD_SERIALIZED: one thread at a time calls MPI,
// which the communicator's lock ensures) unless MPI is running already, and
// MPI_Finalize at the end; MPI_Abort instead when a communicator broke.
class Environment {
public:
    Environment(int& argc, char**& argv) { init(&argc, &argv); }
    Environment() { init(nullptr, nullptr); }
    Environment(const Environment&) = delete;
    Environment& operator=(const Environment&) = delete;
    ~Environment() {
        if (!owner_) return;
        int done = 0;
        MPI_Finalized(&done);
        if (done) return;
        if (detail::broken_flag().load()) MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_Finalize();
    }

private:
    void init(int* argc, char*** argv) {
        int started = 0;
        MPI_Initialized(&started);
        if (started) return;
        int provided = 0;
        const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) throw comm_error("dlgraph.comm.mpi", "MPI_Init_thread failed: " + detail::mpi_error_text(rc));
        owner_ = true;
    }
    bool owner_ = false;
};

class Communicator final : public dlgraph::Communicator {
public:
    // A communicator of its own over `base`'s processes (MPI_Comm_dup, so
    // dlgraph's messages never meet the program's).
    explicit Communicator(MPI_Comm base, Options opts = {}) : opts_(opts) {
        int started = 0;
        MPI_Initialized(&started);
        if (!started)
            throw comm_error("dlgraph.comm.init", "MPI is not initialized: create a dlgraph::mpi::Environment first");
        check(MPI_Comm_dup(base, &comm_), "MPI_Comm_dup");
        MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        if (opts_.max_chunk < 1) opts_.max_chunk = 1;
        if (opts_.max_chunk > INT_MAX) opts_.max_chunk = INT_MAX;
    }
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    ~Communicator() override {
        int done = 0;
        MPI_Finalized(&done);
        if (!done && !broken_) MPI_Comm_free(&comm_);
    }

    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }
    std::string describe() const override {
        return "MPI rank " + std::to_string(rank_) + " of " + std::to_string(size_);
    }
    const Options& options() const { return opts_; }
    // Collective calls made so far (each rank counts the same).
    std::uint64_t calls() const { return seq_; }

    void all_reduce(void* data, std::int64_t count, DataType t, ReduceOp op, const char* what) override {
        const std::lock_guard lock(mutex_);
        agree(what, kind_reduce, t, count, static_cast<int>(op));
        const std::size_t es = dtype_size(t);
        for (std::int64_t off = 0; off < count; off += opts_.max_chunk) {
            const int n = static_cast<int>(std::min(opts_.max_chunk, count - off));
            void* p = static_cast<char*>(data) + off * es;
            const MPI_Datatype mt = detail::mpi_type(t);
            const MPI_Op mo = detail::mpi_op(op);
            transfer(what, [&] { return MPI_Allreduce(MPI_IN_PLACE, p, n, mt, mo, comm_); },
                     [&](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, p, n, mt, mo, comm_, r); });
        }
    }
    void broadcast(void* data, std::int64_t count, DataType t, int root, const char* what) override {
        const std::lock_guard lock(mutex_);
        if (root < 0 || root >= size_)
            throw comm_error("dlgraph.comm.root", std::string(what) + ": root " + std::to_string(root) +
                                                      " is not a rank of " + describe());
        agree(what, kind_broadcast, t, count, root);
        const std::size_t es = dtype_size(t);
        for (std::int64_t off = 0; off < count; off += opts_.max_chunk) {
            const int n = static_cast<int>(std::min(opts_.max_chunk, count - off));
            void* p = static_cast<char*>(data) + off * es;
            const MPI_Datatype mt = detail::mpi_type(t);
            transfer(what, [&] { return MPI_Bcast(p, n, mt, root, comm_); },
                     [&](MPI_Request* r) { return MPI_Ibcast(p, n, mt, root, comm_, r); });
        }
    }
    void all_gather(const void* send, std::int64_t count, DataType t, void* recv, const char* what) override {
        const std::lock_guard lock(mutex_);
        agree(what, kind_gather, t, count, 0);
        const std::size_t es = dtype_size(t);
        const auto* in = static_cast<const char*>(send);
        auto* out = static_cast<char*>(recv);
        if (count <= opts_.max_chunk) {
            gather(in, static_cast<int>(count), t, out, what);
            return;
        }
        // In pieces: piece k of every rank into `staging`, then to its place.
        std::vector<char> staging(static_cast<std::size_t>(opts_.max_chunk * size_) * es);
        for (std::int64_t off = 0; off < count; off += opts_.max_chunk) {
            const std::int64_t n = std::min(opts_.max_chunk, count - off);
            gather(in + off * es, static_cast<int>(n), t, staging.data(), what);
            for (int r = 0; r < size_; ++r)
                std::memcpy(out + (r * count + off) * es, staging.data() + r * n * es, static_cast<std::size_t>(n) * es);
        }
    }
    [[noreturn]] void abort(int code) noexcept override {
        MPI_Abort(MPI_COMM_WORLD, code);
        std::abort();  // MPI_Abort does not return
    }

private:
    enum call_kind : std::int64_t { kind_reduce = 1, kind_broadcast = 2, kind_gather = 3 };
    static constexpr int record_size = 5;  // sequence, kind, dtype, count, root or reduction

    void gather(const char* in, int n, DataType t, char* out, const char* what) {
        const MPI_Datatype mt = detail::mpi_type(t);
        transfer(what, [&] { return MPI_Allgather(in, n, mt, out, n, mt, comm_); },
                 [&](MPI_Request* r) { return MPI_Iallgather(in, n, mt, out, n, mt, comm_, r); });
    }

    // Moves the data of a call every rank has agreed to make (agree): with
    // the check, every peer is in this same call, so MPI's blocking
    // collective (its tuned algorithms, twice as fast as the non-blocking
    // ones for a training step's gradients) cannot wait for a lost peer;
    // without it, the non-blocking one, waited for at most the timeout.
    template <class Blocking, class Start> void transfer(const char* what, Blocking&& blocking, Start&& start) {
        if (opts_.check) {
            check(blocking(), what);
            return;
        }
        MPI_Request r;
        check(start(&r), what);
        wait(r, what);
    }

    // Every rank is about to make the same call, or every rank throws
    // naming the ranks that differ.
    void agree(const char* what, call_kind kind, DataType t, std::int64_t count, int arg) {
        if (broken_)
            throw comm_error("dlgraph.comm.broken", std::string(what) + " on " + describe() + ": the communicator broke "
                                                        "in an earlier call (a peer failed or timed out)");
        const std::uint64_t seq = seq_++;
        if (!opts_.check) return;
        const std::int64_t mine[record_size] = {static_cast<std::int64_t>(seq), kind, static_cast<std::int64_t>(t), count, arg};
        records_.resize(static_cast<std::size_t>(size_) * record_size);
        MPI_Request r;
        check(MPI_Iallgather(mine, record_size, MPI_INT64_T, records_.data(), record_size, MPI_INT64_T, comm_, &r), what);
        wait(r, what);
        bool same = true;
        for (int p = 1; p < size_; ++p)
            same = same && std::memcmp(&records_[0], &records_[static_cast<std::size_t>(p) * record_size],
                                       record_size * sizeof(std::int64_t)) == 0;
        if (same) return;
        std::string calls;
        for (int p = 0; p < size_; ++p) calls += "; rank " + std::to_string(p) + ": " + call_text(&records_[static_cast<std::size_t>(p) * record_size]);
        throw comm_error("dlgraph.comm.mismatch", std::string(what) + " on " + describe() +
                                                      ": the ranks' calls differ (every rank must run the same collective "
                                                      "ops in the same order on the same shapes)" + calls);
    }
    static std::string call_text(const std::int64_t* rec) {
        static const char* kinds[] = {"?", "all-reduce", "broadcast", "all-gather"};
        const std::int64_t k = rec[1] >= 1 && rec[1] <= 3 ? rec[1] : 0;
        std::string s = "call #" + std::to_string(rec[0]) + " " + kinds[k];
        if (k == kind_reduce && rec[4] >= 0 && rec[4] <= 3) s += std::string(" (") + reduce_op_name(static_cast<ReduceOp>(rec[4])) + ")";
        if (k == kind_broadcast) s += " from rank " + std::to_string(rec[4]);
        s += " of " + std::to_string(rec[3]) + " ";
        s += valid_dtype(static_cast<int>(rec[2])) ? to_string(static_cast<DataType>(rec[2])) : "?";
        return s;
    }

    void check(int rc, const char* what) {
        if (rc == MPI_SUCCESS) return;
        broken_ = true;
        detail::broken_flag() = true;
        throw comm_error("dlgraph.comm.mpi", std::string(what) + " on " + describe() + ": " + detail::mpi_error_text(rc));
    }

    // MPI_Test until done, yielding the core now and then (ranks may
    // share cores), and at most opts_.timeout.
    void wait(MPI_Request& r, const char* what) {
        const auto start = std::chrono::steady_clock::now();
        for (unsigned spins = 0;; ++spins) {
            int done = 0;
            check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), what);
            if (done) return;
            if ((spins & 63) == 63) {
                std::this_thread::yield();
                if (std::chrono::steady_clock::now() - start > opts_.timeout) {
                    broken_ = true;
                    detail::broken_flag() = true;
                    throw comm_error("dlgraph.comm.timeout",
                                     std::string(what) + " on " + describe() + ": no answer from a peer within " +
                                         std::to_string(opts_.timeout.count()) + " ms (call #" + std::to_string(seq_ - 1) +
                                         "; a peer failed, or runs another program)");
                }
            }
        }
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    Options opts_;
    int rank_ = 0, size_ = 1;
    std::uint64_t seq_ = 0;
    bool broken_ = false;
    std::vector<std::int64_t> records_;
    std::mutex mutex_;
};

// Every process of the job (MPI_COMM_WORLD), as a communicator of its own.
inline std::shared_ptr<Communicator> world(Options opts = {}) {
    return std::make_shared<Communicator>(MPI_COMM_WORLD, opts);
}

}  // namespace dlgraph::mpi
