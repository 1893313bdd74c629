// Session<Device>: owns one root scope (and, for a device, its context) and
// evaluates targets with feeds. Each (targets, fed names) is planned once
// (make_plan) and cached together with its own child scope (feeds shadow the
// root's variables there; intermediates live there, bound to the plan's
// arena). A run reshapes the plan (shape_plan) only when a feed's or a
// parameter's shape changed; otherwise it binds feeds, calls each step's
// kernel through a prepared context and hands targets out. With a device,
// steps queue work on it, the session waits for it only where a host step
// follows device work and once at the end, and persistables live in device
// memory.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <array>
#include <cstring>
#include <mutex>
#include <new>
#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#include "dlgraph/config.hpp"
#include "dlgraph/fusion.hpp"
#include "dlgraph/kernels/vec.hpp"
#include "dlgraph/planner.hpp"
#include "dlgraph/scope.hpp"
#include "dlgraph/thread_pool.hpp"
#include "dlgraph/xtensor.hpp"

namespace dlgraph {

namespace detail {
// Test hook: when set to a step index, every run fails right after that
// step (its writes done) as a faulting op would, and counts every step as
// one that may fail, so tests can check the rollback at each step.
inline std::size_t test_fail_at_step = SIZE_MAX;

// The kernels of the copies the planner inserts (memcpy_h2d, memcpy_d2h),
// queued on the session's device.
inline void copy_to_device(const KernelContext& c) {
    if (c.in(0).bytes()) c.device->to_device(c.out(0).raw(), c.in(0).raw(), c.in(0).bytes());
}
inline void copy_to_host(const KernelContext& c) {
    if (c.in(0).bytes()) c.device->to_host(c.out(0).raw(), c.in(0).raw(), c.in(0).bytes());
}

// The first n bytes of t, from host or device memory (a device read waits).
inline void read_bytes(const Tensor& t, std::byte* out, std::size_t n) {
    if (!n) return;
    if (t.place() == Place::host) std::memcpy(out, t.raw(), n);
    else t.buffer()->owner()->read(out, t.raw(), n);
}

struct program_state {
    ProgramDesc desc;
    std::uint64_t revision = 0;
};
}  // namespace detail

// A value given for a variable in one call. The name is a view: the handle
// or string it comes from must outlive the call. Tensors and arrays passed as
// lvalues are read in place (no copy) unless the plan writes that variable;
// rvalues are moved or copied into the Feed. Scalars convert to the
// variable's dtype.
class Feed {
public:
    template <class V>
        requires(!std::is_arithmetic_v<std::remove_cvref_t<V>>)
    Feed(std::string_view name, V&& value) : name_(name), value_(as_tensor(std::forward<V>(value))) {}
    // A feed for a handle (Var<T>): its name.
    template <class H, class V>
        requires requires(const H& h) {
            { h.name() } -> std::same_as<const std::string&>;
        }
    Feed(const H& handle, V&& value) : Feed(std::string_view(handle.name()), std::forward<V>(value)) {}
    template <class S>
        requires std::is_arithmetic_v<S>
    Feed(std::string_view name, S v) : name_(name), is_scalar_(true) {
        if constexpr (std::is_floating_point_v<S>) scalar_ = {DataType::FP64, 0, static_cast<double>(v)};
        else scalar_ = {DataType::INT64, static_cast<std::int64_t>(v), static_cast<double>(v)};
    }

    // The name is not copied: a temporary string would dangle.
    template <class S, class V>
        requires std::same_as<S, std::string>
    Feed(S&&, V&&) = delete;

    std::string_view name() const { return name_; }
    const Tensor& value() const { return value_; }
    bool is_scalar() const { return is_scalar_; }
    const Scalar& scalar() const { return scalar_; }

private:
    // A host tensor is read in place; a device tensor (from a device
    // session's scope) is copied to the host, where feeds live.
    static Tensor as_tensor(const Tensor& t) {
        if (t.place() == Place::host) return Tensor::borrow(t.dtype(), t.shape(), t.raw());
        Tensor h;
        h.copy_from(t);
        return h;
    }
    static Tensor as_tensor(Tensor&& t) { return std::move(t); }
    template <class A> static Tensor as_tensor(const A& a) requires requires { tensor_view_of(a); } {
        return tensor_view_of(a);
    }
    template <class A>
        requires(!std::is_lvalue_reference_v<A> && requires(const A& a) { tensor_view_of(a); })
    static Tensor as_tensor(A&& a) {
        Tensor view = tensor_view_of(a);
        Tensor owned;
        owned.copy_from(view);
        return owned;
    }

    std::string_view name_;
    Tensor value_;
    bool is_scalar_ = false;
    Scalar scalar_;
};

// The machine's physical memory in bytes (max_shape_bytes where the
// platform does not say).
inline std::uint64_t physical_memory_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        return std::min<std::uint64_t>(static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page), max_shape_bytes);
#endif
    return max_shape_bytes;
}

struct SessionOptions {
    // Threads each kernel may use (intra-op parallelism, from the process's
    // one pool; see thread_pool.hpp); 0 means every hardware thread.
    // Results do not depend on it.
    int threads = 1;
    // Run chains of element-wise ops as one pass over memory (fusion.hpp).
    // Results are the same bits either way.
    bool fuse = true;
    // Keep the weights of matrix products (a Y that is a persistable the
    // plan only reads) packed for the GEMM, repacked when their value changes
    // (Variable::generation), instead of packing them on every call.
    // Results are the same bits either way.
    bool prepack = true;
    // Let element-wise ops write over an input that dies with them
    // (plan_memory), which shrinks the arena. Same bits either way.
    bool in_place = true;
    // The most bytes one value, or the plan's buffer on one place, may take;
    // a plan that needs more is a resource_error ([dlgraph.resource.size],
    // [dlgraph.resource.arena]) before anything is allocated. Defaults to
    // the machine's physical memory; at most max_shape_bytes.
    std::uint64_t max_bytes = physical_memory_bytes();
    // The communicators of the collective ops (c_allreduce_sum, ...;
    // comm.hpp), indexed by their `ring_id`: {dlgraph::mpi::world()} for
    // the processes of an MPI job. A plan with a collective op whose ring
    // has none is refused ([dlgraph.comm.missing]). A ring whose
    // communicator moves the session's device memory (NCCL's,
    // dlgraph/cuda/nccl.hpp, in a Session<cuda>) runs its collective ops on
    // the device; the others run on the host, with copies around them.
    std::vector<std::shared_ptr<Communicator>> comms = {};
};

template <device_policy Device = cpu>
class Session {
public:
    explicit Session(ProgramDesc desc, SessionOptions opts = {}) : opts_(opts), device_(Device::make_context()) {
        validate(desc);
        auto state = std::make_shared<detail::program_state>();
        state->desc = std::move(desc);
        program_ = std::move(state);
    }
    // Shares a program that a builder may keep extending; the session sees
    // new ops on its next call.
    explicit Session(std::shared_ptr<const detail::program_state> program, SessionOptions opts = {})
        : program_(std::move(program)), opts_(opts), device_(Device::make_context()) {}

