// What an operator is: its slots, attributes, shape inference and CPU kernels
// per dtype. Builders record ops and run `infer`; the planner
// normalizes attributes into `attrs` order once, so kernels read them by
// index and never touch a string. The list of all ops is ops/op_table.hpp.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlgraph/comm.hpp"
#include "dlgraph/config.hpp"
#include "dlgraph/desc.hpp"
#include "dlgraph/device.hpp"
#include "dlgraph/kernels/config.hpp"
#include "dlgraph/scope.hpp"
#include "dlgraph/tensor.hpp"

namespace dlgraph {

struct SlotDef {
    std::string_view name;
    bool duplicable = false;  // may hold several variables (sum's X)
    bool optional = false;    // may be absent or empty
    // The kind of variable the slot takes: tensors, except feed's and
    // fetch's lists. Validation refuses any other kind.
    VarType kind = VarType::LOD_TENSOR;
};

struct AttrDef {
    std::string_view name;
    Attribute value;        // type and default
    bool required = false;  // no default: the op must set it
};

// Compile-time facts of a value: dtype and (possibly partly unknown) shape.
struct VarMeta {
    DataType dtype = DataType::FP32;
    Shape shape;
};

struct OpDef;

// Slot-indexed views over flat pointer arrays; built once per op by the
// planner (or per call by the builder).
template <class P> struct SlotView {
    P const* ptrs = nullptr;
    const std::uint32_t* off = nullptr;  // slot s is [off[s], off[s+1])
    int count(int slot) const { return off[slot + 1] - off[slot]; }
    P at(int slot, int k) const { return ptrs[off[slot] + k]; }
};

class InferContext {
public:
    InferContext(const OpDef& def, std::string_view label, SlotView<const VarMeta*> in, SlotView<VarMeta*> out,
                 const Attribute* attrs, SlotView<const Variable*> in_vars = {}, SlotView<const Tensor*> in_values = {})
        : def_(def), label_(label), in_(in), out_(out), attrs_(attrs), in_vars_(in_vars), in_values_(in_values) {}

    const VarMeta& in(int slot, int k = 0) const { return *in_.at(slot, k); }
    const Shape& shape(int slot, int k = 0) const { return in(slot, k).shape; }
    DataType dtype(int slot, int k = 0) const { return in(slot, k).dtype; }
    int in_count(int slot) const { return in_.count(slot); }
    int out_count(int slot) const { return out_.count(slot); }
    void set(int slot, int k, DataType dtype, const Shape& shape) const { *out_.at(slot, k) = {dtype, shape}; }
    void set(int slot, DataType dtype, const Shape& shape) const { set(slot, 0, dtype, shape); }
    const Attribute& attr(int k) const { return attrs_[k]; }
    // The output's meta as declared (or as the last inference left it).
    const VarMeta& out_meta(int slot, int k = 0) const { return *out_.at(slot, k); }
    // The input's runtime variable; nullptr when inferring before a run
    // (builder, validation). Lets ops whose shapes come from values (feed)
    // infer them at run time.
    const Variable* in_var(int slot, int k = 0) const { return in_vars_.ptrs ? in_vars_.at(slot, k) : nullptr; }
    // For an op with OpDef::reads_values, in the planner: the input's value
    // (a host tensor) when it is known before the run (fed, a scope value
    // the plan does not write, or a constant the planner folded), else
    // nullptr. `knows_values()` is false where no values are offered at all
    // (builder, validation): the op then leaves those dims unknown (-1).
    const Tensor* in_value(int slot, int k = 0) const { return in_values_.ptrs ? in_values_.at(slot, k) : nullptr; }
    bool knows_values() const { return in_values_.ptrs != nullptr; }

    const OpDef& def() const { return def_; }
    // "mul 'fc1'" or "mul (op #3)": how messages name this op.
    std::string_view label() const { return label_; }

