// The builder: a Program and typed handles (Var<T>) whose operators and free
// functions append OpDescs and run shape inference at once, so a mismatch
// throws on the line that caused it, naming the op and both shapes. A handle
// names its variable and the op that produced it; evaluating the handle
// evaluates that op.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include "dlgraph/autodiff.hpp"
#include "dlgraph/config.hpp"
#include "dlgraph/kernels/index.hpp"    // no_padding
#include "dlgraph/kernels/softmax.hpp"  // default_ignore_index
#include "dlgraph/ops/collective.hpp"
#include "dlgraph/session.hpp"

namespace dlgraph {

namespace detail {
// The state behind a Program; shared by its handles and sessions.
struct builder_state : program_state {
    std::map<std::string, int> counters;
    std::set<std::string> trainable;
    std::set<std::string> stop_gradient;
};
}  // namespace detail

template <element_type T> class Var;

// A handle on one op of a program, e.g. a training step to evaluate.
class OpRef {
public:
    OpRef() = default;
    OpRef(std::shared_ptr<detail::builder_state> st, int index) : st_(std::move(st)), index_(index) {}
    int index() const { return index_; }
    operator TargetRef() const { return TargetRef::op_only(index_); }
    const OpDesc& desc() const { return st_->desc.blocks[0].ops.at(static_cast<std::size_t>(index_)); }

private:
    std::shared_ptr<detail::builder_state> st_;
    int index_ = -1;
};

// How a parameter gets its first value: an initializer op and its
// attributes, or a scheme that derives them from the parameter's dims.
struct Initializer {
    std::string op = "fill_constant";
    std::vector<Attribute> attrs;
    enum class scheme { fixed, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal };
    scheme kind = scheme::fixed;
    std::int64_t seed = 0;

    // The op attributes for a parameter of `dims`. Fans follow Paddle's
    // convention: a [in, out] weight has fan_in = in, fan_out = out; a
    // filter [out, in, k...] has fan_in = in * k..., fan_out = out * k...
    // (its receptive field); a [n] vector has both n.
    std::vector<Attribute> resolve(const Shape& dims) const;
};
namespace init {
inline Initializer constant(double v) { return {"fill_constant", {Attribute::make_float("value", v)}}; }
inline Initializer uniform(double lo, double hi, std::int64_t seed = 0) {
    return {"uniform_random",
            {Attribute::make_float("min", lo), Attribute::make_float("max", hi), Attribute::make_int("seed", seed)}};
}
inline Initializer normal(double mean, double std, std::int64_t seed = 0) {
    return {"gaussian_random",
            {Attribute::make_float("mean", mean), Attribute::make_float("std", std), Attribute::make_int("seed", seed)}};
}
// Glorot & Bengio: variance 2 / (fan_in + fan_out).
inline Initializer xavier_uniform(std::int64_t seed = 0) { return {"uniform_random", {}, Initializer::scheme::xavier_uniform, seed}; }
inline Initializer xavier_normal(std::int64_t seed = 0) { return {"gaussian_random", {}, Initializer::scheme::xavier_normal, seed}; }
// He et al.: variance 2 / fan_in, for ReLU layers.
inline Initializer kaiming_uniform(std::int64_t seed = 0) { return {"uniform_random", {}, Initializer::scheme::kaiming_uniform, seed}; }
inline Initializer kaiming_normal(std::int64_t seed = 0) { return {"gaussian_random", {}, Initializer::scheme::kaiming_normal, seed}; }
}  // namespace init

class Program {
public:
    Program() : st_(std::make_shared<detail::builder_state>()) {}
    // Continues building on a loaded program (validated first).
    // Adopts the state behind a handle (its program).
    explicit Program(std::shared_ptr<detail::builder_state> st) : st_(std::move(st)) {}
    explicit Program(ProgramDesc desc) : Program() {
        validate(desc);
        st_->desc = std::move(desc);
    }

    // A variable to be fed; dims may be -1.
    template <element_type T> Var<T> input(const std::string& name, Shape dims) {
        declare(name, dtype_of<T>, dims, false);
        return Var<T>(st_, name, -1);
    }
    // A persistable, trainable parameter with an initializer op.
    template <element_type T>
    Var<T> parameter(const std::string& name, Shape dims, const Initializer& init, bool trainable = true) {
        if (!dims.known())
            throw shape_error("dlgraph.shape.parameter", "parameter '" + name + "' needs known dims, not " + to_string(dims));
        declare(name, dtype_of<T>, dims, true);
        OpDesc op;
        op.type = init.op;
        op.set_output("Out", {name});
        op.attrs = init.resolve(dims);
        op.set_attr(Attribute::make_ints("shape", dims.vec()));
        op.set_attr(Attribute::make_int("dtype", static_cast<int>(dtype_of<T>)));
        int idx = push_op(std::move(op));
        if (trainable) st_->trainable.insert(name);
        return Var<T>(st_, name, idx);
    }
    // A non-persistable value computed by fill_constant (can be fed over).
    template <element_type T> Var<T> constant(T value, Shape dims = {1}, const std::string& name = "") {
        std::string n = name.empty() ? fresh("constant") : name;
        declare(n, dtype_of<T>, dims, false);
        OpDesc op;
        op.type = "fill_constant";
        op.set_output("Out", {n});
        op.set_attr(Attribute::make_ints("shape", dims.vec()));
        op.set_attr(Attribute::make_float("value", static_cast<double>(value)));
        op.set_attr(Attribute::make_int("dtype", static_cast<int>(dtype_of<T>)));
        int idx = push_op(std::move(op));
        return Var<T>(st_, n, idx);
    }
    // A named variable with an initial value (the seed example's `a = 1`).
    template <element_type T> Var<T> variable(const std::string& name, T value, Shape dims = {1}) {
        return constant<T>(value, dims, name);
    }
    // A handle on an existing variable (e.g. of a loaded program).
    template <element_type T> Var<T> var(const std::string& name) const {
        auto* vd = st_->desc.blocks[0].find_var(name);
        if (!vd) throw graph_error("dlgraph.graph.undeclared", "variable '" + name + "' is not declared");
        if (vd->data_type != dtype_of<T>)
            throw type_error("dlgraph.type.handle", "variable '" + name + "' is " + to_string(vd->data_type) +
                                                        ", not " + to_string(dtype_of<T>));
        int producer = -1;
        auto& ops = st_->desc.blocks[0].ops;
        for (int i = static_cast<int>(ops.size()) - 1; i >= 0 && producer < 0; --i)
            if (detail::writes(ops[static_cast<std::size_t>(i)], name)) producer = i;
        return Var<T>(st_, name, producer);
    }

    // Gives variable `v` the name `name` everywhere in the program (so a
    // program loaded from JSON can be evaluated by meaningful names). Handles
    // made earlier keep the old name: use the returned one.
    template <element_type T> Var<T> rename(const Var<T>& v, const std::string& name) {
        BlockDesc& blk = st_->desc.blocks[0];
        if (blk.find_var(name)) throw graph_error("dlgraph.graph.duplicate", "variable '" + name + "' is already declared");
        VarDesc* vd = blk.find_var(v.name());
        if (!vd) throw graph_error("dlgraph.graph.undeclared", "variable '" + v.name() + "' is not declared");
        vd->name = name;
        for (auto& op : blk.ops)
            for (auto* slots : {&op.inputs, &op.outputs})
                for (auto& s : *slots)
                    for (auto& a : s.arguments)
                        if (a == v.name()) a = name;
        for (auto* set : {&st_->trainable, &st_->stop_gradient})
            if (set->erase(v.name())) set->insert(name);
        ++st_->revision;
        return Var<T>(st_, name, v.op());
    }

    const ProgramDesc& desc() const { return st_->desc; }
    std::string to_json(int indent = 1) const { return save_program(st_->desc, indent); }
    std::size_t op_count() const { return st_->desc.blocks[0].ops.size(); }
    bool is_trainable(const std::string& name) const { return st_->trainable.count(name) > 0; }
    const std::set<std::string>& trainable() const { return st_->trainable; }
    // Marks a variable so that no gradient flows through it.
    void stop_gradient(const std::string& name) { st_->stop_gradient.insert(name); }
    // Runs `f` on the description and bumps the revision (sessions re-plan).
    template <class F> decltype(auto) edit(F&& f) {
        ++st_->revision;
        return f(st_->desc);
    }
    const std::shared_ptr<detail::builder_state>& state() const { return st_; }

    // Appends an op of any registered type: inputs and outputs by slot, and
    // attributes; creates the output variables with inferred dtypes and
    // shapes. Returns the op's index. Nothing changes if inference fails.
    // `existing` binds output slots to variables that exist already (an
    // optimizer writes ParamOut into Param); what inference gives for them
    // must match their declarations.
    int append(const std::string& type, const std::vector<OpSlot>& inputs,
               const std::vector<std::pair<std::string, int>>& outputs, std::vector<Attribute> attrs,
               std::vector<std::vector<std::string>>* out_names = nullptr, const std::vector<OpSlot>& existing = {});

