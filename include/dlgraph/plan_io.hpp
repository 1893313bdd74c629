// ExecutionPlans as JSON (ADL to_json, so `json j = plan;` works) and as a
// human-readable listing (describe). A plan that has been shaped
// (shape_plan, or a session's plan after a run) also shows its concrete
// shapes and its memory per place.
//
// JSON layout:
//   {"targets": [{"var": "y", "op": -1}, {"var": null, "op": 4}],
//    "fed": ["x"], "device": "cpu",
//    "steps": [{"op_index": 1, "type": "elementwise_mul", "label": "elementwise_mul (op #1)", "place": "cpu",
//               "inputs": {"X": ["x"], "Y": ["w"]}, "outputs": {"Out": ["elementwise_mul_0"]}}, ...],
//    "values": [{"name": "x", "kind": "feed", "dtype": "FP32", "dims": [-1, 3], "place": "cpu",
//                "copy_of": null, "first_step": null, "last_step": 0, "target": false}, ...],
//    "memory": {"values": [{"name", "dtype", "shape", "bytes", "slot", "offset"}], "slot_bytes": [...],
//               "slot_place": ["cpu", ...], "places": {"cpu": {"arena_bytes", "unshared_bytes", "lower_bound"}}}}
// Step numbers are positions in "steps" (not op indices); copies the planner
// inserted have "op_index": null. A place is "cpu" or the device's name.
// null means "not applicable": not a copy, not written by the plan
// (first_step), alive to the end because it is a target (last_step), or
// outside the arena (slot). "memory" is there only for a shaped plan.
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

// The plan's JSON (the same as `json j = plan`).
DLGRAPH_INLINE json plan_json(const ExecutionPlan& p);

// A listing of the plan: one line per step ("#3 mul  X=x,Y=w -> Out=mul_0",
// numbered by op index, "copy" for an inserted copy; a slot with several
// variables is "X=[a,b]"; "[name]" for a step on the device), then one line
// per value (kind, dtype, dims, place when not the host, and the ops
// between which it lives). A shaped plan's values show their concrete
// shapes, bytes and arena slot and offset, followed by each slot's bytes
// and, per place, the arena total, what one buffer per value would take and
// the lower bound.
DLGRAPH_INLINE std::string describe(const ExecutionPlan& p);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph::detail {

DLGRAPH_INLINE std::string place_name(const ExecutionPlan& p, Place where) {
    return where == Place::device ? p.device : std::string(cpu::name);
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE void to_json(json& j, const ExecutionPlan& p) {
    json targets = json::array();
    for (auto& t : p.targets) targets.push_back({{"var", t.var.empty() ? json(nullptr) : json(t.var)}, {"op", t.op}});
    auto value_name = [&](int v) { return p.values[static_cast<std::size_t>(v)].name; };
    auto slots = [&](const std::vector<SlotDef>& defs, const std::vector<std::uint32_t>& off, const std::vector<int>& vals) {
        json o = json::object();
        for (std::size_t k = 0; k + 1 < off.size() && k < defs.size(); ++k) {
            if (off[k] == off[k + 1]) continue;
            json names = json::array();
            for (int i = static_cast<int>(off[k]); i < static_cast<int>(off[k + 1]); ++i) names.push_back(value_name(vals[static_cast<std::size_t>(i)]));
            o[std::string(defs[k].name)] = std::move(names);
        }
        return o;
    };
    json steps = json::array();
    for (auto& st : p.steps) {
        json s = {{"op_index", st.is_copy() ? json(nullptr) : json(st.op_index)},
                  {"type", std::string(st.def->type)},
                  {"label", st.label},
                  {"place", detail::place_name(p, st.place)}};
        s["inputs"] = slots(st.def->inputs, st.in_off, st.ins);
        s["outputs"] = slots(st.def->outputs, st.out_off, st.outs);
        steps.push_back(std::move(s));
    }
    json values = json::array();
    for (auto& v : p.values) {
        values.push_back({{"name", v.name},
                          {"kind", std::string(value_kind_names[static_cast<int>(v.kind)])},
                          {"dtype", std::string(dtype_name(v.declared.dtype))},
                          {"dims", v.declared.shape.vec()},
                          {"place", detail::place_name(p, v.place)},
                          {"copy_of", v.copy_of >= 0 ? json(value_name(v.copy_of)) : json(nullptr)},
                          {"first_step", v.written && v.first_step != INT_MAX ? json(v.first_step) : json(nullptr)},
                          {"last_step", v.last_step == INT_MAX ? json(nullptr) : json(v.last_step)},
                          {"target", v.target}});
    }
    j = json{{"targets", std::move(targets)}, {"fed", p.fed},         {"device", p.device},
             {"steps", std::move(steps)},     {"values", std::move(values)}};
    if (!p.shaped) return;
    const MemoryPlan& m = p.memory;
    json mvalues = json::array();
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const VarMeta& mt = p.metas[v];
        const bool in_slot = m.value_slot[v] >= 0;
        mvalues.push_back({{"name", p.values[v].name},
                           {"dtype", std::string(dtype_name(mt.dtype))},
                           {"shape", mt.shape.vec()},
                           {"bytes", meta_bytes(mt)},
                           {"slot", in_slot ? json(m.value_slot[v]) : json(nullptr)},
                           {"offset", in_slot ? json(m.value_offset[v]) : json(nullptr)}});
    }
    json slot_place = json::array(), places = json::object();
    for (Place pl : m.slot_place) slot_place.push_back(detail::place_name(p, pl));
    for (int pl = 0; pl < (p.has_device ? 2 : 1); ++pl) {
        const MemoryFigures& f = m.figures[static_cast<std::size_t>(pl)];
        places[detail::place_name(p, static_cast<Place>(pl))] = {
            {"arena_bytes", f.arena_bytes}, {"unshared_bytes", f.unshared_bytes}, {"lower_bound", f.lower_bound}};
    }
    j["memory"] = {{"values", std::move(mvalues)},
                   {"slot_bytes", m.slot_bytes},
                   {"slot_place", std::move(slot_place)},
                   {"places", std::move(places)}};
}

DLGRAPH_INLINE json plan_json(const ExecutionPlan& p) { return json(p); }

}  // namespace dlgraph