    // A session over a builder Program (shared: ops appended later are seen).
    template <class P>
        requires requires(const P& p) { std::shared_ptr<const detail::program_state>(p.state()); }
    explicit Session(const P& program, SessionOptions opts = {})
        : Session(std::shared_ptr<const detail::program_state>(program.state()), opts) {}

    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() { wait_quietly(); }

    // Evaluates one target; returns a copy of its value (an empty tensor for
    // an op target).
    Tensor eval(const TargetRef& target, std::initializer_list<Feed> feeds = {}) {
        Tensor out;
        eval_into(std::span<const TargetRef>(&target, 1), std::span<const Feed>(feeds.begin(), feeds.size()),
                  std::span<Tensor>(&out, 1));
        return out;
    }
    // Evaluates a typed handle (Var<T>) and returns a copy as xt::xarray<T>.
    template <class H>
        requires requires(const H& h) {
            typename H::value_type;
            TargetRef(h);
        }
    xt::xarray<typename H::value_type> eval(const H& target, std::initializer_list<Feed> feeds = {}) {
        return to_xarray<typename H::value_type>(eval(TargetRef(target), feeds));
    }
    std::vector<Tensor> eval(std::initializer_list<TargetRef> targets, std::initializer_list<Feed> feeds = {}) {
        return eval(std::span<const TargetRef>(targets.begin(), targets.size()),
                    std::span<const Feed>(feeds.begin(), feeds.size()));
    }
    // Several targets held in a container (a TrainStep, a vector).
    std::vector<Tensor> eval(std::span<const TargetRef> targets, std::initializer_list<Feed> feeds) {
        return eval(targets, std::span<const Feed>(feeds.begin(), feeds.size()));
    }
    std::vector<Tensor> eval(std::span<const TargetRef> targets, std::span<const Feed> feeds) {
        std::vector<Tensor> out(targets.size());
        eval_into(targets, feeds, out);
        return out;
    }
    // Evaluates targets into `out` (one tensor per target), reusing the
    // storage `out` already has: in steady state this allocates nothing.
    void eval_into(std::span<const TargetRef> targets, std::span<const Feed> feeds, std::span<Tensor> out) {
        eval_into_impl(targets, feeds, out, nullptr);
    }
    // eval_into that also times each step's kernel call: the time of step s
    // (plan(targets, fed).steps[s]) is added to step_time[s], so a caller
    // can sum over runs; a fused chain's time goes to its last step (see
    // fused_steps). step_time is first resized to the plan's step count
    // (new entries zero). Only this call reads the clock; eval_into does not.
    void eval_into_profiled(std::span<const TargetRef> targets, std::span<const Feed> feeds, std::span<Tensor> out,
                            std::vector<std::chrono::nanoseconds>& step_time) {
        eval_into_impl(targets, feeds, out, &step_time);
    }

    // The memory plan of `plan(targets, fed)` for the shapes of its last run:
    // arena slots, and per place their total and the lower bound (see
    // plan_memory).
    MemoryPlan memory_plan(std::span<const TargetRef> targets, std::span<const std::string> fed);

    // The step ranges [first, last] of `plan(targets, fed)` that the last run
    // fused into one pass each (empty before the first run, or with fuse off).
    std::vector<std::pair<int, int>> fused_steps(std::span<const TargetRef> targets, std::span<const std::string> fed);

    // The steps of `plan(targets, fed)` whose weight the last run kept
    // packed (SessionOptions::prepack; empty before the first run).
    std::vector<int> packed_steps(std::span<const TargetRef> targets, std::span<const std::string> fed);

    // The cached plan for these targets and fed names (planned if needed;
    // shaped once it has run). The reference stays valid until the plans
    // are dropped, and its shaped part changes when a run reshapes it: do
    // not read it while another thread evaluates in this session.
    const ExecutionPlan& plan(std::span<const TargetRef> targets, std::span<const std::string> fed);

    // The session's device context; null for Session<cpu>.
    DeviceContext* device() const { return device_.get(); }

    // The session's root scope: persistable variables live here.
    Scope& scope() {
        check_open();
        return *root_;
    }
    const ProgramDesc& program() const { return program_->desc; }
    std::size_t cached_plans() const { return plans_.size(); }

    // Gives every persistable tensor variable of block 0 that has no value
    // yet its value, by running its initializer op (as a first read would);
    // save_checkpoint calls this so that every parameter can be written.
    // Throws value_error for one that no op initializes.
    void initialize_persistables();

    // Releases the scope and all plans; any later call throws.
    void close();
    bool closed() const { return !root_; }

private:
    struct bound_plan {
        ExecutionPlan plan;                    // shaped by the last shape pass
        std::uint64_t revision = 0;
        Scope* local = nullptr;                // child of root: feeds and intermediates
        std::vector<Tensor*> tensors;          // per value (a placeholder for list values)
        std::vector<Variable*> vars;           // per value
        Tensor placeholder;                    // stands for list values in tensor slots
        bool reshape_every_run = false;        // list inputs: their shapes are not in the signature
        std::vector<VarMeta> signature;        // metas of inputs (feeds, scope reads) at that pass
        std::vector<int> inputs;               // values whose metas form the signature
        // Inputs whose values set shapes (PlannedValue::sets_shape): their
        // bytes at that pass join the signature (at most 8 bytes each).
        struct value_key {
            int value = -1;
            std::array<std::byte, 8> bytes{};
            std::size_t size = 0;
        };
        std::vector<value_key> value_signature;
        std::vector<const Tensor*> in_ptrs;    // flat, all steps
        std::vector<Tensor*> out_ptrs;
        std::vector<Variable*> in_var_ptrs;
        std::vector<Variable*> out_var_ptrs;
        std::vector<std::pair<KernelFn, KernelContext>> steps;
        std::vector<std::shared_ptr<Buffer>> arena;  // per slot of the memory plan
        std::vector<std::unique_ptr<detail::fused_chain>> fused;  // element-wise chains run as one step
        std::vector<Variable*> written_persistables;              // touched after each run
        // Rollback: the host persistables the plan writes, each with the
        // step of its first write, its meta before the call and, when the
        // call may fail after that write (or reshapes the plan), a copy of
        // its value (the buffer kept for later calls).
        struct saved_value {
            Tensor* tensor = nullptr;
            int first_write = 0;
            std::unique_ptr<Buffer> copy;
            DataType dtype = DataType::FP32;
            Shape shape;
            bool copied = false, had_value = false;
        };
        std::vector<saved_value> rollback;
        // The persistables the plan writes that live on the device. A
        // device step's fault is known only at the next wait, after later
        // steps may have written them, so when any step may fail each is
        // copied before the call: on the device (copy_on_device, queued
        // ahead of the steps, no wait) or, when it holds a host value, on
        // the host. A failed call rebinds the tensor to its copy, whose
        // buffer then holds the failed value and serves the next call.
        struct saved_device_value {
            Tensor* tensor = nullptr;
            std::shared_ptr<Buffer> copy;
            DataType dtype = DataType::FP32;
            Shape shape;
            bool copied = false, had_value = false;
        };
        std::vector<saved_device_value> device_rollback;
        bool may_fail = false;  // some step may fail (OpDef::may_fail)
        std::vector<Tensor*> unset_reads;  // persistables read without a value: an initializer gives one
        int last_fallible = -1;  // the last step that may fail (with the element-wise steps a chain may add)
        std::vector<int> device_reads;         // persistables read from the scope that live on the device
        std::vector<int> device_writes;        // persistables the plan writes without reading, on the device
        std::vector<std::uint8_t> wait_before; // per step: a host step after device work waits for it
        bool wait_at_end = false;              // device work is queued after the last host step
        struct packed_input {
            std::size_t step;
            const Variable* var;      // the persistable packed (OpDef::prepack_input)
            std::uint64_t generation;  // var's generation when packed
            std::unique_ptr<Buffer> buf;
        };
        std::vector<packed_input> packed;  // set as the steps' ctx.packed
        KernelFault fault;                 // what the steps' kernels report
        // Runs of two or more device steps with no host step or copy between, for a
        // device that records work (DeviceContext::record_begin, CUDA
        // graphs): recorded on a call that finds every tensor of its steps
        // in the memory it had on the call before (the recording holds
        // those addresses), replayed while that holds; a shape pass drops
        // the recording.
        struct work_graph {
            std::size_t begin = 0, end = 0;            // steps [begin, end)
            std::size_t in_begin = 0, in_end = 0;      // their inputs in in_ptrs
            std::size_t out_begin = 0, out_end = 0;    // their outputs in out_ptrs
            std::vector<const void*> memory;           // those tensors' data on the last call
            std::shared_ptr<void> recording;
            bool unrecordable = false;  // a step could not be recorded, or reads host memory
        };
        std::vector<work_graph> graphs;
    };

