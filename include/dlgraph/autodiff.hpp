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

namespace dlgraph::detail {

// Pass 1: the op that writes the loss, after checking the loss can have a
// gradient and has none yet.
DLGRAPH_INLINE int loss_writer(const BlockDesc& blk, const std::string& loss, int loss_op) {
    const VarDesc* lv = blk.find_var(loss);
    if (!lv) throw graph_error("dlgraph.graph.backward", "loss '" + loss + "' is not declared");
    if (!float_dtype(lv->data_type))
        throw type_error("dlgraph.type.backward", "loss '" + loss + "' is " + to_string(lv->data_type) +
                                                      ": only floating-point values have gradients");
    if (blk.find_var(grad_var_name(loss)))
        throw graph_error("dlgraph.graph.backward", "'" + grad_var_name(loss) +
                                                        "' exists already: the program has a backward pass for '" + loss + "'");
    for (int i = static_cast<int>(blk.ops.size()) - 1; i >= 0 && loss_op < 0; --i)
        if (writes(blk.ops[static_cast<std::size_t>(i)], loss)) loss_op = i;
    if (loss_op < 0) throw graph_error("dlgraph.graph.backward", "no op writes the loss '" + loss + "'");
    return loss_op;
}

// Calls f(slot, k, variable) for each input of `op` a gradient can flow
// into (not a no-gradient slot such as a label).
template <class F> void grad_inputs(const OpDef& def, const OpDesc& op, F&& f) {
    for (auto& s : op.inputs) {
        bool skip = false;
        for (auto n : def.no_grad_inputs) skip = skip || n == s.parameter;
        if (skip) continue;
        for (std::size_t k = 0; k < s.arguments.size(); ++k) f(s.parameter, k, s.arguments[k]);
    }
}

// Pass 2: where gradients flow. A variable wants a gradient when it is a
// floating-point tensor (not stopped) that depends on a parameter and that
// the loss depends on through differentiable ops and gradient-carrying
// slots; the relevant ops are those between two such variables, and
// `contributions` counts the gradient parts each variable will receive.
struct gradient_flow {
    std::set<std::string> wanted;
    std::vector<int> relevant;
    std::map<std::string, int> contributions;
};

DLGRAPH_INLINE gradient_flow trace_gradients(const BlockDesc& blk, const std::string& loss, int loss_op,
                                             const std::set<std::string>& params,
                                             const std::set<std::string>& stop_gradient) {
    auto differentiable_var = [&](const std::string& n) {
        auto* v = blk.find_var(n);
        return v && v->type == VarType::LOD_TENSOR && float_dtype(v->data_type) && !stop_gradient.count(n);
    };
    auto each_op = [&](bool backwards, auto&& f) {
        for (int k = 0; k <= loss_op; ++k) {
            const int i = backwards ? loss_op - k : k;
            const OpDesc& op = blk.ops[static_cast<std::size_t>(i)];
            const OpDef& def = lookup_op(op.type, op_path(0, i));
            if (def.differentiable()) f(i, op, def);
        }
    };
    auto any_output = [](const OpDesc& op, auto&& pred) {
        for (auto& s : op.outputs)
            for (auto& a : s.arguments)
                if (pred(a)) return true;
        return false;
    };
    auto any_grad_input = [](const OpDef& def, const OpDesc& op, auto&& pred) {
        bool hit = false;
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) { hit = hit || pred(a); });
        return hit;
    };
    // Values that depend on a parameter (forward), values the loss depends
    // on (backward); a gradient flows through their intersection.
    std::set<std::string> depends(params.begin(), params.end()), reaches{loss};
    each_op(false, [&](int, const OpDesc& op, const OpDef& def) {
        if (!any_grad_input(def, op, [&](const std::string& a) { return depends.count(a) > 0; })) return;
        for (auto& s : op.outputs)
            for (auto& a : s.arguments)
                if (differentiable_var(a)) depends.insert(a);
    });
    each_op(true, [&](int, const OpDesc& op, const OpDef& def) {
        if (!any_output(op, [&](const std::string& a) { return reaches.count(a) > 0; })) return;
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) { reaches.insert(a); });
    });
    gradient_flow g;
    for (auto& v : depends)
        if (differentiable_var(v) && reaches.count(v)) g.wanted.insert(v);
    auto wanted = [&](const std::string& v) { return g.wanted.count(v) > 0; };
    each_op(false, [&](int i, const OpDesc& op, const OpDef& def) {
        if (!any_output(op, wanted) || !any_grad_input(def, op, wanted)) return;
        g.relevant.push_back(i);
        grad_inputs(def, op, [&](auto&, std::size_t, const std::string& a) {
            if (wanted(a)) ++g.contributions[a];
        });
    });
    return g;
}

// Pass 3: the grad ops, appended in reverse order of the relevant forward
// ops. Each variable's gradient is finalized (its one part, a sum of its
// parts, or zeros) the first time a grad op reads it, which comes after
// every contribution: all consumers come later in program order.
class backward_writer {
public:
    backward_writer(BlockDesc& blk, const gradient_flow& flow) : blk_(blk), flow_(flow) {}

    // loss@GRAD = 1, with the loss's shape.
    void seed(const std::string& loss) {
        declare(grad_var_name(loss), loss);
        fill_like(loss, grad_var_name(loss), 1.0);
        final_.insert(grad_var_name(loss));
    }

