// Optimizers as ops (PaddlePaddle's slots), their definitions: sgd, momentum,
// adam, adamw, adagrad, rmsprop, lamb. Each reads a parameter, its gradient, a learning-rate variable and its
// state, and writes the parameter and state back in place (ParamOut names the
// Param variable). The updates are in kernels/optimizers.hpp, the CPU kernels
// in cpu/optimizers.hpp.
#pragma once

#include <initializer_list>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

namespace detail {
// Every listed input slot must match Param's shape; LearningRate is one value.
inline void check_like_param(const InferContext& c, std::initializer_list<int> slots, int lr_slot) {
    const Shape& p = c.shape(0);
    for (int s : slots)
        if (p.known() && c.shape(s).known() && !(c.shape(s) == p))
            c.fail("dlgraph.shape.optimizer", c.slot_name(s) + " is " + to_string(c.shape(s)) + " but Param is " + to_string(p));
    if (c.shape(lr_slot).known() && c.shape(lr_slot).numel() != 1)
        c.fail("dlgraph.shape.optimizer", "LearningRate must hold one value, it is " + to_string(c.shape(lr_slot)));
}
}  // namespace detail

// ParamOut = Param - lr * Grad
struct sgd_op {
    enum { Param = 0, Grad = 1, LearningRate = 2 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, LearningRate});
        detail::check_like_param(c, {Grad}, LearningRate);
        c.set(0, c.dtype(Param), c.shape(Param));
    }
};
inline OpDef sgd_def() {
    OpDef d{"sgd", {{"Param"}, {"Grad"}, {"LearningRate"}}, {{"ParamOut"}}, {}, &sgd_op::infer};
    d.doc = "ParamOut = Param - LearningRate * Grad";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

// v = mu * v + g; p -= lr * (nesterov ? g + mu * v : v), g being
// rescale_grad * Grad, plus regularization_coeff * Param when
// regularization_method is "l2_decay" (Paddle's attributes). Paddle's
// multi_precision (FP16 parameters with FP32 master copies) is refused.
struct momentum_op {
    enum { Param = 0, Grad = 1, Velocity = 2, LearningRate = 3 };
    enum { ParamOut = 0, VelocityOut = 1 };
    enum { mu = 0, use_nesterov = 1, regularization_method = 2, regularization_coeff = 3, multi_precision = 4, rescale_grad = 5 };
    // The L2 coefficient the attributes ask for (0: none).
    static double l2(const Attribute* a) {
        return a[regularization_method].s == "l2_decay" ? a[regularization_coeff].f : 0.0;
    }
    static void infer(const InferContext& c) {
        const std::string& m = c.attr(regularization_method).s;
        if (!m.empty() && m != "l2_decay")
            c.fail("dlgraph.shape.attr", "regularization_method '" + m + "' is not one of '' and 'l2_decay'");
        if (c.attr(multi_precision).b)
            c.fail("dlgraph.shape.attr", "multi_precision (FP32 master copies of FP16 parameters) is not supported");
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, Velocity, LearningRate});
        detail::check_like_param(c, {Grad, Velocity}, LearningRate);
        c.set(ParamOut, c.dtype(Param), c.shape(Param));
        c.set(VelocityOut, c.dtype(Param), c.shape(Param));
    }
};
inline OpDef momentum_def() {
    OpDef d{"momentum", {{"Param"}, {"Grad"}, {"Velocity"}, {"LearningRate"}}, {{"ParamOut"}, {"VelocityOut"}},
            {{"mu", Attribute::make_float("mu", 0.9)},
             {"use_nesterov", Attribute::make_bool("use_nesterov", false)},
             {"regularization_method", Attribute::make_string("regularization_method", "")},
             {"regularization_coeff", Attribute::make_float("regularization_coeff", 0.0)},
             {"multi_precision", Attribute::make_bool("multi_precision", false)},
             {"rescale_grad", Attribute::make_float("rescale_grad", 1.0)}},
            &momentum_op::infer};
    d.doc = "momentum SGD (optionally Nesterov)";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

// Adam (Kingma & Ba), as PaddlePaddle computes it: the bias corrections use
// Beta1Pow/Beta2Pow (beta^t, starting at beta for the first step), which the
// op advances after the update.
struct adam_op {
    enum { Param = 0, Grad = 1, LearningRate = 2, Moment1 = 3, Moment2 = 4, Beta1Pow = 5, Beta2Pow = 6 };
    enum { ParamOut = 0, Moment1Out = 1, Moment2Out = 2, Beta1PowOut = 3, Beta2PowOut = 4 };
    enum { beta1 = 0, beta2 = 1, epsilon = 2 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow});
        detail::check_like_param(c, {Grad, Moment1, Moment2}, LearningRate);
        for (int s : {Beta1Pow, Beta2Pow})
            if (c.shape(s).known() && c.shape(s).numel() != 1)
                c.fail("dlgraph.shape.optimizer", c.slot_name(s) + " must hold one value, it is " + to_string(c.shape(s)));
        for (int o : {ParamOut, Moment1Out, Moment2Out}) c.set(o, c.dtype(Param), c.shape(Param));
        c.set(Beta1PowOut, c.dtype(Param), c.shape(Beta1Pow));
        c.set(Beta2PowOut, c.dtype(Param), c.shape(Beta2Pow));
    }
};
inline OpDef adam_def() {
    OpDef d{"adam",
            {{"Param"}, {"Grad"}, {"LearningRate"}, {"Moment1"}, {"Moment2"}, {"Beta1Pow"}, {"Beta2Pow"}},
            {{"ParamOut"}, {"Moment1Out"}, {"Moment2Out"}, {"Beta1PowOut"}, {"Beta2PowOut"}},
            {{"beta1", Attribute::make_float("beta1", 0.9)},
             {"beta2", Attribute::make_float("beta2", 0.999)},
             {"epsilon", Attribute::make_float("epsilon", 1e-8)}},
            &adam_op::infer};
    d.doc = "Adam update of Param and its moments";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

// AdamW (decoupled weight decay), Paddle's adamw op: adam's slots and
// attributes, then lr_ratio, coeff and with_decay. With with_decay (off by
// default in the op, as in Paddle; dlgraph's AdamW optimizer sets it) the
// parameter first decays, Param -= lr * coeff * Param, then takes Adam's
// step, both at lr = LearningRate * lr_ratio. Deviation: Paddle's CPU
// kernel scales only the decay by lr_ratio (its GPU kernel both); dlgraph
// scales both, which agree at the default lr_ratio 1.
struct adamw_op : adam_op {
    enum { lr_ratio = 3, coeff = 4, with_decay = 5 };
};
inline OpDef adamw_def() {
    OpDef d = adam_def();
    d.type = "adamw";
    d.attrs.push_back({"lr_ratio", Attribute::make_float("lr_ratio", 1.0)});
    d.attrs.push_back({"coeff", Attribute::make_float("coeff", 0.01)});
    d.attrs.push_back({"with_decay", Attribute::make_bool("with_decay", false)});
    d.doc = "AdamW: Param -= lr * coeff * Param (with_decay), then Adam's update";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

// Adagrad: Moment accumulates Grad^2; Param -= lr * Grad / (sqrt(Moment) + epsilon).
struct adagrad_op {
    enum { Param = 0, Grad = 1, Moment = 2, LearningRate = 3 };
    enum { ParamOut = 0, MomentOut = 1 };
    enum { epsilon = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, Moment, LearningRate});
        detail::check_like_param(c, {Grad, Moment}, LearningRate);
        c.set(ParamOut, c.dtype(Param), c.shape(Param));
        c.set(MomentOut, c.dtype(Param), c.shape(Param));
    }
};
inline OpDef adagrad_def() {
    OpDef d{"adagrad", {{"Param"}, {"Grad"}, {"Moment"}, {"LearningRate"}}, {{"ParamOut"}, {"MomentOut"}},
            {{"epsilon", Attribute::make_float("epsilon", 1e-6)}}, &adagrad_op::infer};
    d.doc = "Adagrad: Moment += Grad^2; Param -= lr * Grad / (sqrt(Moment) + epsilon)";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

// RMSProp, Paddle's slots: MeanGrad and MeanGradOut are needed when
// centered (otherwise MeanGradOut, if given, is a copy of MeanGrad).
struct rmsprop_op {
    enum { Param = 0, MeanSquare = 1, Grad = 2, Moment = 3, LearningRate = 4, MeanGrad = 5 };
    enum { ParamOut = 0, MomentOut = 1, MeanSquareOut = 2, MeanGradOut = 3 };
    enum { epsilon = 0, decay = 1, momentum = 2, centered = 3 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, MeanSquare, Grad, Moment, LearningRate});
        detail::check_like_param(c, {MeanSquare, Grad, Moment}, LearningRate);
        const bool centered_ = c.attr(centered).b;
        if (centered_ && (!c.in_count(MeanGrad) || !c.out_count(MeanGradOut)))
            c.fail("dlgraph.shape.optimizer", "centered rmsprop needs MeanGrad and MeanGradOut");
        // Paddle's RMSProp passes MeanGrad and MeanGradOut either way; not
        // centered, MeanGradOut is MeanGrad unchanged.
        if (c.out_count(MeanGradOut) && !c.in_count(MeanGrad))
            c.fail("dlgraph.shape.optimizer", "MeanGradOut needs MeanGrad");
        if (c.in_count(MeanGrad)) {
            c.same_dtype({Param, MeanGrad});
            detail::check_like_param(c, {MeanGrad}, LearningRate);
        }
        for (int o : {ParamOut, MomentOut, MeanSquareOut}) c.set(o, c.dtype(Param), c.shape(Param));
        if (c.out_count(MeanGradOut)) c.set(MeanGradOut, c.dtype(Param), c.shape(Param));
    }
};
inline OpDef rmsprop_def() {
    OpDef d{"rmsprop",
            {{"Param"}, {"MeanSquare"}, {"Grad"}, {"Moment"}, {"LearningRate"}, {"MeanGrad", false, true}},
            {{"ParamOut"}, {"MomentOut"}, {"MeanSquareOut"}, {"MeanGradOut", false, true}},
            {{"epsilon", Attribute::make_float("epsilon", 1e-10)},
             {"decay", Attribute::make_float("decay", 0.9)},
             {"momentum", Attribute::make_float("momentum", 0.0)},
             {"centered", Attribute::make_bool("centered", false)}},
            &rmsprop_op::infer};
    d.doc = "RMSProp (optionally centered, with momentum)";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

// LAMB: adam's slots; attributes beta1, beta2, epsilon (1e-6) and
// weight_decay (0.01).
struct lamb_op : adam_op {
    enum { beta1 = 0, beta2 = 1, epsilon = 2, weight_decay = 3 };
};
inline OpDef lamb_def() {
    OpDef d = adam_def();
    d.type = "lamb";
    d.attrs = {{"beta1", Attribute::make_float("beta1", 0.9)},
               {"beta2", Attribute::make_float("beta2", 0.999)},
               {"epsilon", Attribute::make_float("epsilon", 1e-6)},
               {"weight_decay", Attribute::make_float("weight_decay", 0.01)}};
    d.doc = "LAMB: Adam's direction plus weight decay, scaled by the trust ratio |Param| / |direction|";
    d.in_place = true;  // ParamOut = Param and the like
    return d;
}

}  // namespace dlgraph::ops
