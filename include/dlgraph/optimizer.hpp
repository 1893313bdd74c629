// Optimizers for the builder: minimize(loss) appends the backward pass and
// one update op (sgd, momentum, adam, adamw) per trainable parameter, and
// returns the ops to evaluate as one training step. The learning rate and
// every piece of optimizer state are persistable variables: set_scalar or a
// schedule's ops (LRSchedule) change the rate between steps, and
// checkpoints carry the state. Gradients may be clipped by their global
// norm first.
#pragma once

#include <cmath>
#include <functional>

#include "dlgraph/builder.hpp"

namespace dlgraph {

// One training step: the update ops to evaluate together (each parameter is
// updated exactly once per evaluation), and what they were made from.
struct TrainStep {
    std::vector<TargetRef> ops;
    std::string learning_rate;  // the learning-rate variable
    std::vector<std::pair<std::string, std::string>> param_grads;  // (parameter, the gradient its update reads)
    std::string step_counter;  // a schedule's step counter (empty for a constant rate)
    std::string grad_norm;     // the global norm before clipping (empty without clipping)
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

// A learning rate that follows the training step t (0 at the first step):
// constant, step decay, or cosine annealing, optionally after a linear
// warm-up. minimize() builds it from ops on a persistable step counter
// (NAME_step, in the rate's dtype, so exact to 2^24 steps in FP32) that
// advance the rate variable before the updates read it: any device runs
// them, and a checkpoint carries the counter.
struct LRSchedule {
    enum class Kind { constant, step, cosine };
    Kind kind = Kind::constant;
    double base = 1e-3;            // the rate at the schedule's own t = 0
    std::int64_t step_size = 1;    // step decay: base * gamma^floor(t / step_size)
    double gamma = 0.1;
    std::int64_t total_steps = 1;  // cosine: from base at t = 0 to end_lr at t >= total_steps
    double end_lr = 0;
    std::int64_t warmup_steps = 0;  // linear warm-up: start_lr + (base - start_lr) * t / warmup_steps
    double warmup_start = 0;        // for t < warmup_steps; the schedule then starts at its t = 0

