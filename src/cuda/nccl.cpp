// dlgraph::nccl::Communicator (include/dlgraph/cuda/nccl.hpp): NCCL loaded
// at run time (dlopen), so that dlgraph::cuda has no link dependency on it;
// nccl.h gives the types and the values of its enums.
#include "dlgraph/cuda/nccl.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

#include "context.hpp"
#include "dlgraph/error.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define DLGRAPH_NCCL_HEADER 1
#else
#define DLGRAPH_NCCL_HEADER 0
#endif

namespace dlgraph::nccl {

#if DLGRAPH_NCCL_HEADER

namespace {

// The NCCL functions dlgraph calls, from the loaded library.
struct library {
    std::string path;
    int version = 0;
    ncclResult_t (*get_version)(int*);
    ncclResult_t (*get_unique_id)(ncclUniqueId*);
    ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*);
    const char* (*get_error_string)(ncclResult_t);
    ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
};

// The process's library: loaded by the first call that succeeds, then kept
// (never unloaded: communicators may be destroyed at exit).
const library& load(const std::string& requested) {
    static std::mutex mu;
    static library* loaded = nullptr;
    const std::lock_guard lock(mu);
    if (loaded) return *loaded;
    std::string path = requested;
    const char* from = "Options::library";
    if (path.empty()) {
        if (const char* env = std::getenv("DLGRAPH_NCCL_LIBRARY"); env && *env) {
            path = env;
            from = "$DLGRAPH_NCCL_LIBRARY";
        } else {
            path = "libnccl.so.2";
            from = "the loader's path";
        }
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* why = dlerror();
        throw comm_error("dlgraph.comm.nccl", "cannot load NCCL from '" + path + "' (" + from + "): " +
                                                  (why ? why : "dlopen failed") +
                                                  "; set DLGRAPH_NCCL_LIBRARY to the path of libnccl.so.2");
    }
    auto lib = std::make_unique<library>();
    lib->path = path;
    auto bind = [&](auto& fn, const char* name) {
        void* f = dlsym(h, name);
        if (!f) {
            dlclose(h);
            throw comm_error("dlgraph.comm.nccl", "the NCCL library '" + path + "' has no function " + name);
        }
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(f);
    };
    bind(lib->get_version, "ncclGetVersion");
    bind(lib->get_unique_id, "ncclGetUniqueId");
    bind(lib->comm_init_rank, "ncclCommInitRank");
    bind(lib->comm_destroy, "ncclCommDestroy");
    bind(lib->comm_abort, "ncclCommAbort");
    bind(lib->comm_get_async_error, "ncclCommGetAsyncError");
    bind(lib->get_error_string, "ncclGetErrorString");
    bind(lib->all_reduce, "ncclAllReduce");
    bind(lib->broadcast, "ncclBroadcast");
    bind(lib->all_gather, "ncclAllGather");
    if (lib->get_version(&lib->version) != ncclSuccess) lib->version = 0;
    // NCCL_VERSION_CODE: major * 1000 + minor * 100 + patch before 2.9, major * 10000 + minor * 100 + patch since.
    if (lib->version < 2000 || lib->version >= 30000) {
        dlclose(h);
        throw comm_error("dlgraph.comm.nccl", "the NCCL library '" + path + "' reports version code " +
                                                  std::to_string(lib->version) + "; dlgraph needs NCCL 2");
    }
    loaded = lib.release();
    return *loaded;
}

ncclDataType_t reduce_type(DataType t, const char* what) {
    switch (t) {
        case DataType::FP32: return ncclFloat32;
        case DataType::FP64: return ncclFloat64;
        case DataType::INT32: return ncclInt32;
        case DataType::INT64: return ncclInt64;
        default: break;
    }
    throw comm_error("dlgraph.comm.dtype", std::string(what) + ": NCCL reduces FP32, FP64, INT32 and INT64, not " +
                                               to_string(t));
}

ncclRedOp_t reduce_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: return ncclSum;
        case ReduceOp::max: return ncclMax;
        case ReduceOp::min: return ncclMin;
        case ReduceOp::prod: return ncclProd;
    }
    return ncclSum;
}

}  // namespace

int library_version(const std::string& path) { return load(path).version; }

namespace detail {
struct state {
    const library* lib = nullptr;
    Options opts;
    ncclComm_t comm = nullptr;
    int rank = 0, size = 1, device = 0;
    std::atomic<bool> broken{false};
    cudaStream_t own_stream = nullptr;  // for the host-facing calls, made on first use
    std::mutex mu;                       // those calls, one at a time
    std::mutex queue_mu;                 // the NCCL calls themselves (sessions on several threads)

