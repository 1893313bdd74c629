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
//
// When every rank runs on one machine, all-reduces go through memory the
// ranks share (Options::shared_bytes; MPI still starts the job and
// synchronizes every round), about a third faster than MPI_Allreduce for a
// training step's gradients.
#pragma once

#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "dlgraph/comm.hpp"

namespace dlgraph::mpi {

struct Options {
    // How long a call waits for every peer before it throws.
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
    // Exchange and compare each call's op, dtype, count and root first (one
    // small all-gather per call, waited for at most the timeout); the data
    // then moves with MPI's blocking collectives (or through shared memory,
    // each synchronization waited for at most the timeout: shared_bytes
    // below). Without it each call is
    // non-blocking and waited for at most the timeout (MPI's non-blocking
    // all-reduce is about half as fast).
    bool check = true;
    // The most elements one MPI call moves (MPI counts are int); larger
    // tensors go in pieces. Small values exercise the pieces in tests.
    std::int64_t max_chunk = std::int64_t(1) << 28;
    // Where every rank of the communicator runs on one machine, all-reduces
    // of FP32, FP64, INT32 and INT64 go through a POSIX shared-memory area,
    // in rounds of at most this many bytes: each rank reduces its share of
    // a round and reads the others' shares. Each element is reduced by one
    // rank in rank order, so every rank gets the same bits. The area (two
    // rounds' worth per rank) is made by the first all-reduce. 0: always
    // MPI_Allreduce. Every rank must be given the same value (checked
    // calls compare it: [dlgraph.comm.mismatch]).
    std::int64_t shared_bytes = std::int64_t(2) << 20;
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

// Shared memory of a communicator whose ranks run on one machine: per rank
// two buffers of `bytes` (rounds alternate between them), every rank's
// mapped by every rank. Made collectively; unmapped locally (no collective
// at destruction, so ranks may drop their communicators in any order).
class shared_area {
public:
    shared_area(const shared_area&) = delete;
    shared_area& operator=(const shared_area&) = delete;
    ~shared_area() { munmap(base_, total_); }

