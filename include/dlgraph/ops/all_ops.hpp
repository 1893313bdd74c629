// Every op's definition and CPU kernels, and the table over them (see
// op_table.hpp for the two ways they are compiled). Row NAME of the table is
// ops::NAME_def() (the definition) given its CPU kernels by
// cpu_ops::NAME_kernels(OpDef&); a missing one fails the build.
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "dlgraph/cpu/collective.hpp"
#include "dlgraph/cpu/conv.hpp"
#include "dlgraph/cpu/dropout.hpp"
#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/cpu/eval_ops.hpp"
#include "dlgraph/cpu/feed_fetch.hpp"
#include "dlgraph/cpu/fill.hpp"
#include "dlgraph/cpu/index.hpp"
#include "dlgraph/cpu/io_ops.hpp"
#include "dlgraph/cpu/logic.hpp"
#include "dlgraph/cpu/loss.hpp"
#include "dlgraph/cpu/matmul.hpp"
#include "dlgraph/cpu/memcpy.hpp"
#include "dlgraph/cpu/norm.hpp"
#include "dlgraph/cpu/optimizers.hpp"
#include "dlgraph/cpu/reduce.hpp"
#include "dlgraph/cpu/shape_ops.hpp"
#include "dlgraph/cpu/softmax.hpp"
#include "dlgraph/ops/op_table.hpp"

