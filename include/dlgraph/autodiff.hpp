// Reverse-mode differentiation as a program rewrite: append_backward adds,
// after the forward ops, the grad ops that compute d(loss)/d(param) for the
// trainable parameters, made of ordinary ops (PaddlePaddle's conventions:
// `x@GRAD`; a variable read by several ops has its contributions summed).
#pragma once

#include <map>
#include <set>

#include "dlgraph/config.hpp"
#include "dlgraph/planner.hpp"

namespace dlgraph {

struct BackwardResult {
    // (parameter, its gradient variable), for the parameters the loss depends on.
    std::vector<std::pair<std::string, std::string>> param_grads;
    int first_grad_op = 0;  // ops [first_grad_op, end) are the backward pass
};

namespace detail {
inline bool float_dtype(DataType t) { return t == DataType::FP32 || t == DataType::FP64 || t == DataType::FP16; }
}  // namespace detail

// Appends the backward pass of `loss` (written by op `loss_op`, or by its last
// writer when -1) to block 0 of `desc`, for the parameters in `params`.
// Variables in `stop_gradient` and integer variables get no gradient.
DLGRAPH_INLINE BackwardResult append_backward(ProgramDesc& desc, const std::string& loss,
                                              const std::set<std::string>& params,
                                              const std::set<std::string>& stop_gradient = {}, int loss_op = -1);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph {

DLGRAPH_INLINE BackwardResult append_backward(ProgramDesc& desc, const std::string& loss,
                                              const std::set<std::string>& params,
                                              const std::set<std::string>& stop_gradient, int loss_op) {
    BlockDesc& blk = desc.blocks.at(0);
    const VarDesc* lv = blk.find_var(loss);
    if (!lv) throw graph_error("dlgraph.graph.backward", "loss '" + loss + "' is not declared");
    if (!detail::float_dtype(lv->data_type))
        throw type_error("dlgraph.type.backward", "loss '" + loss + "' is " + to_string(lv->data_type) +
                                                      ": only floating-point values have gradients");
    if (blk.find_var(grad_var_name(loss)))
        throw graph_error("dlgraph.graph.backward", "'" + grad_var_name(loss) + "' exists already: the program has a backward pass for '" + loss + "'");
    if (loss_op < 0)
        for (int i = static_cast<int>(blk.ops.size()) - 1; i >= 0 && loss_op < 0; --i)
            if (detail::writes(blk.ops[static_cast<std::size_t>(i)], loss)) loss_op = i;
    if (loss_op < 0) throw graph_error("dlgraph.graph.backward", "no op writes the loss '" + loss + "'");

    auto meta_of = [&](const std::string& n) -> const VarDesc& { return *blk.find_var(n); };
    auto differentiable_var = [&](const std::string& n) {
        auto* v = blk.find_var(n);
        return v && v->type == VarType::LOD_TENSOR && detail::float_dtype(v->data_type) && !stop_gradient.count(n);
    };
    auto grad_inputs = [&](const OpDef& def, const OpDesc& op, auto&& f) {
        for (auto& s : op.inputs) {
            bool skip = false;
            for (auto n : def.no_grad_inputs) skip = skip || n == s.parameter;
            if (skip) continue;
            for (std::size_t k = 0; k < s.arguments.size(); ++k) f(s.parameter, k, s.arguments[k]);
        }
    };

    // Values that depend on a parameter (forward), and values the loss
    // depends on (backward); a gradient flows through their intersection.
    std::set<std::string> depends(params.begin(), params.end());
    for (int i = 0; i <= loss_op; ++i) {
        const OpDesc& op = blk.ops[static_cast<std::size_t>(i)];
        const OpDef& def = lookup_op(op.type, op_path(0, i));
        if (!def.differentiable()) continue;
        bool hit = false;
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) { hit = hit || depends.count(a); });
        if (!hit) continue;
        for (auto& s : op.outputs)
            for (auto& a : s.arguments)
                if (differentiable_var(a)) depends.insert(a);
    }
    // Only paths a gradient can take count: through differentiable ops and
    // not through their no-gradient slots (a label reaches the loss, but no
    // gradient flows back into it).
    std::set<std::string> reaches{loss};
    for (int i = loss_op; i >= 0; --i) {
        const OpDesc& op = blk.ops[static_cast<std::size_t>(i)];
        const OpDef& def = lookup_op(op.type, op_path(0, i));
        if (!def.differentiable()) continue;
        bool hit = false;
        for (auto& s : op.outputs)
            for (auto& a : s.arguments) hit = hit || reaches.count(a);
        if (!hit) continue;
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) { reaches.insert(a); });
    }
    auto wanted = [&](const std::string& v) { return differentiable_var(v) && depends.count(v) && reaches.count(v); };

    // The ops on a path from a parameter to the loss, and how many gradient
    // contributions each variable will receive.
    std::vector<int> relevant;
    std::map<std::string, int> count;
    for (int i = 0; i <= loss_op; ++i) {
        const OpDesc& op = blk.ops[static_cast<std::size_t>(i)];
        const OpDef& def = lookup_op(op.type, op_path(0, i));
        if (!def.differentiable()) continue;
        bool out_hit = false, in_hit = false;
        for (auto& s : op.outputs)
            for (auto& a : s.arguments) out_hit = out_hit || wanted(a);
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) { in_hit = in_hit || wanted(a); });
        if (!out_hit || !in_hit) continue;
        relevant.push_back(i);
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) {
            if (wanted(a)) ++count[a];
        });
    }

    BackwardResult result;
    result.first_grad_op = static_cast<int>(blk.ops.size());
    std::vector<OpDesc> new_ops;
    std::map<std::string, std::vector<std::string>> pending;  // contributions not yet summed
    std::set<std::string> final_grads;
    auto declare = [&](const std::string& name, const std::string& like) {
        if (blk.find_var(name)) throw graph_error("dlgraph.graph.backward", "variable '" + name + "' exists already");
        VarDesc v = meta_of(like);
        v.name = name;
        v.persistable = false;
        blk.vars.push_back(std::move(v));
    };
    auto fill_like = [&](const std::string& like, const std::string& out, double value) {
        OpDesc op;
        op.type = "fill_any_like";
        op.set_input("X", {like}).set_output("Out", {out});
        op.set_attr(Attribute::make_float("value", value));
        new_ops.push_back(std::move(op));
    };
    // The final gradient of `v`: its one contribution, the sum of several, or zeros.
    auto finalize = [&](const std::string& v) {
        const std::string g = grad_var_name(v);
        if (final_grads.count(g)) return g;
        auto& parts = pending[v];
        if (parts.empty()) {
            declare(g, v);
            fill_like(v, g, 0.0);
        } else if (parts.size() == 1 && parts[0] != g) {  // a maker skipped a counted input
            declare(g, v);
            OpDesc op;
            op.type = "assign";
            op.set_input("X", parts).set_output("Out", {g});
            new_ops.push_back(std::move(op));
        } else if (parts.size() > 1) {
            declare(g, v);
            OpDesc op;
            op.type = "sum";
            op.set_input("X", parts).set_output("Out", {g});
            new_ops.push_back(std::move(op));
        }
        final_grads.insert(g);
        return g;
    };

    declare(grad_var_name(loss), loss);
    fill_like(loss, grad_var_name(loss), 1.0);
    final_grads.insert(grad_var_name(loss));

    for (auto it = relevant.rbegin(); it != relevant.rend(); ++it) {
        const OpDesc& op = blk.ops[static_cast<std::size_t>(*it)];
        const OpDef& def = lookup_op(op.type, op_path(0, *it));
        std::vector<std::string> unused;
        GradRequest req{op,
                        [&](std::string_view slot, std::size_t k) -> std::string {
                            for (auto n : def.no_grad_inputs)
                                if (n == slot) return "";
                            const std::string& a = op.input(slot)->arguments[k];
                            if (!wanted(a)) return "";
                            std::string name = count[a] == 1 ? grad_var_name(a)
                                                             : grad_var_name(a) + "@RENAME@" + std::to_string(pending[a].size());
                            pending[a].push_back(name);
                            declare(name, a);
                            return name;
                        },
                        [&](std::string_view slot, std::size_t k) { return finalize(op.output(slot)->arguments[k]); }};
        for (OpDesc& g : make_grad_ops(def, req)) {
            // A duplicable slot lists a gradient for each variable; those not
            // wanted still need a (never read) name.
            for (auto& s : g.outputs)
                for (std::size_t k = 0; k < s.arguments.size(); ++k)
                    if (s.arguments[k].empty()) {
                        const std::string_view suffix = "@GRAD";
                        const OpSlot* in = s.parameter.size() > suffix.size() && s.parameter.ends_with(suffix)
                                               ? op.input(s.parameter.substr(0, s.parameter.size() - suffix.size()))
                                               : nullptr;
                        if (!in || k >= in->arguments.size())
                            throw graph_error("dlgraph.graph.backward", "the grad maker of '" + op.type +
                                                                            "' left output slot '" + s.parameter + "' unnamed");
                        const std::string& fwd = in->arguments[k];
                        std::string name = grad_var_name(fwd) + "@UNUSED@" + std::to_string(*it);
                        declare(name, fwd);
                        s.arguments[k] = name;
                    }
            new_ops.push_back(std::move(g));
        }
    }
    for (auto& p : params)
        if (wanted(p)) result.param_grads.emplace_back(p, finalize(p));
    for (auto& op : new_ops) blk.ops.push_back(std::move(op));
    return result;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