    [[noreturn]] void fail(const std::string& id, const std::string& msg) const;
    [[noreturn]] void fail_type(const std::string& msg) const;
    // Requires the listed input slots (first variable of each) to share a dtype.
    void same_dtype(std::initializer_list<int> slots) const;
    // Requires input `slot` to be one of `allowed`.
    void dtype_in(int slot, std::initializer_list<DataType> allowed) const;
    std::string slot_name(int slot) const;

private:
    const OpDef& def_;
    std::string_view label_;
    SlotView<const VarMeta*> in_;
    SlotView<VarMeta*> out_;
    const Attribute* attrs_;
    SlotView<const Variable*> in_vars_;
    SlotView<const Tensor*> in_values_;
};

// Bad data a kernel met: an integer division by zero, a label out of range.
// Kernels never throw (they may run on worker threads or a device); they
// record the first fault here (one per bound plan) and skip the work it
// spoils, and the session throws it as a dlgraph error after the step, or,
// for work a device runs later, after the next wait (throw_fault). A device
// whose kernels find faults in device memory copies them here by the time
// its synchronize() returns.
using kernels::fault_code;
struct KernelFault {
    std::atomic<int> code{0};
    std::int64_t a = 0, b = 0, c = 0;  // the facts of the first fault (a label, its row, the class count)
    // The plan step that met it, where a device tells (KernelContext::step); else -1.
    std::int32_t step = -1;
    // Records a fault unless one is recorded already; safe from several threads.
    void raise(fault_code f, std::int64_t fa = 0, std::int64_t fb = 0, std::int64_t fc = 0,
               std::int32_t at_step = -1) noexcept {
        int none = 0;
        if (!code.compare_exchange_strong(none, static_cast<int>(f), std::memory_order_acq_rel)) return;
        a = fa;
        b = fb;
        c = fc;
        step = at_step;
    }
    void raise(const kernels::fault& f) noexcept {
        if (f) raise(f.code, f.a, f.b, f.c);
    }
    bool failed() const noexcept { return code.load(std::memory_order_acquire) != 0; }
    void clear() noexcept { code.store(0, std::memory_order_relaxed); }
};

struct KernelContext {
    SlotView<const Tensor*> in_;
    SlotView<Tensor*> out_;
    const Attribute* attrs = nullptr;
    // The runtime variables behind the slots, for ops on non-tensor values
    // (feed and fetch read and write TensorLists).
    SlotView<Variable*> in_vars_;
    SlotView<Variable*> out_vars_;
    // Private data of a step the session made itself (a fused chain).
    const void* fused = nullptr;
    // The op's `prepack_input` packed by its `prepack` hook, when the session
    // keeps it packed (a weight the plan does not write); else null.
    const void* packed = nullptr;
    // The session's device, for a step placed on it (its kernels find their
    // stream and handles there); null on the host.
    DeviceContext* device = nullptr;
    // Where the kernel records bad data (never null in a session's steps).
    KernelFault* fault = nullptr;
    // The step's index in the plan (-1 outside a session): a device whose
    // faults are seen after a wait names the step that met them.
    std::int32_t step = -1;
    // A collective op's communicator (OpDef::comm_ring_attr); else null.
    Communicator* comm = nullptr;