    void check_open() const {
        if (!root_) throw session_error("dlgraph.session.closed", "the session is closed");
    }

    void eval_into_impl(std::span<const TargetRef> targets, std::span<const Feed> feeds, std::span<Tensor> out,
                        std::vector<std::chrono::nanoseconds>* step_time);

    // The same names both ways (feeds naming one variable twice never match).
    static bool same_fed(const ExecutionPlan& p, std::span<const Feed> feeds) {
        if (p.fed.size() != feeds.size()) return false;
        for (auto& n : p.fed) {
            bool found = false;
            for (auto& f : feeds) found = found || n == f.name();
            if (!found) return false;
        }
        return true;
    }
    static bool same_fed(const ExecutionPlan& p, std::span<const std::string> fed) {
        if (p.fed.size() != fed.size()) return false;
        for (auto& n : p.fed)
            if (std::find(fed.begin(), fed.end(), n) == fed.end()) return false;
        return true;
    }

    bound_plan& plan_for(std::span<const TargetRef> targets, std::span<const Feed> feeds);
    bound_plan& find_or_make(std::span<const TargetRef> targets, std::span<const std::string> fed);
    void drop_plans();

    bound_plan& make(std::span<const TargetRef> targets, std::span<const std::string> fed);

    // Runs the initializers of persistable values the plan reads that have no
    // value yet.
    void initialize(bound_plan& bp);

    static void check_feed(const PlannedValue& pv, const Tensor& t);

    // Puts the feeds into the plan's local variables.
    void bind_feeds(bound_plan& bp, std::span<const Feed> feeds);

    // Reshapes the plan for the current inputs (shape_plan: shapes, kernels,
    // memory, fusion, packing) and, only when that succeeded, binds it:
    // arena buffers, tensors, kernels, fused chains, packed weights.
    void shape_pass(bound_plan& bp);

    // Gives each step the plan keeps a packed weight for a buffer as
    // ctx.packed; run() fills it whenever the weight's generation changed.
    void bind_packing(bound_plan& bp);

    // A host buffer, or one in the device's memory.
    // Memory for the plan; running out is a resource_error, not bad_alloc.
    std::shared_ptr<Buffer> allocate(Place where, std::size_t bytes) {
        try {
            return where == Place::device ? device_->allocate(bytes) : std::make_shared<Buffer>(bytes);
        } catch (const std::bad_alloc&) {
            throw resource_error("dlgraph.resource.alloc",
                                 "could not allocate " + bytes_text(bytes) + " on the " +
                                     (where == Place::device ? std::string(device_->name()) : std::string("host")));
        }
    }
    // Puts `t` (a persistable that lives on the device) into device memory
    // when it holds a value on the host (set or loaded there).
    void upload(Tensor& t);

    // Uploads the device persistables the plan reads that hold a host value
    // (set_scalar, load_checkpoint put values there); false when one the plan
    // only writes is not in device memory, so the plan must bind it again.
    bool device_persistables_in_place(bound_plan& bp);

    // The steps of a run with a device or with timing: waits before host
    // steps after device work and at the end, fault checks after each step
    // and each wait.
    void run_steps(bound_plan& bp, std::chrono::nanoseconds* step_time);
    // Runs a work graph's steps: replays its recording, records it, or runs
    // them one by one.
    void run_graph(bound_plan& bp, typename bound_plan::work_graph& g);
    void save_for_rollback(bound_plan& bp);
    // The communicator of a collective step's ring (SessionOptions::comms).
    Communicator* communicator_of(const PlannedStep& st) const {
        const std::int64_t ring = st.attrs[static_cast<std::size_t>(st.def->comm_ring_attr)].i;
        if (ring < 0 || static_cast<std::size_t>(ring) >= opts_.comms.size() || !opts_.comms[static_cast<std::size_t>(ring)])
            throw comm_error("dlgraph.comm.missing",
                             st.label + " uses ring_id " + std::to_string(ring) +
                                 ", but the session has no communicator for it: give one in SessionOptions::comms "
                                 "(dlgraph::mpi::world() under MPI, or a SelfCommunicator for one process)");
        return opts_.comms[static_cast<std::size_t>(ring)].get();
    }
    // The rings whose communicator moves the device's memory (make_plan's
    // device_rings): their collective steps run on the device.
    std::uint64_t device_rings() const noexcept {
        std::uint64_t bits = 0;
        for (std::size_t r = 0; device_ && r < opts_.comms.size() && r < 64; ++r)
            if (opts_.comms[r] && opts_.comms[r]->memory() == device_->name()) bits |= std::uint64_t(1) << r;
        return bits;
    }
    void roll_back(bound_plan& bp) noexcept;

    // Waits for the device's queued work, ignoring its errors (a run that
    // failed, close, destruction: nothing may still use the buffers).
    void wait_quietly() noexcept {
        if (!device_) return;
        try {
            device_->synchronize();
        } catch (...) {
        }
    }

    bool signature_matches(const bound_plan& bp) const;

    // With `step_time` (one entry per step), each kernel call's time is added
    // to its entry; without, the loop reads no clock.
    void run(bound_plan& bp, std::span<const Feed> feeds, std::span<Tensor> out,
             std::chrono::nanoseconds* step_time = nullptr);