    // Every rank of `comm` calls it in the same collective call. Null on
    // every rank when the ranks are on several machines or any rank cannot
    // map the area (then all-reduces use MPI_Allreduce). Returns the first
    // MPI error code otherwise unhandled through `rc`.
    static std::unique_ptr<shared_area> make(MPI_Comm comm, int rank, int size, std::size_t bytes, int& rc) {
        rc = MPI_SUCCESS;
        MPI_Comm node = MPI_COMM_NULL;
        if ((rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node)) != MPI_SUCCESS) return nullptr;
        int node_size = 0;
        MPI_Comm_size(node, &node_size);
        MPI_Comm_free(&node);
        if (node_size != size) return nullptr;  // the same answer on every rank
        const std::size_t total = bytes * 2 * static_cast<std::size_t>(size);
        static std::atomic<unsigned> made{0};
        char name[64] = {};  // empty: rank 0 could not make it
        int fd = -1;
        if (rank == 0) {
            std::snprintf(name, sizeof name, "/dlgraph-%ld-%u", static_cast<long>(getpid()), made++);
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
            // Reserved now, so that touching it later cannot fault for want
            // of space.
            if (fd < 0 || posix_fallocate(fd, 0, static_cast<off_t>(total)) != 0) {
                if (fd >= 0) shm_unlink(name);
                name[0] = 0;
            }
        }
        // Rank 0's size too: ranks given other Options::shared_bytes (which
        // unchecked calls do not compare) keep MPI_Allreduce.
        std::uint64_t size0 = bytes;
        rc = MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
        if (rc == MPI_SUCCESS) rc = MPI_Bcast(&size0, 1, MPI_UINT64_T, 0, comm);
        int ok = rc == MPI_SUCCESS && name[0] != 0 && size0 == bytes;
        if (ok && rank != 0) ok = (fd = shm_open(name, O_RDWR, 0)) >= 0;
        void* base = ok ? mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
        ok = ok && base != MAP_FAILED;
        if (fd >= 0) close(fd);
        // Every rank has it mapped, or gave up: the name can go.
        if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
        if (rank == 0 && name[0]) shm_unlink(name);
        if (rc != MPI_SUCCESS || !ok) {
            if (base != MAP_FAILED) munmap(base, total);
            return nullptr;
        }
        return std::unique_ptr<shared_area>(new shared_area(static_cast<char*>(base), total, bytes));
    }
    // Rank r's buffer for round `round`.
    char* part(int r, std::uint64_t round) const {
        return base_ + (static_cast<std::size_t>(r) * 2 + (round & 1)) * bytes_;
    }
    std::size_t bytes() const { return bytes_; }

private:
    shared_area(char* base, std::size_t total, std::size_t bytes) : base_(base), total_(total), bytes_(bytes) {}
    char* base_;
    std::size_t total_, bytes_;
};

// out[i] = op(src[0][i], ..., src[n-1][i]) in that order, for i < len;
// `out` is none of the sources, and n >= 2. Integers wrap (computed
// unsigned), as MPI's do; max and min give NaN where any rank has one.
template <class T> void reduce_into(T* __restrict out, const void* const* src, int n, std::size_t len, ReduceOp op) {
    using W = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::type_identity<T>>::type;
    auto each = [&](auto f) {
        const T* __restrict a = static_cast<const T*>(src[0]);
        const T* __restrict b = static_cast<const T*>(src[1]);
        for (std::size_t i = 0; i < len; ++i) out[i] = f(a[i], b[i]);
        for (int p = 2; p < n; ++p) {
            const T* __restrict c = static_cast<const T*>(src[p]);
            for (std::size_t i = 0; i < len; ++i) out[i] = f(out[i], c[i]);
        }
    };
    switch (op) {
        case ReduceOp::sum: each([](T a, T b) { return static_cast<T>(static_cast<W>(a) + static_cast<W>(b)); }); break;
        case ReduceOp::prod: each([](T a, T b) { return static_cast<T>(static_cast<W>(a) * static_cast<W>(b)); }); break;
        // A NaN on any rank gives NaN (b != b only for a NaN b; a NaN a
        // compares false and stays).
        case ReduceOp::max: each([](T a, T b) { return a < b || b != b ? b : a; }); break;
        case ReduceOp::min: each([](T a, T b) { return b < a || b != b ? b : a; }); break;
    }
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
        opts_.shared_bytes = std::clamp<std::int64_t>(opts_.shared_bytes, 0, std::int64_t(1) << 30);
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
    // Whether all-reduces go through shared memory (Options::shared_bytes):
    // known after the first all-reduce of FP32, FP64, INT32 or INT64.
    bool shares_memory() const { return shared_ != nullptr; }

    void all_reduce(void* data, std::int64_t count, DataType t, ReduceOp op, const char* what) override {
        const std::lock_guard lock(mutex_);
        if (shared_reduce(data, count, t, op, what)) return;
        agree(what, kind_reduce, t, count, static_cast<int>(op));
        if (wants_shared(count, t) && !tried_shared_) {  // the first all-reduce: every rank is here
            tried_shared_ = true;
            if (!opts_.check) sync(what);  // unchecked calls do not wait for the peers: a lost one times out here
            int rc = MPI_SUCCESS;
            shared_ = detail::shared_area::make(comm_, rank_, size_, static_cast<std::size_t>(shared_round_bytes()), rc);
            check(rc, what);
            if (shared_) {
                shared_rounds(static_cast<char*>(data), count, t, op, what, false);
                return;
            }
        }
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

    // All-reduces through the shared area (Options::shared_bytes), in
    // rounds of whole cache lines (so any dtype is aligned).
    std::int64_t shared_round_bytes() const { return (opts_.shared_bytes + 63) / 64 * 64; }
    bool wants_shared(std::int64_t count, DataType t) const {
        return size_ > 1 && count > 0 && opts_.shared_bytes > 0 &&
               (t == DataType::FP32 || t == DataType::FP64 || t == DataType::INT32 || t == DataType::INT64);
    }
    // The all-reduce through the area when it exists (else false: not
    // started). With the check, this rank's part of the first round is
    // copied in before the agreement, whose all-gather then serves as the
    // round's first synchronization.
    bool shared_reduce(void* data, std::int64_t count, DataType t, ReduceOp op, const char* what) {
        if (!shared_ || !wants_shared(count, t)) return false;
        refuse_if_broken(what);  // before writing the buffer a peer may still read after a timeout
        const bool early = opts_.check;
        if (early) copy_in(static_cast<char*>(data), std::min<std::int64_t>(count, round_elements(t)), t);
        agree(what, kind_reduce, t, count, static_cast<int>(op));
        shared_rounds(static_cast<char*>(data), count, t, op, what, early);
        return true;
    }
    std::int64_t round_elements(DataType t) const {
        return std::max<std::int64_t>(1, static_cast<std::int64_t>(shared_->bytes() / dtype_size(t)));
    }
    // Round r's share of rank p: [lo, hi) of the round's m elements.
    std::int64_t share_begin(std::int64_t m, int p) const {
        const std::int64_t per = (m + size_ - 1) / size_;
        return std::min(m, per * p);
    }
    // This rank's elements of the others' shares into its buffer.
    void copy_in(const char* data, std::int64_t m, DataType t) {
        const std::size_t es = dtype_size(t);
        char* mine = shared_->part(rank_, round_);
        for (int p = 0; p < size_; ++p) {
            if (p == rank_) continue;
            const std::int64_t lo = share_begin(m, p), hi = share_begin(m, p + 1);
            if (hi > lo) std::memcpy(mine + lo * es, data + lo * es, static_cast<std::size_t>(hi - lo) * es);
        }
    }
    // Every rank has written its buffer (or read the others'): the next
    // step may read (or overwrite) them.
    void sync(const char* what) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        MPI_Request r;
        check(MPI_Ibarrier(comm_, &r), what);
        wait(r, what);
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // The rounds of an agreed all-reduce; `copied` says the first round's
    // copy-in and synchronization are done.
    void shared_rounds(char* data, std::int64_t count, DataType t, ReduceOp op, const char* what, bool copied) {
        const std::size_t es = dtype_size(t);
        const std::int64_t step = round_elements(t);
        for (std::int64_t off = 0; off < count; off += step, ++round_, copied = false) {
            const std::int64_t m = std::min(step, count - off);
            char* d = data + off * es;
            if (!copied) copy_in(d, m, t);
            sync(what);
            // This rank's share, reduced over every rank in rank order into
            // its own buffer (where the others read it) and into `data`.
            const std::int64_t lo = share_begin(m, rank_), hi = share_begin(m, rank_ + 1);
            if (hi > lo) {
                char* out = shared_->part(rank_, round_) + lo * es;
                const auto len = static_cast<std::size_t>(hi - lo);
                reduce_share(out, d + lo * es, t, op, lo * static_cast<std::int64_t>(es), len);
                std::memcpy(d + lo * es, out, len * es);
            }
            sync(what);
            for (int p = 0; p < size_; ++p) {
                if (p == rank_) continue;
                const std::int64_t plo = share_begin(m, p), phi = share_begin(m, p + 1);
                if (phi > plo)
                    std::memcpy(d + plo * es, shared_->part(p, round_) + plo * es, static_cast<std::size_t>(phi - plo) * es);
            }
        }
    }
    // out = op over every rank's elements at byte `at` of the round: this
    // rank's from `own`, the others' from their buffers.
    void reduce_share(char* out, const char* own, DataType t, ReduceOp op, std::int64_t at, std::size_t len) {
        sources_.resize(static_cast<std::size_t>(size_));
        for (int p = 0; p < size_; ++p) sources_[static_cast<std::size_t>(p)] = p == rank_ ? own : shared_->part(p, round_) + at;
        auto run = [&]<class T>(T*) {
            detail::reduce_into(reinterpret_cast<T*>(out), sources_.data(), size_, len, op);
        };
        switch (t) {
            case DataType::FP32: run(static_cast<float*>(nullptr)); break;
            case DataType::FP64: run(static_cast<double*>(nullptr)); break;
            case DataType::INT32: run(static_cast<std::int32_t*>(nullptr)); break;
            case DataType::INT64: run(static_cast<std::int64_t*>(nullptr)); break;
            default: break;  // wants_shared admits no other
        }
    }
    static constexpr int record_size = 6;  // sequence, kind, dtype, count, root or reduction, shared rounds' bytes

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
        refuse_if_broken(what);
        const std::uint64_t seq = seq_++;
        if (!opts_.check) return;
        // All-reduces also compare the shared-memory rounds' size: ranks
        // with other Options would read past each other's rounds.
        const std::int64_t shared = kind == kind_reduce ? shared_round_bytes() : 0;
        const std::int64_t mine[record_size] = {static_cast<std::int64_t>(seq), kind, static_cast<std::int64_t>(t), count, arg, shared};
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
        if (k == kind_reduce) s += rec[5] > 0 ? " in shared-memory rounds of " + std::to_string(rec[5]) + " bytes" : " without shared memory";
        return s;
    }

    void refuse_if_broken(const char* what) const {
        if (broken_)
            throw comm_error("dlgraph.comm.broken", std::string(what) + " on " + describe() + ": the communicator broke "
                                                        "in an earlier call (a peer failed or timed out)");
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
    std::unique_ptr<detail::shared_area> shared_;
    bool tried_shared_ = false;
    std::uint64_t round_ = 0;  // rounds through the shared area so far (same on every rank)
    std::vector<const void*> sources_;
    std::mutex mutex_;
};

// Every process of the job (MPI_COMM_WORLD), as a communicator of its own.
inline std::shared_ptr<Communicator> world(Options opts = {}) {
    return std::make_shared<Communicator>(MPI_COMM_WORLD, opts);
}

}  // namespace dlgraph::mpi