    const Tensor& in(int slot, int k = 0) const { return *in_.at(slot, k); }
    int in_count(int slot) const { return in_.count(slot); }
    Tensor& out(int slot, int k = 0) const { return *out_.at(slot, k); }
    int out_count(int slot) const { return out_.count(slot); }
    const Attribute& attr(int k) const { return attrs[k]; }
    Variable& in_var(int slot, int k = 0) const { return *in_vars_.at(slot, k); }
    Variable& out_var(int slot, int k = 0) const { return *out_vars_.at(slot, k); }
};

using KernelTable = std::array<KernelFn, num_dtypes>;

// An element-wise op's math on one block, for fused chains (fusion.hpp):
// z[i] = f(x[i * sx], y[i * sy]) for i < n, with sx, sy in {0, 1}; unary
// ops ignore y. One per floating dtype (FP32, FP64).
using BlockFn = void (*)(std::int64_t n, const void* x, int sx, const void* y, int sy, void* z);
struct Fusible {
    int arity = 0;  // 0: not fusible; 1: unary (x); 2: binary (x, y)
    BlockFn fp32 = nullptr, fp64 = nullptr;
    // The input slots the block reads as x and y. The op may have other
    // input slots: the block's math must not depend on them (a unary op's
    // grad reads Out@GRAD and one of X, Out). In place, the output may take
    // over the memory of slots[0].
    std::array<int, 2> slots{0, 1};
    // Binary: the INT attribute that places y onto x (Paddle's `axis`);
    // -1: none, y is aligned at x's trailing dims (NumPy).
    int axis_attr = 0;
    BlockFn fn(DataType t) const { return t == DataType::FP32 ? fp32 : t == DataType::FP64 ? fp64 : nullptr; }
};

// ---- gradients --------------------------------------------------------------
//
// Backward is a program rewrite made of ordinary ops (PaddlePaddle's
// conventions): the gradient of variable `x` is `x@GRAD`; a forward op's grad
// maker returns the OpDescs of its gradient ops, which read the forward
// inputs and outputs they need plus `Out@GRAD` and write `X@GRAD`, ....

inline std::string grad_var_name(std::string_view v) { return std::string(v) + "@GRAD"; }

// What a grad maker needs to know: the forward op, and for each forward
// input variable the name its gradient contribution must be written to
// ("" when no gradient is wanted for it).
struct GradRequest {
    const OpDesc& fwd;
    // grad_name(slot, k): where the gradient of input k of `slot` goes, or ""
    // (not wanted, or no such input: an optional slot left out).
    std::function<std::string(std::string_view slot, std::size_t k)> grad_name;
    // out_grad(slot, k): the (final) gradient of forward output k of `slot`.
    std::function<std::string(std::string_view slot, std::size_t k)> out_grad;
};
using GradMaker = std::vector<OpDesc> (*)(const GradRequest&);

// The grad maker of an op X -> Out that is its own adjoint (flip,
// c_allreduce_sum): X@GRAD = the same op, same attributes, on Out@GRAD.
inline std::vector<OpDesc> self_adjoint_grad(const GradRequest& r) {
    const std::string dx = r.grad_name("X", 0);
    if (dx.empty()) return {};
    OpDesc g;
    g.type = r.fwd.type;
    g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
    g.attrs = r.fwd.attrs;
    return {g};
}

// The usual grad op, described as data: `type` reads the forward input slots
// `ins`, the forward output slots `outs` and the gradients of `outs`
// (as "<slot>@GRAD"); it writes "<slot>@GRAD" for each input slot of
// `grads` whose gradient is wanted, and copies the forward attributes.
struct GradSpec {
    std::string_view type;
    std::vector<std::string_view> ins;
    std::vector<std::string_view> outs;
    std::vector<std::string_view> grads;
    // Forward output slots whose gradient alone the grad op reads (as
    // "<slot>@GRAD"), not their value: the value may then die with the
    // forward pass (elementwise_add_grad needs Out@GRAD, not Out).
    std::vector<std::string_view> out_grads{};
};

struct OpDef {
    std::string_view type;
    std::vector<SlotDef> inputs;
    std::vector<SlotDef> outputs;
    std::vector<AttrDef> attrs;
    void (*infer)(const InferContext&) = nullptr;
    // Which input slot's dtype selects the kernel; -1: the INT attribute
    // `dtype_attr`; both -1: the first output's dtype.
    int kernel_slot = 0;
    int dtype_attr = -1;
    // The CPU kernels, one per dtype (null: no kernel for that dtype). Every
    // op runs on the host; a device brings its own kernels
    // (DeviceContext::kernel) for the ops it can run.
    KernelTable kernels{};
    // A registered op's kernels for devices, by DeviceContext::name()
    // ("cuda"): a device runs the op where it has one for the dtype (and the
    // CPU has one too). Built-in ops leave it empty: their device kernels
    // are the backend's own.
    std::vector<std::pair<std::string_view, KernelTable>> device_kernels{};
    // One-line summary for docs and `dlgraph inspect`.
    std::string_view doc{};
    // How to differentiate it: a GradSpec for the usual grad op, or a custom
    // maker (e.g. scale's gradient is a scale). Neither: not differentiable.
    GradSpec grad_spec{};
    GradMaker grad_maker = nullptr;
    // Input slots that never get a gradient (integer labels, shapes).
    std::vector<std::string_view> no_grad_inputs{};
    // Set for element-wise ops the session may fuse into one pass.
    Fusible fusible{};
    // An input the kernel can take pre-packed (mul and matmul: Y for the
    // GEMM), and how: prepack(ctx, nullptr) gives the bytes the packing
    // needs for ctx's shapes (0: not worth it; the planner asks with a
    // context of inputs that have shapes but no data, and no outputs),
    // prepack(ctx, out) writes it.
    // The session packs an input that is a persistable its plan does not
    // write once per change of its value, and passes it as ctx.packed.
    int prepack_input = -1;
    std::size_t (*prepack)(const KernelContext&, void* out) = nullptr;