namespace dlgraph::detail {

// "X=x,Y=[a,b]": a step's slots and the values in them.
DLGRAPH_INLINE std::string describe_slots(const ExecutionPlan& p, const std::vector<SlotDef>& defs,
                                          const std::vector<std::uint32_t>& off, const std::vector<int>& vals) {
    std::string s;
    for (std::size_t k = 0; k + 1 < off.size() && k < defs.size(); ++k) {
        const int n = off[k + 1] - off[k];
        if (n == 0) continue;
        if (!s.empty()) s += ",";
        s += std::string(defs[k].name) + "=";
        if (n > 1) s += "[";
        for (int i = static_cast<int>(off[k]); i < static_cast<int>(off[k + 1]); ++i) {
            if (i > static_cast<int>(off[k])) s += ",";
            s += p.values[static_cast<std::size_t>(vals[static_cast<std::size_t>(i)])].name;
        }
        if (n > 1) s += "]";
    }
    return s;
}

DLGRAPH_INLINE std::string describe_header(const ExecutionPlan& p) {
    int copies = 0, on_device = 0;
    for (auto& st : p.steps) {
        copies += st.is_copy();
        on_device += !st.is_copy() && st.place == Place::device;
    }
    std::string out = "plan: " + std::to_string(p.steps.size()) + " steps, " + std::to_string(p.values.size()) + " values";
    if (p.has_device)
        out += ", " + std::to_string(on_device) + " steps on " + p.device + ", " + std::to_string(copies) + " copies";
    out += "\ntargets:";
    for (auto& t : p.targets) {
        if (t.var.empty()) out += " op #" + std::to_string(t.op);
        else if (t.op >= 0) out += " " + t.var + " (op #" + std::to_string(t.op) + ")";
        else out += " " + t.var;
    }
    out += "\nfed:";
    if (p.fed.empty()) out += " (none)";
    for (auto& f : p.fed) out += " " + f;
    return out + "\n";
}

DLGRAPH_INLINE std::string describe_steps(const ExecutionPlan& p) {
    std::string out = "steps:\n";
    if (p.steps.empty()) out += "  (none)\n";
    for (auto& st : p.steps) {
        out += "  " + std::string(st.is_copy() ? "copy" : "#" + std::to_string(st.op_index)) + " " +
               std::string(st.def->type) + "  ";
        const std::string ins = describe_slots(p, st.def->inputs, st.in_off, st.ins);
        out += (ins.empty() ? "(no inputs)" : ins) + " -> " + describe_slots(p, st.def->outputs, st.out_off, st.outs);
        if (!st.is_copy() && st.place == Place::device) out += "  [" + p.device + "]";
        out += "\n";
    }
    return out;
}

DLGRAPH_INLINE std::string describe_values(const ExecutionPlan& p) {
    auto op_at = [&](int step) {
        const PlannedStep& st = p.steps[static_cast<std::size_t>(step)];
        return st.is_copy() ? "copy@" + std::to_string(step) : "#" + std::to_string(st.op_index);
    };
    auto pad = [](std::string s, std::size_t w) {
        if (s.size() < w) s.append(w - s.size(), ' ');
        return s;
    };
    std::string out = "values:\n";
    if (p.values.empty()) out += "  (none)\n";
    std::size_t wname = 0, wtype = 0, wbytes = 0;
    std::vector<std::string> types, bytes;
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const VarMeta& m = p.shaped ? p.metas[v] : p.values[v].declared;
        types.push_back(std::string(dtype_name(m.dtype)) + " " + to_string(m.shape));
        bytes.push_back(p.shaped ? std::to_string(meta_bytes(m)) + " bytes" : std::string());
        wname = std::max(wname, p.values[v].name.size());
        wtype = std::max(wtype, types.back().size());
        wbytes = std::max(wbytes, bytes.back().size());
    }
    for (std::size_t v = 0; v < p.values.size(); ++v) {
        const PlannedValue& pv = p.values[v];
        std::string line = "  " + pad(pv.name, wname) + "  " +
                           pad(std::string(value_kind_names[static_cast<int>(pv.kind)]), 12) + "  " + pad(types[v], wtype);
        if (p.shaped) line += "  " + pad(bytes[v], wbytes);
        if (pv.place == Place::device) line += "  on " + p.device;
        if (p.shaped && p.memory.value_slot[v] >= 0)
            line += "  slot " + std::to_string(p.memory.value_slot[v]) + " @" + std::to_string(p.memory.value_offset[v]);
        if (pv.written && pv.first_step != INT_MAX)
            line += "  live " + op_at(pv.first_step) + ".." + (pv.last_step == INT_MAX ? std::string("end") : op_at(pv.last_step));
        if (pv.target) line += "  target";
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

DLGRAPH_INLINE std::string describe_memory(const ExecutionPlan& p) {
    const MemoryPlan& m = p.memory;
    std::string out = "memory:\n";
    for (std::size_t s = 0; s < m.slot_bytes.size(); ++s) {
        std::string users;
        for (std::size_t v = 0; v < p.values.size(); ++v)
            if (m.value_slot[v] == static_cast<int>(s)) users += (users.empty() ? "" : ", ") + p.values[v].name;
        out += "  slot " + std::to_string(s) + ": " + std::to_string(m.slot_bytes[s]) + " bytes on " +
               place_name(p, m.slot_place[s]) + " (" + users + ")\n";
    }
    for (int pl = 0; pl < (p.has_device ? 2 : 1); ++pl) {
        const MemoryFigures& f = m.figures[static_cast<std::size_t>(pl)];
        int nslots = 0;
        for (Place sp : m.slot_place) nslots += sp == static_cast<Place>(pl);
        out += "  " + place_name(p, static_cast<Place>(pl)) + ": arena " + std::to_string(f.arena_bytes) + " bytes in " +
               std::to_string(nslots) + " slots, one buffer per value " + std::to_string(f.unshared_bytes) +
               " bytes, lower bound " + std::to_string(f.lower_bound) + " bytes\n";
    }
    return out;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE std::string describe(const ExecutionPlan& p) {
    std::string out = detail::describe_header(p) + detail::describe_steps(p) + detail::describe_values(p);
    if (p.shaped) out += detail::describe_memory(p);
    return out;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
