// The Planner turns (program, targets, fed names, device) into an
// ExecutionPlan, and the plan plus concrete input shapes into everything a
// session needs to run it. It is a sequence of passes, each a function:
//
//   make_plan:   check the request -> prune (the ops the targets need)
//                -> steps and values in program order -> place each step
//                (host, or the device when it has a kernel) -> insert copies
//                where a value crosses places -> lifetimes
//   shape_plan:  infer shapes and choose kernels -> memory plan per place
//                -> fused element-wise chains -> weights kept packed
//
// `plan_program` is the two together: one pure function from the program,
// the targets, the fed names, the input shapes and the device to the whole
// executable plan. The Session caches make_plan's result per (targets, fed
// names) and reruns shape_plan when an input's shape changes; it then binds
// tensors to the plan and runs it without touching names.
//
// Dataflow follows program order: a read of `v` by op i sees the last op
// before i that writes `v`. A fed name cuts the graph there. A persistable
// variable's first writer is its initializer: it runs once, when the
// session's scope has no value yet, never as part of an ordinary plan.
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <unordered_map>

#include "dlgraph/config.hpp"
#include "dlgraph/validate.hpp"

namespace dlgraph {

// What to evaluate: a variable (written by op `op`, or by name when op is
// -1), or an op alone (empty `var`).
struct TargetRef {
    std::string var;
    int op = -1;
    TargetRef() = default;
    TargetRef(std::string v, int o = -1) : var(std::move(v)), op(o) {}
    TargetRef(const char* v) : var(v) {}
    static TargetRef op_only(int index) { return {std::string(), index}; }
    friend bool operator==(const TargetRef&, const TargetRef&) = default;
};

enum class ValueKind { feed, persistable, intermediate };
inline constexpr std::string_view value_kind_names[] = {"feed", "persistable", "intermediate"};

struct PlannedValue {
    std::string name;
    ValueKind kind = ValueKind::intermediate;
    VarType type = VarType::LOD_TENSOR;  // lists (feed/fetch) live in the scope
    VarMeta declared;             // dtype and dims from the VarDesc
    Place place = Place::host;    // where it lives
    int copy_of = -1;             // a copy the plan made: the value it copies
    int first_step = INT_MAX;     // first step that writes it
    int last_step = -1;           // last step that reads or writes it (INT_MAX for targets)
    bool written = false;         // some step of the plan writes it
    bool target = false;
    // A step's shapes follow from this value (an input of an
    // OpDef::reads_values step, or what such an input copies): the planner
    // offers it to that step, and a session shapes again when it changes.
    bool sets_shape = false;
    // Lives in the plan's arena: an intermediate tensor a step writes.
    bool in_arena() const { return kind == ValueKind::intermediate && written; }
};

struct PlannedStep {
    int op_index = -1;                        // -1: a copy the planner inserted
    const OpDef* def = nullptr;
    Place place = Place::host;                // copies are queued on the device
    std::vector<int> ins, outs;               // value indices, in slot order
    std::vector<std::uint32_t> in_off, out_off;
    std::vector<Attribute> attrs;             // normalized, def order
    std::string label;                        // "mul (op #3)", "memcpy_h2d (x)"
    bool is_copy() const { return op_index < 0; }
};

// Where each intermediate lives for concrete shapes (shape_plan).
//
// Slot 0 is one buffer on the host shared by every intermediate there that
// is not a target; a plan with a device has slot 1, the same on the device;
// each target has a host buffer of its own (the slots after), so it can be
// handed to the caller. Offsets in a shared slot are assigned greedy by size
// as in TFLite's arena planner: largest value first, each at the lowest
// offset that no value live at the same time covers (sizes rounded up to 64
// bytes from 1 KiB on, else to 16, so large values sit on cache lines). A
// value is live from the step that writes it to the last step that reads
// it, both included, so an op's output shares memory with none of its
// inputs, with one exception (`in_place`): an element-wise op
// (OpDef::fusible, z[i] from x[i] and y[i] or y[0]) writes over its X when X
// is an intermediate in the same place, of the output's dtype and size, that
// nothing reads after it; the two then hold one place in the arena (and
// count once in lower_bound).
struct MemoryFigures {
    std::size_t arena_bytes = 0;      // what the plan allocates for intermediates here
    std::size_t unshared_bytes = 0;   // what one buffer per intermediate would take
    std::size_t lower_bound = 0;      // the most bytes live at once (largest simultaneous set)
};
struct MemoryPlan {
    std::vector<std::size_t> slot_bytes;
    std::vector<Place> slot_place;
    std::vector<int> value_slot;            // per value: its buffer, -1 outside the arena
    std::vector<std::size_t> value_offset;  // per value: its byte offset in that buffer
    std::array<MemoryFigures, num_places> figures{};
    const MemoryFigures& host() const { return figures[static_cast<int>(Place::host)]; }
    const MemoryFigures& device() const { return figures[static_cast<int>(Place::device)]; }
};

// An operand of a fused chain's op: the running value (the previous op's
// result, kept in a cache-sized block), a tensor of the output's size, a
// single element, or a row repeated every `row` elements (a bias).
enum class FusedOperand : std::uint8_t { running, full, scalar, row };
struct FusedChainPlan {
    int first = 0, last = 0;       // the steps it covers
    std::int64_t row = 0;          // period of row operands (0: none)
    std::vector<std::array<FusedOperand, 2>> operands;  // per step: X, Y
};

// A step whose weight input (OpDef::prepack_input) the session keeps packed.
struct PackedWeight {
    int step = 0;
    std::size_t bytes = 0;
};

struct PlanOptions {
    bool fuse = true;      // element-wise chains as one pass (host steps; device steps where it can)
    bool in_place = true;  // element-wise ops may write over a dying X
    bool prepack = true;   // weights the plan only reads are kept packed
    // The most bytes one value, or the arena on one place, may take
    // (at most max_shape_bytes); larger is a resource_error before anything
    // is allocated.
    std::uint64_t max_bytes = max_shape_bytes;
};

struct ExecutionPlan {
    std::vector<TargetRef> targets;
    std::vector<std::string> fed;
    std::string device;               // the device's name; "cpu" when everything runs on the host
    bool has_device = false;
    std::vector<PlannedValue> values;
    std::vector<PlannedStep> steps;
    std::vector<int> target_values;   // per target: value index (a host value), or -1 for op targets
    std::vector<int> feed_values;     // per fed name: value index, or -1 if unused
    std::vector<int> scope_reads;     // persistable values read from the scope

    // Set by shape_plan, for the input shapes it was given.
    bool shaped = false;
    std::vector<VarMeta> metas;              // per value
    std::vector<DataType> kernel_dtypes;     // per step
    std::vector<KernelFn> kernels;           // per step (copies: null, the session's)
    MemoryPlan memory;
    std::vector<FusedChainPlan> fused;
    std::vector<PackedWeight> packed;