    // Gives the caller the value of target `v`. When the caller's tensor owns
    // a large enough buffer of its own and the target has a dedicated arena
    // slot, the two buffers are swapped instead of copied (swap_out): the
    // caller gets the computed buffer, the plan takes the caller's old one.
    static void hand_out(bound_plan& bp, int v, Tensor& dst);
    static bool swap_out(bound_plan& bp, int v, Tensor& dst);
    // Before the steps of a CPU plan that cannot fail, each target's slot takes
    // the buffer of its `out` tensor where hand_out will swap them (the same
    // swap, made early; hand_out's gives them back): the target is computed
    // in the caller's buffer, the same one every call. Swapped after the
    // run alone, the slot and the caller would trade two buffers call by
    // call, and a large target would be written to memory that left the
    // cache a call ago: a convolution's 6.4 MB output took 1.0-1.3 ms to
    // write that way, 0.35 ms into the same buffer each time (one thread).
    // Returns whether any was swapped (a failing call swaps them back).
    static bool swap_in(bound_plan& bp, std::span<Tensor> out);

    std::shared_ptr<const detail::program_state> program_;
    SessionOptions opts_;
    std::unique_ptr<DeviceContext> device_;  // before the scope: outlives every tensor in it
    std::unique_ptr<Scope> root_ = std::make_unique<Scope>();
    std::vector<std::unique_ptr<bound_plan>> plans_;
    std::uint64_t revision_ = 0;
    std::recursive_mutex mu_;
};

// The larger members, out of class and so not inline: a DLGRAPH_PREBUILT
// program uses the library's Session<cpu> (extern template, below) instead
// of compiling them again (see config.hpp).

template <device_policy Device>
auto Session<Device>::memory_plan(std::span<const TargetRef> targets, std::span<const std::string> fed) -> MemoryPlan {
    std::lock_guard lock(mu_);
    check_open();
    bound_plan& bp = find_or_make(targets, fed);
    if (!bp.plan.shaped)
        throw session_error("dlgraph.session.unshaped", "memory_plan: the plan has not run yet, so its shapes are unknown");
    return bp.plan.memory;
}

template <device_policy Device>
auto Session<Device>::fused_steps(std::span<const TargetRef> targets,
        std::span<const std::string> fed) -> std::vector<std::pair<int, int>> {
    std::lock_guard lock(mu_);
    check_open();
    std::vector<std::pair<int, int>> r;
    for (auto& c : find_or_make(targets, fed).plan.fused) r.emplace_back(c.first, c.last);
    return r;
}

template <device_policy Device>
auto Session<Device>::packed_steps(std::span<const TargetRef> targets, std::span<const std::string> fed)
        -> std::vector<int> {
    std::lock_guard lock(mu_);
    check_open();
    std::vector<int> r;
    for (auto& pk : find_or_make(targets, fed).plan.packed) r.push_back(pk.step);
    return r;
}

template <device_policy Device>
auto Session<Device>::plan(std::span<const TargetRef> targets,
        std::span<const std::string> fed) -> const ExecutionPlan& {
    std::lock_guard lock(mu_);
    check_open();
    return find_or_make(targets, fed).plan;
}

template <device_policy Device>
auto Session<Device>::initialize_persistables() -> void {
    std::lock_guard lock(mu_);
    check_open();
    const BlockDesc& blk = program_->desc.blocks[0];
    std::vector<TargetRef> inits;
    for (auto& vd : blk.vars) {
        if (!vd.persistable || vd.type != VarType::LOD_TENSOR) continue;
        if (const Variable* v = root_->find_local(vd.name); v && v->initialized()) continue;
        const int op = initializer_of(blk, vd.name);
        if (op < 0)
            throw value_error("dlgraph.value.unset", "persistable variable '" + vd.name +
                                                         "' has no value: no op initializes it and it was "
                                                         "neither fed nor loaded");
        TargetRef t = TargetRef::op_only(op);
        if (std::find(inits.begin(), inits.end(), t) == inits.end()) inits.push_back(t);
    }
    if (inits.empty()) return;
    std::vector<Tensor> none;
    run(find_or_make(inits, {}), {}, none);
}

template <device_policy Device>
auto Session<Device>::close() -> void {
    std::lock_guard lock(mu_);
    wait_quietly();
    plans_.clear();
    root_.reset();
}

template <device_policy Device>
auto Session<Device>::eval_into_impl(std::span<const TargetRef> targets, std::span<const Feed> feeds,
        std::span<Tensor> out, std::vector<std::chrono::nanoseconds>* step_time) -> void {
    std::lock_guard lock(mu_);
    check_open();
    if (out.size() != targets.size())
        throw graph_error("dlgraph.graph.target", "eval_into: " + std::to_string(targets.size()) + " targets but " +
                                                      std::to_string(out.size()) + " outputs");
    bound_plan& bp = plan_for(targets, feeds);
    if (step_time) step_time->resize(bp.plan.steps.size());
    run(bp, feeds, out, step_time ? step_time->data() : nullptr);
}

template <device_policy Device>
auto Session<Device>::plan_for(std::span<const TargetRef> targets, std::span<const Feed> feeds) -> bound_plan& {
    if (program_->revision != revision_) drop_plans();
    for (auto& bp : plans_)
        if (std::equal(targets.begin(), targets.end(), bp->plan.targets.begin(), bp->plan.targets.end()) &&
            same_fed(bp->plan, feeds))
            return *bp;
    std::vector<std::string> fed;
    for (auto& f : feeds) fed.emplace_back(f.name());
    return make(targets, fed);
}

template <device_policy Device>
auto Session<Device>::find_or_make(std::span<const TargetRef> targets,
        std::span<const std::string> fed) -> bound_plan& {
    if (program_->revision != revision_) drop_plans();
    for (auto& bp : plans_)
        if (std::equal(targets.begin(), targets.end(), bp->plan.targets.begin(), bp->plan.targets.end()) &&
            same_fed(bp->plan, fed))
            return *bp;
    return make(targets, fed);
}

template <device_policy Device>
auto Session<Device>::drop_plans() -> void {
    for (auto& bp : plans_) root_->drop_child(*bp->local);
    plans_.clear();
    revision_ = program_->revision;
}