    LRSchedule(double lr = 1e-3) : base(lr) {}  // a constant rate (implicit: Adam(1e-3) reads as before)
    static LRSchedule step_decay(double lr, std::int64_t step_size, double gamma = 0.1) {
        LRSchedule s(lr);
        s.kind = Kind::step;
        s.step_size = step_size;
        s.gamma = gamma;
        return s;
    }
    static LRSchedule cosine(double lr, std::int64_t total_steps, double end_lr = 0) {
        LRSchedule s(lr);
        s.kind = Kind::cosine;
        s.total_steps = total_steps;
        s.end_lr = end_lr;
        return s;
    }
    // The same schedule after `steps` steps of linear warm-up from start_lr.
    LRSchedule with_warmup(std::int64_t steps, double start_lr = 0) const {
        LRSchedule s = *this;
        s.warmup_steps = steps;
        s.warmup_start = start_lr;
        return s;
    }
    bool is_constant() const { return kind == Kind::constant && warmup_steps == 0; }
    // The rate at step t, in double: what the ops compute (up to rounding).
    double at(std::int64_t t) const {
        if (t < warmup_steps)
            return warmup_start + (base - warmup_start) * static_cast<double>(t) / static_cast<double>(warmup_steps);
        t -= warmup_steps;
        if (kind == Kind::step) return base * std::pow(gamma, std::floor(static_cast<double>(t) / static_cast<double>(step_size)));
        if (kind == Kind::cosine) {
            const double tc = static_cast<double>(std::min(t, total_steps));
            return end_lr + (base - end_lr) * 0.5 * (1 + std::cos(std::acos(-1.0) * tc / static_cast<double>(total_steps)));
        }
        return base;
    }
    void check(const std::string& who) const {
        auto bad = [&](const std::string& why) { throw graph_error("dlgraph.graph.args", who + ": " + why); };
        if (kind == Kind::step && (step_size < 1 || !(gamma > 0)))
            bad("a step decay needs step_size >= 1 and gamma > 0, not " + std::to_string(step_size) + " and " +
                std::to_string(gamma));
        if (kind == Kind::cosine && total_steps < 1) bad("a cosine schedule needs total_steps >= 1, not " + std::to_string(total_steps));
        if (warmup_steps < 0) bad("warmup_steps is " + std::to_string(warmup_steps));
    }
};

namespace detail {

// The rate of schedule `s` at step t (a one-element Var of the counter's dtype), as ops.
template <element_type T> Var<T> schedule_rate(Program& p, const Var<T>& t, const LRSchedule& s) {
    auto k = [&](double v) { return p.constant<T>(static_cast<T>(v)); };
    Var<T> after = s.warmup_steps > 0 ? maximum(scale(t, 1.0, -static_cast<double>(s.warmup_steps)), k(0)) : t;
    Var<T> rate = k(s.base);
    if (s.kind == LRSchedule::Kind::step) {
        // t / step_size divided, not multiplied by the inverse, so a multiple of it floors to itself.
        rate = scale(pow(k(s.gamma), floor(after / k(static_cast<double>(s.step_size)))), s.base);
    } else if (s.kind == LRSchedule::Kind::cosine) {
        const double T_ = static_cast<double>(s.total_steps);
        auto tc = minimum(after, k(T_));
        rate = scale(cos(scale(tc, std::acos(-1.0) / T_)), 0.5 * (s.base - s.end_lr), 0.5 * (s.base + s.end_lr));
    }
    if (s.warmup_steps == 0) return rate;
    auto warm = scale(t, (s.base - s.warmup_start) / static_cast<double>(s.warmup_steps), s.warmup_start);
    return where(less_than(t, k(static_cast<double>(s.warmup_steps))), warm, rate);
}

// Gradients scaled by clip / max(clip, global norm), the norm over all of
// them (Paddle's ClipGradByGlobalNorm); returns the clipped gradients and
// sets `norm` to the norm before clipping.
template <element_type T>
std::vector<Var<T>> clip_by_global_norm(Program& p, const std::vector<Var<T>>& grads, double clip, std::string& norm) {
    std::vector<Var<T>> squares;
    for (auto& g : grads) squares.push_back(reduce_sum(square(g)));
    auto global = sqrt(squares.size() == 1 ? squares[0] : sum(squares));
    norm = global.name();
    auto c = p.constant<T>(static_cast<T>(clip));
    auto factor = c / maximum(global, c);
    std::vector<Var<T>> out;
    for (auto& g : grads) out.push_back(g * factor);
    return out;
}

// The settings every optimizer has besides its own hyper-parameters.
struct optimizer_settings {
    LRSchedule lr;
    double clip = 0;   // global-norm clipping; 0: none
    double l2 = 0;     // L2 weight decay: grad += l2 * param after clipping; 0: none
    int nranks = 0;    // data parallel over this many ranks; 0: not
    int ring_id = 0;   // ... with the communicator of this ring
};

// The shared part of every optimizer: the learning rate (a persistable
// variable, advanced by the schedule's ops unless constant), the backward
// pass, data-parallel averaging, clipping, and a call to `update` for each
// (parameter, gradient) pair.
template <element_type T, class Update>
TrainStep minimize_with(const Var<T>& loss, const optimizer_settings& set, const std::string& name,
                        std::vector<std::string> params, Update&& update) {
    const LRSchedule& lr = set.lr;
    const double clip = set.clip;
    lr.check(name);
    if (set.nranks < 0)
        throw graph_error("dlgraph.graph.args", name + ": data parallel over " + std::to_string(set.nranks) + " ranks");
    if (clip < 0 || std::isnan(clip))
        throw graph_error("dlgraph.graph.args", name + ": the global-norm clip is " + std::to_string(clip) + ": it must be > 0");
    if (set.l2 < 0 || std::isnan(set.l2))
        throw graph_error("dlgraph.graph.args", name + ": the L2 decay is " + std::to_string(set.l2) + ": it must be >= 0");
    Program p(state_of(loss));
    auto rate = p.parameter<T>(p.fresh(name + "_learning_rate"), {1}, init::constant(lr.at(0)), /*trainable=*/false);
    auto grads = append_backward(loss, std::move(params));
    if (grads.empty())
        throw graph_error("dlgraph.graph.backward", name + ": the loss '" + loss.name() +
                                                       "' depends on no trainable parameter");
    TrainStep step;
    step.learning_rate = rate.name();
    if (!lr.is_constant()) {
        // counter += 1, then the rate at t = counter - 1, assigned to the rate variable.
        auto counter = p.parameter<T>(p.fresh(name + "_step"), {1}, init::constant(0), false);
        const int inc = p.append("increment", {{"X", {counter.name()}}}, {}, {Attribute::make_float("step", 1.0)},
                                 nullptr, {{"Out", {counter.name()}}});
        auto t = scale(Var<T>(p.state(), counter.name(), inc), 1.0, -1.0);
        auto r = schedule_rate(p, t, lr);
        p.append("assign", {{"X", {r.name()}}}, {}, {}, nullptr, {{"Out", {rate.name()}}});
        step.step_counter = counter.name();
    }
    std::vector<Var<T>> gs;
    for (auto& pg : grads) gs.push_back(pg.second);
    // Data parallel: each rank's gradient becomes the mean over the ranks.
    if (set.nranks > 0)
        for (auto& g : gs) g = scale(c_allreduce_sum(g, set.ring_id), 1.0 / set.nranks);
    if (clip > 0) gs = clip_by_global_norm(p, gs, clip, step.grad_norm);
    // L2 decay as Paddle's regularizer appends it (after clipping): the
    // gradient plus coeff times the parameter.
    if (set.l2 > 0)
        for (std::size_t i = 0; i < gs.size(); ++i) gs[i] = gs[i] + scale(grads[i].first, set.l2);
    for (std::size_t i = 0; i < grads.size(); ++i) {
        const auto& param = grads[i].first;
        step.param_grads.emplace_back(param.name(), gs[i].name());
        step.ops.push_back(TargetRef::op_only(update(p, param, gs[i], rate)));
    }
    return step;
}

// A persistable state variable shaped like `like`, initialized to `value`.
template <element_type T> Var<T> state_like(Program& p, const Var<T>& like, const std::string& what, double value) {
    return p.parameter<T>(p.fresh(like.name() + "_" + what), like.shape(), init::constant(value), false);
}

// What every optimizer takes besides its own hyper-parameters: the
// learning rate (a number or an LRSchedule) and global-norm clipping.
template <class Derived> class optimizer_base {
public:
    // Scales every gradient by clip / max(clip, global norm) before the
    // updates (Paddle's ClipGradByGlobalNorm); TrainStep::grad_norm then
    // names the norm before clipping.
    Derived& clip_by_global_norm(double clip) {
        set_.clip = clip;
        return static_cast<Derived&>(*this);
    }
    // Data-parallel training over the `nranks` processes of ring
    // `ring_id`'s communicator (SessionOptions::comms): each gradient is
    // summed over the ranks (c_allreduce_sum) and divided by nranks before
    // clipping and the update, so every rank takes the same step, that of
    // the whole batch across the ranks. Start the ranks equal
    // (broadcast_persistables) and feed each its own shard of the data.
    // L2 weight decay as a program rewrite (Paddle's L2Decay regularizer):
    // each gradient becomes grad + coeff * param, after clipping.
    Derived& l2_decay(double coeff) {
        set_.l2 = coeff;
        return static_cast<Derived&>(*this);
    }
    Derived& data_parallel(int nranks, int ring_id = 0) {
        set_.nranks = nranks;
        set_.ring_id = ring_id;
        return static_cast<Derived&>(*this);
    }

protected:
    explicit optimizer_base(LRSchedule lr) { set_.lr = lr; }
    optimizer_settings set_;
};

}  // namespace detail

class SGD : public detail::optimizer_base<SGD> {
public:
    explicit SGD(LRSchedule learning_rate) : optimizer_base(learning_rate) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "sgd", std::move(params),
                                     [](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         return p.append("sgd", {{"Param", {w.name()}}, {"Grad", {g.name()}}, {"LearningRate", {lr.name()}}},
                                                         {}, {}, nullptr, {{"ParamOut", {w.name()}}});
                                     });
    }
};