    // The grad ops of forward op `index`.
    void differentiate(int index) {
        const OpDesc& op = blk_.ops[static_cast<std::size_t>(index)];
        const OpDef& def = lookup_op(op.type, op_path(0, index));
        GradRequest req{op, [&](std::string_view slot, std::size_t k) { return part_name(def, op, slot, k); },
                        [&](std::string_view slot, std::size_t k) { return finalize(op.output(slot)->arguments[k]); }};
        for (OpDesc& g : make_grad_ops(def, req)) {
            name_unused_outputs(op, index, g);
            ops_.push_back(std::move(g));
        }
    }

    // The final gradient of `v`: its one contribution, the sum of several, or zeros.
    std::string finalize(const std::string& v) {
        const std::string g = grad_var_name(v);
        if (final_.count(g)) return g;
        auto& parts = pending_[v];
        if (parts.empty()) {
            declare(g, v);
            fill_like(v, g, 0.0);
        } else if (parts.size() == 1 && parts[0] != g) {  // a maker skipped a counted input
            declare(g, v);
            add_op("assign", parts, g);
        } else if (parts.size() > 1) {
            declare(g, v);
            add_op("sum", parts, g);
        }
        final_.insert(g);
        return g;
    }

    // Appends the grad ops to the block.
    void commit() {
        for (auto& op : ops_) blk_.ops.push_back(std::move(op));
        ops_.clear();
    }

private:
    // Where input k of `slot` gets its gradient part, "" when none is wanted.
    std::string part_name(const OpDef& def, const OpDesc& op, std::string_view slot, std::size_t k) {
        for (auto n : def.no_grad_inputs)
            if (n == slot) return "";
        // A slot the op does not use (an optional input left out) has no gradient.
        const OpSlot* in = op.input(slot);
        if (!in || k >= in->arguments.size()) return "";
        const std::string& a = in->arguments[k];
        if (!flow_.wanted.count(a)) return "";
        auto& parts = pending_[a];
        std::string name = flow_.contributions.at(a) == 1 ? grad_var_name(a)
                                                          : grad_var_name(a) + "@RENAME@" + std::to_string(parts.size());
        parts.push_back(name);
        declare(name, a);
        return name;
    }
    // A duplicable slot lists a gradient for each variable; those not
    // wanted still need a (never read) name.
    void name_unused_outputs(const OpDesc& op, int index, OpDesc& g) {
        for (auto& s : g.outputs)
            for (std::size_t k = 0; k < s.arguments.size(); ++k) {
                if (!s.arguments[k].empty()) continue;
                const std::string_view suffix = "@GRAD";
                const OpSlot* in = s.parameter.size() > suffix.size() && s.parameter.ends_with(suffix)
                                       ? op.input(s.parameter.substr(0, s.parameter.size() - suffix.size()))
                                       : nullptr;
                if (!in || k >= in->arguments.size())
                    throw graph_error("dlgraph.graph.backward",
                                      "the grad maker of '" + op.type + "' left output slot '" + s.parameter + "' unnamed");
                const std::string& fwd = in->arguments[k];
                s.arguments[k] = grad_var_name(fwd) + "@UNUSED@" + std::to_string(index);
                declare(s.arguments[k], fwd);
            }
    }
    void declare(const std::string& name, const std::string& like) {
        if (blk_.find_var(name)) throw graph_error("dlgraph.graph.backward", "variable '" + name + "' exists already");
        VarDesc v = *blk_.find_var(like);
        v.name = name;
        v.persistable = false;
        blk_.vars.push_back(std::move(v));
    }
    void fill_like(const std::string& like, const std::string& out, double value) {
        OpDesc op;
        op.type = "fill_any_like";
        op.set_input("X", {like}).set_output("Out", {out});
        op.set_attr(Attribute::make_float("value", value));
        ops_.push_back(std::move(op));
    }
    void add_op(const char* type, const std::vector<std::string>& x, const std::string& out) {
        OpDesc op;
        op.type = type;
        op.set_input("X", x).set_output("Out", {out});
        ops_.push_back(std::move(op));
    }

    BlockDesc& blk_;
    const gradient_flow& flow_;
    std::vector<OpDesc> ops_;
    std::map<std::string, std::vector<std::string>> pending_;  // contributions not yet summed
    std::set<std::string> final_;
};

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE BackwardResult append_backward(ProgramDesc& desc, const std::string& loss,
                                              const std::set<std::string>& params,
                                              const std::set<std::string>& stop_gradient, int loss_op) {
    BlockDesc& blk = desc.blocks.at(0);
    loss_op = detail::loss_writer(blk, loss, loss_op);
    const detail::gradient_flow flow = detail::trace_gradients(blk, loss, loss_op, params, stop_gradient);
    BackwardResult result;
    result.first_grad_op = static_cast<int>(blk.ops.size());
    detail::backward_writer w(blk, flow);
    w.seed(loss);
    for (auto it = flow.relevant.rbegin(); it != flow.relevant.rend(); ++it) w.differentiate(*it);
    for (auto& p : params)
        if (flow.wanted.count(p)) result.param_grads.emplace_back(p, w.finalize(p));
    w.commit();
    return result;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