template <device_policy Device>
auto Session<Device>::make(std::span<const TargetRef> targets, std::span<const std::string> fed) -> bound_plan& {
    auto bp = std::make_unique<bound_plan>();
    bp->plan = make_plan(program_->desc, targets, fed, device_.get(), device_rings());
    const ExecutionPlan& p = bp->plan;
    bp->local = &root_->new_child();
    for (auto& v : p.values) {
        Variable& var = v.kind == ValueKind::persistable ? root_->var(v.name) : bp->local->var(v.name);
        bp->vars.push_back(&var);
        if (v.type == VarType::LOD_TENSOR) {
            bp->tensors.push_back(&var.get_mutable<Tensor>());
        } else {
            bp->tensors.push_back(&bp->placeholder);
            bp->reshape_every_run = true;
        }
    }
    std::vector<int> first_write(p.values.size(), -1);
    for (int s = static_cast<int>(p.steps.size()) - 1; s >= 0; --s)
        for (int v : p.steps[static_cast<std::size_t>(s)].outs) first_write[static_cast<std::size_t>(v)] = s;
    for (std::size_t v = 0; v < p.values.size(); ++v)
        if (p.values[v].kind == ValueKind::persistable && p.values[v].written) {
            bp->written_persistables.push_back(bp->vars[v]);
            if (p.values[v].type == VarType::LOD_TENSOR && p.values[v].place == Place::host) {
                typename bound_plan::saved_value r;
                r.tensor = bp->tensors[v];
                r.first_write = first_write[v];
                bp->rollback.push_back(std::move(r));
            } else if (p.values[v].type == VarType::LOD_TENSOR) {
                typename bound_plan::saved_device_value r;
                r.tensor = bp->tensors[v];
                bp->device_rollback.push_back(std::move(r));
            }
        }
    bp->unset_reads.reserve(p.scope_reads.size());
    // The last step that may fail: on a device any (faults appear at waits);
    // on the host a may_fail op's, or the end of the element-wise run after
    // it (a fused chain runs at its last step).
    const int nsteps = static_cast<int>(p.steps.size());
    bp->last_fallible = device_ ? nsteps - 1 : -1;
    for (int s = 0; s < nsteps; ++s)
        if (p.steps[static_cast<std::size_t>(s)].def->may_fail) {
            bp->may_fail = true;
            int at = s;
            if (p.steps[static_cast<std::size_t>(s)].def->fusible.arity)
                while (at + 1 < nsteps && p.steps[static_cast<std::size_t>(at + 1)].def->fusible.arity) ++at;
            bp->last_fallible = std::max(bp->last_fallible, at);
        }
    for (int v : p.scope_reads)
        if (p.values[static_cast<std::size_t>(v)].place == Place::device) bp->device_reads.push_back(v);
    for (std::size_t v = 0; v < p.values.size(); ++v)
        if (p.values[v].kind == ValueKind::persistable && p.values[v].place == Place::device && p.values[v].written &&
            std::find(p.scope_reads.begin(), p.scope_reads.end(), static_cast<int>(v)) == p.scope_reads.end())
            bp->device_writes.push_back(static_cast<int>(v));
    bool device_work = false;  // queued since the last wait
    for (auto& st : p.steps) {
        bp->wait_before.push_back(st.place == Place::host && device_work);
        device_work = st.place == Place::device;
    }
    bp->wait_at_end = device_work;
    for (int v : p.feed_values)
        if (v >= 0) bp->inputs.push_back(v);
    for (int v : p.scope_reads) bp->inputs.push_back(v);
    bp->signature.resize(bp->inputs.size());
    for (int v : bp->inputs)
        if (p.values[static_cast<std::size_t>(v)].sets_shape) bp->value_signature.push_back({v});
    // Flat pointer arrays; reserve first so the contexts' pointers stay valid.
    std::size_t nin = 0, nout = 0;
    for (auto& st : p.steps) { nin += st.ins.size(); nout += st.outs.size(); }
    if (device_) {  // the runs of device steps that may be recorded
        std::size_t in_at = 0, out_at = 0;
        for (std::size_t s = 0; s < p.steps.size();) {
            std::size_t e = s, in_end = in_at, out_end = out_at;
            // Not the planner's copies: a feed's comes from the caller's memory.
            // Not collectives: a device communicator watches the wait after
            // its calls, which a replay would not tell it of (cuda/nccl.hpp).
            auto recordable = [&](const PlannedStep& st) {
                return st.place == Place::device && !st.is_copy() && !(st.def && st.def->comm_ring_attr >= 0);
            };
            for (; e < p.steps.size() && recordable(p.steps[e]); ++e) {
                in_end += p.steps[e].ins.size();
                out_end += p.steps[e].outs.size();
            }
            if (e - s >= 2) {
                typename bound_plan::work_graph g;
                g.begin = s;
                g.end = e;
                g.in_begin = in_at;
                g.in_end = in_end;
                g.out_begin = out_at;
                g.out_end = out_end;
                g.memory.assign(in_end - in_at + out_end - out_at, nullptr);
                bp->graphs.push_back(std::move(g));
            }
            if (e == s) {  // a host step, a copy or a collective
                in_end += p.steps[e].ins.size();
                out_end += p.steps[e].outs.size();
                ++e;
            }
            s = e;
            in_at = in_end;
            out_at = out_end;
        }
    }
    bp->in_ptrs.reserve(nin);
    bp->out_ptrs.reserve(nout);
    bp->in_var_ptrs.reserve(nin);
    bp->out_var_ptrs.reserve(nout);
    for (auto& st : p.steps) {
        KernelContext ctx;
        ctx.in_ = {bp->in_ptrs.data() + bp->in_ptrs.size(), st.in_off.data()};
        ctx.out_ = {bp->out_ptrs.data() + bp->out_ptrs.size(), st.out_off.data()};
        ctx.in_vars_ = {bp->in_var_ptrs.data() + bp->in_var_ptrs.size(), st.in_off.data()};
        ctx.out_vars_ = {bp->out_var_ptrs.data() + bp->out_var_ptrs.size(), st.out_off.data()};
        ctx.attrs = st.attrs.data();
        ctx.device = st.place == Place::device ? device_.get() : nullptr;
        ctx.fault = &bp->fault;
        ctx.step = static_cast<std::int32_t>(&st - p.steps.data());
        if (st.def && st.def->comm_ring_attr >= 0) ctx.comm = communicator_of(st);
        for (int v : st.ins) {
            bp->in_ptrs.push_back(bp->tensors[static_cast<std::size_t>(v)]);
            bp->in_var_ptrs.push_back(bp->vars[static_cast<std::size_t>(v)]);
        }
        for (int v : st.outs) {
            bp->out_ptrs.push_back(bp->tensors[static_cast<std::size_t>(v)]);
            bp->out_var_ptrs.push_back(bp->vars[static_cast<std::size_t>(v)]);
        }
        bp->steps.emplace_back(nullptr, ctx);
    }
    plans_.push_back(std::move(bp));
    return *plans_.back();
}

template <device_policy Device>
auto Session<Device>::initialize(bound_plan& bp) -> void {
    const BlockDesc& blk = program_->desc.blocks[0];
    std::vector<TargetRef> inits;
    for (int v : bp.plan.scope_reads) {
        if (bp.vars[static_cast<std::size_t>(v)]->initialized()) continue;
        const std::string& name = bp.plan.values[static_cast<std::size_t>(v)].name;
        if (bp.plan.values[static_cast<std::size_t>(v)].type != VarType::LOD_TENSOR)
            throw value_error("dlgraph.value.unset", "list variable '" + name +
                                                         "' holds no value: set it in the session's scope first");
        int op = initializer_of(blk, name);
        if (op < 0)
            throw value_error("dlgraph.value.unset", "persistable variable '" + name +
                                                         "' has no value: no op initializes it and it was "
                                                         "neither fed nor loaded");
        TargetRef t = TargetRef::op_only(op);
        if (std::find(inits.begin(), inits.end(), t) == inits.end()) inits.push_back(t);
    }
    if (inits.empty()) return;
    bound_plan& ip = find_or_make(inits, {});
    if (&ip == &bp) throw graph_error("dlgraph.graph.cycle", "an initializer depends on itself");
    std::vector<Tensor> none;
    run(ip, {}, none);
}