class Momentum : public detail::optimizer_base<Momentum> {
public:
    explicit Momentum(LRSchedule learning_rate, double mu = 0.9, bool nesterov = false)
        : optimizer_base(learning_rate), mu_(mu), nesterov_(nesterov) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "momentum", std::move(params),
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
    double mu_;
    bool nesterov_;
};

namespace detail {
// An adam or adamw op updating w, with its moments and beta powers as new
// state variables; `extra` attributes follow adam's (adamw's).
template <element_type T>
int append_adam(Program& p, const std::string& type, const Var<T>& w, const Var<T>& g, const Var<T>& lr, double b1,
                double b2, double eps, std::vector<Attribute> extra = {}) {
    auto m1 = state_like(p, w, "moment1", 0.0);
    auto m2 = state_like(p, w, "moment2", 0.0);
    auto b1p = p.parameter<T>(p.fresh(w.name() + "_beta1_pow"), {1}, init::constant(b1), false);
    auto b2p = p.parameter<T>(p.fresh(w.name() + "_beta2_pow"), {1}, init::constant(b2), false);
    std::vector<Attribute> attrs{Attribute::make_float("beta1", b1), Attribute::make_float("beta2", b2),
                                 Attribute::make_float("epsilon", eps)};
    attrs.insert(attrs.end(), extra.begin(), extra.end());
    return p.append(type,
                    {{"Param", {w.name()}}, {"Grad", {g.name()}}, {"LearningRate", {lr.name()}}, {"Moment1", {m1.name()}},
                     {"Moment2", {m2.name()}}, {"Beta1Pow", {b1p.name()}}, {"Beta2Pow", {b2p.name()}}},
                    {}, std::move(attrs), nullptr,
                    {{"ParamOut", {w.name()}}, {"Moment1Out", {m1.name()}}, {"Moment2Out", {m2.name()}},
                     {"Beta1PowOut", {b1p.name()}}, {"Beta2PowOut", {b2p.name()}}});
}
}  // namespace detail