    std::string describe() const {
        return "NCCL rank " + std::to_string(rank) + " of " + std::to_string(size) + " (GPU " + std::to_string(device) +
               ")";
    }
    void check_usable(const char* what) const {
        if (broken)
            throw comm_error("dlgraph.comm.broken", std::string(what) + " on " + describe() +
                                                        ": the communicator broke (an earlier error or timeout) "
                                                        "and takes no more calls");
    }
    void check(ncclResult_t r, const char* what, const char* call) {
        if (r == ncclSuccess) return;
        throw comm_error("dlgraph.comm.nccl", std::string(what) + " on " + describe() + ": " + call + ": " +
                                                  lib->get_error_string(r));
    }
    // Aborts the NCCL communicator (its queued kernels end); later calls throw.
    void abort_comm() noexcept {
        const std::lock_guard lock(queue_mu);
        broken = true;
        if (comm) lib->comm_abort(comm);
        comm = nullptr;
    }
    // GPU `device` made current and its context started, or comm_error.
    void use_gpu(const char* what) const {
        int previous = -1;
        if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
        cudaError_t e = cudaSetDevice(device);
        if (e == cudaSuccess) e = cudaFree(nullptr);  // starts the context
        if (previous >= 0 && previous != device) cudaSetDevice(previous);
        if (e != cudaSuccess) {
            cudaGetLastError();
            throw comm_error("dlgraph.comm.nccl", std::string(what) + " on " + describe() + ": GPU " +
                                                      std::to_string(device) + " is not usable: " +
                                                      cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
        }
    }
    void init(int nranks, int myrank, const ncclUniqueId& id, const char* what) {
        rank = myrank;
        size = nranks;
        const cuda_detail::device_scope on(device);
        check(lib->comm_init_rank(&comm, nranks, id, myrank), what, "ncclCommInitRank");
    }
    cudaStream_t stream() {
        if (!own_stream) {
            const cuda_detail::device_scope on(device);
            cuda_detail::check(cudaStreamCreateWithFlags(&own_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        }
        return own_stream;
    }
    void check_device_memory(const void* p, const char* what) const {
        cudaPointerAttributes a{};
        const cudaError_t e = cudaPointerGetAttributes(&a, p);
        if (e != cudaSuccess) cudaGetLastError();
        if (e != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged))
            throw comm_error("dlgraph.comm.memory", std::string(what) + " on " + describe() +
                                                        ": the data is not in GPU memory (an NCCL communicator "
                                                        "moves device memory: give it to a Session<cuda>)");
    }
};
}  // namespace detail

namespace {
// Options::timeout of the communicators `comms` waits on: the least.
std::chrono::milliseconds least_timeout(Communicator* const* comms, std::size_t n) {
    auto t = std::chrono::milliseconds::max();
    for (std::size_t i = 0; i < n; ++i) t = std::min(t, comms[i]->options().timeout);
    return t;
}
}  // namespace

Communicator::Communicator(dlgraph::Communicator& bootstrap, int device, Options opts)
    : s_(std::make_unique<detail::state>()) {
    s_->opts = std::move(opts);
    s_->device = device;
    const char* what = "nccl::Communicator";
    // Every rank loads NCCL and makes its GPU usable, and says whether it
    // could, so that no rank waits in ncclCommInitRank for one that cannot
    // come.
    std::exception_ptr failure;
    try {
        s_->lib = &load(s_->opts.library);
        s_->use_gpu(what);
    } catch (...) {
        failure = std::current_exception();
    }
    std::int32_t ok = failure ? 0 : 1;
    bootstrap.all_reduce(&ok, 1, DataType::INT32, ReduceOp::min, what);
    if (failure) std::rethrow_exception(failure);
    if (!ok)
        throw comm_error("dlgraph.comm.nccl", std::string(what) + " on " + bootstrap.describe() +
                                                  ": another rank could not load NCCL or use its GPU");
    // Rank 0's id (and whether it got one) to every rank.
    std::int32_t msg[1 + NCCL_UNIQUE_ID_BYTES / 4] = {};
    ncclUniqueId id{};
    if (bootstrap.rank() == 0) {
        msg[0] = s_->lib->get_unique_id(&id) == ncclSuccess ? 1 : 0;
        std::memcpy(msg + 1, &id, sizeof id);
    }
    bootstrap.broadcast(msg, 1 + NCCL_UNIQUE_ID_BYTES / 4, DataType::INT32, 0, what);
    if (!msg[0])
        throw comm_error("dlgraph.comm.nccl", std::string(what) + " on " + bootstrap.describe() +
                                                  ": rank 0 could not make NCCL's unique id (ncclGetUniqueId)");
    std::memcpy(&id, msg + 1, sizeof id);
    s_->init(bootstrap.size(), bootstrap.rank(), id, what);
}

Communicator::Communicator(int device, Options opts) : s_(std::make_unique<detail::state>()) {
    s_->opts = std::move(opts);
    s_->device = device;
    s_->lib = &load(s_->opts.library);
    s_->use_gpu("nccl::Communicator");
    ncclUniqueId id{};
    s_->check(s_->lib->get_unique_id(&id), "nccl::Communicator", "ncclGetUniqueId");
    s_->init(1, 0, id, "nccl::Communicator");
}

Communicator::~Communicator() {
    if (!s_) return;
    const cuda_detail::device_scope on(s_->device);
    if (s_->comm) s_->lib->comm_destroy(s_->comm);
    if (s_->own_stream) cudaStreamDestroy(s_->own_stream);
}

int Communicator::rank() const noexcept { return s_->rank; }
int Communicator::size() const noexcept { return s_->size; }
int Communicator::device() const noexcept { return s_->device; }
const Options& Communicator::options() const noexcept { return s_->opts; }
bool Communicator::broken() const noexcept { return s_->broken; }
std::string Communicator::describe() const { return s_->describe(); }

void Communicator::all_reduce_on(const void* send, void* recv, std::int64_t count, DataType t, ReduceOp op,
                                 void* stream, const char* what) {
    const std::lock_guard lock(s_->queue_mu);
    s_->check_usable(what);
    const ncclDataType_t nt = reduce_type(t, what);
    if (count <= 0) return;
    s_->check(s_->lib->all_reduce(send, recv, static_cast<size_t>(count), nt, reduce_op(op), s_->comm,
                                  static_cast<cudaStream_t>(stream)),
              what, "ncclAllReduce");
}

// Broadcast and all-gather move bytes: any dtype.
void Communicator::broadcast_on(const void* send, void* recv, std::int64_t count, DataType t, int root, void* stream,
                                const char* what) {
    const std::lock_guard lock(s_->queue_mu);
    s_->check_usable(what);
    if (root < 0 || root >= s_->size)
        throw comm_error("dlgraph.comm.root", std::string(what) + ": root " + std::to_string(root) + " is not a rank of " +
                                                  describe());
    if (count <= 0) return;
    s_->check(s_->lib->broadcast(send, recv, static_cast<size_t>(count) * dtype_size(t), ncclUint8, root, s_->comm,
                                 static_cast<cudaStream_t>(stream)),
              what, "ncclBroadcast");
}

void Communicator::all_gather_on(const void* send, void* recv, std::int64_t count, DataType t, void* stream,
                                 const char* what) {
    const std::lock_guard lock(s_->queue_mu);
    s_->check_usable(what);
    if (count <= 0) return;
    s_->check(s_->lib->all_gather(send, recv, static_cast<size_t>(count) * dtype_size(t), ncclUint8, s_->comm,
                                  static_cast<cudaStream_t>(stream)),
              what, "ncclAllGather");
}

void wait_all(void* stream, Communicator* const* comms, std::size_t n, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    const auto timeout = least_timeout(comms, n);
    auto fail = [&](const char* code, const std::string& why) {
        for (std::size_t i = 0; i < n; ++i) comms[i]->s_->abort_comm();
        throw comm_error(code, std::string(what) + ": " + why);
    };
    for (;;) {
        const cudaError_t q = cudaStreamQuery(static_cast<cudaStream_t>(stream));
        if (q != cudaErrorNotReady) return;  // done, or a CUDA error the caller's wait reports
        cudaGetLastError();                  // "not ready" is no error of the next call's
        for (std::size_t i = 0; i < n; ++i) {
            detail::state& s = *comms[i]->s_;
            bool was_broken = false;
            ncclResult_t async = ncclSuccess;
            {
                const std::lock_guard lock(s.queue_mu);
                was_broken = s.broken;
                if (!was_broken && s.lib->comm_get_async_error(s.comm, &async) != ncclSuccess) async = ncclSystemError;
            }
            // Aborted by another waiter (a session or a call on another
            // thread): what this stream queued on it was cut off.
            if (was_broken)
                fail("dlgraph.comm.broken", s.describe() + ": the communicator broke while its collectives were "
                                                           "queued (an error or timeout seen by another wait)");
            if (async != ncclSuccess && async != ncclInProgress)
                fail("dlgraph.comm.nccl", s.describe() + ": " + s.lib->get_error_string(async) +
                                              "; the communicator is aborted");
        }
        const auto waited = std::chrono::steady_clock::now() - start;
        if (std::chrono::duration_cast<std::chrono::milliseconds>(waited) > timeout)
            fail("dlgraph.comm.timeout",
                 comms[0]->describe() + ": the queued collectives did not complete within " +
                     std::to_string(timeout.count()) + " ms (a peer that never joined them?); the communicator is aborted");
        if (waited < std::chrono::milliseconds(2)) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

void Communicator::wait(void* stream, const char* what) {
    Communicator* self = this;
    wait_all(stream, &self, 1, what);
}

// The host-facing calls: device memory only, on the communicator's stream, waited for.
void Communicator::all_reduce(void* data, std::int64_t count, DataType t, ReduceOp op, const char* what) {
    const std::lock_guard lock(s_->mu);
    s_->check_usable(what);
    if (count <= 0) return;
    s_->check_device_memory(data, what);
    const cuda_detail::device_scope on(s_->device);
    all_reduce_on(data, data, count, t, op, s_->stream(), what);
    wait(s_->stream(), what);
}

void Communicator::broadcast(void* data, std::int64_t count, DataType t, int root, const char* what) {
    const std::lock_guard lock(s_->mu);
    s_->check_usable(what);
    if (count > 0) s_->check_device_memory(data, what);
    const cuda_detail::device_scope on(s_->device);
    broadcast_on(data, data, count, t, root, s_->stream(), what);
    if (count > 0) wait(s_->stream(), what);
}

void Communicator::all_gather(const void* send, std::int64_t count, DataType t, void* recv, const char* what) {
    const std::lock_guard lock(s_->mu);
    s_->check_usable(what);
    if (count <= 0) return;
    s_->check_device_memory(send, what);
    s_->check_device_memory(recv, what);
    const cuda_detail::device_scope on(s_->device);
    all_gather_on(send, recv, count, t, s_->stream(), what);
    wait(s_->stream(), what);
}

void Communicator::abort(int code) noexcept {
    s_->abort_comm();
    std::_Exit(code);
}

#else  // built without nccl.h: every communicator is a clear error

namespace detail {
struct state {};
}  // namespace detail
namespace {
[[noreturn]] void no_header() {
    throw comm_error("dlgraph.comm.nccl", "this dlgraph::cuda was built without NCCL's header (nccl.h): "
                                          "install NCCL's development files and rebuild");
}
}  // namespace
int library_version(const std::string&) { no_header(); }
Communicator::Communicator(dlgraph::Communicator&, int, Options) { no_header(); }
Communicator::Communicator(int, Options) { no_header(); }
Communicator::~Communicator() = default;
int Communicator::rank() const noexcept { return 0; }
int Communicator::size() const noexcept { return 1; }
int Communicator::device() const noexcept { return 0; }
const Options& Communicator::options() const noexcept {
    static const Options o;
    return o;
}
bool Communicator::broken() const noexcept { return true; }
std::string Communicator::describe() const { return "NCCL (not built)"; }
void Communicator::all_reduce_on(const void*, void*, std::int64_t, DataType, ReduceOp, void*, const char*) { no_header(); }
void Communicator::broadcast_on(const void*, void*, std::int64_t, DataType, int, void*, const char*) { no_header(); }
void Communicator::all_gather_on(const void*, void*, std::int64_t, DataType, void*, const char*) { no_header(); }
void wait_all(void*, Communicator* const*, std::size_t, const char*) {}
void Communicator::wait(void*, const char*) {}
void Communicator::all_reduce(void*, std::int64_t, DataType, ReduceOp, const char*) { no_header(); }
void Communicator::broadcast(void*, std::int64_t, DataType, int, const char*) { no_header(); }
void Communicator::all_gather(const void*, std::int64_t, DataType, void*, const char*) { no_header(); }
void Communicator::abort(int code) noexcept { std::_Exit(code); }

#endif

}  // namespace dlgraph::nccl