template <device_policy Device>
auto Session<Device>::check_feed(const PlannedValue& pv, const Tensor& t) -> void {
    if (!t.initialized())
        throw feed_error("dlgraph.feed.empty", "feed '" + pv.name + "' holds no value");
    if (t.dtype() != pv.declared.dtype)
        throw type_error("dlgraph.type.feed", "feed '" + pv.name + "' is " + to_string(t.dtype()) +
                                                  " but the variable is " + to_string(pv.declared.dtype));
    if (!pv.declared.shape.empty() && !dims_compatible(pv.declared.shape, t.shape()))
        throw shape_error("dlgraph.shape.feed", "feed '" + pv.name + "' has shape " + to_string(t.shape()) +
                                                    " but the variable is declared " +
                                                    to_string(pv.declared.shape));
}

template <device_policy Device>
auto Session<Device>::bind_feeds(bound_plan& bp, std::span<const Feed> feeds) -> void {
    const ExecutionPlan& p = bp.plan;
    for (std::size_t i = 0; i < p.fed.size(); ++i) {
        int v = p.feed_values[i];
        if (v < 0) continue;
        const PlannedValue& pv = p.values[static_cast<std::size_t>(v)];
        const Feed* f = nullptr;
        for (auto& x : feeds)
            if (x.name() == p.fed[i]) f = &x;
        if (!f) throw feed_error("dlgraph.feed.missing", "feed '" + p.fed[i] + "' was not given");  // same_fed prevents it
        Tensor& dst = *bp.tensors[static_cast<std::size_t>(v)];
        if (f->is_scalar()) {
            Shape s = pv.declared.shape;
            for (auto& d : s)
                if (d != 1 && d != -1)
                    throw shape_error("dlgraph.shape.feed", "feed '" + pv.name + "' is a scalar but the variable "
                                                            "is declared " + to_string(pv.declared.shape));
            for (auto& d : s) d = 1;
            dst.resize(pv.declared.dtype, s);
            const Scalar& sc = f->scalar();
            visit_dtype(pv.declared.dtype, [&]<class T>(type_tag<T>) {
                if constexpr (std::is_same_v<T, float16>)
                    throw type_error("dlgraph.type.feed", "cannot feed a scalar to FP16 variable '" + pv.name + "'");
                else if constexpr (std::is_floating_point_v<T>) *dst.data<T>() = static_cast<T>(sc.f);
                else *dst.data<T>() = sc.dtype == DataType::INT64 ? static_cast<T>(sc.i) : kernels::convert<T>(sc.f);
            });
            continue;
        }
        check_feed(pv, f->value());
        if (pv.written) {
            dst.copy_from(f->value());
        } else {
            dst = Tensor::borrow(f->value().dtype(), f->value().shape(), f->value().raw());
        }
    }
}

template <device_policy Device>
auto Session<Device>::shape_pass(bound_plan& bp) -> void {
    ExecutionPlan& p = bp.plan;
    for (auto& g : bp.graphs) {  // recorded with the old shapes
        g.recording.reset();
        g.unrecordable = false;
        std::fill(g.memory.begin(), g.memory.end(), nullptr);
    }
    std::vector<VarMeta> metas(p.values.size());
    std::vector<bool> known(p.values.size(), false);
    for (int v : bp.inputs) {
        metas[static_cast<std::size_t>(v)] = {bp.tensors[static_cast<std::size_t>(v)]->dtype(),
                                              bp.tensors[static_cast<std::size_t>(v)]->shape()};
        known[static_cast<std::size_t>(v)] = true;
    }
    for (std::size_t v = 0; v < p.values.size(); ++v)
        if (p.values[v].kind == ValueKind::persistable && bp.tensors[v]->initialized() && !known[v]) {
            metas[v] = {bp.tensors[v]->dtype(), bp.tensors[v]->shape()};
            known[v] = true;
        }
    shape_plan(p, std::move(metas), std::move(known), device_.get(),
               PlanOptions{opts_.fuse, opts_.in_place, opts_.prepack, std::min(opts_.max_bytes, max_shape_bytes)}, &bp.vars);
    // Unshaped until everything below is bound: if an allocation fails, the
    // next call reshapes and binds again rather than run a half-bound plan.
    p.shaped = false;
    // Commit: arena buffers, bindings, kernels.
    const MemoryPlan& mem = p.memory;
    if (bp.arena.size() < mem.slot_bytes.size()) bp.arena.resize(mem.slot_bytes.size());
    for (std::size_t s = 0; s < mem.slot_bytes.size(); ++s)
        if (!bp.arena[s] || bp.arena[s]->bytes() < mem.slot_bytes[s] || bp.arena[s]->place() != mem.slot_place[s])
            bp.arena[s] = allocate(mem.slot_place[s], mem.slot_bytes[s]);
    // Values outside the arena (targets' own slots aside: persistables)
    // keep their buffer, and their value, when it fits; else get a new one.
    // Everything is allocated before any tensor is rebound, so a refused
    // allocation leaves every persistable as it was.
    std::vector<std::shared_ptr<Buffer>> fresh(p.values.size());
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const PlannedValue& pv = p.values[v];
        const Tensor& t = *bp.tensors[v];
        if (!pv.written || pv.type != VarType::LOD_TENSOR || pv.in_arena()) continue;
        const bool fits = t.buffer() && t.place() == pv.place && t.capacity() >= meta_bytes(p.metas[v]) &&
                          t.raw() == t.buffer()->data();
        if (!fits) fresh[v] = allocate(pv.place, meta_bytes(p.metas[v]));
    }
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const PlannedValue& pv = p.values[v];
        const VarMeta& m = p.metas[v];
        Tensor& t = *bp.tensors[v];
        if (!pv.written || pv.type != VarType::LOD_TENSOR) continue;
        if (pv.in_arena()) t.bind(bp.arena[static_cast<std::size_t>(mem.value_slot[v])], m.dtype, m.shape, mem.value_offset[v]);
        else t.bind(fresh[v] ? std::move(fresh[v]) : t.buffer(), m.dtype, m.shape);
    }
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        KernelFn& fn = bp.steps[s].first;
        fn = p.kernels[s];
        if (p.steps[s].is_copy())
            fn = p.values[static_cast<std::size_t>(p.steps[s].outs[0])].place == Place::device ? &detail::copy_to_device
                                                                                                 : &detail::copy_to_host;
    }
    bind_packing(bp);
    bp.fused = detail::bind_chains(p, bp.steps, device_.get());
    for (std::size_t i = 0; i < bp.inputs.size(); ++i)
        bp.signature[i] = p.metas[static_cast<std::size_t>(bp.inputs[i])];
    for (auto& k : bp.value_signature) {
        const Tensor& t = *bp.tensors[static_cast<std::size_t>(k.value)];
        k.size = t.bytes() <= k.bytes.size() ? t.bytes() : 0;
        if (k.size) detail::read_bytes(t, k.bytes.data(), k.size);
    }
    p.shaped = true;
}

template <device_policy Device>
auto Session<Device>::bind_packing(bound_plan& bp) -> void {
    const ExecutionPlan& p = bp.plan;
    bp.packed.clear();
    for (auto& [fn, ctx] : bp.steps) ctx.packed = nullptr;
    for (const PackedWeight& pw : p.packed) {
        const auto s = static_cast<std::size_t>(pw.step);
        const PlannedStep& st = p.steps[s];
        const auto v = static_cast<std::size_t>(st.ins[st.in_off[static_cast<std::size_t>(st.def->prepack_input)]]);
        bp.packed.push_back({s, bp.vars[v], 0, std::make_unique<Buffer>(pw.bytes)});
        bp.packed.back().generation = bp.vars[v]->generation() - 1;  // not packed yet
        bp.steps[s].second.packed = bp.packed.back().buf->data();
    }
}