    std::string fresh(const std::string& base);

private:
    void declare(const std::string& name, DataType t, const Shape& dims, bool persistable);
    int push_op(OpDesc op) {
        auto& ops = st_->desc.blocks[0].ops;
        ops.push_back(std::move(op));
        ++st_->revision;
        return static_cast<int>(ops.size()) - 1;
    }
    std::shared_ptr<detail::builder_state> st_;
};

template <element_type T> class Var {
public:
    using value_type = T;
    Var() = default;
    Var(std::shared_ptr<detail::builder_state> st, std::string name, int op)
        : st_(std::move(st)), name_(std::move(name)), op_(op) {}

    const std::string& name() const { return name_; }
    // Index of the op that produced this handle (-1: an input).
    int op() const { return op_; }
    const VarDesc& desc() const { return *st_->desc.blocks[0].find_var(name_); }
    Shape shape() const { return Shape(desc().dims); }
    // A handle is a target: evaluating it evaluates the op that produced it.
    operator TargetRef() const { return {name_, op_}; }
    const std::shared_ptr<detail::builder_state>& state() const { return st_; }
    Program program() const;

private:
    std::shared_ptr<detail::builder_state> st_;
    std::string name_;
    int op_ = -1;
};


namespace detail {

template <class T> const std::shared_ptr<builder_state>& state_of(const Var<T>& v) {
    if (!v.state()) throw graph_error("dlgraph.graph.handle", "empty variable handle");
    return v.state();
}

// Checks that every handle belongs to one program; returns it.
template <class First, class... Rest>
std::shared_ptr<builder_state> same_program(const std::string& op, const First& first, const Rest&... rest) {
    auto st = state_of(first);
    ((state_of(rest) != st
          ? throw graph_error("dlgraph.graph.program", op + ": '" + first.name() + "' and '" + rest.name() +
                                                           "' belong to different programs")
          : void()),
     ...);
    return st;
}

template <element_type U, class... H>
Var<U> unary_out(const std::string& type, std::shared_ptr<builder_state> st, std::vector<OpSlot> inputs,
                 std::vector<Attribute> attrs = {}, const std::string& out_slot = "Out") {
    Program p(st);
    std::vector<std::vector<std::string>> names;
    int idx = p.append(type, inputs, {{out_slot, 1}}, std::move(attrs), &names);
    return Var<U>(st, names[0][0], idx);
}

}  // namespace detail

template <element_type T> Program Var<T>::program() const { return Program(st_); }

// ---- any op, by type (registered ops' builder functions) ----------------------------

// One input slot of apply_op: its name and the handles bound to it, of any
// element types.
struct SlotInput {
    template <element_type... U>
    SlotInput(std::string slot_name, const Var<U>&... vars) : slot(std::move(slot_name)), names{vars.name()...} {
        ((state = state ? state : detail::state_of(vars)), ...);
        ((detail::state_of(vars) != state ? throw graph_error("dlgraph.graph.program",
                                                              "slot " + slot + ": '" + names.front() + "' and '" +
                                                                  vars.name() + "' belong to different programs")
                                          : void()),
         ...);
    }
    std::string slot;
    std::vector<std::string> names;
    std::shared_ptr<detail::builder_state> state;
};

// Appends op `type` (built-in or registered) reading `inputs` with `attrs`
// and returns its output slot `out_slot` (one variable) as Var<T>: the
// builder function of a registered op is one line, e.g.
//   template <element_type T> Var<T> mish(const Var<T>& x) { return apply_op<T>("mish", {{"X", x}}); }
// Inference runs at once, as for built-in ops; an output that is not of
// element type T is a type_error. Nothing changes when it throws.
template <element_type T>
Var<T> apply_op(const std::string& type, const std::vector<SlotInput>& inputs, std::vector<Attribute> attrs = {},
                const std::string& out_slot = "Out") {
    std::shared_ptr<detail::builder_state> st;
    std::vector<OpSlot> slots;
    for (auto& in : inputs) {
        if (in.names.empty()) continue;
        if (st && in.state != st)
            throw graph_error("dlgraph.graph.program", type + ": its inputs belong to different programs");
        st = in.state;
        slots.push_back({in.slot, in.names});
    }
    if (!st) throw graph_error("dlgraph.graph.handle", type + ": apply_op needs at least one input handle");
    BlockDesc& blk = st->desc.blocks[0];
    const std::size_t ops = blk.ops.size(), vars = blk.vars.size();
    Program p(st);
    std::vector<std::vector<std::string>> names;
    const int idx = p.append(type, slots, {{out_slot, 1}}, std::move(attrs), &names);
    const VarDesc* out = blk.find_var(names[0][0]);
    if (out->data_type != dtype_of<T>) {
        const std::string got = to_string(out->data_type);
        blk.ops.resize(ops);
        blk.vars.resize(vars);
        ++st->revision;
        throw type_error("dlgraph.type.handle", type + ": its output " + out_slot + " is " + got + ", not " +
                                                    to_string(dtype_of<T>));
    }
    return Var<T>(st, names[0][0], idx);
}

// ---- element-wise -------------------------------------------------------------

#define DLGRAPH_BINARY(fname, optype)                                                                          \
    template <element_type T> Var<T> fname(const Var<T>& x, const Var<T>& y, int axis = -1) {                 \
        auto st = detail::same_program(optype, x, y);                                                          \
        return detail::unary_out<T>(optype, st, {{"X", {x.name()}}, {"Y", {y.name()}}},                        \
                                    {Attribute::make_int("axis", axis)});                                      \
    }
DLGRAPH_BINARY(elementwise_add, "elementwise_add")
DLGRAPH_BINARY(elementwise_sub, "elementwise_sub")
DLGRAPH_BINARY(elementwise_mul, "elementwise_mul")
DLGRAPH_BINARY(elementwise_div, "elementwise_div")
DLGRAPH_BINARY(elementwise_max, "elementwise_max")
DLGRAPH_BINARY(elementwise_min, "elementwise_min")
DLGRAPH_BINARY(elementwise_pow, "elementwise_pow")
DLGRAPH_BINARY(elementwise_mod, "elementwise_mod")
DLGRAPH_BINARY(elementwise_floordiv, "elementwise_floordiv")
#undef DLGRAPH_BINARY
template <element_type T> Var<T> maximum(const Var<T>& x, const Var<T>& y) { return elementwise_max(x, y); }
template <element_type T> Var<T> minimum(const Var<T>& x, const Var<T>& y) { return elementwise_min(x, y); }
template <element_type T> Var<T> pow(const Var<T>& x, const Var<T>& y) { return elementwise_pow(x, y); }
// Python's % and // (the remainder has y's sign; the quotient rounds down).
template <element_type T> Var<T> mod(const Var<T>& x, const Var<T>& y) { return elementwise_mod(x, y); }
template <element_type T> Var<T> floordiv(const Var<T>& x, const Var<T>& y) { return elementwise_floordiv(x, y); }

// ---- comparisons, logical ops, where ------------------------------------------------

// x op y element-wise with the binary ops' broadcasting; a BOOL result.
#define DLGRAPH_COMPARE(fname)                                                                                 \
    template <element_type T> Var<bool> fname(const Var<T>& x, const Var<T>& y, int axis = -1) {            \
        auto st = detail::same_program(#fname, x, y);                                                          \
        return detail::unary_out<bool>(#fname, st, {{"X", {x.name()}}, {"Y", {y.name()}}},                     \
                                       {Attribute::make_int("axis", axis)});                                   \
    }
DLGRAPH_COMPARE(less_than)
DLGRAPH_COMPARE(less_equal)
DLGRAPH_COMPARE(greater_than)
DLGRAPH_COMPARE(greater_equal)
DLGRAPH_COMPARE(equal)
DLGRAPH_COMPARE(not_equal)
#undef DLGRAPH_COMPARE
// Truths of any dtype (nonzero is true), broadcast; a BOOL result.
#define DLGRAPH_LOGICAL(fname)                                                                                 \
    template <element_type T> Var<bool> fname(const Var<T>& x, const Var<T>& y) {                            \
        auto st = detail::same_program(#fname, x, y);                                                          \
        return detail::unary_out<bool>(#fname, st, {{"X", {x.name()}}, {"Y", {y.name()}}});                    \
    }
DLGRAPH_LOGICAL(logical_and)
DLGRAPH_LOGICAL(logical_or)
DLGRAPH_LOGICAL(logical_xor)
#undef DLGRAPH_LOGICAL
template <element_type T> Var<bool> logical_not(const Var<T>& x) {
    return detail::unary_out<bool>("logical_not", detail::state_of(x), {{"X", {x.name()}}});
}
// condition ? x : y element-wise; all three of one shape. Differentiable in
// x and y (an attention mask: where(mask, scores, fill)).
template <element_type T> Var<T> where(const Var<bool>& condition, const Var<T>& x, const Var<T>& y) {
    auto st = detail::same_program("where", condition, x, y);
    return detail::unary_out<T>("where", st, {{"Condition", {condition.name()}}, {"X", {x.name()}}, {"Y", {y.name()}}});
}

#define DLGRAPH_UNARY(fname)                                                                              \
    template <element_type T> Var<T> fname(const Var<T>& x) {                                             \
        return detail::unary_out<T>(#fname, detail::state_of(x), {{"X", {x.name()}}});                    \
    }
DLGRAPH_UNARY(relu)
DLGRAPH_UNARY(sigmoid)
DLGRAPH_UNARY(tanh)
DLGRAPH_UNARY(exp)
DLGRAPH_UNARY(log)
DLGRAPH_UNARY(sqrt)
DLGRAPH_UNARY(abs)
DLGRAPH_UNARY(square)
DLGRAPH_UNARY(assign)
DLGRAPH_UNARY(softsign)
DLGRAPH_UNARY(sin)
DLGRAPH_UNARY(cos)
DLGRAPH_UNARY(reciprocal)
DLGRAPH_UNARY(rsqrt)
DLGRAPH_UNARY(floor)
DLGRAPH_UNARY(ceil)
DLGRAPH_UNARY(round)
DLGRAPH_UNARY(sign)
#undef DLGRAPH_UNARY

// Activations with attributes: Paddle's names and defaults (ops/elementwise.hpp).
template <element_type T> Var<T> gelu(const Var<T>& x, bool approximate = false) {
    return detail::unary_out<T>("gelu", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_bool("approximate", approximate)});
}
template <element_type T> Var<T> leaky_relu(const Var<T>& x, double alpha = 0.02) {
    return detail::unary_out<T>("leaky_relu", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("alpha", alpha)});
}
template <element_type T> Var<T> elu(const Var<T>& x, double alpha = 1.0) {
    return detail::unary_out<T>("elu", detail::state_of(x), {{"X", {x.name()}}}, {Attribute::make_float("alpha", alpha)});
}
template <element_type T> Var<T> relu6(const Var<T>& x, double threshold = 6.0) {
    return detail::unary_out<T>("relu6", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("threshold", threshold)});
}
template <element_type T> Var<T> hard_sigmoid(const Var<T>& x, double slope = 0.2, double offset = 0.5) {
    return detail::unary_out<T>("hard_sigmoid", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("slope", slope), Attribute::make_float("offset", offset)});
}
template <element_type T>
Var<T> hard_swish(const Var<T>& x, double threshold = 6.0, double scale = 6.0, double offset = 3.0) {
    return detail::unary_out<T>("hard_swish", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("threshold", threshold), Attribute::make_float("scale", scale),
                                 Attribute::make_float("offset", offset)});
}
template <element_type T> Var<T> softplus(const Var<T>& x, double beta = 1.0, double threshold = 20.0) {
    return detail::unary_out<T>("softplus", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("beta", beta), Attribute::make_float("threshold", threshold)});
}
template <element_type T> Var<T> swish(const Var<T>& x, double beta = 1.0) {
    return detail::unary_out<T>("swish", detail::state_of(x), {{"X", {x.name()}}}, {Attribute::make_float("beta", beta)});
}
// x limited to [min, max] (Paddle's clip; min <= max).
template <element_type T> Var<T> clip(const Var<T>& x, double min, double max) {
    return detail::unary_out<T>("clip", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("min", min), Attribute::make_float("max", max)});
}
// x ^ factor (Paddle's pow; pow(x, y) of two tensors is elementwise_pow).
template <element_type T> Var<T> pow(const Var<T>& x, double factor) {
    return detail::unary_out<T>("pow", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("factor", factor)});
}