    int value_index(std::string_view name) const {
        for (std::size_t i = 0; i < values.size(); ++i)
            if (values[i].name == name) return static_cast<int>(i);
        return -1;
    }
};

namespace detail {

DLGRAPH_INLINE bool writes(const OpDesc& op, std::string_view v);

}  // namespace detail

// Index of the op that initializes persistable `name` (its first writer), or -1.
DLGRAPH_INLINE int initializer_of(const BlockDesc& b, std::string_view name);

inline std::string op_label(const OpDesc& op, int index) { return op.type + " (op #" + std::to_string(index) + ")"; }

// Plans block 0 of `program` (which must have been validated): the steps the
// targets need, each placed on `device` when it has a kernel for it (else
// on the host), with copies where values cross places. No device: every
// step on the host. A collective step (OpDef::comm_ring_attr) goes on the
// device only when bit `ring_id` of `device_rings` is set: that ring's
// communicator moves the device's memory (Communicator::memory; the
// session sets the bits from SessionOptions::comms; rings from 64 on are
// host rings).
DLGRAPH_INLINE ExecutionPlan make_plan(const ProgramDesc& program, std::span<const TargetRef> targets,
                                       std::span<const std::string> fed, const DeviceContext* device = nullptr,
                                       std::uint64_t device_rings = 0);

// Concrete dtypes and shapes of a plan's values. On entry `metas[v]` is
// set for every value with `known[v]` (feeds and values read from the
// scope); on return every value the plan writes is set too, and
// `kernel_dtypes[s]` names the kernel each step will use. Throws, as a run
// would, on a shape or dtype the ops reject. `vars` (per value, optional)
// lets ops whose shapes come from values (feed) see them. A value whose
// bytes would exceed `max_bytes` is a resource_error.
DLGRAPH_INLINE void infer_plan(const ExecutionPlan& p, std::vector<VarMeta>& metas, std::vector<bool>& known,
                               std::vector<DataType>& kernel_dtypes, const std::vector<Variable*>* vars = nullptr,
                               std::uint64_t max_bytes = max_shape_bytes);

DLGRAPH_INLINE std::size_t meta_bytes(const VarMeta& m);

// The memory plan for concrete metas (see MemoryPlan).
DLGRAPH_INLINE MemoryPlan plan_memory(const ExecutionPlan& p, const std::vector<VarMeta>& metas,
                                      bool in_place = true);

// The chains of consecutive element-wise steps that can run as one pass:
// each step reads the previous one's result and nothing else does, and all
// run in one place: host steps, or device steps where `device` can fuse
// them (DeviceContext::fused_code; at most max_device_chain per chain).
DLGRAPH_INLINE std::vector<FusedChainPlan> plan_fusion(const ExecutionPlan& p, const std::vector<VarMeta>& metas,
                                                       const DeviceContext* device = nullptr);

// Completes a plan for concrete input shapes: `metas`/`known` as for
// infer_plan. Fills the plan's shaped part (metas, kernels, memory, fusion,
// packing); throws, leaving the plan as it was, when the shapes are
// rejected.
DLGRAPH_INLINE void shape_plan(ExecutionPlan& p, std::vector<VarMeta> metas, std::vector<bool> known,
                               const DeviceContext* device, const PlanOptions& opts,
                               const std::vector<Variable*>* vars = nullptr);

// make_plan then shape_plan: the whole executable plan from the program, the
// targets, the fed names with their metas, and the persistables' metas.
DLGRAPH_INLINE ExecutionPlan plan_program(const ProgramDesc& program, std::span<const TargetRef> targets,
                                          std::span<const std::string> fed, std::span<const VarMeta> fed_metas,
                                          std::span<const VarMeta> persistable_metas, const DeviceContext* device,
                                          const PlanOptions& opts = {});

namespace detail {
// A value to place in a shared buffer: its bytes, the steps it is live
// over [first, last], and (on return) its offset.
struct arena_item {
    int v;
    std::size_t bytes, offset;
    int first, last;
};
// Offsets for `items` so that values live at one step do not overlap; the
// buffer's size. Greedy by size up to greedy_items_max values, else
// place_items_linear.
DLGRAPH_INLINE std::size_t place_items(std::vector<arena_item>& items);
DLGRAPH_INLINE std::size_t place_items_linear(std::vector<arena_item>& items);
}  // namespace detail

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph::detail {

DLGRAPH_INLINE bool writes(const OpDesc& op, std::string_view v) {
    for (auto& s : op.outputs)
        for (auto& a : s.arguments)
            if (a == v) return true;
    return false;
}

// The fed names, checked: each names a tensor variable, none twice.
DLGRAPH_INLINE std::set<std::string, std::less<>> check_feeds(const BlockDesc& blk, std::span<const std::string> fed) {
    std::set<std::string, std::less<>> fed_set(fed.begin(), fed.end());
    for (auto& f : fed) {
        auto* vd = blk.find_var(f);
        if (!vd) throw feed_error("dlgraph.feed.unknown", "feed '" + f + "' names no variable of the program");
        if (vd->type != VarType::LOD_TENSOR)
            throw feed_error("dlgraph.feed.kind", "feed '" + f + "' is a " + std::string(var_type_name(vd->type)) +
                                                      " variable; only tensors can be fed");
    }
    if (fed_set.size() != fed.size()) throw feed_error("dlgraph.feed.twice", "a variable is fed twice");
    return fed_set;
}

// Pass 1: the ops the targets need (by op index), and the persistables and
// lists they read from the scope.
struct pruned {
    std::vector<bool> needed;
    std::set<std::string, std::less<>> scope_reads;
};

DLGRAPH_INLINE pruned prune(const BlockDesc& blk, std::span<const TargetRef> targets,
                            const std::set<std::string, std::less<>>& fed) {
    const int nops = static_cast<int>(blk.ops.size());
    pruned r{std::vector<bool>(static_cast<std::size_t>(nops), false), {}};
    std::vector<int> work;
    auto need_op = [&](int j) {
        if (!r.needed[static_cast<std::size_t>(j)]) {
            r.needed[static_cast<std::size_t>(j)] = true;
            work.push_back(j);
        }
    };
    // Names and writers indexed once, so pruning is linear in the program.
    const VarIndex vars(blk);
    auto declared = [&](const std::string& name, const std::string& who) -> const VarDesc& {
        const VarDesc* vd = vars.find(name);
        if (!vd) throw graph_error("dlgraph.graph.undeclared", who + ": variable '" + name + "' is not declared");
        return *vd;
    };
    std::unordered_map<std::string_view, std::vector<int>> writers;  // name -> ops writing it, ascending
    for (int i = 0; i < nops; ++i)
        for (auto& sl : blk.ops[static_cast<std::size_t>(i)].outputs)
            for (auto& a : sl.arguments) {
                auto& w = writers[a];
                if (w.empty() || w.back() != i) w.push_back(i);
            }
    static const std::vector<int> none;
    auto writers_of = [&](std::string_view name) -> const std::vector<int>& {
        auto it = writers.find(name);
        return it == writers.end() ? none : it->second;
    };
    auto initializer = [&](std::string_view name) { return writers_of(name).empty() ? -1 : writers_of(name).front(); };
    // The value `name` as op `reader` (nops = after the last op) sees it.
    auto resolve = [&](const std::string& name, int reader, const std::string& who) {
        if (fed.count(name)) return;
        const VarDesc& vd = declared(name, who);
        const std::vector<int>& w = writers_of(name);
        const auto later = std::lower_bound(w.begin(), w.end(), reader);  // the first writer at or after reader
        const int j = later == w.begin() ? -1 : *(later - 1);
        if (vd.persistable || vd.type != VarType::LOD_TENSOR) {  // lists: set in the scope by the caller
            if (j >= 0 && (!vd.persistable || j != initializer(name))) need_op(j);
            else r.scope_reads.insert(name);
            return;
        }
        if (j >= 0) return need_op(j);
        if (later != w.end())
            throw graph_error("dlgraph.graph.cycle", who + " reads '" + name + "', which only the later " +
                                                         op_label(blk.ops[static_cast<std::size_t>(*later)], *later) +
                                                         " writes: the graph has a cycle");
        throw feed_error("dlgraph.feed.missing",
                         who + " needs '" + name + "', which is neither fed nor written by an earlier op: feed it");
    };
    for (auto& t : targets) {
        if (t.var.empty()) {
            if (t.op < 0 || t.op >= nops)
                throw graph_error("dlgraph.graph.target", "target op #" + std::to_string(t.op) + " does not exist");
            need_op(t.op);
            continue;
        }
        const VarDesc& vd = declared(t.var, "target");
        if (t.op >= nops || (t.op >= 0 && !writes(blk.ops[static_cast<std::size_t>(t.op)], t.var)))
            throw graph_error("dlgraph.graph.target",
                              "target '" + t.var + "': op #" + std::to_string(t.op) + " does not write it");
        if (fed.count(t.var)) continue;
        if (vd.persistable && (t.op < 0 || t.op == initializer(t.var))) r.scope_reads.insert(t.var);
        else if (t.op >= 0) need_op(t.op);
        else resolve(t.var, nops, "target '" + t.var + "'");
    }
    while (!work.empty()) {
        const int i = work.back();
        work.pop_back();
        auto& op = blk.ops[static_cast<std::size_t>(i)];
        for (auto& s : op.inputs)
            for (auto& a : s.arguments) resolve(a, i, op_label(op, i));
    }
    return r;
}

// Pass 2: the needed ops as steps in program order, with their values, the
// targets, the feeds and the scope reads.
DLGRAPH_INLINE void add_steps(ExecutionPlan& plan, const BlockDesc& blk, const pruned& pr,
                              const std::set<std::string, std::less<>>& fed) {
    std::unordered_map<std::string_view, int> index;
    const VarIndex vars(blk);
    auto value = [&](const std::string& name) {
        if (auto it = index.find(name); it != index.end()) return it->second;
        const VarDesc* found = vars.find(name);
        if (!found) throw graph_error("dlgraph.graph.undeclared", "plan: variable '" + name + "' is not declared");
        const VarDesc& vd = *found;
        PlannedValue v;
        v.name = name;
        v.kind = fed.count(name)                                      ? ValueKind::feed
                 : vd.persistable || vd.type != VarType::LOD_TENSOR ? ValueKind::persistable
                                                                     : ValueKind::intermediate;
        v.type = vd.type;
        v.declared = {vd.data_type, Shape(vd.dims)};
        plan.values.push_back(std::move(v));
        const int k = static_cast<int>(plan.values.size()) - 1;
        index.emplace(vd.name, k);  // a key that lives as long as the block
        return k;
    };
    for (int i = 0; i < static_cast<int>(blk.ops.size()); ++i) {
        if (!pr.needed[static_cast<std::size_t>(i)]) continue;
        auto& op = blk.ops[static_cast<std::size_t>(i)];
        PlannedStep st;
        st.op_index = i;
        st.def = &lookup_op(op.type, op_path(0, i) + ".type");
        st.attrs = normalize_attrs(*st.def, op, op_path(0, i));
        st.label = op_label(op, i);
        auto add_slots = [&](const std::vector<SlotDef>& defs, const std::vector<OpSlot>& slots,
                             std::vector<int>& vals, std::vector<std::uint32_t>& off) {
            off.push_back(0);
            for (auto& sd : defs) {
                auto s = std::find_if(slots.begin(), slots.end(), [&](const OpSlot& x) { return x.parameter == sd.name; });
                if (s != slots.end())
                    for (auto& a : s->arguments) vals.push_back(value(a));
                off.push_back(static_cast<std::uint32_t>(vals.size()));
            }
        };
        add_slots(st.def->inputs, op.inputs, st.ins, st.in_off);
        add_slots(st.def->outputs, op.outputs, st.outs, st.out_off);
        // A program may have an op write a variable it reads (Out = X).
        // Unless the op's kernels allow it (OpDef::in_place, element-wise
        // ops), the step writes a fresh value that an assign then copies
        // over: a GEMM or a gather writing over what it reads would read
        // its own results.
        std::vector<PlannedStep> copies;
        if (!st.def->in_place && !st.def->fusible.arity)
            for (int& o : st.outs) {
                const PlannedValue target = plan.values[static_cast<std::size_t>(o)];
                if (target.type != VarType::LOD_TENSOR || std::find(st.ins.begin(), st.ins.end(), o) == st.ins.end())
                    continue;
                PlannedValue fresh;
                fresh.name = target.name + "@op" + std::to_string(i) + (copies.empty() ? "" : "." + std::to_string(copies.size()));
                fresh.declared = target.declared;
                plan.values.push_back(std::move(fresh));
                PlannedStep a;
                a.op_index = i;
                OpDesc assign;
                assign.type = "assign";
                a.def = &lookup_op(assign.type, op_path(0, i) + ".type");
                a.attrs = normalize_attrs(*a.def, assign, op_path(0, i));
                a.label = "assign (op #" + std::to_string(i) + " writes '" + target.name + "', which it reads)";
                a.ins = {static_cast<int>(plan.values.size()) - 1};
                a.in_off = {0, 1};
                a.outs = {o};
                a.out_off = {0, 1};
                o = a.ins[0];
                copies.push_back(std::move(a));
            }
        plan.steps.push_back(std::move(st));
        for (auto& a : copies) plan.steps.push_back(std::move(a));
    }
    for (auto& t : plan.targets) plan.target_values.push_back(t.var.empty() ? -1 : value(t.var));
    for (auto& f : plan.fed) {
        auto it = index.find(f);
        plan.feed_values.push_back(it == index.end() ? -1 : it->second);
    }
    for (auto& n : pr.scope_reads) plan.scope_reads.push_back(value(n));
}

// The dtype that will choose step `st`'s kernel, from the declarations
// (the session checks that what runs has the declared dtypes).
DLGRAPH_INLINE DataType declared_kernel_dtype(const ExecutionPlan& p, const PlannedStep& st) {
    const OpDef& d = *st.def;
    if (d.kernel_slot >= 0 && st.in_off[static_cast<std::size_t>(d.kernel_slot)] <
                                  st.in_off[static_cast<std::size_t>(d.kernel_slot) + 1])
        return p.values[static_cast<std::size_t>(st.ins[st.in_off[static_cast<std::size_t>(d.kernel_slot)]])].declared.dtype;
    if (d.kernel_slot < 0 && d.dtype_attr >= 0) return dtype_from_int(st.attrs[static_cast<std::size_t>(d.dtype_attr)].i);
    return st.outs.empty() ? DataType::FP32 : p.values[static_cast<std::size_t>(st.outs[0])].declared.dtype;
}

// Pass 3: each step on the device when the device has a kernel for it, it
// touches no list variable (those live in the scope, on the host), its
// attributes ask for no host-only form (OpDef::host_only_with), and, for a
// collective, its ring's communicator moves device memory (`device_rings`).
DLGRAPH_INLINE void place_steps(ExecutionPlan& plan, const DeviceContext& device, std::uint64_t device_rings) {
    for (auto& st : plan.steps) {
        bool lists = false;
        for (auto* vals : {&st.ins, &st.outs})
            for (int v : *vals) lists = lists || plan.values[static_cast<std::size_t>(v)].type != VarType::LOD_TENSOR;
        const bool host_form = st.def->host_only_with && st.def->host_only_with(st.attrs.data());
        bool host_ring = false;
        if (st.def->comm_ring_attr >= 0) {
            const std::int64_t ring = st.attrs[static_cast<std::size_t>(st.def->comm_ring_attr)].i;
            host_ring = ring < 0 || ring >= 64 || !((device_rings >> ring) & 1u);
        }
        st.place = !lists && !host_form && !host_ring && device.kernel(*st.def, declared_kernel_dtype(plan, st))
                       ? Place::device
                       : Place::host;
    }
}

// Pass 4: copies. A value lives where its first writer runs (feeds on the
// host, persistable tensors on the device). A step that reads a value
// living elsewhere reads a copy made just before it, one per value and
// place for as long as the value is not written again; a step that writes
// a value living elsewhere writes a copy in its own place, which is then
// copied back. Targets living on the device are copied to the host at the
// end, and the copy is what the caller gets. A copy to the device goes at
// the start of the run of device steps it feeds (after the last host step),
// so that it splits no such run (a fused chain, a recorded CUDA graph) and
// adds no wait. Copies are values of their own
// (named "x@cpu", "x@cuda", with ".1", ".2", ... when a value is copied to
// one place more than once), so each has its own lifetime in the arena.
class copy_router {
public:
    copy_router(ExecutionPlan& plan, std::string device_name)
        : plan_(plan), device_name_(std::move(device_name)), h2d_(lookup_op("memcpy_h2d", "planner")),
          d2h_(lookup_op("memcpy_d2h", "planner")), current_(plan.values.size(), {-1, -1}) {}

    void route() {
        set_homes();
        std::vector<PlannedStep> steps;
        for (auto& st : plan_.steps) route_step(std::move(st), steps);
        copy_targets(steps);
        plan_.steps = std::move(steps);
    }

private:
    // Where each value lives: persistable tensors on the device, feeds and
    // lists on the host, an intermediate where its first writer runs.
    void set_homes() {
        std::vector<bool> placed(plan_.values.size(), false);
        for (auto& pv : plan_.values)
            pv.place = pv.kind == ValueKind::persistable && pv.type == VarType::LOD_TENSOR ? Place::device : Place::host;
        for (auto& st : plan_.steps)
            for (int v : st.outs)
                if (value(v).kind == ValueKind::intermediate && !placed[static_cast<std::size_t>(v)]) {
                    value(v).place = st.place;
                    placed[static_cast<std::size_t>(v)] = true;
                }
    }

    // Appends step `st` to `out`, reading and writing copies where its
    // values live elsewhere, with the copies it needs before and after.
    void route_step(PlannedStep st, std::vector<PlannedStep>& out) {
        std::vector<std::pair<int, int>> read;  // value -> the copy this step reads
        for (int& v : st.ins) {
            if (value(v).place == st.place) continue;
            int& c = current(v, st.place);
            if (c < 0) {
                c = new_copy(v, st.place);
                if (st.place == Place::device)  // at the start of this run of device steps
                    out.insert(out.begin() + static_cast<std::ptrdiff_t>(run_start_++), copy_step(v, c));
                else
                    out.push_back(copy_step(v, c));
            }
            read.emplace_back(v, c);
            v = c;
        }
        std::vector<PlannedStep> back;
        for (int& v : st.outs) {
            const int orig = v;
            if (value(orig).place != st.place) {
                // An op that updates a value in place (ParamOut = Param)
                // writes the copy it read; else a fresh copy.
                auto it = std::find_if(read.begin(), read.end(), [&](auto& r) { return r.first == orig; });
                v = it != read.end() ? it->second : new_copy(orig, st.place);
                back.push_back(copy_step(v, orig));
            }
            // Written: every other place's copy is stale; this step's place holds the value.
            current_[static_cast<std::size_t>(orig)] = {-1, -1};
            if (v != orig) current(orig, st.place) = v;
        }
        const bool host = st.place == Place::host;
        out.push_back(std::move(st));
        if (host) run_start_ = out.size();
        for (auto& c : back) out.push_back(std::move(c));
    }

    void copy_targets(std::vector<PlannedStep>& out) {
        for (int& v : plan_.target_values) {
            if (v < 0 || value(v).place == Place::host) continue;
            int& c = current(v, Place::host);
            if (c < 0) {
                c = new_copy(v, Place::host);
                out.push_back(copy_step(v, c));
            }
            v = c;
        }
    }

    int new_copy(int v, Place where) {
        PlannedValue c = value(v);
        const std::string base = c.name + "@" + (where == Place::device ? device_name_ : std::string(cpu::name));
        const int n = copies_[base]++;
        c.name = n == 0 ? base : base + "." + std::to_string(n);
        c.kind = ValueKind::intermediate;
        c.place = where;
        c.copy_of = v;
        c.target = false;
        plan_.values.push_back(std::move(c));
        return static_cast<int>(plan_.values.size()) - 1;
    }

    PlannedStep copy_step(int from, int to) {
        PlannedStep c;
        c.def = value(to).place == Place::device ? &h2d_ : &d2h_;
        c.place = Place::device;  // queued on the device, either way
        c.ins = {from};
        c.outs = {to};
        c.in_off = {0, 1};
        c.out_off = {0, 1};
        c.label = std::string(c.def->type) + " (" + value(from).name + ")";
        return c;
    }

    PlannedValue& value(int v) { return plan_.values[static_cast<std::size_t>(v)]; }
    // The value holding v's current value in place `where`, or -1.
    int& current(int v, Place where) { return current_[static_cast<std::size_t>(v)][static_cast<std::size_t>(where)]; }

    ExecutionPlan& plan_;
    std::string device_name_;
    const OpDef &h2d_, &d2h_;
    std::vector<std::array<int, num_places>> current_;  // per original value
    std::size_t run_start_ = 0;                         // where the last run of device steps starts
    std::map<std::string, int, std::less<>> copies_;    // copies made per name, for unique names
};

// Pass 5: who writes what, the first write and the last read of each value;
// targets live to the end.
DLGRAPH_INLINE void set_lifetimes(ExecutionPlan& plan) {
    for (auto& pv : plan.values) {
        pv.first_step = INT_MAX;
        pv.last_step = -1;
        pv.written = false;
        pv.target = false;
        pv.sets_shape = false;
    }
    // Backwards, so a copy's source follows the copy that a reads_values step reads.
    for (auto st = plan.steps.rbegin(); st != plan.steps.rend(); ++st)
        if (st->def->reads_values || (st->is_copy() && plan.values[static_cast<std::size_t>(st->outs[0])].sets_shape))
            for (int v : st->ins) plan.values[static_cast<std::size_t>(v)].sets_shape = true;
    for (int s = 0; s < static_cast<int>(plan.steps.size()); ++s) {
        const PlannedStep& st = plan.steps[static_cast<std::size_t>(s)];
        for (int v : st.ins) plan.values[static_cast<std::size_t>(v)].last_step = std::max(plan.values[static_cast<std::size_t>(v)].last_step, s);
        for (int v : st.outs) {
            PlannedValue& pv = plan.values[static_cast<std::size_t>(v)];
            pv.written = true;
            pv.first_step = std::min(pv.first_step, s);
            pv.last_step = std::max(pv.last_step, s);
        }
    }
    for (int v : plan.target_values)
        if (v >= 0) {
            plan.values[static_cast<std::size_t>(v)].target = true;
            plan.values[static_cast<std::size_t>(v)].last_step = INT_MAX;
        }
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE int initializer_of(const BlockDesc& b, std::string_view name) {
    for (std::size_t i = 0; i < b.ops.size(); ++i)
        if (detail::writes(b.ops[i], name)) return static_cast<int>(i);
    return -1;
}

DLGRAPH_INLINE ExecutionPlan make_plan(const ProgramDesc& program, std::span<const TargetRef> targets,
                                       std::span<const std::string> fed, const DeviceContext* device,
                                       std::uint64_t device_rings) {
    const BlockDesc& blk = program.blocks.at(0);
    ExecutionPlan plan;
    plan.targets.assign(targets.begin(), targets.end());
    plan.fed.assign(fed.begin(), fed.end());
    plan.device = device ? std::string(device->name()) : std::string(cpu::name);
    plan.has_device = device != nullptr;
    if (targets.empty()) throw graph_error("dlgraph.graph.target", "nothing to evaluate: no targets given");
    const auto fed_set = detail::check_feeds(blk, fed);
    detail::add_steps(plan, blk, detail::prune(blk, targets, fed_set), fed_set);
    if (device) {
        detail::place_steps(plan, *device, device_rings);
        detail::copy_router(plan, plan.device).route();
    }
    detail::set_lifetimes(plan);
    return plan;
}

namespace detail {

// The values infer_plan offers to OpDef::reads_values steps (sets_shape
// values only): a plan input the plan does not write (a feed, a scope
// value; one in device memory is read into a host copy), the result of a
// small OpDef::constant step computed here by its CPU kernel, and a copy of
// either, until a step writes the value again.
class shape_values {
public:
    shape_values(const ExecutionPlan& p, const std::vector<bool>& known, const std::vector<Variable*>* vars)
        : p_(p), of_(p.values.size(), nullptr) {
        for (std::size_t v = 0; v < p.values.size(); ++v) {
            const PlannedValue& pv = p.values[v];
            if (!pv.sets_shape || !known[v] || pv.written || !vars || !(*vars)[v] || !(*vars)[v]->is<Tensor>()) continue;
            const Tensor& t = (*vars)[v]->get<Tensor>();
            if (!t.initialized()) continue;
            if (t.place() == Place::host) {
                of_[v] = &t;
            } else {
                folded_.emplace_back().copy_from(t);
                of_[v] = &folded_.back();
            }
        }
    }
    const Tensor* of(int v) const { return of_[static_cast<std::size_t>(v)]; }
    // After step `st` inferred its outputs' metas.
    void after(const PlannedStep& st, DataType kernel_dtype, const std::vector<VarMeta>& metas) {
        for (int o : st.outs) of_[static_cast<std::size_t>(o)] = nullptr;  // written: what was offered is stale
        if (st.outs.size() != 1 || !p_.values[static_cast<std::size_t>(st.outs[0])].sets_shape) return;
        const auto out = static_cast<std::size_t>(st.outs[0]);
        if (st.is_copy()) {
            of_[out] = of_[static_cast<std::size_t>(st.ins[0])];
            return;
        }
        const KernelFn fn = st.def->constant ? st.def->kernel(kernel_dtype) : nullptr;
        if (!fn || metas[out].shape.numel() > max_folded) return;
        Tensor& t = folded_.emplace_back(metas[out].dtype, metas[out].shape);
        Tensor* outs[] = {&t};
        KernelFault fault;
        KernelContext ctx;
        ctx.in_ = {nullptr, st.in_off.data()};
        ctx.out_ = {outs, st.out_off.data()};
        ctx.attrs = st.attrs.data();
        ctx.fault = &fault;
        fn(ctx);
        if (!fault.failed()) of_[out] = &t;
    }

private:
    static constexpr std::int64_t max_folded = 64;  // elements
    const ExecutionPlan& p_;
    std::vector<const Tensor*> of_;
    std::deque<Tensor> folded_;  // stable addresses
};

}  // namespace detail

DLGRAPH_INLINE void infer_plan(const ExecutionPlan& p, std::vector<VarMeta>& metas, std::vector<bool>& known,
                               std::vector<DataType>& kernel_dtypes, const std::vector<Variable*>* vars,
                               std::uint64_t max_bytes) {
    kernel_dtypes.assign(p.steps.size(), DataType::FP32);
    std::vector<const VarMeta*> ins;
    std::vector<const Variable*> in_vars;
    std::vector<VarMeta> outs;
    std::vector<VarMeta*> outp;
    // A value is one tensor however often it is written, bound once to its
    // last meta, so a write may not change the meta that an earlier step
    // wrote or read since the value got it: that step's kernel would meet
    // the later dtype and shape (a buffer of another size).
    std::vector<bool> read_since(p.values.size(), false), written(p.values.size(), false);
    detail::shape_values values(p, known, vars);
    std::vector<const Tensor*> in_values;
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        const PlannedStep& st = p.steps[s];
        for (int v : st.ins) read_since[static_cast<std::size_t>(v)] = true;
        ins.clear();
        in_vars.clear();
        in_values.clear();
        outs.clear();
        outp.clear();
        for (int v : st.ins) {
            ins.push_back(&metas[static_cast<std::size_t>(v)]);
            if (vars) in_vars.push_back((*vars)[static_cast<std::size_t>(v)]);
            if (st.def->reads_values) in_values.push_back(values.of(v));
        }
        for (int v : st.outs) outs.push_back(p.values[static_cast<std::size_t>(v)].declared);
        for (auto& m : outs) outp.push_back(&m);
        InferContext ctx(*st.def, st.label, {ins.data(), st.in_off.data()}, {outp.data(), st.out_off.data()},
                         st.attrs.data(), {vars ? in_vars.data() : nullptr, st.in_off.data()},
                         {st.def->reads_values ? in_values.data() : nullptr, st.in_off.data()});
        st.def->infer(ctx);
        for (std::size_t k = 0; k < st.outs.size(); ++k) {
            const auto v = static_cast<std::size_t>(st.outs[k]);
            const PlannedValue& pv = p.values[v];
            if (pv.type != VarType::LOD_TENSOR) continue;  // a fetch list: no tensor meta
            if (!outs[k].shape.known())
                throw shape_error("dlgraph.shape.unknown", st.label + ": could not infer the shape of '" + pv.name +
                                                               "' (got " + to_string(outs[k].shape) + ")");
            check_shape_size(outs[k].shape, dtype_size(outs[k].dtype), max_bytes, st.label + ": '" + pv.name + "'");
            if (outs[k].dtype != pv.declared.dtype)
                throw type_error("dlgraph.type.declared", st.label + " writes " + to_string(outs[k].dtype) + " to '" +
                                                              pv.name + "', which is declared " +
                                                              to_string(pv.declared.dtype));
            if (!pv.declared.shape.empty() && !dims_compatible(pv.declared.shape, outs[k].shape))
                throw shape_error("dlgraph.shape.declared", st.label + " writes shape " + to_string(outs[k].shape) +
                                                                " to '" + pv.name + "', which is declared " +
                                                                to_string(pv.declared.shape));
            if (pv.kind == ValueKind::persistable && known[v] &&
                !(metas[v].shape == outs[k].shape && metas[v].dtype == outs[k].dtype))
                throw shape_error("dlgraph.shape.persistable", st.label + " would change persistable '" + pv.name +
                                                                   "' from " + to_string(metas[v].shape) + " to " +
                                                                   to_string(outs[k].shape));
            if (known[v] && (read_since[v] || written[v]) &&
                !(metas[v].shape == outs[k].shape && metas[v].dtype == outs[k].dtype))
                throw shape_error("dlgraph.shape.rewrite",
                                  st.label + " writes '" + pv.name + "' as " + to_string(outs[k].dtype) + " " +
                                      to_string(outs[k].shape) + ", but it was " + to_string(metas[v].dtype) + " " +
                                      to_string(metas[v].shape) + " for an earlier step: a variable written again "
                                      "in one plan must keep its dtype and shape");
            metas[v] = outs[k];
            known[v] = true;
            read_since[v] = false;
            written[v] = true;
        }
        kernel_dtypes[s] = kernel_dtype(*st.def, ctx, st.attrs.data());
        if (!st.is_copy()) check_kernel(*st.def, kernel_dtypes[s], st.label);
        values.after(st, kernel_dtypes[s], metas);
    }
}

DLGRAPH_INLINE std::size_t meta_bytes(const VarMeta& m) {
    return m.shape.known() ? static_cast<std::size_t>(m.shape.numel()) * dtype_size(m.dtype) : 0;
}

}  // namespace dlgraph

namespace dlgraph::detail {

// in_place: shares[v] is the value whose memory v takes over, or -1.
DLGRAPH_INLINE std::vector<int> in_place_sharing(const ExecutionPlan& p, const std::vector<VarMeta>& metas) {
    std::vector<int> shares(p.values.size(), -1);
    auto shared_value = [&](std::size_t v) { return p.values[v].in_arena() && !p.values[v].target; };
    for (int s = 0; s < static_cast<int>(p.steps.size()); ++s) {
        const PlannedStep& st = p.steps[static_cast<std::size_t>(s)];
        const auto slot = static_cast<std::size_t>(st.def->fusible.slots[0]);
        if (!st.def->fusible.arity || st.outs.empty() || st.in_off[slot + 1] == st.in_off[slot]) continue;
        const auto o = static_cast<std::size_t>(st.outs[0]), x = static_cast<std::size_t>(st.ins[st.in_off[slot]]);
        if (o == x || !shared_value(o) || !shared_value(x) || p.values[x].last_step != s || p.values[x].first_step >= s)
            continue;
        if (p.values[x].place != p.values[o].place) continue;
        if (metas[x].dtype != metas[o].dtype || meta_bytes(metas[x]) != meta_bytes(metas[o]) || !meta_bytes(metas[o]))
            continue;
        shares[o] = static_cast<int>(x);
    }
    return shares;
}

// Greedy placement by size in one shared buffer (TFLite's arena planner).
// Up to this many values on one place; the greedy's cost grows with the
// square of the values that live at the same time.
inline constexpr std::size_t greedy_items_max = 4096;
// Up to this many values, greedy placement also restarts with each of the
// greedy_restarts largest values first (place_items).
inline constexpr std::size_t greedy_restart_items = 512;
inline constexpr std::size_t greedy_restarts = 16;

// Above greedy_items_max (a split into 65,536 outputs): a linear scan in
// step order, each value taking the smallest free block that fits (freed
// blocks merge with their neighbours), O(n log n).
DLGRAPH_INLINE std::size_t place_items_linear(std::vector<arena_item>& items) {
    std::vector<arena_item*> by_first, by_last;
    for (auto& it : items) {
        it.offset = 0;
        if (it.bytes == 0) continue;  // an empty value takes no room
        by_first.push_back(&it);
        by_last.push_back(&it);
    }
    std::stable_sort(by_first.begin(), by_first.end(), [](auto* a, auto* b) { return a->first < b->first; });
    std::stable_sort(by_last.begin(), by_last.end(), [](auto* a, auto* b) { return a->last < b->last; });
    std::map<std::size_t, std::size_t> free_at;                   // offset -> bytes
    std::set<std::pair<std::size_t, std::size_t>> free_by_size;  // (bytes, offset)
    auto unlist = [&](std::size_t off, std::size_t bytes) {
        free_at.erase(off);
        free_by_size.erase({bytes, off});
    };
    auto list = [&](std::size_t off, std::size_t bytes) {
        if (auto next = free_at.find(off + bytes); next != free_at.end()) {  // merge with the block after
            const std::size_t nb = next->second;
            unlist(off + bytes, nb);
            bytes += nb;
        }
        if (auto after = free_at.lower_bound(off); after != free_at.begin()) {  // and the one before
            auto prev = std::prev(after);
            if (prev->first + prev->second == off) {
                const std::size_t po = prev->first, pb = prev->second;
                unlist(po, pb);
                off = po;
                bytes += pb;
            }
        }
        free_at.emplace(off, bytes);
        free_by_size.emplace(bytes, off);
    };
    std::size_t top = 0, freed = 0;
    for (arena_item* it : by_first) {
        for (; freed < by_last.size() && by_last[freed]->last < it->first; ++freed)
            list(by_last[freed]->offset, by_last[freed]->bytes);  // placed: its first step came earlier
        if (auto fit = free_by_size.lower_bound({it->bytes, 0}); fit != free_by_size.end()) {
            const auto [bytes, off] = *fit;
            unlist(off, bytes);
            it->offset = off;
            if (bytes > it->bytes) list(off + it->bytes, bytes - it->bytes);
        } else if (!free_at.empty() && free_at.rbegin()->first + free_at.rbegin()->second == top) {
            const std::size_t off = free_at.rbegin()->first;  // the last free block grows up to fit
            unlist(off, free_at.rbegin()->second);
            it->offset = off;
            top = off + it->bytes;
        } else {
            it->offset = top;
            top += it->bytes;
        }
    }
    return top;
}

// Greedy by size from `order` (indices into items): each value at the
// lowest offset where it overlaps no value placed before it that is live
// at the same time. Writes the offsets; returns the buffer's size.
DLGRAPH_INLINE std::size_t place_greedy(std::vector<arena_item>& items, const std::vector<std::size_t>& order) {
    std::vector<const arena_item*> placed, overlapping;
    std::size_t total = 0;
    for (std::size_t i : order) {
        arena_item& it = items[i];
        overlapping.clear();
        for (const arena_item* q : placed)
            if (!(q->last < it.first || it.last < q->first)) overlapping.push_back(q);
        std::sort(overlapping.begin(), overlapping.end(),
                  [](const arena_item* a, const arena_item* b) { return a->offset < b->offset; });
        std::size_t at = 0;
        for (const arena_item* q : overlapping) {
            if (q->offset >= at + it.bytes) break;  // the gap before q fits
            at = std::max(at, q->offset + q->bytes);
        }
        it.offset = at;
        placed.push_back(&it);
        total = std::max(total, at + it.bytes);
    }
    return total;
}

DLGRAPH_INLINE std::size_t place_items(std::vector<arena_item>& items) {
    if (items.size() > greedy_items_max) return place_items_linear(items);
    std::vector<std::size_t> by_size(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) by_size[i] = i;
    std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) { return items[a].bytes > items[b].bytes; });
    std::size_t best = place_greedy(items, by_size);
    // Greedy by size can miss a packing that exists (an MLP's training plan:
    // 14% over the lower bound, where placing one activation first meets
    // it). On plans small enough, it starts again with each of the
    // greedy_restarts largest values placed first, and keeps the smallest.
    if (items.size() > greedy_restart_items) return best;
    std::vector<std::size_t> offsets(items.size()), order(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) offsets[i] = items[i].offset;
    for (std::size_t k = 1; k < std::min(items.size(), greedy_restarts); ++k) {
        order[0] = by_size[k];
        std::copy(by_size.begin(), by_size.begin() + static_cast<std::ptrdiff_t>(k), order.begin() + 1);
        std::copy(by_size.begin() + static_cast<std::ptrdiff_t>(k) + 1, by_size.end(), order.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        if (const std::size_t total = place_greedy(items, order); total < best) {
            best = total;
            for (std::size_t i = 0; i < items.size(); ++i) offsets[i] = items[i].offset;
        }
    }
    for (std::size_t i = 0; i < items.size(); ++i) items[i].offset = offsets[i];
    return best;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE MemoryPlan plan_memory(const ExecutionPlan& p, const std::vector<VarMeta>& metas, bool in_place) {
    MemoryPlan m;
    const std::size_t nv = p.values.size();
    m.value_slot.assign(nv, -1);
    m.value_offset.assign(nv, 0);
    const int nshared = p.has_device ? 2 : 1;  // slot i: the buffer shared on place i
    for (int s = 0; s < nshared; ++s) {
        m.slot_bytes.push_back(0);
        m.slot_place.push_back(static_cast<Place>(s));
    }
    const std::vector<int> shares = in_place ? detail::in_place_sharing(p, metas) : std::vector<int>(nv, -1);
    // The first value of v's chain, each chain walked once (a 40,000-op
    // chain in place is one chain).
    std::vector<int> roots(nv, -1);
    auto root_of = [&](std::size_t v) {
        std::size_t r = v;
        while (shares[r] >= 0 && roots[r] < 0) r = static_cast<std::size_t>(shares[r]);
        const int top = roots[r] >= 0 ? roots[r] : static_cast<int>(r);
        for (std::size_t u = v; u != r; u = static_cast<std::size_t>(shares[u])) roots[u] = top;
        roots[r] = top;
        return static_cast<std::size_t>(top);
    };
    // Values that share memory form chains x -> o -> ...; each chain is
    // placed once, by its first value, live over the union of its members.
    std::vector<std::vector<detail::arena_item>> items(static_cast<std::size_t>(nshared));
    std::vector<int> root(nv, -1), item_of(nv, -1);
    for (std::size_t v = 0; v < nv; ++v) {
        const PlannedValue& pv = p.values[v];
        if (!pv.in_arena()) continue;
        const std::size_t bytes = meta_bytes(metas[v]);
        m.figures[static_cast<int>(pv.place)].unshared_bytes += bytes;
        if (pv.target) {
            m.value_slot[v] = static_cast<int>(m.slot_bytes.size());
            m.slot_bytes.push_back(bytes);
            m.slot_place.push_back(pv.place);
            continue;
        }
        root[v] = static_cast<int>(root_of(v));
        if (shares[v] >= 0) continue;
        // Cache-line aligned from 1 KiB on (a vector load across two lines
        // costs streaming kernels); small values pack at 16 bytes.
        const std::size_t align = bytes >= 1024 ? buffer_alignment : 16;
        auto& list = items[static_cast<std::size_t>(pv.place)];
        item_of[v] = static_cast<int>(list.size());
        list.push_back({static_cast<int>(v), (bytes + align - 1) / align * align, 0, pv.first_step,
                        std::max(pv.last_step, pv.first_step)});
    }
    for (std::size_t v = 0; v < nv; ++v)  // a chain is live until its last member dies
        if (shares[v] >= 0) {
            const auto r = static_cast<std::size_t>(root[v]);
            auto& it = items[static_cast<std::size_t>(p.values[r].place)][static_cast<std::size_t>(item_of[r])];
            it.last = std::max({it.last, p.values[v].last_step, p.values[v].first_step});
        }
    for (int s = 0; s < nshared; ++s) {
        auto& list = items[static_cast<std::size_t>(s)];
        m.slot_bytes[static_cast<std::size_t>(s)] = detail::place_items(list);
        for (auto& it : list) {
            m.value_slot[static_cast<std::size_t>(it.v)] = s;
            m.value_offset[static_cast<std::size_t>(it.v)] = it.offset;
        }
    }
    for (std::size_t v = 0; v < nv; ++v)
        if (root[v] >= 0 && shares[v] >= 0) {
            m.value_slot[v] = m.value_slot[static_cast<std::size_t>(root[v])];
            m.value_offset[v] = m.value_offset[static_cast<std::size_t>(root[v])];
        }
    for (std::size_t s = 0; s < m.slot_bytes.size(); ++s)
        m.figures[static_cast<int>(m.slot_place[s])].arena_bytes += m.slot_bytes[s];
    // The bound counts a chain of values that share memory once: while two
    // of them are live (the step that writes one over the other), both are
    // the same bytes. One sweep over the lifetimes' ends.
    const std::size_t ns = p.steps.size();
    std::vector<std::array<std::size_t, num_places>> starts(ns + 1), ends(ns + 1);
    for (std::size_t v = 0; v < nv; ++v) {
        const PlannedValue& pv = p.values[v];
        if (!pv.in_arena()) continue;
        const bool shared_first = shares[v] >= 0;  // at its first step the value it shares is live and counted
        const std::size_t first = static_cast<std::size_t>(std::max(pv.first_step, 0)) + (shared_first ? 1 : 0);
        const std::size_t last = pv.target ? ns - 1 : static_cast<std::size_t>(std::max({pv.last_step, pv.first_step, 0}));
        if (ns == 0 || first > last) continue;
        starts[first][static_cast<int>(pv.place)] += meta_bytes(metas[v]);
        ends[last + 1][static_cast<int>(pv.place)] += meta_bytes(metas[v]);
    }
    std::array<std::size_t, num_places> live{};
    for (std::size_t s = 0; s < ns; ++s)
        for (int pl = 0; pl < num_places; ++pl) {
            live[static_cast<std::size_t>(pl)] += starts[s][static_cast<std::size_t>(pl)];
            live[static_cast<std::size_t>(pl)] -= ends[s][static_cast<std::size_t>(pl)];
            m.figures[pl].lower_bound = std::max(m.figures[pl].lower_bound, live[static_cast<std::size_t>(pl)]);
        }
    return m;
}

}  // namespace dlgraph

namespace dlgraph::detail {

// How tensor meta `t` can be an operand of an op whose output has shape
// `out` (`axis`: the op's axis attribute); false when a chain cannot take it.
DLGRAPH_INLINE bool classify_operand(const VarMeta& t, const Shape& out, std::int64_t axis, FusedOperand& o,
                                     std::int64_t& row) {
    const Shape& s = t.shape;
    if (s == out || (s.numel() == out.numel() && axis == -1 && s.rank() <= out.rank())) {
        // Same elements in the same order (leading unit dims aside).
        bool same = true;
        for (int i = 1; i <= s.rank() && same; ++i) same = s[s.rank() - i] == out[out.rank() - i];
        if (same) {
            o = FusedOperand::full;
            return true;
        }
    }
    if (s.numel() == 1) {
        o = FusedOperand::scalar;
        return true;
    }
    // A row: s without its leading unit dims equals out's trailing dims.
    int lead = 0;
    while (lead < s.rank() && s[lead] == 1) ++lead;
    const int rr = s.rank() - lead;
    if (rr == 0 || rr > out.rank() || (axis != -1 && axis != out.rank() - rr)) return false;
    for (int i = 0; i < rr; ++i)
        if (s[lead + i] != out[out.rank() - rr + i]) return false;
    if (row != 0 && row != s.numel()) return false;  // one period per chain
    row = s.numel();
    o = FusedOperand::row;
    return true;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE std::vector<FusedChainPlan> plan_fusion(const ExecutionPlan& p, const std::vector<VarMeta>& metas,
                                                       const DeviceContext* device) {
    std::vector<FusedChainPlan> chains;
    std::vector<int> uses(p.values.size(), 0);
    for (auto& st : p.steps)
        for (int v : st.ins) ++uses[static_cast<std::size_t>(v)];
    // A step that may take part: a fusible op with one output, FP32/FP64 on
    // the host, or one the device can fuse.
    auto fusible = [&](std::size_t s) {
        const PlannedStep& st = p.steps[s];
        if (st.def->fusible.arity == 0 || st.outs.size() != 1) return false;
        const DataType t = metas[static_cast<std::size_t>(st.outs[0])].dtype;
        if (st.place == Place::host) return st.def->fusible.fn(t) != nullptr;
        return device && st.place == Place::device && device->fused_code(*st.def, t) >= 0;
    };
    // The running value `prev` may stay in the cache if only step s reads it.
    auto private_to = [&](int prev, std::size_t s) {
        const PlannedValue& pv = p.values[static_cast<std::size_t>(prev)];
        int reads = 0;
        for (int v : p.steps[s].ins) reads += v == prev;
        return pv.kind == ValueKind::intermediate && !pv.target && uses[static_cast<std::size_t>(prev)] == reads;
    };
    std::size_t s = 0;
    while (s < p.steps.size()) {
        if (!fusible(s)) {
            ++s;
            continue;
        }
        // Grow a chain from s while the next step reads only-here values.
        FusedChainPlan chain;
        const VarMeta& om = metas[static_cast<std::size_t>(p.steps[s].outs[0])];
        std::size_t e = s;  // last step in the chain
        int prev = -1;
        const Place place = p.steps[s].place;
        const std::size_t most = place == Place::host ? p.steps.size() : static_cast<std::size_t>(max_device_chain);
        for (std::size_t t = s; t < p.steps.size() && t - s < most && fusible(t); ++t) {
            const PlannedStep& st = p.steps[t];
            if (st.place != place) break;
            const VarMeta& m = metas[static_cast<std::size_t>(st.outs[0])];
            if (m.dtype != om.dtype || !(m.shape == om.shape)) break;
            if (t > s && !private_to(prev, t)) break;
            std::array<FusedOperand, 2> ops{FusedOperand::running, FusedOperand::running};
            const Fusible& f = st.def->fusible;
            const std::int64_t axis = f.arity == 2 && f.axis_attr >= 0 ? st.attrs[static_cast<std::size_t>(f.axis_attr)].i : -1;
            bool ok = true;
            std::int64_t row = chain.row;
            for (int k = 0; k < f.arity && ok; ++k) {
                const int v = st.ins[st.in_off[static_cast<std::size_t>(f.slots[static_cast<std::size_t>(k)])]];
                if (t == s || v != prev)
                    ok = detail::classify_operand(metas[static_cast<std::size_t>(v)], m.shape, axis,
                                                  ops[static_cast<std::size_t>(k)], row);
            }
            if (!ok) break;
            chain.row = row;
            chain.operands.push_back(ops);
            prev = st.outs[0];
            e = t;
        }
        if (e == s) {  // a single op gains nothing
            ++s;
            continue;
        }
        chain.first = static_cast<int>(s);
        chain.last = static_cast<int>(e);
        chains.push_back(std::move(chain));
        s = e + 1;
    }
    return chains;
}

}  // namespace dlgraph

namespace dlgraph::detail {

// Pass: the host steps whose weight (OpDef::prepack_input: a persistable the
// plan only reads) is worth keeping packed, and the bytes each packing takes.
DLGRAPH_INLINE std::vector<PackedWeight> plan_packing(const ExecutionPlan& p, const std::vector<VarMeta>& metas) {
    std::vector<PackedWeight> out;
    std::vector<Tensor> shapes;  // tensors with the steps' shapes and no data
    std::vector<const Tensor*> ins;
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        const PlannedStep& st = p.steps[s];
        const int slot = st.def->prepack_input;
        if (st.place != Place::host || !st.def->prepack || st.in_off[static_cast<std::size_t>(slot) + 1] == st.in_off[static_cast<std::size_t>(slot)])
            continue;
        const PlannedValue& w = p.values[static_cast<std::size_t>(st.ins[st.in_off[static_cast<std::size_t>(slot)]])];
        if (w.kind != ValueKind::persistable || w.written) continue;
        shapes.clear();
        ins.clear();
        for (int v : st.ins)
            shapes.push_back(Tensor::borrow(metas[static_cast<std::size_t>(v)].dtype, metas[static_cast<std::size_t>(v)].shape, nullptr));
        for (auto& t : shapes) ins.push_back(&t);
        KernelContext ctx;
        ctx.in_ = {ins.data(), st.in_off.data()};
        ctx.attrs = st.attrs.data();
        if (const std::size_t bytes = st.def->prepack(ctx, nullptr)) out.push_back({static_cast<int>(s), bytes});
    }
    return out;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE void shape_plan(ExecutionPlan& p, std::vector<VarMeta> metas, std::vector<bool> known,
                               const DeviceContext* device, const PlanOptions& opts,
                               const std::vector<Variable*>* vars) {
    std::vector<DataType> kernel_dtypes;
    infer_plan(p, metas, known, kernel_dtypes, vars, opts.max_bytes);
    std::vector<KernelFn> kernels(p.steps.size(), nullptr);
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        const PlannedStep& st = p.steps[s];
        if (st.is_copy()) continue;
        kernels[s] = st.place == Place::device ? device->kernel(*st.def, kernel_dtypes[s]) : st.def->kernel(kernel_dtypes[s]);
        if (!kernels[s])  // placed by declared dtypes; what ran differs
            throw type_error("dlgraph.type.kernel", st.label + ": no " + std::string(st.place == Place::device ? p.device : "cpu") +
                                                        " kernel for " + to_string(kernel_dtypes[s]));
    }
    MemoryPlan memory = plan_memory(p, metas, opts.in_place);
    for (std::size_t s = 0; s < memory.slot_bytes.size(); ++s)
        if (memory.slot_bytes[s] > opts.max_bytes)
            throw resource_error("dlgraph.resource.arena",
                                 "the plan needs a buffer of " + bytes_text(memory.slot_bytes[s]) + " on the " +
                                     (memory.slot_place[s] == Place::host ? std::string("host") : p.device) +
                                     ", more than the limit of " + bytes_text(opts.max_bytes));
    std::vector<FusedChainPlan> fused = opts.fuse ? plan_fusion(p, metas, device) : std::vector<FusedChainPlan>{};
    std::vector<PackedWeight> packed = opts.prepack ? detail::plan_packing(p, metas) : std::vector<PackedWeight>{};
    // Nothing threw: commit.
    p.metas = std::move(metas);
    p.kernel_dtypes = std::move(kernel_dtypes);
    p.kernels = std::move(kernels);
    p.memory = std::move(memory);
    p.fused = std::move(fused);
    p.packed = std::move(packed);
    p.shaped = true;
}

DLGRAPH_INLINE ExecutionPlan plan_program(const ProgramDesc& program, std::span<const TargetRef> targets,
                                          std::span<const std::string> fed, std::span<const VarMeta> fed_metas,
                                          std::span<const VarMeta> persistable_metas, const DeviceContext* device,
                                          const PlanOptions& opts) {
    ExecutionPlan p = make_plan(program, targets, fed, device);
    std::vector<VarMeta> metas(p.values.size());
    std::vector<bool> known(p.values.size(), false);
    for (std::size_t i = 0; i < p.feed_values.size() && i < fed_metas.size(); ++i)
        if (const int v = p.feed_values[i]; v >= 0) {
            metas[static_cast<std::size_t>(v)] = fed_metas[i];
            known[static_cast<std::size_t>(v)] = true;
        }
    for (std::size_t i = 0; i < p.scope_reads.size() && i < persistable_metas.size(); ++i) {
        metas[static_cast<std::size_t>(p.scope_reads[i])] = persistable_metas[i];
        known[static_cast<std::size_t>(p.scope_reads[i])] = true;
    }
    shape_plan(p, std::move(metas), std::move(known), device, opts);
    return p;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
