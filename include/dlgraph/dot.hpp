// Graphviz DOT text for a program (block 0) or an execution plan, for
// `dot -Tsvg`. Ops are boxes labeled "type\n#index"; variables are ellipses
// labeled with name, dtype and dims. In a program, persistable variables are
// filled grey; in a plan, feeds are light blue, values read from the scope
// (persistables) grey, targets drawn with a double border, intermediates
// carry their arena slot once the plan is shaped, values and steps on a
// device carry its name, and inserted copies are drawn as "copy" steps.
// Edges run var -> op for inputs and
// op -> var for outputs, labeled with the slot. Node ids are generated
// ("v3", "op7"), so names never need to be valid DOT ids; labels escape
// quotes, backslashes and control characters.
#pragma once

#include <map>
#include <string>

#include "dlgraph/config.hpp"
#include "dlgraph/planner.hpp"

namespace dlgraph {

namespace detail {

// Text for a double-quoted DOT label: '"' and '\' escaped, newlines as the
// label escape "\n", other control characters as '?'. A trailing backslash
// gets a space after it: Graphviz's lexer reads the '\"' of '...\\"' as an
// escaped quote, so a string must never end in an escaped backslash.
DLGRAPH_INLINE std::string dot_escape(std::string_view s);

// "[-1,3]", as to_string(Shape) writes dims (any rank).
DLGRAPH_INLINE std::string dot_dims(const std::vector<std::int64_t>& dims);

DLGRAPH_INLINE const char* dot_header();

}  // namespace detail

// The dataflow graph of block 0 of `p`. Needs no validation: variables that
// ops use without declaring them are drawn dashed.
DLGRAPH_INLINE std::string to_dot(const ProgramDesc& p);

// The planned steps and values of `plan` only.
DLGRAPH_INLINE std::string to_dot(const ExecutionPlan& plan);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph::detail {

DLGRAPH_INLINE std::string dot_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            out += '?';
        } else {
            out += c;
        }
    }
    if (!s.empty() && s.back() == '\\') out += ' ';
    return out;
}

DLGRAPH_INLINE std::string dot_dims(const std::vector<std::int64_t>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(dims[i]);
    }
    return s + "]";
}

DLGRAPH_INLINE const char* dot_header() {
    return "  rankdir=TB;\n"
           "  node [fontname=\"Helvetica\", fontsize=10];\n"
           "  edge [fontname=\"Helvetica\", fontsize=9];\n";
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE std::string to_dot(const ProgramDesc& p) {
    std::string out = "digraph program {\n";
    out += detail::dot_header();
    if (p.blocks.empty()) return out + "}\n";
    const BlockDesc& blk = p.blocks[0];
    std::map<std::string, std::string, std::less<>> ids;  // variable name -> node id
    auto var_node = [&](const std::string& name) -> const std::string& {
        auto it = ids.find(name);
        if (it != ids.end()) return it->second;
        std::string id = "v" + std::to_string(ids.size());
        const VarDesc* vd = blk.find_var(name);
        out += "  " + id + " [shape=ellipse, ";
        if (!vd) {
            out += "style=dashed, label=\"" + detail::dot_escape(name) + "\\n(undeclared)\"];\n";
        } else {
            std::string label = detail::dot_escape(name) + "\\n";
            if (vd->type == VarType::LOD_TENSOR)
                label += std::string(dtype_name(vd->data_type)) + " " + detail::dot_dims(vd->dims);
            else
                label += std::string(var_type_name(vd->type));
            if (vd->persistable) out += "style=filled, fillcolor=\"#d9d9d9\", peripheries=2, ";
            out += "label=\"" + label + (vd->persistable ? "\\npersistable" : "") + "\"];\n";
        }
        return ids.emplace(name, std::move(id)).first->second;
    };
    // Declared variables first, in declaration order, so the output is stable.
    for (auto& v : blk.vars) var_node(v.name);
    for (std::size_t i = 0; i < blk.ops.size(); ++i) {
        const OpDesc& op = blk.ops[i];
        const std::string oid = "op" + std::to_string(i);
        out += "  " + oid + " [shape=box, style=\"rounded,filled\", fillcolor=\"#fff2cc\", label=\"" +
               detail::dot_escape(op.type) + "\\n#" + std::to_string(i) + "\"];\n";
        for (auto& s : op.inputs)
            for (auto& a : s.arguments)
                out += "  " + var_node(a) + " -> " + oid + " [label=\"" + detail::dot_escape(s.parameter) + "\"];\n";
        for (auto& s : op.outputs)
            for (auto& a : s.arguments)
                out += "  " + oid + " -> " + var_node(a) + " [label=\"" + detail::dot_escape(s.parameter) + "\"];\n";
    }
    return out + "}\n";
}

DLGRAPH_INLINE std::string to_dot(const ExecutionPlan& plan) {
    std::string out = "digraph plan {\n";
    out += detail::dot_header();
    for (std::size_t v = 0; v < plan.values.size(); ++v) {
        const PlannedValue& pv = plan.values[v];
        std::string label = detail::dot_escape(pv.name) + "\\n" + std::string(dtype_name(pv.declared.dtype)) + " " +
                            detail::dot_dims(pv.declared.shape.vec()) + "\\n";
        std::string style;
        switch (pv.kind) {
            case ValueKind::feed:
                label += "feed";
                style = "style=filled, fillcolor=\"#cfe2f3\", ";
                break;
            case ValueKind::persistable:
                label += "persistable";
                style = "style=filled, fillcolor=\"#d9d9d9\", ";
                break;
            case ValueKind::intermediate:
                label += plan.shaped && plan.memory.value_slot[v] >= 0
                             ? "slot " + std::to_string(plan.memory.value_slot[v])
                             : std::string(pv.copy_of >= 0 ? "copy" : "intermediate");
                break;
        }
        if (pv.place == Place::device) label += "\\non " + detail::dot_escape(plan.device);
        if (pv.target) {
            label += "\\ntarget";
            style += "peripheries=2, penwidth=2, ";
        }
        out += "  v" + std::to_string(v) + " [shape=ellipse, " + style + "label=\"" + label + "\"];\n";
    }
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
        const PlannedStep& st = plan.steps[s];
        const std::string sid = "s" + std::to_string(s);
        const std::string where = st.is_copy() ? std::string("copy")
                                  : "#" + std::to_string(st.op_index) +
                                        (st.place == Place::device ? " on " + plan.device : std::string());
        out += "  " + sid + " [shape=box, style=\"rounded,filled\", fillcolor=\"#fff2cc\", label=\"" +
               detail::dot_escape(std::string(st.def->type)) + "\\n" + detail::dot_escape(where) + "\"];\n";
        for (std::size_t k = 0; k + 1 < st.in_off.size() && k < st.def->inputs.size(); ++k)
            for (int i = static_cast<int>(st.in_off[k]); i < static_cast<int>(st.in_off[k + 1]); ++i)
                out += "  v" + std::to_string(st.ins[static_cast<std::size_t>(i)]) + " -> " + sid + " [label=\"" +
                       detail::dot_escape(st.def->inputs[k].name) + "\"];\n";
        for (std::size_t k = 0; k + 1 < st.out_off.size() && k < st.def->outputs.size(); ++k)
            for (int i = static_cast<int>(st.out_off[k]); i < static_cast<int>(st.out_off[k + 1]); ++i)
                out += "  " + sid + " -> v" + std::to_string(st.outs[static_cast<std::size_t>(i)]) + " [label=\"" +
                       detail::dot_escape(st.def->outputs[k].name) + "\"];\n";
    }
    return out + "}\n";
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