template <element_type T>
Var<T> scale(const Var<T>& x, double s, double bias = 0.0, bool bias_after_scale = true) {
    return detail::unary_out<T>("scale", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_float("scale", s), Attribute::make_float("bias", bias),
                                 Attribute::make_bool("bias_after_scale", bias_after_scale)});
}

template <element_type T> Var<T> operator+(const Var<T>& x, const Var<T>& y) { return elementwise_add(x, y); }
template <element_type T> Var<T> operator-(const Var<T>& x, const Var<T>& y) { return elementwise_sub(x, y); }
template <element_type T> Var<T> operator*(const Var<T>& x, const Var<T>& y) { return elementwise_mul(x, y); }
template <element_type T> Var<T> operator/(const Var<T>& x, const Var<T>& y) { return elementwise_div(x, y); }
template <element_type T> Var<T> operator-(const Var<T>& x) { return scale(x, -1.0); }
// With a scalar: scale ops (no constant tensor needed), except c / x.
template <element_type T> Var<T> operator+(const Var<T>& x, std::type_identity_t<T> c) { return scale(x, 1.0, double(c)); }
template <element_type T> Var<T> operator+(std::type_identity_t<T> c, const Var<T>& x) { return scale(x, 1.0, double(c)); }
template <element_type T> Var<T> operator-(const Var<T>& x, std::type_identity_t<T> c) { return scale(x, 1.0, -double(c)); }
template <element_type T> Var<T> operator-(std::type_identity_t<T> c, const Var<T>& x) { return scale(x, -1.0, double(c)); }
template <element_type T> Var<T> operator*(const Var<T>& x, std::type_identity_t<T> c) { return scale(x, double(c)); }
template <element_type T> Var<T> operator*(std::type_identity_t<T> c, const Var<T>& x) { return scale(x, double(c)); }
template <element_type T> Var<T> operator/(const Var<T>& x, std::type_identity_t<T> c) { return scale(x, 1.0 / double(c)); }
template <element_type T> Var<T> operator/(std::type_identity_t<T> c, const Var<T>& x) {
    return elementwise_div(x.program().template constant<T>(c, {1}), x);
}

// ---- matrix products ----------------------------------------------------------------

// alpha * op(x) * op(y), batch dims broadcast. As in Paddle, a vector x is a
// row (transposed, a column) and a vector y a column (transposed, a row).
template <element_type T>
Var<T> matmul(const Var<T>& x, const Var<T>& y, bool transpose_x = false, bool transpose_y = false, double alpha = 1.0) {
    auto st = detail::same_program("matmul", x, y);
    return detail::unary_out<T>("matmul", st, {{"X", {x.name()}}, {"Y", {y.name()}}},
                                {Attribute::make_bool("transpose_X", transpose_x),
                                 Attribute::make_bool("transpose_Y", transpose_y), Attribute::make_float("alpha", alpha)});
}
template <element_type T> Var<T> mul(const Var<T>& x, const Var<T>& y, int x_num_col_dims = 1, int y_num_col_dims = 1) {
    auto st = detail::same_program("mul", x, y);
    return detail::unary_out<T>("mul", st, {{"X", {x.name()}}, {"Y", {y.name()}}},
                                {Attribute::make_int("x_num_col_dims", x_num_col_dims),
                                 Attribute::make_int("y_num_col_dims", y_num_col_dims)});
}

// ---- softmax and losses ----------------------------------------------------------------

template <element_type T> Var<T> softmax(const Var<T>& x, int axis = -1) {
    return detail::unary_out<T>("softmax", detail::state_of(x), {{"X", {x.name()}}}, {Attribute::make_int("axis", axis)});
}
// log(softmax(x)) along `axis`, computed as x - log(sum(exp(x))): no log of
// a rounded probability, so it stays finite where softmax underflows to 0.
template <element_type T> Var<T> log_softmax(const Var<T>& x, int axis = -1) {
    return detail::unary_out<T>("log_softmax", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_int("axis", axis)});
}
// A hard label equal to ignore_index (Paddle's -100 unless given; a padding
// token's class, say) has loss 0 and no gradient.
template <element_type T, element_type L>
Var<T> cross_entropy(const Var<T>& x, const Var<L>& label, bool soft_label = false,
                     std::int64_t ignore_index = kernels::default_ignore_index) {
    auto st = detail::same_program("cross_entropy", x, label);
    return detail::unary_out<T>("cross_entropy", st, {{"X", {x.name()}}, {"Label", {label.name()}}},
                                {Attribute::make_bool("soft_label", soft_label),
                                 Attribute::make_int("ignore_index", ignore_index)},
                                "Y");
}
// Returns {softmax, loss}.
template <element_type T, element_type L>
std::pair<Var<T>, Var<T>> softmax_with_cross_entropy(const Var<T>& logits, const Var<L>& label, bool soft_label = false,
                                                     std::int64_t ignore_index = kernels::default_ignore_index) {
    auto st = detail::same_program("softmax_with_cross_entropy", logits, label);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    int idx = p.append("softmax_with_cross_entropy", {{"Logits", {logits.name()}}, {"Label", {label.name()}}},
                       {{"Softmax", 1}, {"Loss", 1}},
                       {Attribute::make_bool("soft_label", soft_label), Attribute::make_int("ignore_index", ignore_index)},
                       &names);
    return {Var<T>(st, names[0][0], idx), Var<T>(st, names[1][0], idx)};
}

