// The Planner turns (program, targets, fed names) into an ExecutionPlan: the
// ops the targets need, in program order; where each value comes from (a
// feed, a persistable variable in the session's scope, or an op of the
// plan); the device of each op; and a memory plan that lets values whose
// lifetimes do not overlap share a buffer. Planning resolves every name once;
// the Session then runs the plan without touching names.
//
// Dataflow follows program order: a read of `v` by op i sees the last op
// before i that writes `v`. A fed name cuts the graph there. A persistable
// variable's first writer is its initializer: it runs once, when the
// session's scope has no value yet, never as part of an ordinary plan.
#pragma once

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <span>

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
    int first_step = INT_MAX;     // first step that writes it
    int last_step = -1;           // last step that reads it (INT_MAX for targets)
    bool written = false;         // some step of the plan writes it
    bool target = false;
    int slot = -1;                // arena slot (intermediates)
};

struct PlannedStep {
    int op_index = -1;
    const OpDef* def = nullptr;
    DeviceKind device = DeviceKind::CPU;
    std::vector<int> ins, outs;               // value indices, in slot order
    std::vector<std::uint16_t> in_off, out_off;
    std::vector<Attribute> attrs;             // normalized, def order
    std::string label;                        // "mul (op #3)"
};

struct ExecutionPlan {
    std::vector<TargetRef> targets;
    std::vector<std::string> fed;
    std::vector<PlannedValue> values;
    std::vector<PlannedStep> steps;
    std::vector<int> target_values;   // per target: value index, or -1 for op targets
    std::vector<int> feed_values;     // per fed name: value index, or -1 if unused
    std::vector<int> scope_reads;     // persistable values read from the scope
    int num_slots = 0;

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

// Plans block 0 of `program` (which must have been validated).
DLGRAPH_INLINE ExecutionPlan make_plan(const ProgramDesc& program, std::span<const TargetRef> targets,
                                       std::span<const std::string> fed, DeviceKind device = DeviceKind::CPU);

// Concrete dtypes and shapes of a plan's values. On entry `metas[v]` is
// set for every value with `known[v]` (feeds and values read from the
// scope); on return every value the plan writes is set too, and
// `kernel_dtypes[s]` names the kernel each step will use. Throws, as a run
// would, on a shape or dtype the ops reject or an op the device lacks.
DLGRAPH_INLINE void infer_plan(const ExecutionPlan& p, std::vector<VarMeta>& metas, std::vector<bool>& known,
                               std::vector<DataType>& kernel_dtypes, DeviceKind device, std::string_view device_name,
                               const std::vector<Variable*>* vars = nullptr);

// The arena for concrete metas: where each intermediate lives, each
// buffer's bytes, and totals.
//
// Slot 0 is one buffer shared by every intermediate that is not a target;
// each target has a buffer of its own (slots 1...), so it can be handed to
// the caller. Offsets in slot 0 are assigned once sizes are known (each
// shape pass), greedy by size as in TFLite's arena planner: largest value
// first, each at the lowest 64-byte-aligned offset that no value live at the
// same time covers (sizes rounded up to 64 bytes from 1 KiB on, else to 16,
// so large values sit on cache lines). A value is live from the step that
// writes it to the last step that reads it, both included, so an op's output
// shares memory with none of its inputs, with one exception (`in_place`): an
// element-wise op (OpDef::fusible, z[i] from x[i] and y[i] or y[0]) writes
// over its X when X is an intermediate of the output's dtype and size that
// nothing reads after it; the two then hold one place in the arena (and
// count once in lower_bound).
struct MemoryPlan {
    std::vector<std::size_t> slot_bytes;
    std::vector<int> value_slot;          // per value: its buffer, -1 outside the arena
    std::vector<std::size_t> value_offset;  // per value: its byte offset in that buffer
    std::size_t arena_bytes = 0;      // all buffers: what the plan allocates for intermediates
    std::size_t unshared_bytes = 0;   // what one buffer per intermediate would take
    std::size_t lower_bound = 0;      // the most bytes live at once (largest simultaneous set)
};

DLGRAPH_INLINE std::size_t meta_bytes(const VarMeta& m);

DLGRAPH_INLINE MemoryPlan plan_memory(const ExecutionPlan& p, const std::vector<VarMeta>& metas,
                                      bool in_place = true);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph::detail {

DLGRAPH_INLINE bool writes(const OpDesc& op, std::string_view v) {
    for (auto& s : op.outputs)
        for (auto& a : s.arguments)
            if (a == v) return true;
    return false;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE int initializer_of(const BlockDesc& b, std::string_view name) {
    for (std::size_t i = 0; i < b.ops.size(); ++i)
        if (detail::writes(b.ops[i], name)) return static_cast<int>(i);
    return -1;
}

DLGRAPH_INLINE ExecutionPlan make_plan(const ProgramDesc& program, std::span<const TargetRef> targets,
                                       std::span<const std::string> fed, DeviceKind device) {
    const BlockDesc& blk = program.blocks.at(0);
    const int nops = static_cast<int>(blk.ops.size());
    ExecutionPlan plan;
    plan.targets.assign(targets.begin(), targets.end());
    plan.fed.assign(fed.begin(), fed.end());
    if (targets.empty()) throw graph_error("dlgraph.graph.target", "nothing to evaluate: no targets given");

    std::set<std::string, std::less<>> fed_set(fed.begin(), fed.end());
    for (auto& f : fed) {
        auto* vd = blk.find_var(f);
        if (!vd) throw feed_error("dlgraph.feed.unknown", "feed '" + f + "' names no variable of the program");
        if (vd->type != VarType::LOD_TENSOR)
            throw feed_error("dlgraph.feed.kind", "feed '" + f + "' is a " + std::string(var_type_name(vd->type)) +
                                                      " variable; only tensors can be fed");
    }
    if (fed_set.size() != fed.size()) throw feed_error("dlgraph.feed.twice", "a variable is fed twice");

    std::vector<bool> needed(static_cast<std::size_t>(nops), false);
    std::vector<int> work;
    std::set<std::string, std::less<>> scope_reads;
    auto need_op = [&](int j) {
        if (!needed[static_cast<std::size_t>(j)]) {
            needed[static_cast<std::size_t>(j)] = true;
            work.push_back(j);
        }
    };
    auto declared = [&](const std::string& name, const std::string& who) -> const VarDesc& {
        auto* vd = blk.find_var(name);
        if (!vd) throw graph_error("dlgraph.graph.undeclared", who + ": variable '" + name + "' is not declared");
        return *vd;
    };
    // The value `name` as op `reader` (nops = after the last op) sees it.
    auto resolve = [&](const std::string& name, int reader, const std::string& who) {
        if (fed_set.count(name)) return;
        const VarDesc& vd = declared(name, who);
        int j = reader - 1;
        while (j >= 0 && !detail::writes(blk.ops[static_cast<std::size_t>(j)], name)) --j;
        if (vd.persistable) {
            if (j >= 0 && j != initializer_of(blk, name)) need_op(j);
            else scope_reads.insert(name);
            return;
        }
        if (vd.type != VarType::LOD_TENSOR) {  // a feed or fetch list: set in the scope by the caller
            if (j >= 0) need_op(j);
            else scope_reads.insert(name);
            return;
        }
        if (j >= 0) return need_op(j);
        for (int k = reader; k < nops; ++k)
            if (detail::writes(blk.ops[static_cast<std::size_t>(k)], name))
                throw graph_error("dlgraph.graph.cycle",
                                  who + " reads '" + name + "', which only the later " +
                                      op_label(blk.ops[static_cast<std::size_t>(k)], k) +
                                      " writes: the graph has a cycle");
        throw feed_error("dlgraph.feed.missing", who + " needs '" + name +
                                                     "', which is neither fed nor written by an earlier op: feed it");
    };

    for (auto& t : targets) {
        if (t.var.empty()) {
            if (t.op < 0 || t.op >= nops)
                throw graph_error("dlgraph.graph.target", "target op #" + std::to_string(t.op) + " does not exist");
            need_op(t.op);
            continue;
        }
        const VarDesc& vd = declared(t.var, "target");
        if (t.op >= nops || (t.op >= 0 && !detail::writes(blk.ops[static_cast<std::size_t>(t.op)], t.var)))
            throw graph_error("dlgraph.graph.target", "target '" + t.var + "': op #" + std::to_string(t.op) +
                                                          " does not write it");
        if (fed_set.count(t.var)) continue;
        if (vd.persistable && (t.op < 0 || t.op == initializer_of(blk, t.var))) {
            scope_reads.insert(t.var);
        } else if (t.op >= 0) {
            need_op(t.op);
        } else {
            resolve(t.var, nops, "target '" + t.var + "'");
        }
    }
    while (!work.empty()) {
        int i = work.back();
        work.pop_back();
        auto& op = blk.ops[static_cast<std::size_t>(i)];
        for (auto& s : op.inputs)
            for (auto& a : s.arguments) resolve(a, i, op_label(op, i));
    }

    // Values and steps, in program order.
    std::map<std::string, int, std::less<>> index;
    auto value = [&](const std::string& name) {
        auto it = index.find(name);
        if (it != index.end()) return it->second;
        const VarDesc& vd = declared(name, "plan");
        PlannedValue v;
        v.name = name;
        v.kind = fed_set.count(name)                                  ? ValueKind::feed
                 : vd.persistable || vd.type != VarType::LOD_TENSOR ? ValueKind::persistable
                                                                     : ValueKind::intermediate;
        v.type = vd.type;
        v.declared = {vd.data_type, Shape(vd.dims)};
        plan.values.push_back(std::move(v));
        int k = static_cast<int>(plan.values.size()) - 1;
        index.emplace(name, k);
        return k;
    };
    for (int i = 0; i < nops; ++i) {
        if (!needed[static_cast<std::size_t>(i)]) continue;
        auto& op = blk.ops[static_cast<std::size_t>(i)];
        PlannedStep st;
        st.op_index = i;
        st.def = &lookup_op(op.type, op_path(0, i) + ".type");
        st.device = device;
        st.attrs = normalize_attrs(*st.def, op, op_path(0, i));
        st.label = op_label(op, i);
        const int s = static_cast<int>(plan.steps.size());
        st.in_off.push_back(0);
        for (auto& sd : st.def->inputs) {
            if (auto* sl = op.input(sd.name))
                for (auto& a : sl->arguments) {
                    int v = value(a);
                    st.ins.push_back(v);
                    plan.values[static_cast<std::size_t>(v)].last_step = std::max(plan.values[static_cast<std::size_t>(v)].last_step, s);
                }
            st.in_off.push_back(static_cast<std::uint16_t>(st.ins.size()));
        }
        st.out_off.push_back(0);
        for (auto& sd : st.def->outputs) {
            if (auto* sl = op.output(sd.name))
                for (auto& a : sl->arguments) {
                    int v = value(a);
                    auto& pv = plan.values[static_cast<std::size_t>(v)];
                    st.outs.push_back(v);
                    pv.written = true;
                    pv.first_step = std::min(pv.first_step, s);
                    pv.last_step = std::max(pv.last_step, s);
                }
            st.out_off.push_back(static_cast<std::uint16_t>(st.outs.size()));
        }
        plan.steps.push_back(std::move(st));
    }
    for (auto& t : targets) {
        if (t.var.empty()) {
            plan.target_values.push_back(-1);
            continue;
        }
        int v = value(t.var);
        plan.values[static_cast<std::size_t>(v)].target = true;
        plan.values[static_cast<std::size_t>(v)].last_step = INT_MAX;
        plan.target_values.push_back(v);
    }
    for (auto& f : fed) {
        auto it = index.find(f);
        plan.feed_values.push_back(it == index.end() ? -1 : it->second);
    }
    for (auto& n : scope_reads) plan.scope_reads.push_back(value(n));

    // Memory plan: intermediates share arena slots when lifetimes do not
    // overlap; a target has a slot of its own, kept to the end.
    std::vector<int> free_slots;
    std::vector<bool> released(plan.values.size(), false);
    for (int s = 0; s < static_cast<int>(plan.steps.size()); ++s) {
        auto& st = plan.steps[static_cast<std::size_t>(s)];
        for (int v : st.outs) {
            auto& pv = plan.values[static_cast<std::size_t>(v)];
            if (pv.kind != ValueKind::intermediate || pv.slot >= 0) continue;
            // A target keeps a slot of its own, so its buffer can be handed
            // to the caller (see Session::eval_into) without touching others.
            if (!free_slots.empty() && !pv.target) {
                pv.slot = free_slots.back();
                free_slots.pop_back();
            } else {
                pv.slot = plan.num_slots++;
            }
        }
        auto release = [&](int v) {
            auto& pv = plan.values[static_cast<std::size_t>(v)];
            if (pv.kind == ValueKind::intermediate && pv.slot >= 0 && pv.last_step == s && !pv.target &&
                !released[static_cast<std::size_t>(v)]) {
                free_slots.push_back(pv.slot);
                released[static_cast<std::size_t>(v)] = true;
            }
        };
        for (int v : st.ins) release(v);
        for (int v : st.outs) release(v);
    }
    return plan;
}

DLGRAPH_INLINE void infer_plan(const ExecutionPlan& p, std::vector<VarMeta>& metas, std::vector<bool>& known,
                               std::vector<DataType>& kernel_dtypes, DeviceKind device, std::string_view device_name,
                               const std::vector<Variable*>* vars) {
    kernel_dtypes.assign(p.steps.size(), DataType::FP32);
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        const PlannedStep& st = p.steps[s];
        std::vector<const VarMeta*> ins;
        std::vector<const Variable*> in_vars;
        std::vector<VarMeta> outs;
        std::vector<VarMeta*> outp;
        for (int v : st.ins) {
            ins.push_back(&metas[static_cast<std::size_t>(v)]);
            if (vars) in_vars.push_back((*vars)[static_cast<std::size_t>(v)]);
        }
        for (int v : st.outs) outs.push_back(p.values[static_cast<std::size_t>(v)].declared);
        for (auto& m : outs) outp.push_back(&m);
        InferContext ctx(*st.def, st.label, {ins.data(), st.in_off.data()}, {outp.data(), st.out_off.data()},
                         st.attrs.data(), {vars ? in_vars.data() : nullptr, st.in_off.data()});
        st.def->infer(ctx);
        for (std::size_t k = 0; k < st.outs.size(); ++k) {
            const auto v = static_cast<std::size_t>(st.outs[k]);
            const PlannedValue& pv = p.values[v];
            if (pv.type != VarType::LOD_TENSOR) continue;  // a fetch list: no tensor meta
            if (!outs[k].shape.known())
                throw shape_error("dlgraph.shape.unknown", st.label + ": could not infer the shape of '" + pv.name +
                                                               "' (got " + to_string(outs[k].shape) + ")");
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
            metas[v] = outs[k];
            known[v] = true;
        }
        const DataType kt = kernel_dtype(*st.def, ctx, st.attrs.data());
        (void)device_name;
        check_kernel(*st.def, kt, st.label, device, false);
        kernel_dtypes[s] = kt;
    }
}

DLGRAPH_INLINE std::size_t meta_bytes(const VarMeta& m) {
    return m.shape.known() ? static_cast<std::size_t>(m.shape.numel()) * dtype_size(m.dtype) : 0;
}

DLGRAPH_INLINE MemoryPlan plan_memory(const ExecutionPlan& p, const std::vector<VarMeta>& metas, bool in_place) {
    MemoryPlan m;
    const std::size_t nv = p.values.size();
    m.value_slot.assign(nv, -1);
    m.value_offset.assign(nv, 0);
    m.slot_bytes.push_back(0);
    auto shared_value = [&](std::size_t v) {
        const PlannedValue& pv = p.values[v];
        return pv.kind == ValueKind::intermediate && pv.slot >= 0 && !pv.target;
    };
    // host[v]: the value whose memory v takes over (in place), or -1.
    std::vector<int> host(nv, -1);
    for (int s = 0; in_place && s < static_cast<int>(p.steps.size()); ++s) {
        const PlannedStep& st = p.steps[static_cast<std::size_t>(s)];
        if (!st.def->fusible.arity || st.outs.empty() || st.ins.empty() || st.in_off[1] == st.in_off[0]) continue;
        const auto o = static_cast<std::size_t>(st.outs[0]), x = static_cast<std::size_t>(st.ins[st.in_off[0]]);
        if (!shared_value(o) || !shared_value(x) || p.values[x].last_step != s || p.values[x].first_step >= s) continue;
        if (metas[x].dtype != metas[o].dtype || meta_bytes(metas[x]) != meta_bytes(metas[o]) || !meta_bytes(metas[o]))
            continue;
        host[o] = static_cast<int>(x);
    }
    // Values that share memory form chains x -> o -> ...; each chain is
    // placed once, by its first value, live over the union of its members.
    struct item {
        int v;
        std::size_t bytes, offset;
        int first, last;
    };
    std::vector<item> shared;
    std::vector<int> root(nv, -1);
    auto root_of = [&](std::size_t v) {
        while (host[v] >= 0) v = static_cast<std::size_t>(host[v]);
        return v;
    };
    for (std::size_t v = 0; v < nv; ++v) {
        const PlannedValue& pv = p.values[v];
        if (pv.kind != ValueKind::intermediate || pv.slot < 0) continue;
        const std::size_t bytes = meta_bytes(metas[v]);
        m.unshared_bytes += bytes;
        if (pv.target) {
            m.value_slot[v] = static_cast<int>(m.slot_bytes.size());
            m.slot_bytes.push_back(bytes);
            continue;
        }
        root[v] = static_cast<int>(root_of(v));
        if (host[v] >= 0) continue;
        // Cache-line aligned from 1 KiB on (a vector load across two lines
        // costs streaming kernels); small values pack at 16 bytes.
        const std::size_t align = bytes >= 1024 ? buffer_alignment : 16;
        const std::size_t rounded = (bytes + align - 1) / align * align;
        shared.push_back({static_cast<int>(v), rounded, 0, pv.first_step, std::max(pv.last_step, pv.first_step)});
    }
    std::vector<int> item_of(nv, -1);
    for (std::size_t i = 0; i < shared.size(); ++i) item_of[static_cast<std::size_t>(shared[i].v)] = static_cast<int>(i);
    for (std::size_t v = 0; v < nv; ++v)  // a chain is live until its last member dies
        if (host[v] >= 0) {
            item& it = shared[static_cast<std::size_t>(item_of[static_cast<std::size_t>(root[v])])];
            it.last = std::max({it.last, p.values[v].last_step, p.values[v].first_step});
        }
    std::stable_sort(shared.begin(), shared.end(), [](const item& a, const item& b) { return a.bytes > b.bytes; });
    std::vector<const item*> placed, overlapping;
    for (auto& it : shared) {
        overlapping.clear();
        for (const item* q : placed)
            if (!(q->last < it.first || it.last < q->first)) overlapping.push_back(q);
        std::sort(overlapping.begin(), overlapping.end(), [](const item* a, const item* b) { return a->offset < b->offset; });
        std::size_t at = 0;
        for (const item* q : overlapping) {
            if (q->offset >= at + it.bytes) break;  // the gap before q fits
            at = std::max(at, q->offset + q->bytes);
        }
        it.offset = at;
        placed.push_back(&it);
        m.value_offset[static_cast<std::size_t>(it.v)] = at;
        m.slot_bytes[0] = std::max(m.slot_bytes[0], at + it.bytes);
    }
    for (std::size_t v = 0; v < nv; ++v)
        if (root[v] >= 0) {
            m.value_slot[v] = 0;
            m.value_offset[v] = m.value_offset[static_cast<std::size_t>(root[v])];
        }
    for (auto b : m.slot_bytes) m.arena_bytes += b;
    // The bound counts a chain of values that share memory once: while two
    // of them are live (the step that writes one over the other), both are
    // the same bytes.
    for (int s = 0; s < static_cast<int>(p.steps.size()); ++s) {
        std::size_t live = 0;
        for (std::size_t v = 0; v < nv; ++v) {
            const PlannedValue& pv = p.values[v];
            if (pv.kind == ValueKind::intermediate && pv.first_step <= s &&
                (std::max(pv.last_step, pv.first_step) >= s || pv.target)) {
                const bool hosted_here = host[v] >= 0 && pv.first_step == s;  // its host is live and counted
                if (!hosted_here) live += meta_bytes(metas[v]);
            }
        }
        m.lower_bound = std::max(m.lower_bound, live);
    }
    return m;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
