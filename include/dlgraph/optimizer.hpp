// Optimizers for the builder: minimize(loss) appends the backward pass and
// one update op (sgd, momentum, adam) per trainable parameter, and returns
// the ops to evaluate as one training step. The learning rate and every
// piece of optimizer state are persistable variables: a schedule can change
// the learning rate between steps, and checkpoints carry the state.
#pragma once

#include "dlgraph/builder.hpp"

namespace dlgraph {

// One training step: the update ops to evaluate together (each parameter is
// updated exactly once per evaluation), and what they were made from.
struct TrainStep {
    std::vector<TargetRef> ops;
    std::string learning_rate;  // the learning-rate variable
    std::vector<std::pair<std::string, std::string>> param_grads;
    // The step's ops, as targets: s.eval(step.targets(), feeds).
    std::span<const TargetRef> targets() const { return ops; }
    // The step's ops followed by `extra` targets (e.g. the loss to report).
    std::vector<TargetRef> with(std::initializer_list<TargetRef> extra) const {
        std::vector<TargetRef> t = ops;
        t.insert(t.end(), extra.begin(), extra.end());
        return t;
    }
};

// Sets every element of a persistable variable (e.g. a learning rate) in a
// session. A variable without a value yet takes its declared dtype and dims
// (its initializer then never runs).
template <class Session> void set_scalar(Session& s, const std::string& name, double value) {
    const VarDesc* vd = s.program().blocks[0].find_var(name);
    if (!vd || !vd->persistable)
        throw graph_error("dlgraph.graph.undeclared", "'" + name + "' is not a persistable variable of the program");
    Tensor& t = s.scope().var(name).template get_mutable<Tensor>();
    if (!t.initialized()) t.resize(vd->data_type, Shape(vd->dims));
    if (t.place() != Place::host) {  // set on the host; the session puts it back on its device
        Tensor h;
        h.copy_from(t);
        t = std::move(h);
    }
    visit_dtype(t.dtype(), [&]<class T>(type_tag<T>) {
        if constexpr (std::is_same_v<T, float16>) throw type_error("dlgraph.type.kernel", "FP16 scalars are not supported");
        else std::fill(t.data<T>(), t.data<T>() + t.numel(), static_cast<T>(value));
    });
}

namespace detail {

// The shared part of every optimizer: learning rate, backward pass, and a
// call to `update` for each (parameter, gradient) pair.
template <element_type T, class Update>
TrainStep minimize_with(const Var<T>& loss, double lr, const std::string& name, std::vector<std::string> params,
                        Update&& update) {
    Program p(state_of(loss));
    auto rate = p.parameter<T>(p.fresh(name + "_learning_rate"), {1}, init::constant(lr), /*trainable=*/false);
    auto grads = append_backward(loss, std::move(params));
    if (grads.empty())
        throw graph_error("dlgraph.graph.backward", name + ": the loss '" + loss.name() +
                                                       "' depends on no trainable parameter");
    TrainStep step;
    step.learning_rate = rate.name();
    for (auto& [param, grad] : grads) {
        step.param_grads.emplace_back(param.name(), grad.name());
        step.ops.push_back(TargetRef::op_only(update(p, param, grad, rate)));
    }
    return step;
}

// A persistable state variable shaped like `like`, initialized to `value`.
template <element_type T> Var<T> state_like(Program& p, const Var<T>& like, const std::string& what, double value) {
    return p.parameter<T>(p.fresh(like.name() + "_" + what), like.shape(), init::constant(value), false);
}

}  // namespace detail

class SGD {
public:
    explicit SGD(double learning_rate) : lr_(learning_rate) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, lr_, "sgd", std::move(params),
                                     [](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         return p.append("sgd", {{"Param", {w.name()}}, {"Grad", {g.name()}}, {"LearningRate", {lr.name()}}},
                                                         {}, {}, nullptr, {{"ParamOut", {w.name()}}});
                                     });
    }

private:
    double lr_;
};

class Momentum {
public:
    explicit Momentum(double learning_rate, double mu = 0.9, bool nesterov = false)
        : lr_(learning_rate), mu_(mu), nesterov_(nesterov) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, lr_, "momentum", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         auto v = detail::state_like(p, w, "velocity", 0.0);
                                         return p.append("momentum",
                                                         {{"Param", {w.name()}}, {"Grad", {g.name()}}, {"Velocity", {v.name()}},
                                                          {"LearningRate", {lr.name()}}},
                                                         {}, {Attribute::make_float("mu", mu_), Attribute::make_bool("use_nesterov", nesterov_)},
                                                         nullptr, {{"ParamOut", {w.name()}}, {"VelocityOut", {v.name()}}});
                                     });
    }

private:
    double lr_, mu_;
    bool nesterov_;
};

class Adam {
public:
    explicit Adam(double learning_rate = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8)
        : lr_(learning_rate), b1_(beta1), b2_(beta2), eps_(epsilon) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, lr_, "adam", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         auto m1 = detail::state_like(p, w, "moment1", 0.0);
                                         auto m2 = detail::state_like(p, w, "moment2", 0.0);
                                         auto b1p = p.parameter<T>(p.fresh(w.name() + "_beta1_pow"), {1}, init::constant(b1_), false);
                                         auto b2p = p.parameter<T>(p.fresh(w.name() + "_beta2_pow"), {1}, init::constant(b2_), false);
                                         return p.append("adam",
                                                         {{"Param", {w.name()}}, {"Grad", {g.name()}}, {"LearningRate", {lr.name()}},
                                                          {"Moment1", {m1.name()}}, {"Moment2", {m2.name()}},
                                                          {"Beta1Pow", {b1p.name()}}, {"Beta2Pow", {b2p.name()}}},
                                                         {},
                                                         {Attribute::make_float("beta1", b1_), Attribute::make_float("beta2", b2_),
                                                          Attribute::make_float("epsilon", eps_)},
                                                         nullptr,
                                                         {{"ParamOut", {w.name()}}, {"Moment1Out", {m1.name()}}, {"Moment2Out", {m2.name()}},
                                                          {"Beta1PowOut", {b1p.name()}}, {"Beta2PowOut", {b2p.name()}}});
                                     });
    }

private:
    double lr_, b1_, b2_, eps_;
};

}  // namespace dlgraph