// paddle.nn.functional.square_error_cost: (input - label)^2 element by
// element, as Paddle builds it (elementwise_sub, then square); no op of
// its own.
template <element_type T> Var<T> square_error_cost(const Var<T>& input, const Var<T>& label) {
    return square(input - label);
}
// The cross entropy of sigmoid(x) against probability labels, element by
// element (Paddle's sigmoid_cross_entropy_with_logits): 0 where label ==
// ignore_index; normalize divides by the count of the other elements.
template <element_type T>
Var<T> sigmoid_cross_entropy_with_logits(const Var<T>& x, const Var<T>& label, bool normalize = false,
                                         std::int64_t ignore_index = -100) {
    auto st = detail::same_program("sigmoid_cross_entropy_with_logits", x, label);
    return detail::unary_out<T>("sigmoid_cross_entropy_with_logits", st, {{"X", {x.name()}}, {"Label", {label.name()}}},
                                {Attribute::make_bool("normalize", normalize), Attribute::make_int("ignore_index", ignore_index)});
}
namespace detail {
// Appends op `type` with one variable in each output slot of `outs` and
// returns the one of slot k.
template <element_type T>
Var<T> one_of_outputs(const std::string& type, std::shared_ptr<builder_state> st, std::vector<OpSlot> inputs,
                      std::vector<Attribute> attrs, const std::vector<std::string>& outs, std::size_t k) {
    Program p(st);
    std::vector<std::pair<std::string, int>> slots;
    for (auto& o : outs) slots.push_back({o, 1});
    std::vector<std::vector<std::string>> names;
    const int idx = p.append(type, inputs, slots, std::move(attrs), &names);
    return Var<T>(st, names[k][0], idx);
}
}  // namespace detail
// Paddle's huber_loss of the residual y - x, element by element.
template <element_type T> Var<T> huber_loss(const Var<T>& x, const Var<T>& y, double delta = 1.0) {
    auto st = detail::same_program("huber_loss", x, y);
    return detail::one_of_outputs<T>("huber_loss", st, {{"X", {x.name()}}, {"Y", {y.name()}}},
                                     {Attribute::make_float("delta", delta)}, {"Out", "Residual"}, 0);
}
// Paddle's smooth_l1_loss: [N, 1], each row's sum of the smooth L1 of x - y
// (quadratic within 1 / sigma^2); with weights, of (x - y) * inside_weight,
// each element's loss times outside_weight.
template <element_type T> Var<T> smooth_l1_loss(const Var<T>& x, const Var<T>& y, double sigma = 1.0) {
    auto st = detail::same_program("smooth_l1_loss", x, y);
    return detail::one_of_outputs<T>("smooth_l1_loss", st, {{"X", {x.name()}}, {"Y", {y.name()}}},
                                     {Attribute::make_float("sigma", sigma)}, {"Diff", "Out"}, 1);
}
template <element_type T>
Var<T> smooth_l1_loss(const Var<T>& x, const Var<T>& y, const Var<T>& inside_weight, const Var<T>& outside_weight,
                      double sigma = 1.0) {
    auto st = detail::same_program("smooth_l1_loss", x, y, inside_weight, outside_weight);
    return detail::one_of_outputs<T>("smooth_l1_loss", st,
                                     {{"X", {x.name()}}, {"Y", {y.name()}}, {"InsideWeight", {inside_weight.name()}},
                                      {"OutsideWeight", {outside_weight.name()}}},
                                     {Attribute::make_float("sigma", sigma)}, {"Diff", "Out"}, 1);
}
// The Kullback-Leibler divergence of log-probabilities x from target
// (paddle.nn.functional.kl_div): reduction none, sum, mean or batchmean.
template <element_type T> Var<T> kl_div(const Var<T>& x, const Var<T>& target, const std::string& reduction = "mean") {
    auto st = detail::same_program("kldiv_loss", x, target);
    return detail::unary_out<T>("kldiv_loss", st, {{"X", {x.name()}}, {"Target", {target.name()}}},
                                {Attribute::make_string("reduction", reduction)}, "Loss");
}
// Paddle's bce_loss: the binary cross entropy of probabilities x (each in
// [0, 1]; another value is an error when the program runs) against labels
// of x's shape, element by element, with the logs clipped at -100
// (paddle.nn.functional.binary_cross_entropy is its mean).
template <element_type T> Var<T> bce_loss(const Var<T>& x, const Var<T>& label) {
    auto st = detail::same_program("bce_loss", x, label);
    return detail::unary_out<T>("bce_loss", st, {{"X", {x.name()}}, {"Label", {label.name()}}}, {});
}

// ---- evaluation ----------------------------------------------------------------------------

// The k largest values of each row (last axis), largest first, and their
// indices (ties: the lower index first). Returns {values, indices}.
template <element_type T> std::pair<Var<T>, Var<std::int64_t>> top_k(const Var<T>& x, int k) {
    auto st = detail::state_of(x);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    int idx = p.append("top_k", {{"X", {x.name()}}}, {{"Out", 1}, {"Indices", 1}}, {Attribute::make_int("k", k)}, &names);
    return {Var<T>(st, names[0][0], idx), Var<std::int64_t>(st, names[1][0], idx)};
}
// The share of rows whose label ([N, 1]) is among their top-k indices
// ([N, k]), from top_k's outputs; FP32 [1]. The op also writes the counts
// (Correct and Total, INT32 [1]).
template <element_type T>
Var<float> accuracy(const Var<T>& topk_values, const Var<std::int64_t>& topk_indices, const Var<std::int64_t>& label) {
    auto st = detail::same_program("accuracy", topk_values, topk_indices, label);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    int idx = p.append("accuracy",
                       {{"Out", {topk_values.name()}}, {"Indices", {topk_indices.name()}}, {"Label", {label.name()}}},
                       {{"Accuracy", 1}, {"Correct", 1}, {"Total", 1}}, {}, &names);
    return Var<float>(st, names[0][0], idx);
}

// ---- reductions ----------------------------------------------------------------------------

template <element_type T> Var<T> mean(const Var<T>& x) {
    return detail::unary_out<T>("mean", detail::state_of(x), {{"X", {x.name()}}});
}
#define DLGRAPH_REDUCE(fname)                                                                                    \
    template <element_type T>                                                                                    \
    Var<T> fname(const Var<T>& x, std::vector<std::int64_t> dims = {}, bool keep_dim = false) {                   \
        bool all = dims.empty();                                                                                 \
        if (all) dims = {0};                                                                                     \
        return detail::unary_out<T>(#fname, detail::state_of(x), {{"X", {x.name()}}},                           \
                                    {Attribute::make_ints("dim", dims), Attribute::make_bool("keep_dim", keep_dim), \
                                     Attribute::make_bool("reduce_all", all)});                                  \
    }
DLGRAPH_REDUCE(reduce_sum)
DLGRAPH_REDUCE(reduce_mean)
DLGRAPH_REDUCE(reduce_max)
DLGRAPH_REDUCE(reduce_min)
DLGRAPH_REDUCE(reduce_prod)
DLGRAPH_REDUCE(reduce_all)
DLGRAPH_REDUCE(reduce_any)
#undef DLGRAPH_REDUCE

// Where along `axis` x is largest (arg_max) or smallest (arg_min): the first
// of ties, a NaN beating every number. The positions are INT64 (I =
// std::int32_t for INT32); without an axis, x is searched whole (Out [1]).
#define DLGRAPH_ARG_EXTREME(fname)                                                                                  \
    template <class I = std::int64_t, element_type T>                                                             \
        requires(std::is_same_v<I, std::int64_t> || std::is_same_v<I, std::int32_t>)                            \
    Var<I> fname(const Var<T>& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdims = false) {       \
        return detail::unary_out<I>(#fname, detail::state_of(x), {{"X", {x.name()}}},                           \
                                    {Attribute::make_long("axis", axis.value_or(0)),                            \
                                     Attribute::make_bool("keepdims", keepdims),                                \
                                     Attribute::make_bool("flatten", !axis.has_value()),                        \
                                     Attribute::make_int("dtype", static_cast<int>(dtype_of<I>))});             \
    }
DLGRAPH_ARG_EXTREME(arg_max)
DLGRAPH_ARG_EXTREME(arg_min)
#undef DLGRAPH_ARG_EXTREME

// The running sums of x along `axis` (paddle.cumsum; without an axis over x
// flattened, Out [numel]); exclusive leaves each element out of its own
// sum, reverse sums from the end.
template <element_type T>
Var<T> cumsum(const Var<T>& x, std::optional<std::int64_t> axis = std::nullopt, bool exclusive = false,
              bool reverse = false) {
    return detail::unary_out<T>("cumsum", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_int("axis", axis.value_or(-1)),
                                 Attribute::make_bool("flatten", !axis.has_value()),
                                 Attribute::make_bool("exclusive", exclusive), Attribute::make_bool("reverse", reverse)});
}