class Adam : public detail::optimizer_base<Adam> {
public:
    explicit Adam(LRSchedule learning_rate = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8)
        : optimizer_base(learning_rate), b1_(beta1), b2_(beta2), eps_(epsilon) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "adam", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         return detail::append_adam(p, "adam", w, g, lr, b1_, b2_, eps_);
                                     });
    }

private:
    double b1_, b2_, eps_;
};

// AdamW (decoupled weight decay, paddle.optimizer.AdamW): each step a
// parameter first decays by lr * weight_decay, then takes Adam's step. All
// parameters decay unless decay_if is given, which names those that do
// (Paddle's apply_decay_param_fun; biases and norm scales usually do not).
class AdamW : public detail::optimizer_base<AdamW> {
public:
    explicit AdamW(LRSchedule learning_rate = 1e-3, double weight_decay = 0.01, double beta1 = 0.9,
                   double beta2 = 0.999, double epsilon = 1e-8)
        : optimizer_base(learning_rate), decay_(weight_decay), b1_(beta1), b2_(beta2), eps_(epsilon) {}
    AdamW& decay_if(std::function<bool(const std::string&)> pred) {
        decay_if_ = std::move(pred);
        return *this;
    }
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "adamw", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         const bool decays = !decay_if_ || decay_if_(w.name());
                                         return detail::append_adam(p, "adamw", w, g, lr, b1_, b2_, eps_,
                                                                    {Attribute::make_float("lr_ratio", 1.0),
                                                                     Attribute::make_float("coeff", decay_),
                                                                     Attribute::make_bool("with_decay", decays)});
                                     });
    }