namespace dlgraph {

DLGRAPH_INLINE const std::vector<OpDef>& op_table() {
    static const std::vector<OpDef> table = [] {
        std::vector<OpDef> t;
        t.reserve(static_cast<std::size_t>(op_count));
#define DLGRAPH_X(name)                  \
    t.push_back(ops::name##_def());      \
    cpu_ops::name##_kernels(t.back());
        DLGRAPH_OP_LIST(DLGRAPH_X)
#undef DLGRAPH_X
        return t;
    }();
    return table;
}

namespace detail {
// The ops registered from user code. A definition never moves or goes (the
// planner keeps pointers to it); `text` owns the strings its views show.
struct op_registry {
    std::shared_mutex mutex;
    std::map<std::string, std::unique_ptr<OpDef>, std::less<>> by_type;
    std::vector<const OpDef*> order;
    std::deque<std::string> text;
};
DLGRAPH_INLINE op_registry& registry() {
    static op_registry r;
    return r;
}
DLGRAPH_INLINE const OpDef* find_builtin_op(std::string_view type) {
    static const std::unordered_map<std::string_view, const OpDef*> index = [] {
        std::unordered_map<std::string_view, const OpDef*> m;
        for (auto& d : op_table()) m.emplace(d.type, &d);
        return m;
    }();
    auto it = index.find(type);
    return it == index.end() ? nullptr : it->second;
}
}  // namespace detail

DLGRAPH_INLINE const OpDef* find_op(std::string_view type) {
    if (const OpDef* d = detail::find_builtin_op(type)) return d;
    auto& r = detail::registry();
    std::shared_lock lock(r.mutex);
    auto it = r.by_type.find(type);
    return it == r.by_type.end() ? nullptr : it->second.get();
}

DLGRAPH_INLINE std::vector<const OpDef*> registered_ops() {
    auto& r = detail::registry();
    std::shared_lock lock(r.mutex);
    return r.order;
}

DLGRAPH_INLINE void check_op_definition(const OpDef& d) {
    const std::string op = "op '" + std::string(d.type) + "'";
    auto fail = [&](const std::string& why) { throw graph_error("dlgraph.op.definition", op + ": " + why); };
    if (d.type.empty()) throw graph_error("dlgraph.op.definition", "an op definition needs a type");
    if (!d.infer) fail("no shape inference (infer)");
    auto has = [](const std::vector<SlotDef>& slots, std::string_view n) {
        return std::any_of(slots.begin(), slots.end(), [&](const SlotDef& s) { return s.name == n; });
    };
    for (auto* slots : {&d.inputs, &d.outputs}) {
        const char* side = slots == &d.inputs ? "input" : "output";
        for (std::size_t i = 0; i < slots->size(); ++i) {
            const std::string_view n = (*slots)[i].name;
            if (n.empty()) fail(std::string(side) + " slot " + std::to_string(i) + " has no name");
            for (std::size_t j = 0; j < i; ++j)
                if ((*slots)[j].name == n) fail(std::string(side) + " slot '" + std::string(n) + "' is declared twice");
        }
    }
    for (std::size_t i = 0; i < d.attrs.size(); ++i) {
        const AttrDef& a = d.attrs[i];
        if (a.name.empty()) fail("attribute " + std::to_string(i) + " has no name");
        if (a.value.name != a.name)
            fail("attribute '" + std::string(a.name) + "' has a default named '" + a.value.name + "'");
        for (std::size_t j = 0; j < i; ++j)
            if (d.attrs[j].name == a.name) fail("attribute '" + std::string(a.name) + "' is declared twice");
    }
    if (!kernel_choice_valid(d)) {
        if (d.kernel_slot >= 0)
            fail("its kernel is chosen by input slot " + std::to_string(d.kernel_slot) +
                 ", which is optional or does not exist (it has " + std::to_string(d.inputs.size()) + ")");
        if (d.dtype_attr >= 0) fail("its kernel is chosen by attribute " + std::to_string(d.dtype_attr) + ", which is not an INT attribute");
        fail("its kernel is chosen by its first output, but it has none");
    }
    if (d.comm_ring_attr >= 0 && (d.comm_ring_attr >= static_cast<int>(d.attrs.size()) ||
                                  d.attrs[static_cast<std::size_t>(d.comm_ring_attr)].value.type != AttrType::INT))
        fail("its ring is attribute " + std::to_string(d.comm_ring_attr) + ", which is not an INT attribute");
    if (std::none_of(d.kernels.begin(), d.kernels.end(), [](KernelFn k) { return k != nullptr; }))
        fail("no CPU kernel (every op must run on the host)");
    for (std::size_t i = 0; i < d.device_kernels.size(); ++i) {
        if (d.device_kernels[i].first.empty()) fail("device_kernels[" + std::to_string(i) + "] names no device");
        for (std::size_t j = 0; j < i; ++j)
            if (d.device_kernels[j].first == d.device_kernels[i].first)
                fail("device '" + std::string(d.device_kernels[i].first) + "' has two kernel tables");
    }
    auto need = [&](const std::vector<SlotDef>& slots, std::string_view n, const std::string& what) {
        if (!has(slots, n)) fail(what + " names slot '" + std::string(n) + "', which the op does not have");
    };
    const GradSpec& g = d.grad_spec;
    if (!g.type.empty() && d.grad_maker) fail("it has both a GradSpec and a grad maker");
    if (g.type.empty() && !(g.ins.empty() && g.outs.empty() && g.grads.empty() && g.out_grads.empty()))
        fail("its GradSpec has slots but no type");
    for (auto n : g.ins) need(d.inputs, n, "GradSpec.ins");
    for (auto n : g.outs) need(d.outputs, n, "GradSpec.outs");
    for (auto n : g.grads) need(d.inputs, n, "GradSpec.grads");
    for (auto n : g.out_grads) need(d.outputs, n, "GradSpec.out_grads");
    for (auto n : d.no_grad_inputs) need(d.inputs, n, "no_grad_inputs");
    if (const OpDef* gd = g.type.empty() ? nullptr : find_op(g.type)) {
        // The grad op exists already: it must take what the spec passes it.
        auto need_grad = [&](const std::vector<SlotDef>& slots, const std::string& n, const char* side) {
            if (!has(slots, n))
                fail("its grad op '" + std::string(g.type) + "' has no " + side + " slot '" + n + "' for the GradSpec");
        };
        for (auto n : g.ins) need_grad(gd->inputs, std::string(n), "input");
        for (auto n : g.outs) {
            need_grad(gd->inputs, std::string(n), "input");
            need_grad(gd->inputs, grad_var_name(n), "input");
        }
        for (auto n : g.grads) need_grad(gd->outputs, grad_var_name(n), "output");
        for (auto n : g.out_grads) need_grad(gd->inputs, grad_var_name(n), "input");
    }
    const Fusible& f = d.fusible;
    if (f.arity < 0 || f.arity > 2) fail("fusible.arity is " + std::to_string(f.arity) + " (0, 1 or 2)");
    if (f.arity > 0) {
        // The fused chain passes input slots f.slots[0] (and [1]) and writes output 0.
        if (d.outputs.size() != 1) fail("fusible, but it has " + std::to_string(d.outputs.size()) + " output slots (one)");
        for (int k = 0; k < f.arity; ++k) {
            const int slot = f.slots[static_cast<std::size_t>(k)];
            if (slot < 0 || slot >= static_cast<int>(d.inputs.size()))
                fail("fusible, it reads input slot " + std::to_string(slot) + ", which does not exist (it has " +
                     std::to_string(d.inputs.size()) + ")");
            if (k == 1 && slot == f.slots[0]) fail("fusible, it reads input slot " + std::to_string(slot) + " twice");
            const SlotDef& sd = d.inputs[static_cast<std::size_t>(slot)];
            if (sd.duplicable || sd.optional) fail("fusible, its input slot '" + std::string(sd.name) + "' must take one variable");
        }
        if (f.arity == 2 && f.axis_attr >= 0 &&
            (f.axis_attr >= static_cast<int>(d.attrs.size()) ||
             d.attrs[static_cast<std::size_t>(f.axis_attr)].value.type != AttrType::INT))
            fail("fusible, its axis is attribute " + std::to_string(f.axis_attr) + ", which is not an INT attribute");
        if (!f.fp32 && !f.fp64) fail("fusible, but it has no block function (fp32 or fp64)");
    }
    if ((d.prepack_input >= 0) != (d.prepack != nullptr)) fail("prepack_input and prepack go together");
    if (d.prepack_input >= static_cast<int>(d.inputs.size())) fail("prepack_input is not an input slot");
}

DLGRAPH_INLINE const OpDef& register_op(OpDef def) {
    check_op_definition(def);
    auto& r = detail::registry();
    std::unique_lock lock(r.mutex);
    if (detail::find_builtin_op(def.type) || r.by_type.count(def.type))
        throw graph_error("dlgraph.op.duplicate", "op '" + std::string(def.type) + "' is already " +
                                                      (detail::find_builtin_op(def.type) ? "a built-in op" : "registered"));
    auto keep = [&](std::string_view& v) {
        if (v.empty()) return;
        r.text.emplace_back(v);
        v = r.text.back();
    };
    keep(def.type);
    keep(def.doc);
    for (auto* slots : {&def.inputs, &def.outputs})
        for (auto& sd : *slots) keep(sd.name);
    for (auto& a : def.attrs) keep(a.name);
    keep(def.grad_spec.type);
    for (auto* names : {&def.grad_spec.ins, &def.grad_spec.outs, &def.grad_spec.grads, &def.grad_spec.out_grads,
                        &def.no_grad_inputs})
        for (auto& n : *names) keep(n);
    for (auto& dk : def.device_kernels) keep(dk.first);
    auto owned = std::make_unique<OpDef>(std::move(def));
    const OpDef& d = *owned;
    r.by_type.emplace(std::string(d.type), std::move(owned));
    r.order.push_back(&d);
    return d;
}

}  // namespace dlgraph