// ---- convolutional networks ------------------------------------------------------------------
//
// NCHW. Paddings are [h, w] or [top, bottom, left, right]; padding_algorithm
// EXPLICIT (the paddings), SAME (ceil(in / stride) outputs) or VALID (none).

struct Conv2d {
    std::vector<std::int64_t> strides{1, 1};
    std::vector<std::int64_t> paddings{0, 0};
    std::vector<std::int64_t> dilations{1, 1};
    std::int64_t groups = 1;
    std::string padding_algorithm = "EXPLICIT";
    std::string data_format = "NCHW";  // or "NHWC": Input and Output channels last (Filter stays [M, C/groups, kh, kw])
};

namespace detail {
template <element_type T> Var<T> conv(const char* type, const Var<T>& x, const Var<T>& filter, const Conv2d& o) {
    auto st = same_program(type, x, filter);
    return unary_out<T>(type, st, {{"Input", {x.name()}}, {"Filter", {filter.name()}}},
                        {Attribute::make_ints("strides", o.strides), Attribute::make_ints("paddings", o.paddings),
                         Attribute::make_string("padding_algorithm", o.padding_algorithm),
                         Attribute::make_int("groups", o.groups), Attribute::make_ints("dilations", o.dilations),
                         Attribute::make_string("data_format", o.data_format)},
                        "Output");
}
}  // namespace detail

// x [N, C, H, W] (*) filter [M, C / groups, kh, kw] -> [N, M, oh, ow].
template <element_type T> Var<T> conv2d(const Var<T>& x, const Var<T>& filter, const Conv2d& o = {}) {
    return detail::conv("conv2d", x, filter, o);
}
// Each of x's C channels with its own filters ([M, 1, kh, kw], M a multiple
// of C); o.groups is set to C.
template <element_type T> Var<T> depthwise_conv2d(const Var<T>& x, const Var<T>& filter, Conv2d o = {}) {
    const int c = o.data_format == "NHWC" ? 3 : 1;
    if (x.shape().rank() != 4 || x.shape()[c] < 0)
        throw shape_error("dlgraph.shape.conv", "depthwise_conv2d: X is " + to_string(x.shape()) + ": it needs " +
                                                    (c == 3 ? "[N, H, W, C]" : "[N, C, H, W]") + " with C known (groups = C)");
    o.groups = x.shape()[c];
    return detail::conv("depthwise_conv2d", x, filter, o);
}

struct Pool2d {
    std::string pooling_type = "max";  // or "avg"
    std::vector<std::int64_t> ksize{2, 2};
    std::vector<std::int64_t> strides{1, 1};
    std::vector<std::int64_t> paddings{0, 0};
    bool global_pooling = false;  // one output per channel
    bool exclusive = true;        // avg: divide by the window's part inside the input
    bool adaptive = false;        // ksize is the output's size
    bool ceil_mode = false;       // output sizes rounded up
    std::string padding_algorithm = "EXPLICIT";
    std::string data_format = "NCHW";  // or "NHWC" (channels last)
};

template <element_type T> Var<T> pool2d(const Var<T>& x, const Pool2d& o) {
    return detail::unary_out<T>(
        "pool2d", detail::state_of(x), {{"X", {x.name()}}},
        {Attribute::make_string("pooling_type", o.pooling_type), Attribute::make_ints("ksize", o.ksize),
         Attribute::make_bool("global_pooling", o.global_pooling), Attribute::make_ints("strides", o.strides),
         Attribute::make_ints("paddings", o.paddings), Attribute::make_bool("exclusive", o.exclusive),
         Attribute::make_bool("adaptive", o.adaptive), Attribute::make_bool("ceil_mode", o.ceil_mode),
         Attribute::make_string("data_format", o.data_format), Attribute::make_string("padding_algorithm", o.padding_algorithm)});
}
// The max of each k x k window, stride `stride` (default k); x NCHW, or
// NHWC with data_format "NHWC".
template <element_type T>
Var<T> max_pool2d(const Var<T>& x, std::int64_t k, std::int64_t stride = 0, std::int64_t padding = 0,
                  const std::string& data_format = "NCHW") {
    Pool2d o;
    o.ksize = {k, k};
    o.strides = {stride ? stride : k, stride ? stride : k};
    o.paddings = {padding, padding};
    o.data_format = data_format;
    return pool2d(x, o);
}
template <element_type T>
Var<T> avg_pool2d(const Var<T>& x, std::int64_t k, std::int64_t stride = 0, std::int64_t padding = 0,
                  const std::string& data_format = "NCHW") {
    Pool2d o;
    o.pooling_type = "avg";
    o.ksize = {k, k};
    o.strides = {stride ? stride : k, stride ? stride : k};
    o.paddings = {padding, padding};
    o.data_format = data_format;
    return pool2d(x, o);
}

// x with dims start_axis..stop_axis merged into one ([N, C, H, W] -> [N, C*H*W]
// by default). Also writes XShape, which its gradient reads.
template <element_type T> Var<T> flatten(const Var<T>& x, int start_axis = 1, int stop_axis = -1) {
    auto st = detail::state_of(x);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    int idx = p.append("flatten_contiguous_range", {{"X", {x.name()}}}, {{"Out", 1}, {"XShape", 1}},
                       {Attribute::make_int("start_axis", start_axis), Attribute::make_int("stop_axis", stop_axis)},
                       &names);
    return Var<T>(st, names[0][0], idx);
}

struct BatchNorm {
    double momentum = 0.9;   // moving = moving * momentum + batch * (1 - momentum)
    double epsilon = 1e-5;
    bool is_test = false;           // normalize with the moving statistics, update nothing
    bool use_global_stats = false;  // the same while training (the gradient follows)
    std::string data_layout = "NCHW";  // or "NHWC": channels in x's last dim
};

namespace detail {
// Parameter NAME of `dims`: the one declared already (same dtype and dims),
// or a new one.
template <element_type T>
Var<T> shared_parameter(Program& p, const std::string& name, const Shape& dims, const Initializer& init, bool trainable) {
    const VarDesc* vd = p.desc().blocks[0].find_var(name);
    if (!vd) return p.parameter<T>(name, dims, init, trainable);
    if (!vd->persistable || Shape(vd->dims) != dims || p.is_trainable(name) != trainable)
        throw graph_error("dlgraph.graph.duplicate", "variable '" + name + "' is already declared as " +
                                                         to_string(vd->data_type) + " " + to_string(Shape(vd->dims)) +
                                                         (vd->persistable ? "" : ", not persistable") +
                                                         ": it cannot be shared as the parameter " + to_string(dims));
    return p.var<T>(name);
}
}  // namespace detail

// Batch normalization of x [N, C, ...] (or [N, ..., C], o.data_layout
// NHWC) per channel: creates the trainable
// NAME.scale (1) and NAME.bias (0) and the persistable moving statistics
// NAME.mean (0) and NAME.variance (1), which training updates in place.
// A second batch_norm with the same NAME shares them: a network built
// twice, for training and with is_test for evaluation, normalizes its test
// branch with the statistics its training branch keeps. Build the test
// branch first: program order is dataflow, and a test branch after the
// training one reads the statistics as that one updates them (evaluating
// it would run the training branch's batch norm).
template <element_type T> Var<T> batch_norm(const Var<T>& x, const std::string& name, const BatchNorm& o = {}) {
    auto st = detail::state_of(x);
    Program p(st);
    const Shape xs = x.shape();
    const int axis = o.data_layout == "NHWC" ? xs.rank() - 1 : 1;
    if (xs.rank() < 2 || xs[axis] < 0)
        throw shape_error("dlgraph.shape.batch_norm", "batch_norm '" + name + "': X is " + to_string(xs) +
                                                          ": it needs rank >= 2 and a known channel dim " +
                                                          std::to_string(axis));
    const Shape c{xs[axis]};
    auto scale = detail::shared_parameter<T>(p, name + ".scale", c, init::constant(1), true);
    auto bias = detail::shared_parameter<T>(p, name + ".bias", c, init::constant(0), true);
    auto mean = detail::shared_parameter<T>(p, name + ".mean", c, init::constant(0), false);
    auto var = detail::shared_parameter<T>(p, name + ".variance", c, init::constant(1), false);
    // With the moving statistics normalizing, the op updates nothing: it
    // writes no MeanOut and VarianceOut (which would make it a writer of the
    // statistics that later readers wait for), and in a test no SavedMean
    // and SavedVariance (no gradient reads them).
    const bool global = o.is_test || o.use_global_stats;
    std::vector<std::pair<std::string, int>> outs{{"Y", 1}};
    if (!o.is_test) outs.insert(outs.end(), {{"SavedMean", 1}, {"SavedVariance", 1}});
    std::vector<OpSlot> updates;
    if (!global) updates = {{"MeanOut", {mean.name()}}, {"VarianceOut", {var.name()}}};
    std::vector<std::vector<std::string>> names;
    std::vector<Attribute> attrs{Attribute::make_bool("is_test", o.is_test), Attribute::make_float("momentum", o.momentum),
                                 Attribute::make_float("epsilon", o.epsilon),
                                 Attribute::make_bool("use_global_stats", o.use_global_stats)};
    if (o.data_layout != "NCHW") attrs.push_back(Attribute::make_string("data_layout", o.data_layout));
    const int idx = p.append("batch_norm",
                             {{"X", {x.name()}}, {"Scale", {scale.name()}}, {"Bias", {bias.name()}},
                              {"Mean", {mean.name()}}, {"Variance", {var.name()}}},
                             outs, std::move(attrs), &names, updates);
    return Var<T>(st, names[0][0], idx);
}