template <device_policy Device>
auto Session<Device>::upload(Tensor& t) -> void {
    auto buf = device_->allocate(t.bytes());
    if (t.bytes()) device_->to_device(buf->data(), t.raw(), t.bytes());
    device_->synchronize();  // the host copy goes with the rebinding
    t.bind(std::move(buf), t.dtype(), t.shape());
}

template <device_policy Device>
auto Session<Device>::signature_matches(const bound_plan& bp) const -> bool {
    if (!bp.plan.shaped || bp.reshape_every_run) return false;
    for (std::size_t i = 0; i < bp.inputs.size(); ++i) {
        const Tensor& t = *bp.tensors[static_cast<std::size_t>(bp.inputs[i])];
        if (t.dtype() != bp.signature[i].dtype || !(t.shape() == bp.signature[i].shape)) return false;
    }
    for (auto& k : bp.value_signature) {  // a value over 8 bytes (size 0) never matches
        const Tensor& t = *bp.tensors[static_cast<std::size_t>(k.value)];
        if (t.bytes() != k.size) return false;
        std::array<std::byte, 8> now;
        detail::read_bytes(t, now.data(), k.size);
        if (std::memcmp(now.data(), k.bytes.data(), k.size) != 0) return false;
    }
    return true;
}

template <device_policy Device>
auto Session<Device>::run(bound_plan& bp, std::span<const Feed> feeds, std::span<Tensor> out,
        std::chrono::nanoseconds* step_time) -> void {
    bind_feeds(bp, feeds);  // checks feeds before anything else changes
    const parallelism_scope threads(opts_.threads);
    // Persistables the plan writes count as changed (Variable::generation)
    // after every call, failed or not (packed copies are then redone).
    struct touch_on_exit {
        const std::vector<Variable*>& vars;
        ~touch_on_exit() {
            for (Variable* v : vars) v->touch();
        }
    } touch{bp.written_persistables};
    save_for_rollback(bp);  // before anything changes a persistable
    const std::size_t n = bp.steps.size();
    bool swapped_in = false;
    try {
        initialize(bp);
        if (device_ && !device_persistables_in_place(bp)) bp.plan.shaped = false;  // rebind them
        if (!signature_matches(bp)) shape_pass(bp);
        for (auto& pk : bp.packed)
            if (pk.var->generation() != pk.generation) {
                bp.plan.steps[pk.step].def->prepack(bp.steps[pk.step].second, pk.buf->data());
                pk.generation = pk.var->generation();
            }
        bp.fault.clear();
        swapped_in = !device_ && !bp.may_fail && swap_in(bp, out);
        if (!device_ && !step_time) {  // the CPU's loop: one kernel call and one fault test per step
            for (std::size_t s = 0; s < n; ++s) {
                bp.steps[s].first(bp.steps[s].second);
                if (bp.fault.failed() || s == detail::test_fail_at_step) throw_fault(bp.fault, bp.plan.steps[s].label);
            }
        } else {  // with a device (waits before host steps), or timing each step
            run_steps(bp, step_time);
        }
    } catch (...) {
        wait_quietly();  // no queued work may outlive the buffers it uses
        if (swapped_in) swap_in(bp, out);  // the caller's buffers back
        roll_back(bp);
        // Persistables may have been reset or rebound: every plan binds
        // its tensors again on its next call.
        for (auto& other : plans_) other->plan.shaped = false;
        throw;
    }
    // A plan that cannot fail needed copies only for this call (it
    // reshaped): give their device memory back.
    if (!bp.may_fail)
        for (auto& r : bp.device_rollback) r.copy.reset();
    const ExecutionPlan& p = bp.plan;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int v = p.target_values[i];
        std::size_t first = 0;  // a target named twice: the second gets a copy of the first
        while (first < i && p.target_values[first] != v) ++first;
        if (v < 0) out[i].reset();
        else if (first < i) out[i].copy_from(out[first]);
        else hand_out(bp, v, out[i]);
    }
}

// Copies the persistables that a failing step could leave half-updated:
// those first written at or before the last step that may fail. Their
// buffers are allocated once; a steady state allocates nothing.
// A call that reshapes the plan may rebind any of them (a shape that
// follows a feed), so then all are copied.
template <device_policy Device>
auto Session<Device>::save_for_rollback(bound_plan& bp) -> void {
    const bool all = detail::test_fail_at_step != SIZE_MAX || !signature_matches(bp);
    bp.unset_reads.clear();
    for (int v : bp.plan.scope_reads)
        if (Tensor* t = bp.tensors[static_cast<std::size_t>(v)]; t != &bp.placeholder && !t->initialized())
            bp.unset_reads.push_back(t);
    for (auto& r : bp.rollback) {
        const Tensor& t = *r.tensor;
        r.had_value = t.initialized() && t.place() == Place::host;
        r.copied = r.had_value && (all || r.first_write <= bp.last_fallible);
        if (!r.copied) continue;
        r.dtype = t.dtype();
        r.shape = t.shape();
        if (!r.copy || r.copy->bytes() < t.bytes()) r.copy = std::make_unique<Buffer>(t.bytes());
        if (t.bytes()) std::memcpy(r.copy->data(), t.raw(), t.bytes());
    }
    for (auto& r : bp.device_rollback) {
        const Tensor& t = *r.tensor;
        r.had_value = t.initialized();
        r.copied = r.had_value && (all || bp.may_fail);
        if (!r.copied) continue;
        r.dtype = t.dtype();
        r.shape = t.shape();
        const Place where = t.place();
        if (!r.copy || r.copy->bytes() < t.bytes() || r.copy->place() != where)
            r.copy = allocate(where, std::max<std::size_t>(t.bytes(), 1));
        if (!t.bytes()) continue;
        if (where == Place::device) device_->copy_on_device(r.copy->data(), t.raw(), t.bytes());
        else std::memcpy(r.copy->data(), t.raw(), t.bytes());
    }
}

// Puts back what save_for_rollback saw: values copied are restored (with
// their dtype and shape), values that had none lose what the call gave
// them, initializers' included.
template <device_policy Device>
auto Session<Device>::roll_back(bound_plan& bp) noexcept -> void {
    for (Tensor* t : bp.unset_reads) t->reset();
    for (auto& r : bp.rollback) {
        Tensor& t = *r.tensor;
        if (!r.had_value) {
            if (t.initialized() && t.place() == Place::host) t.reset();
            continue;
        }
        if (!r.copied) continue;
        if (t.dtype() != r.dtype || !(t.shape() == r.shape) || !t.buffer() || t.place() != Place::host ||
            t.capacity() < r.copy->bytes() || t.raw() != t.buffer()->data()) {
            try {
                t.resize(r.dtype, r.shape);
            } catch (...) {  // no memory to put it back: the value is lost rather than wrong
                t.reset();
                continue;
            }
        }
        if (t.bytes()) std::memcpy(t.raw(), r.copy->data(), t.bytes());
    }
    // The device's work is done (run() waited before calling this).
    for (auto& r : bp.device_rollback) {
        Tensor& t = *r.tensor;
        if (!r.had_value) {
            if (t.initialized()) t.reset();
            continue;
        }
        if (!r.copied) continue;
        // The failed value's own buffer serves as the next call's copy.
        std::shared_ptr<Buffer> failed = t.buffer() && t.raw() == t.buffer()->data() ? t.buffer() : nullptr;
        t.bind(std::move(r.copy), r.dtype, r.shape);  // moves and a fixed-size Shape: cannot throw
        r.copy = std::move(failed);
    }
}