    // Whether a run can fail at this op once shapes are checked: its kernel
    // meets bad data (a fault: an integer divisor of zero, a label out of
    // range) or a file (io ops, feed and fetch lists). The session keeps a
    // copy of a persistable only when such an op can fail after its first
    // write (see Session's rollback).
    bool may_fail = false;
    // Output shapes follow from input values, not only metas (range's size
    // from Start, End and Step): `infer` reads them with
    // InferContext::in_value. The planner offers those values, and a session
    // shapes its plan again when one of them changes.
    bool reads_values = false;
    // The kernels may write an output over an input it reads (ParamOut =
    // Param, gradient accumulation by sum): element by element, or reading
    // what they need first. Element-wise ops (`fusible`) are so too. For
    // any other op that a program makes write a variable it reads, the
    // planner gives the step a fresh output and copies it over after.
    bool in_place = false;
    // Out follows from the attributes alone (fill_constant): the planner may
    // run its CPU kernel while planning to offer a small result as an input
    // value of a `reads_values` op.
    bool constant = false;
    // Whether a step of this op, with these attributes, runs on the host
    // although the plan's device has the op's kernel: a form its device
    // kernels do not take (the window ops' NHWC). Null: never.
    bool (*host_only_with)(const Attribute* attrs) = nullptr;
    // A collective op (ops/collective.hpp): the index of its INT attribute
    // `ring_id`. The session hands its kernel that ring's communicator
    // (SessionOptions::comms) as KernelContext::comm; -1: not a collective.
    int comm_ring_attr = -1;
    bool differentiable() const { return grad_maker != nullptr || !grad_spec.type.empty(); }

    int input_index(std::string_view n) const { return index_of(inputs, n); }
    int output_index(std::string_view n) const { return index_of(outputs, n); }
    int attr_index(std::string_view n) const {
        for (std::size_t i = 0; i < attrs.size(); ++i)
            if (attrs[i].name == n) return static_cast<int>(i);
        return -1;
    }
    KernelFn kernel(DataType t) const { return kernels[static_cast<std::size_t>(t)]; }
    // The kernel of `device_kernels` for `device` at `t`, or nullptr.
    KernelFn device_kernel(std::string_view device, DataType t) const {
        if (!supports(t)) return nullptr;
        for (auto& [name, table] : device_kernels)
            if (name == device) return table[static_cast<std::size_t>(t)];
        return nullptr;
    }
    bool supports(DataType t) const { return kernel(t) != nullptr; }
    std::string supported_dtypes() const {
        std::string s;
        for (int t = 0; t < num_dtypes; ++t)
            if (kernels[static_cast<std::size_t>(t)]) s += (s.empty() ? "" : ", ") + std::string(dtype_names[t]);
        return s.empty() ? "none" : s;
    }

private:
    static int index_of(const std::vector<SlotDef>& v, std::string_view n) {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i].name == n) return static_cast<int>(i);
        return -1;
    }
};