// Layer normalization of x (Paddle's layer_norm): each row of x seen as
// [left, right], split at begin_norm_axis, by its own mean and biased
// variance, then times `scale` and plus `bias` ([right] each, both
// optional). Returns Y; the op also writes the Mean and Variance its
// gradient reads.
template <element_type T>
Var<T> layer_norm(const Var<T>& x, const std::optional<Var<std::type_identity_t<T>>>& scale,
                  const std::optional<Var<std::type_identity_t<T>>>& bias, int begin_norm_axis = 1,
                  double epsilon = 1e-5) {
    std::vector<SlotInput> ins{{"X", x}};
    auto st = detail::state_of(x);
    for (const auto& [slot, v] : {std::pair{"Scale", &scale}, std::pair{"Bias", &bias}})
        if (*v) {
            st = detail::same_program("layer_norm", x, **v);
            ins.push_back({slot, **v});
        }
    Program p(st);
    std::vector<OpSlot> slots;
    for (auto& in : ins) slots.push_back({in.slot, in.names});
    std::vector<std::vector<std::string>> names;
    const int idx = p.append("layer_norm", slots, {{"Y", 1}, {"Mean", 1}, {"Variance", 1}},
                             {Attribute::make_float("epsilon", epsilon), Attribute::make_int("begin_norm_axis", begin_norm_axis)},
                             &names);
    return Var<T>(st, names[0][0], idx);
}

struct LayerNorm {
    int begin_norm_axis = 1;  // normalize over the dims from this one on
    double epsilon = 1e-5;
    bool scale = true, bias = true;  // with the trainable NAME.scale (1) and NAME.bias (0)
};

// The same with its parameters NAME.scale and NAME.bias created (or shared)
// by name; the dims from begin_norm_axis on must be known.
template <element_type T> Var<T> layer_norm(const Var<T>& x, const std::string& name, const LayerNorm& o = {}) {
    Program p(detail::state_of(x));
    const Shape xs = x.shape();
    std::int64_t right = 1;
    for (int i = std::max(o.begin_norm_axis, 0); i < xs.rank(); ++i) right = xs[i] < 0 || right < 0 ? -1 : right * xs[i];
    if (o.begin_norm_axis < 1 || o.begin_norm_axis >= xs.rank() || right < 0)
        throw shape_error("dlgraph.shape.layer_norm", "layer_norm '" + name + "': X is " + to_string(xs) +
                                                          ": begin_norm_axis " + std::to_string(o.begin_norm_axis) +
                                                          " must be in [1, rank) with the dims from it known");
    std::optional<Var<T>> scale, bias;
    if (o.scale) scale = detail::shared_parameter<T>(p, name + ".scale", Shape{right}, init::constant(1), true);
    if (o.bias) bias = detail::shared_parameter<T>(p, name + ".bias", Shape{right}, init::constant(0), true);
    return layer_norm(x, scale, bias, o.begin_norm_axis, o.epsilon);
}

// Rows of the table w [rows, width] picked by ids: Paddle's lookup_table
// (Ids [..., 1], Out [..., width]), padding_idx -1 for none, else its rows
// of Out are 0 and get no gradient.
template <element_type T, class I>
Var<T> lookup_table(const Var<T>& w, const Var<I>& ids, std::int64_t padding_idx = kernels::no_padding) {
    auto st = detail::same_program("lookup_table", w, ids);
    return detail::unary_out<T>("lookup_table", st, {{"W", {w.name()}}, {"Ids", {ids.name()}}},
                                {Attribute::make_long("padding_idx", padding_idx)});
}

// Paddle 2's embedding (lookup_table_v2): Out = w[ids] of shape ids' + [width]
// for INT64 or INT32 ids of any shape. A padding_idx counts from the end when
// negative (-1: the last row), as paddle.nn.functional.embedding's.
template <element_type T, class I>
Var<T> embedding(const Var<I>& ids, const Var<T>& w, std::optional<std::int64_t> padding_idx = std::nullopt) {
    auto st = detail::same_program("embedding", w, ids);
    std::int64_t pad = kernels::no_padding;
    if (padding_idx) {
        const std::int64_t rows = w.shape().rank() == 2 ? w.shape()[0] : -1;
        pad = *padding_idx;
        if (pad < 0 && rows >= 0) pad += rows;
        if (pad < 0 || (rows >= 0 && pad >= rows))
            throw shape_error("dlgraph.shape.lookup_table", "embedding: padding_idx " + std::to_string(*padding_idx) +
                                                                " is out of range for W of shape " + to_string(w.shape()));
    }
    return detail::unary_out<T>("lookup_table_v2", st, {{"W", {w.name()}}, {"Ids", {ids.name()}}},
                                {Attribute::make_long("padding_idx", pad)});
}

struct Embedding {
    std::int64_t rows = 0, width = 0;           // the table: rows ids of width values each
    std::optional<std::int64_t> padding_idx{};  // as embedding()'s
    Initializer init = init::normal(0, 1);      // of NAME.w: N(0, 1) as torch.nn.Embedding (Paddle's is Xavier)
};

// embedding() with its table NAME.w [rows, width] created (or shared) by name.
template <element_type T = float, class I>
Var<T> embedding(const Var<I>& ids, const std::string& name, const Embedding& o) {
    Program p(detail::state_of(ids));
    if (o.rows <= 0 || o.width <= 0)
        throw shape_error("dlgraph.shape.lookup_table", "embedding '" + name + "': rows and width must be > 0, not " +
                                                            std::to_string(o.rows) + " and " + std::to_string(o.width));
    auto w = detail::shared_parameter<T>(p, name + ".w", Shape{o.rows, o.width}, o.init, true);
    return embedding(ids, w, o.padding_idx);
}

// paddle.nn.functional.one_hot (one_hot_v2): Out = ids' shape + [depth],
// the one-hot rows of INT64 or INT32 ids, as T (FP32 unless given). An id
// outside [0, depth) is an error when the program runs, or a row of zeros
// with allow_out_of_range.
template <element_type T = float, class I>
Var<T> one_hot(const Var<I>& ids, std::int64_t depth, bool allow_out_of_range = false) {
    return detail::unary_out<T>("one_hot_v2", detail::state_of(ids), {{"X", {ids.name()}}},
                                {Attribute::make_int("depth", depth),
                                 Attribute::make_int("dtype", static_cast<int>(dtype_of<T>)),
                                 Attribute::make_bool("allow_out_of_range", allow_out_of_range)});
}

struct Dropout {
    double prob = 0.5;                                // of zeroing an element
    std::string implementation = "downgrade_in_infer";  // or "upscale_in_train"
    bool is_test = false;                             // no zeroing: x * (1 - prob), or x when upscaled
    std::int64_t seed = 0;                            // 0: a fresh mask source each run
};

// Dropout of x while training. Writes the Mask its gradient reads. With a
// seed, a persistable INT32 counter NAME.seed starts at it and an increment
// op advances it before each dropout, which draws its mask from the
// counter: masks differ per step and reproduce from the seed (and a
// checkpoint keeps the counter).
template <element_type T> Var<T> dropout(const Var<T>& x, const std::string& name, const Dropout& o = {}) {
    auto st = detail::state_of(x);
    Program p(st);
    std::vector<OpSlot> ins{{"X", {x.name()}}};
    if (o.seed < INT32_MIN || o.seed > INT32_MAX)
        throw graph_error("dlgraph.graph.args", "dropout '" + name + "': seed " + std::to_string(o.seed) +
                                                    " does not fit the INT32 counter");
    if (o.seed != 0 && !o.is_test) {
        auto counter = p.parameter<std::int32_t>(name + ".seed", {1}, init::constant(double(o.seed)), false);
        p.append("increment", {{"X", {counter.name()}}}, {}, {Attribute::make_float("step", 1.0)}, nullptr,
                 {{"Out", {counter.name()}}});
        ins.push_back({"Seed", {counter.name()}});
    }
    std::vector<std::vector<std::string>> names;
    const int idx = p.append("dropout", ins, {{"Out", 1}, {"Mask", 1}},
                             {Attribute::make_float("dropout_prob", o.prob), Attribute::make_bool("is_test", o.is_test),
                              Attribute::make_string("dropout_implementation", o.implementation)},
                             &names);
    return Var<T>(st, names[0][0], idx);
}

// ---- shape ops --------------------------------------------------------------------------------