template <device_policy Device>
auto Session<Device>::run_steps(bound_plan& bp, std::chrono::nanoseconds* step_time) -> void {
    using clock = std::chrono::steady_clock;
    // A fault a device records while its work runs is known after a wait.
    auto wait = [&] {
        device_->synchronize();
        if (!bp.fault.failed()) return;
        const std::size_t at = static_cast<std::size_t>(bp.fault.step);
        throw_fault(bp.fault, at < bp.plan.steps.size() ? bp.plan.steps[at].label : "a step on " + bp.plan.device);
    };
    std::size_t g = 0;  // the next work graph
    for (std::size_t s = 0; s < bp.steps.size(); ++s) {
        if (bp.wait_before[s]) wait();
        if (g < bp.graphs.size() && bp.graphs[g].begin == s && !step_time) {
            run_graph(bp, bp.graphs[g]);
            s = bp.graphs[g++].end - 1;
            continue;
        }
        const auto t0 = step_time ? clock::now() : clock::time_point();
        bp.steps[s].first(bp.steps[s].second);
        if (step_time) {  // a device step's time is until its work is done, not until it is queued
            if (bp.plan.steps[s].place == Place::device) wait();
            step_time[s] += std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0);
        }
        if (bp.fault.failed() || s == detail::test_fail_at_step) throw_fault(bp.fault, bp.plan.steps[s].label);
    }
    if (bp.wait_at_end) wait();
}

template <device_policy Device>
auto Session<Device>::run_graph(bound_plan& bp, typename bound_plan::work_graph& g) -> void {
    // Whether each tensor of the steps has the memory it had on the last call.
    bool same = true, on_device = true;
    std::size_t k = 0;
    auto note = [&](const Tensor* t) {
        const void* m = t->raw();
        if (g.memory[k] != m) same = false;
        g.memory[k++] = m;
        on_device = on_device && (!m || t->place() == Place::device);
    };
    for (std::size_t i = g.in_begin; i < g.in_end; ++i) note(bp.in_ptrs[i]);
    for (std::size_t i = g.out_begin; i < g.out_end; ++i) note(bp.out_ptrs[i]);
    if (!same) g.recording.reset();
    auto replay = [&] {
        device_->replay(g.recording.get(), &bp.fault);
        if (detail::test_fail_at_step >= g.begin && detail::test_fail_at_step < g.end)
            throw_fault(bp.fault, bp.plan.steps[detail::test_fail_at_step].label);
    };
    if (g.recording) return replay();
    if (same && on_device && !g.unrecordable && device_->record_begin()) {
        bool recorded = true;
        try {
            for (std::size_t s = g.begin; s < g.end; ++s) bp.steps[s].first(bp.steps[s].second);
        } catch (...) {
            recorded = false;  // nothing recorded has run: the steps run below, and throw again if they must
        }
        g.recording = device_->record_end();
        if (recorded && g.recording) return replay();
        g.recording.reset();
        g.unrecordable = true;
    }
    for (std::size_t s = g.begin; s < g.end; ++s) {
        bp.steps[s].first(bp.steps[s].second);
        if (bp.fault.failed() || s == detail::test_fail_at_step) throw_fault(bp.fault, bp.plan.steps[s].label);
    }
}

template <device_policy Device>
auto Session<Device>::device_persistables_in_place(bound_plan& bp) -> bool {
    for (int v : bp.device_reads)
        if (Tensor& t = *bp.tensors[static_cast<std::size_t>(v)]; t.initialized() && t.place() != Place::device) upload(t);
    for (int v : bp.device_writes)
        if (bp.tensors[static_cast<std::size_t>(v)]->place() != Place::device) return false;
    return true;
}

template <device_policy Device>
auto Session<Device>::hand_out(bound_plan& bp, int v, Tensor& dst) -> void {
    if (!swap_out(bp, v, dst)) dst.copy_from(*bp.tensors[static_cast<std::size_t>(v)]);
}

template <device_policy Device>
auto Session<Device>::swap_out(bound_plan& bp, int v, Tensor& dst) -> bool {
    const PlannedValue& pv = bp.plan.values[static_cast<std::size_t>(v)];
    Tensor& src = *bp.tensors[static_cast<std::size_t>(v)];
    const bool swappable = pv.in_arena() && src.buffer() && src.place() == Place::host && dst.place() == Place::host &&
                           dst.buffer() && dst.buffer().use_count() == 1 &&
                           dst.capacity() >= src.bytes() &&
                           dst.capacity() <= 2 * std::max<std::size_t>(src.bytes(), buffer_alignment);
    if (!swappable) return false;
    auto& slot = bp.arena[static_cast<std::size_t>(bp.plan.memory.value_slot[static_cast<std::size_t>(v)])];
    std::shared_ptr<Buffer> mine = dst.buffer();
    dst.bind(src.buffer(), src.dtype(), src.shape());
    slot = std::move(mine);
    src.bind(slot, src.dtype(), src.shape());
    return true;
}

template <device_policy Device>
auto Session<Device>::swap_in(bound_plan& bp, std::span<Tensor> out) -> bool {
    const ExecutionPlan& p = bp.plan;
    // The caller's buffer may be what a step reads: a feed borrows its
    // tensor's memory (h fed back as h = f(h)), and `out` may be the
    // scope's own tensor of a persistable. Those stay out, as does a
    // slot whose buffer hand_out could not swap back.
    auto overlaps_a_value = [&](const Tensor& t, const Tensor* target) {
        const auto* lo = static_cast<const std::byte*>(t.buffer()->data());
        const auto* hi = lo + t.capacity();
        for (const Tensor* u : bp.tensors) {
            if (u == target || !u->raw()) continue;
            const auto* a = static_cast<const std::byte*>(u->raw());
            if (a < hi && lo < a + u->bytes()) return true;
        }
        return false;
    };
    bool any = false;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int v = p.target_values[i];
        std::size_t first = 0;  // as run() hands them out: a target named twice, once
        while (first < i && p.target_values[first] != v) ++first;
        if (v < 0 || first != i || !out[i].buffer()) continue;
        const Tensor* target = bp.tensors[static_cast<std::size_t>(v)];
        const std::size_t back = std::max<std::size_t>(target->bytes(), buffer_alignment);
        if (target->capacity() > 2 * back || overlaps_a_value(out[i], target)) continue;
        any = swap_out(bp, v, out[i]) || any;
    }
    return any;
}

#if DLGRAPH_EXTERN_TEMPLATES
// Compiled once in dlgraph::prebuilt (src/runtime.cpp; see config.hpp).
extern template class Session<cpu>;
#endif

}  // namespace dlgraph