private:
    double decay_, b1_, b2_, eps_;
    std::function<bool(const std::string&)> decay_if_;
};

// Adagrad (paddle.optimizer.Adagrad): a per-element rate lr / (sqrt(the sum
// of squared gradients) + epsilon); the sum starts at initial_accumulator.
class Adagrad : public detail::optimizer_base<Adagrad> {
public:
    explicit Adagrad(LRSchedule learning_rate, double epsilon = 1e-6, double initial_accumulator = 0.0)
        : optimizer_base(learning_rate), eps_(epsilon), init_(initial_accumulator) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "adagrad", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         auto m = detail::state_like(p, w, "moment", init_);
                                         return p.append("adagrad",
                                                         {{"Param", {w.name()}}, {"Grad", {g.name()}}, {"Moment", {m.name()}},
                                                          {"LearningRate", {lr.name()}}},
                                                         {}, {Attribute::make_float("epsilon", eps_)}, nullptr,
                                                         {{"ParamOut", {w.name()}}, {"MomentOut", {m.name()}}});
                                     });
    }

private:
    double eps_, init_;
};

// RMSProp (paddle.optimizer.RMSProp): rho is the mean square's decay; with
// momentum, and optionally centered (the gradient's mean subtracted).
class RMSProp : public detail::optimizer_base<RMSProp> {
public:
    explicit RMSProp(LRSchedule learning_rate, double rho = 0.95, double epsilon = 1e-6, double momentum = 0.0,
                     bool centered = false)
        : optimizer_base(learning_rate), rho_(rho), eps_(epsilon), mom_(momentum), centered_(centered) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "rmsprop", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         auto ms = detail::state_like(p, w, "mean_square", 0.0);
                                         auto m = detail::state_like(p, w, "moment", 0.0);
                                         std::vector<OpSlot> ins{{"Param", {w.name()}}, {"MeanSquare", {ms.name()}},
                                                                 {"Grad", {g.name()}}, {"Moment", {m.name()}},
                                                                 {"LearningRate", {lr.name()}}};
                                         std::vector<OpSlot> outs{{"ParamOut", {w.name()}}, {"MomentOut", {m.name()}},
                                                                  {"MeanSquareOut", {ms.name()}}};
                                         if (centered_) {
                                             auto mg = detail::state_like(p, w, "mean_grad", 0.0);
                                             ins.push_back({"MeanGrad", {mg.name()}});
                                             outs.push_back({"MeanGradOut", {mg.name()}});
                                         }
                                         return p.append("rmsprop", ins, {},
                                                         {Attribute::make_float("epsilon", eps_), Attribute::make_float("decay", rho_),
                                                          Attribute::make_float("momentum", mom_),
                                                          Attribute::make_bool("centered", centered_)},
                                                         nullptr, outs);
                                     });
    }

private:
    double rho_, eps_, mom_;
    bool centered_;
};

// LAMB (paddle.optimizer.Lamb): Adam's direction plus lamb_weight_decay
// times the parameter, each parameter's step scaled by its trust ratio.
class Lamb : public detail::optimizer_base<Lamb> {
public:
    explicit Lamb(LRSchedule learning_rate = 1e-3, double lamb_weight_decay = 0.01, double beta1 = 0.9,
                  double beta2 = 0.999, double epsilon = 1e-6)
        : optimizer_base(learning_rate), decay_(lamb_weight_decay), b1_(beta1), b2_(beta2), eps_(epsilon) {}
    template <element_type T> TrainStep minimize(const Var<T>& loss, std::vector<std::string> params = {}) const {
        return detail::minimize_with(loss, set_, "lamb", std::move(params),
                                     [this](Program& p, const Var<T>& w, const Var<T>& g, const Var<T>& lr) {
                                         return detail::append_adam(p, "lamb", w, g, lr, b1_, b2_, eps_,
                                                                    {Attribute::make_float("weight_decay", decay_)});
                                     });
    }

private:
    double decay_, b1_, b2_, eps_;
};

}  // namespace dlgraph