template <element_type T> Var<T> reshape(const Var<T>& x, std::vector<std::int64_t> shape) {
    return detail::unary_out<T>("reshape", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_ints("shape", std::move(shape))});
}
namespace detail {
// squeeze2 / unsqueeze2: Out and the XShape their grad ops read.
template <element_type T> Var<T> with_xshape(const std::string& type, const Var<T>& x, std::vector<std::int64_t> axes) {
    auto st = state_of(x);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    const int idx = p.append(type, {{"X", {x.name()}}}, {{"Out", 1}, {"XShape", 1}},
                             {Attribute::make_ints("axes", std::move(axes))}, &names);
    return Var<T>(st, names[0][0], idx);
}
}  // namespace detail
// x without its dims of 1: those listed (a listed dim other than 1 stays, as
// in Paddle), or all of them (paddle.squeeze).
template <element_type T> Var<T> squeeze(const Var<T>& x, std::vector<std::int64_t> axes = {}) {
    return detail::with_xshape("squeeze2", x, std::move(axes));
}
// x with dims of 1 inserted at `axes`, in order (paddle.unsqueeze).
template <element_type T> Var<T> unsqueeze(const Var<T>& x, std::vector<std::int64_t> axes) {
    return detail::with_xshape("unsqueeze2", x, std::move(axes));
}
// [start, start + step, ...) short of end (paddle.arange; the op `range`),
// from one-element values. Out's length comes from the values, so they must
// be known before a run (fed, in the scope, or constants such as
// Program::constant); until then Out's shape is [-1]. A feed of another
// value gives another length on the next run.
template <element_type T> Var<T> arange(const Var<T>& start, const Var<T>& end, const Var<T>& step) {
    return apply_op<T>("range", {{"Start", start}, {"End", end}, {"Step", step}});
}
template <element_type T> Var<T> arange(Program& p, T start, T end, T step = T(1)) {
    return arange(p.constant<T>(start), p.constant<T>(end), p.constant<T>(step));
}
// x reversed along the dims in `axis` (paddle.flip).
template <element_type T> Var<T> flip(const Var<T>& x, std::vector<std::int64_t> axis) {
    return detail::unary_out<T>("flip", detail::state_of(x), {{"X", {x.name()}}}, {Attribute::make_ints("axis", std::move(axis))});
}
// x[starts[k]:ends[k]] along each dim axes[k] (paddle.slice; negative
// indices count from the end, and are clamped to the dim); the dims listed
// in decrease_axis (each sliced to size 1) are dropped.
template <element_type T>
Var<T> slice(const Var<T>& x, std::vector<std::int64_t> axes, std::vector<std::int64_t> starts, std::vector<std::int64_t> ends,
             std::vector<std::int64_t> decrease_axis = {}) {
    return detail::unary_out<T>("slice", detail::state_of(x), {{"Input", {x.name()}}},
                                {Attribute::make_ints("axes", std::move(axes)), Attribute::make_ints("starts", std::move(starts)),
                                 Attribute::make_ints("ends", std::move(ends)),
                                 Attribute::make_ints("decrease_axis", std::move(decrease_axis))});
}
// ---- collectives (ops/collective.hpp; run with SessionOptions::comms) ----
//
// x summed (max, min, multiplied) over every rank of ring `ring_id`'s
// communicator; every rank gets the same result.
template <element_type T> Var<T> c_allreduce(const Var<T>& x, ReduceOp op, int ring_id = 0) {
    return detail::unary_out<T>(ops::allreduce_type(op), detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_int("ring_id", ring_id)});
}
template <element_type T> Var<T> c_allreduce_sum(const Var<T>& x, int ring_id = 0) { return c_allreduce(x, ReduceOp::sum, ring_id); }
// Rank `root`'s x, on every rank.
template <element_type T> Var<T> c_broadcast(const Var<T>& x, int root = 0, int ring_id = 0) {
    return detail::unary_out<T>("c_broadcast", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_int("ring_id", ring_id), Attribute::make_int("root", root)});
}
// Every rank's x stacked along dim 0 in rank order; `nranks` is the size of
// the ring's group (checked when it runs).
template <element_type T> Var<T> c_allgather(const Var<T>& x, int nranks, int ring_id = 0) {
    return detail::unary_out<T>("c_allgather", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_int("ring_id", ring_id), Attribute::make_int("nranks", nranks)});
}
template <element_type T> Var<T> transpose(const Var<T>& x, std::vector<std::int64_t> axis) {
    return detail::unary_out<T>("transpose", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_ints("axis", std::move(axis))});
}
template <element_type T> Var<T> concat(const std::vector<Var<T>>& xs, int axis = 0) {
    if (xs.empty()) throw graph_error("dlgraph.graph.args", "concat needs at least one input");
    std::vector<std::string> names;
    for (auto& x : xs) {
        detail::same_program("concat", xs[0], x);
        names.push_back(x.name());
    }
    return detail::unary_out<T>("concat", detail::state_of(xs[0]), {{"X", names}}, {Attribute::make_int("axis", axis)});
}
template <element_type T> Var<T> sum(const std::vector<Var<T>>& xs) {
    if (xs.empty()) throw graph_error("dlgraph.graph.args", "sum needs at least one input");
    std::vector<std::string> names;
    for (auto& x : xs) {
        detail::same_program("sum", xs[0], x);
        names.push_back(x.name());
    }
    return detail::unary_out<T>("sum", detail::state_of(xs[0]), {{"X", names}});
}
namespace detail {
template <element_type T> std::vector<Var<T>> split_impl(const Var<T>& x, int n, std::vector<Attribute> attrs) {
    auto st = state_of(x);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    int idx = p.append("split", {{"X", {x.name()}}}, {{"Out", n}}, std::move(attrs), &names);
    std::vector<Var<T>> out;
    for (auto& n2 : names[0]) out.emplace_back(st, n2, idx);
    return out;
}
}  // namespace detail
// Splits into `num` equal parts along `axis`.
template <element_type T> std::vector<Var<T>> split(const Var<T>& x, int num, int axis = 0) {
    return detail::split_impl(x, num, {Attribute::make_int("num", num), Attribute::make_int("axis", axis)});
}
// Splits into parts of the given sizes along `axis` (one size may be -1).
template <element_type T> std::vector<Var<T>> split(const Var<T>& x, std::vector<std::int64_t> sections, int axis = 0) {
    int n = static_cast<int>(sections.size());
    return detail::split_impl(x, n, {Attribute::make_ints("sections", std::move(sections)), Attribute::make_int("axis", axis)});
}
// The xs (one shape) joined along a new dim `axis` (Paddle's stack).
template <element_type T> Var<T> stack(const std::vector<Var<T>>& xs, int axis = 0) {
    if (xs.empty()) throw graph_error("dlgraph.graph.args", "stack needs at least one input");
    std::vector<std::string> names;
    for (auto& x : xs) {
        detail::same_program("stack", xs[0], x);
        names.push_back(x.name());
    }
    return detail::unary_out<T>("stack", detail::state_of(xs[0]), {{"X", names}}, {Attribute::make_int("axis", axis)}, "Y");
}
// x cut along `axis` (a known dim) into its slices, that dim dropped.
template <element_type T> std::vector<Var<T>> unstack(const Var<T>& x, int axis = 0) {
    const Shape s = x.shape();
    const int a = axis < 0 ? axis + s.rank() : axis;
    if (a < 0 || a >= s.rank() || s[a] < 0)
        throw shape_error("dlgraph.shape.stack", "unstack: axis " + std::to_string(axis) + " of " + to_string(s) +
                                                     " must name a dim of known size");
    auto st = detail::state_of(x);
    Program p(st);
    std::vector<std::vector<std::string>> names;
    const int n = static_cast<int>(s[a]);
    int idx = p.append("unstack", {{"X", {x.name()}}}, {{"Y", n}},
                       {Attribute::make_int("axis", axis), Attribute::make_int("num", n)}, &names);
    std::vector<Var<T>> out;
    for (auto& n2 : names[0]) out.emplace_back(st, n2, idx);
    return out;
}
// x repeated repeat_times[i] times along dim i (Paddle's tile; a shorter
// list counts from the last dim).
template <element_type T> Var<T> tile(const Var<T>& x, std::vector<std::int64_t> repeat_times) {
    return detail::unary_out<T>("tile", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_ints("repeat_times", std::move(repeat_times))});
}
// x broadcast to `shape` (Paddle's expand_v2; -1 keeps x's dim).
template <element_type T> Var<T> expand(const Var<T>& x, std::vector<std::int64_t> shape) {
    return detail::unary_out<T>("expand_v2", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_ints("shape", std::move(shape))});
}
// x with paddings[2i] elements of `value` before and paddings[2i+1] after dim i.
template <element_type T> Var<T> pad(const Var<T>& x, std::vector<std::int64_t> paddings, double value = 0) {
    return detail::unary_out<T>("pad", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_ints("paddings", std::move(paddings)), Attribute::make_float("pad_value", value)});
}
// x's slices along `axis` at `index` (INT32 or INT64 ids, [N] or [N, 1]);
// the gradient adds repeated ids (paddle.gather: overwrite false).
template <element_type T, class I> Var<T> gather(const Var<T>& x, const Var<I>& index, int axis = 0) {
    auto st = detail::same_program("gather", x, index);
    return detail::unary_out<T>("gather", st, {{"X", {x.name()}}, {"Index", {index.name()}}},
                                {Attribute::make_bool("overwrite", false), Attribute::make_int("axis", axis)});
}
// x with rows ids set to updates (overwrite: the last write of a repeated id
// stays) or, without overwrite, to the sum of their updates.
template <element_type T, class I>
Var<T> scatter(const Var<T>& x, const Var<I>& ids, const Var<T>& updates, bool overwrite = true) {
    auto st = detail::same_program("scatter", x, ids, updates);
    return detail::unary_out<T>("scatter", st, {{"X", {x.name()}}, {"Ids", {ids.name()}}, {"Updates", {updates.name()}}},
                                {Attribute::make_bool("overwrite", overwrite)});
}
template <element_type U, element_type T> Var<U> cast(const Var<T>& x) {
    return detail::unary_out<U>("cast", detail::state_of(x), {{"X", {x.name()}}},
                                {Attribute::make_int("in_dtype", static_cast<int>(dtype_of<T>)),
                                 Attribute::make_int("out_dtype", static_cast<int>(dtype_of<U>))});
}