// The dtype that selects `def`'s kernel, given an inference context.
// An op with neither an input slot nor a dtype attribute to go by (load)
// follows the dtype of its first output.
DLGRAPH_INLINE DataType kernel_dtype(const OpDef& def, const InferContext& ctx, const Attribute* attrs);

// Internal consistency of a definition: its way of choosing a kernel points
// at something it has. A failure is a bug in dlgraph, not in user input.
DLGRAPH_INLINE bool kernel_choice_valid(const OpDef& def);

// Throws unless op `def` has a CPU kernel for dtype `t` (every op runs on
// the host, so that is what makes an op valid at a dtype): checked when an
// op is built or loaded, so the error points at the line that made it.
DLGRAPH_INLINE void check_kernel(const OpDef& def, DataType t, std::string_view label);

// The dlgraph error for the fault a kernel of step `label` recorded.
[[noreturn]] DLGRAPH_INLINE void throw_fault(const KernelFault& f, std::string_view label);

// The grad ops of `def` for a request, through its maker or its GradSpec.
DLGRAPH_INLINE std::vector<OpDesc> make_grad_ops(const OpDef& def, const GradRequest& r);

// Fills a kernel table from `Op::template compute<T>` for each listed T.
template <class Op, class... Ts> KernelTable cpu_kernels() {
    KernelTable t{};
    ((t[static_cast<std::size_t>(dtype_of<Ts>)] = [](const KernelContext& c) { Op::template compute<Ts>(cpu{}, c); }), ...);
    return t;
}

