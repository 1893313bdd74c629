// ExecutionPlans as JSON (ADL to_json, so `json j = plan;` works) and as a
// human-readable listing (describe), optionally with the memory a plan takes
// for concrete shapes (plan_memory from planner.hpp).
//
// JSON layout:
//   {"targets": [{"var": "y", "op": -1}, {"var": null, "op": 4}],
//    "fed": ["x"],
//    "steps": [{"op_index": 1, "type": "elementwise_mul", "label": "elementwise_mul (op #1)", "device": "cpu",
//               "inputs": {"X": ["x"], "Y": ["w"]}, "outputs": {"Out": ["elementwise_mul_0"]}}, ...],
//    "values": [{"name": "x", "kind": "feed", "dtype": "FP32", "dims": [-1, 3], "slot": null,
//                "first_step": null, "last_step": 0, "target": false}, ...],
//    "num_slots": 2}
// Step numbers are positions in "steps" (not op indices). null means "not
// applicable": no arena slot (feeds, persistables), not written by the plan
// (first_step), or alive to the end because it is a target (last_step).
#pragma once

#include <optional>

#include <climits>
#include <string>
#include <vector>

#include "dlgraph/config.hpp"
#include "dlgraph/json.hpp"
#include "dlgraph/planner.hpp"

namespace dlgraph {

DLGRAPH_INLINE void to_json(json& j, const ExecutionPlan& p);

namespace detail {
DLGRAPH_INLINE void check_metas(const ExecutionPlan& p, const std::vector<VarMeta>& metas);
}  // namespace detail

// The plan's JSON; with `metas` (one per value, concrete shapes, e.g. from
// infer_plan) also "memory": {"values": [{"name", "dtype", "shape", "bytes"}],
// "slot_bytes", "arena_bytes", "unshared_bytes", "lower_bound"}.
DLGRAPH_INLINE json plan_json(const ExecutionPlan& p, const std::vector<VarMeta>* metas = nullptr);

// A listing of the plan: one line per step ("#3 mul  X=x,Y=w -> Out=mul_0",
// numbered by op index; a slot with several variables is "X=[a,b]"), then
// one line per value (kind, dtype, dims, arena slot, and the ops between
// which it lives). With `metas` (one per value, concrete) the values show
// their concrete shapes and bytes, followed by each arena slot's bytes, the
// arena total, what one buffer per value would take and the lower bound.
DLGRAPH_INLINE std::string describe(const ExecutionPlan& p, const std::vector<VarMeta>* metas = nullptr);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph {

DLGRAPH_INLINE void to_json(json& j, const ExecutionPlan& p) {
    json targets = json::array();
    for (auto& t : p.targets) targets.push_back({{"var", t.var.empty() ? json(nullptr) : json(t.var)}, {"op", t.op}});
    auto value_name = [&](int v) { return p.values[static_cast<std::size_t>(v)].name; };
    auto slots = [&](const std::vector<SlotDef>& defs, const std::vector<std::uint16_t>& off, const std::vector<int>& vals) {
        json o = json::object();
        for (std::size_t k = 0; k + 1 < off.size() && k < defs.size(); ++k) {
            if (off[k] == off[k + 1]) continue;
            json names = json::array();
            for (int i = off[k]; i < off[k + 1]; ++i) names.push_back(value_name(vals[static_cast<std::size_t>(i)]));
            o[std::string(defs[k].name)] = std::move(names);
        }
        return o;
    };
    json steps = json::array();
    for (auto& st : p.steps) {
        json s = {{"op_index", st.op_index},
                  {"type", st.def ? std::string(st.def->type) : std::string()},
                  {"label", st.label},
                  {"device", std::string(device_names[static_cast<int>(st.device)])}};
        s["inputs"] = st.def ? slots(st.def->inputs, st.in_off, st.ins) : json::object();
        s["outputs"] = st.def ? slots(st.def->outputs, st.out_off, st.outs) : json::object();
        steps.push_back(std::move(s));
    }
    json values = json::array();
    for (auto& v : p.values) {
        values.push_back({{"name", v.name},
                          {"kind", std::string(value_kind_names[static_cast<int>(v.kind)])},
                          {"dtype", std::string(dtype_name(v.declared.dtype))},
                          {"dims", v.declared.shape.vec()},
                          {"slot", v.slot >= 0 ? json(v.slot) : json(nullptr)},
                          {"first_step", v.written && v.first_step != INT_MAX ? json(v.first_step) : json(nullptr)},
                          {"last_step", v.last_step == INT_MAX ? json(nullptr) : json(v.last_step)},
                          {"target", v.target}});
    }
    j = json{{"targets", std::move(targets)}, {"fed", p.fed},         {"steps", std::move(steps)},
             {"values", std::move(values)},   {"num_slots", p.num_slots}};
}

}  // namespace dlgraph

namespace dlgraph::detail {

DLGRAPH_INLINE void check_metas(const ExecutionPlan& p, const std::vector<VarMeta>& metas) {
    if (metas.size() != p.values.size())
        throw graph_error("dlgraph.graph.metas", "the plan has " + std::to_string(p.values.size()) +
                                                     " values but " + std::to_string(metas.size()) +
                                                     " metas were given");
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE json plan_json(const ExecutionPlan& p, const std::vector<VarMeta>* metas) {
    json j = p;
    if (!metas) return j;
    detail::check_metas(p, *metas);
    const MemoryPlan m = plan_memory(p, *metas);
    json values = json::array();
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const VarMeta& mt = (*metas)[v];
        values.push_back({{"name", p.values[v].name},
                          {"dtype", std::string(dtype_name(mt.dtype))},
                          {"shape", mt.shape.vec()},
                          {"bytes", meta_bytes(mt)}});
    }
    j["memory"] = {{"values", std::move(values)},
                   {"slot_bytes", m.slot_bytes},
                   {"arena_bytes", m.arena_bytes},
                   {"unshared_bytes", m.unshared_bytes},
                   {"lower_bound", m.lower_bound}};
    return j;
}

DLGRAPH_INLINE std::string describe(const ExecutionPlan& p, const std::vector<VarMeta>* metas) {
    if (metas) detail::check_metas(p, *metas);
    auto vname = [&](int v) -> const std::string& { return p.values[static_cast<std::size_t>(v)].name; };
    auto op_at = [&](int step) { return "#" + std::to_string(p.steps[static_cast<std::size_t>(step)].op_index); };
    auto pad = [](std::string s, std::size_t w) {
        if (s.size() < w) s.append(w - s.size(), ' ');
        return s;
    };

    std::string out = "plan: " + std::to_string(p.steps.size()) + " steps, " + std::to_string(p.values.size()) +
                      " values, " + std::to_string(p.num_slots) + " arena slots\n";
    out += "targets:";
    for (auto& t : p.targets) {
        if (t.var.empty()) out += " op #" + std::to_string(t.op);
        else if (t.op >= 0) out += " " + t.var + " (op #" + std::to_string(t.op) + ")";
        else out += " " + t.var;
    }
    out += "\nfed:";
    if (p.fed.empty()) out += " (none)";
    for (auto& f : p.fed) out += " " + f;
    out += "\nsteps:\n";
    if (p.steps.empty()) out += "  (none)\n";
    auto slot_list = [&](const std::vector<SlotDef>& defs, const std::vector<std::uint16_t>& off,
                         const std::vector<int>& vals) {
        std::string s;
        for (std::size_t k = 0; k + 1 < off.size() && k < defs.size(); ++k) {
            const int n = off[k + 1] - off[k];
            if (n == 0) continue;
            if (!s.empty()) s += ",";
            s += std::string(defs[k].name) + "=";
            if (n > 1) s += "[";
            for (int i = off[k]; i < off[k + 1]; ++i) {
                if (i > off[k]) s += ",";
                s += vname(vals[static_cast<std::size_t>(i)]);
            }
            if (n > 1) s += "]";
        }
        return s;
    };
    for (auto& st : p.steps) {
        std::string type = st.def ? std::string(st.def->type) : std::string("?");
        out += "  #" + std::to_string(st.op_index) + " " + type + "  ";
        if (st.def) {
            std::string ins = slot_list(st.def->inputs, st.in_off, st.ins);
            out += ins.empty() ? "(no inputs)" : ins;
            out += " -> " + slot_list(st.def->outputs, st.out_off, st.outs);
        }
        if (st.device != DeviceKind::CPU) out += "  [" + std::string(device_names[static_cast<int>(st.device)]) + "]";
        out += "\n";
    }

    out += "values:\n";
    if (p.values.empty()) out += "  (none)\n";
    std::size_t wname = 0, wtype = 0, wbytes = 0;
    std::vector<std::string> types, bytes;
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const VarMeta& m = metas ? (*metas)[v] : p.values[v].declared;
        types.push_back(std::string(dtype_name(m.dtype)) + " " + to_string(m.shape));
        bytes.push_back(metas ? std::to_string(meta_bytes(m)) + " bytes" : std::string());
        wname = std::max(wname, p.values[v].name.size());
        wtype = std::max(wtype, types.back().size());
        wbytes = std::max(wbytes, bytes.back().size());
    }
    // With concrete metas, slots are the memory plan's for those sizes.
    std::optional<MemoryPlan> mem;
    if (metas) mem = plan_memory(p, *metas);
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const PlannedValue& pv = p.values[v];
        const int slot = mem ? mem->value_slot[v] : pv.slot;
        std::string line = "  " + pad(pv.name, wname) + "  " +
                           pad(std::string(value_kind_names[static_cast<int>(pv.kind)]), 12) + "  " +
                           pad(types[v], wtype);
        if (metas) line += "  " + pad(bytes[v], wbytes);
        if (slot >= 0) line += "  slot " + std::to_string(slot);
        if (mem && slot == 0) line += " @" + std::to_string(mem->value_offset[v]);
        if (pv.written && pv.first_step != INT_MAX)
            line += "  live " + op_at(pv.first_step) + ".." +
                    (pv.last_step == INT_MAX ? std::string("end") : op_at(pv.last_step));
        if (pv.target) line += "  target";
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }

    if (mem) {
        const MemoryPlan& m = *mem;
        out += "memory:\n";
        for (std::size_t s = 0; s < m.slot_bytes.size(); ++s) {
            std::string users;
            for (std::size_t v = 0; v < p.values.size(); ++v)
                if (m.value_slot[v] == static_cast<int>(s)) {
                    if (!users.empty()) users += ", ";
                    users += p.values[v].name;
                }
            out += "  slot " + std::to_string(s) + ": " + std::to_string(m.slot_bytes[s]) + " bytes (" + users + ")\n";
        }
        out += "  arena: " + std::to_string(m.arena_bytes) + " bytes in " + std::to_string(m.slot_bytes.size()) +
               " slots\n";
        out += "  one buffer per value: " + std::to_string(m.unshared_bytes) + " bytes\n";
        out += "  lower bound: " + std::to_string(m.lower_bound) + " bytes\n";
    }
    return out;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