// ---- gradients -------------------------------------------------------------------------------------

// Appends the backward pass of `loss` for `params` (default: every trainable
// parameter) and returns (parameter, gradient) handles for the parameters
// the loss depends on. The gradient of `w` is the variable `w@GRAD`.
template <element_type T>
std::vector<std::pair<Var<T>, Var<T>>> append_backward(const Var<T>& loss, std::vector<std::string> params = {}) {
    auto st = detail::state_of(loss);
    Program p(st);
    std::set<std::string> which(params.begin(), params.end());
    if (params.empty()) which = st->trainable;
    BackwardResult r = p.edit([&](ProgramDesc& d) { return dlgraph::append_backward(d, loss.name(), which, st->stop_gradient, loss.op()); });
    std::vector<std::pair<Var<T>, Var<T>>> out;
    for (auto& [param, grad] : r.param_grads) {
        auto* pv = st->desc.blocks[0].find_var(param);
        if (pv->data_type != dtype_of<T>) continue;  // another dtype's parameters are not this loss's
        out.emplace_back(p.var<T>(param), p.var<T>(grad));
    }
    return out;
}
// Marks `v` so that no gradient flows through it; returns it.
template <element_type T> const Var<T>& stop_gradient(const Var<T>& v) {
    Program(detail::state_of(v)).stop_gradient(v.name());
    return v;
}

// ---- sessions over builder programs ------------------------------------------------------------

template <device_policy Device = cpu> Session<Device> make_session(const Program& p, SessionOptions opts = {}) {
    return Session<Device>(std::static_pointer_cast<const detail::program_state>(p.state()), opts);
}


}  // namespace dlgraph

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph {

DLGRAPH_INLINE std::vector<Attribute> Initializer::resolve(const Shape& dims) const {
    if (kind == scheme::fixed) return attrs;
    double fan_in = 1, fan_out = 1;
    if (dims.rank() == 1) fan_in = fan_out = static_cast<double>(dims[0]);
    else if (dims.rank() >= 2) {
        double field = 1;
        for (int i = 2; i < dims.rank(); ++i) field *= static_cast<double>(dims[i]);
        const int in = dims.rank() == 2 ? 0 : 1;
        fan_in = static_cast<double>(dims[in]) * field;
        fan_out = static_cast<double>(dims[1 - in]) * field;
    }
    const bool uniform = kind == scheme::xavier_uniform || kind == scheme::kaiming_uniform;
    const double var = (kind == scheme::xavier_uniform || kind == scheme::xavier_normal) ? 2.0 / (fan_in + fan_out)
                                                                                          : 2.0 / fan_in;
    if (uniform) {
        const double limit = std::sqrt(3.0 * var);
        return {Attribute::make_float("min", -limit), Attribute::make_float("max", limit), Attribute::make_int("seed", seed)};
    }
    return {Attribute::make_float("mean", 0.0), Attribute::make_float("std", std::sqrt(var)), Attribute::make_int("seed", seed)};
}

DLGRAPH_INLINE int Program::append(const std::string& type, const std::vector<OpSlot>& inputs,
        const std::vector<std::pair<std::string, int>>& outputs, std::vector<Attribute> attrs,
        std::vector<std::vector<std::string>>* out_names, const std::vector<OpSlot>& existing) {
    const OpDef& def = lookup_op(type, type);
    BlockDesc& blk = st_->desc.blocks[0];
    // Names looked up by hash, not by scanning the block (an op may have
    // thousands of outputs); valid until the first new output is declared.
    const VarIndex index(blk);
    OpDesc op;
    op.type = type;
    op.inputs = inputs;
    op.attrs = std::move(attrs);
    for (auto& e : existing) op.set_output(e.parameter, e.arguments);
    std::vector<std::vector<std::string>> fresh_names;
    for (auto& [slot, count] : outputs) {
        std::vector<std::string> v;
        for (int k = 0; k < count; ++k) {
            std::string n;
            do n = type + "_" + std::to_string(st_->counters[type]++);
            while (index.find(n));
            v.push_back(std::move(n));
        }
        op.set_output(slot, v);
        fresh_names.push_back(std::move(v));
    }
    const int index_of_op = static_cast<int>(blk.ops.size());
    std::string label = op_label(op, index_of_op);
    // Slots the op lacks, required ones left out, one given twice: refused
    // here as load_program refuses them (infer reads the slots it declares).
    detail::check_slots(def.inputs, op.inputs, op, "inputs", label);
    detail::check_slots(def.outputs, op.outputs, op, "outputs", label);
    auto norm = normalize_attrs(def, op, label);
    std::vector<VarMeta> in_metas;
    for (auto& n : slot_args(def.inputs, op.inputs)) {
        auto* vd = index.find(n);
        if (!vd) throw graph_error("dlgraph.graph.undeclared", label + ": variable '" + n + "' is not declared");
        in_metas.push_back({vd->data_type, Shape(vd->dims)});
    }
    // Slot order of the outputs must follow the definition for infer.
    OpDesc ordered = op;
    ordered.outputs.clear();
    for (auto& sd : def.outputs)
        if (auto* s = op.output(sd.name)) ordered.outputs.push_back(*s);
    op.outputs = ordered.outputs;
    const std::vector<std::string> names = slot_args(def.outputs, op.outputs);
    std::vector<const VarDesc*> declared(names.size());
    std::vector<VarMeta> out_metas;
    for (std::size_t k = 0; k < names.size(); ++k) {
        declared[k] = index.find(names[k]);
        out_metas.push_back(declared[k] ? VarMeta{declared[k]->data_type, Shape(declared[k]->dims)} : VarMeta{});
    }
    std::vector<const VarMeta*> ip;
    std::vector<VarMeta*> op_;
    for (auto& m : in_metas) ip.push_back(&m);
    for (auto& m : out_metas) op_.push_back(&m);
    infer_op(def, op, norm, ip, op_, label);
    // Every check before the first change: a failed append changes nothing.
    for (std::size_t k = 0; k < names.size(); ++k) {
        const VarDesc* vd = declared[k];
        if (vd && (vd->data_type != out_metas[k].dtype || !dims_compatible(Shape(vd->dims), out_metas[k].shape)))
            throw shape_error("dlgraph.shape.declared", label + " writes " + to_string(out_metas[k].dtype) + " " +
                                                            to_string(out_metas[k].shape) + " to '" + names[k] +
                                                            "', which is " + to_string(vd->data_type) + " " +
                                                            to_string(Shape(vd->dims)));
    }
    for (std::size_t k = 0; k < names.size(); ++k)
        if (!declared[k]) blk.vars.push_back({names[k], VarType::LOD_TENSOR, out_metas[k].dtype, out_metas[k].shape.vec(), 0, false});
    if (out_names)
        for (auto& v : fresh_names) out_names->push_back(std::move(v));
    return push_op(std::move(op));
}

DLGRAPH_INLINE std::string Program::fresh(const std::string& base) {
    for (;;) {
        std::string n = base + "_" + std::to_string(st_->counters[base]++);
        if (!st_->desc.blocks[0].find_var(n)) return n;
    }
}

DLGRAPH_INLINE void Program::declare(const std::string& name, DataType t, const Shape& dims, bool persistable) {
    auto& blk = st_->desc.blocks[0];
    if (blk.find_var(name)) throw graph_error("dlgraph.graph.duplicate", "variable '" + name + "' is already declared");
    blk.vars.push_back({name, VarType::LOD_TENSOR, t, dims.vec(), 0, persistable});
    ++st_->revision;
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