inline std::string InferContext::slot_name(int slot) const { return std::string(def_.inputs[static_cast<std::size_t>(slot)].name); }

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph {

DLGRAPH_INLINE DataType kernel_dtype(const OpDef& def, const InferContext& ctx, const Attribute* attrs) {
    if (def.kernel_slot >= 0) return ctx.dtype(def.kernel_slot);
    if (def.dtype_attr >= 0) return dtype_from_int(attrs[def.dtype_attr].i);
    return ctx.out_meta(0).dtype;
}

DLGRAPH_INLINE bool kernel_choice_valid(const OpDef& def) {
    if (def.kernel_slot >= 0)
        return static_cast<std::size_t>(def.kernel_slot) < def.inputs.size() && !def.inputs[static_cast<std::size_t>(def.kernel_slot)].optional;
    if (def.dtype_attr >= 0)
        return static_cast<std::size_t>(def.dtype_attr) < def.attrs.size() &&
               def.attrs[static_cast<std::size_t>(def.dtype_attr)].value.type == AttrType::INT;
    return !def.outputs.empty();
}

DLGRAPH_INLINE void check_kernel(const OpDef& def, DataType t, std::string_view label) {
    if (def.supports(t)) return;
    throw type_error("dlgraph.type.kernel", std::string(label) + ": no kernel for " + to_string(t) +
                                                " (it has: " + def.supported_dtypes() + ")");
}

DLGRAPH_INLINE void throw_fault(const KernelFault& f, std::string_view label) {
    const std::string op(label);
    switch (static_cast<fault_code>(f.code.load())) {
        case fault_code::div_by_zero:
            throw value_error("dlgraph.value.div0", op + ": integer division by zero");
        case fault_code::label_out_of_range:
            throw value_error("dlgraph.value.label", op + ": label " + std::to_string(f.a) + " (row " +
                                                         std::to_string(f.b) + ") is out of range [0, " +
                                                         std::to_string(f.c) + ")");
        case fault_code::k_out_of_range:
            throw shape_error("dlgraph.shape.top_k", op + ": k is " + std::to_string(f.a) + " but the last dim is " +
                                                         std::to_string(f.b) + ": k must not exceed the last dim");
        case fault_code::id_out_of_range:
            throw value_error("dlgraph.value.id", op + ": id " + std::to_string(f.a) + " (at " + std::to_string(f.b) +
                                                      ") is out of range [0, " + std::to_string(f.c) + ")");
        case fault_code::prob_out_of_range:
            throw value_error("dlgraph.value.prob", op + ": X[" + std::to_string(f.a) + "] is " +
                                                       std::to_string(std::bit_cast<double>(f.c)) +
                                                       ", not a probability: it must be in [0, 1]");
        case fault_code::none:  // no fault recorded: a test's injected failure (Session's test_fail_at_step)
            throw value_error("dlgraph.value.injected", op + ": a failure injected by a test");
    }
    throw value_error("dlgraph.value.fault", op + ": the kernel reported fault " + std::to_string(f.code.load()));
}

DLGRAPH_INLINE std::vector<OpDesc> make_grad_ops(const OpDef& def, const GradRequest& r) {
    if (def.grad_maker) return def.grad_maker(r);
    const GradSpec& g = def.grad_spec;
    OpDesc op;
    op.type = std::string(g.type);
    for (auto slot : g.ins)
        if (auto* s = r.fwd.input(slot)) op.set_input(std::string(slot), s->arguments);
    for (auto slot : g.outs) {
        auto* s = r.fwd.output(slot);
        if (!s) continue;
        op.set_input(std::string(slot), s->arguments);
        std::vector<std::string> grads;
        for (std::size_t k = 0; k < s->arguments.size(); ++k) grads.push_back(r.out_grad(slot, k));
        op.set_input(grad_var_name(slot), grads);
    }
    for (auto slot : g.out_grads) {
        auto* s = r.fwd.output(slot);
        if (!s) continue;
        std::vector<std::string> grads;
        for (std::size_t k = 0; k < s->arguments.size(); ++k) grads.push_back(r.out_grad(slot, k));
        op.set_input(grad_var_name(slot), grads);
    }
    bool any = false;
    for (auto slot : g.grads) {
        auto* s = r.fwd.input(slot);
        if (!s) continue;
        std::vector<std::string> names;
        bool wanted = false;
        for (std::size_t k = 0; k < s->arguments.size(); ++k) {
            names.push_back(r.grad_name(slot, k));
            wanted = wanted || !names.back().empty();
        }
        if (!wanted) continue;
        op.set_output(grad_var_name(slot), names);
        any = true;
    }
    if (!any) return {};
    op.attrs = r.fwd.attrs;
    return {op};
}

DLGRAPH_INLINE void InferContext::fail(const std::string& id, const std::string& msg) const {
    throw shape_error(id, std::string(label_) + ": " + msg);
}

DLGRAPH_INLINE void InferContext::fail_type(const std::string& msg) const {
    throw type_error("dlgraph.type.op", std::string(label_) + ": " + msg);
}

DLGRAPH_INLINE void InferContext::same_dtype(std::initializer_list<int> slots) const {
    const int first = *slots.begin();
    if (!in_count(first)) return;
    for (int s : slots)
        for (int k = 0; k < in_count(s); ++k)
            if (dtype(s, k) != dtype(first))
                fail_type(slot_name(first) + " is " + to_string(dtype(first)) + " but " + slot_name(s) +
                          (in_count(s) > 1 ? "[" + std::to_string(k) + "]" : "") + " is " + to_string(dtype(s, k)));
}

DLGRAPH_INLINE void InferContext::dtype_in(int slot, std::initializer_list<DataType> allowed) const {
    for (auto t : allowed)
        if (dtype(slot) == t) return;
    std::string names;
    for (auto t : allowed) names += (names.empty() ? "" : " or ") + to_string(t);
    fail_type(slot_name(slot) + " must be " + names + ", not " + to_string(dtype(slot)));
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
