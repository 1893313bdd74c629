// The op suite's cases (see op_cases.hpp). Each family of ops has one
// function below; every case goes through case_builder, which declares the
// fed inputs with their exact dims, builds the op as an OpDesc, runs the op's
// shape inference to declare its outputs, and fetches them.
#include "op_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>

using namespace dlgraph;

namespace {

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ull;
constexpr std::uint64_t fnv_prime = 0x100000001b3ull;

std::uint64_t fnv1a(std::string_view s, std::uint64_t h = fnv_offset) {
    for (unsigned char c : s) {
        h ^= c;
        h *= fnv_prime;
    }
    return h;
}

// Seeded values by the suite's own mapping (portable: no std distributions).
struct rng {
    std::mt19937_64 g;
    explicit rng(std::uint64_t seed) : g(seed) {}
    double unit() { return static_cast<double>(g() >> 11) * 0x1.0p-53; }  // [0, 1)
    // One rounding, written out: a compiler may or may not contract
    // lo + (hi - lo) * u into an FMA (GCC does at -O2 and above in GNU mode),
    // which would make the inputs depend on the build's flags.
    double uniform(double lo, double hi) { return std::fma(hi - lo, unit(), lo); }
    std::int64_t integer(std::int64_t lo, std::int64_t hi) {  // [lo, hi], in unsigned (modular) arithmetic
        const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
        return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + g() % span);
    }
};

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

constexpr DataType BOOL = DataType::BOOL, INT16 = DataType::INT16, INT32 = DataType::INT32, INT64 = DataType::INT64,
                   FP16 = DataType::FP16, FP32 = DataType::FP32, FP64 = DataType::FP64;
constexpr DataType all_dtypes[] = {BOOL, INT16, INT32, INT64, FP16, FP32, FP64};

bool is_fp(DataType t) { return t == FP32 || t == FP64; }
int dt(DataType t) { return static_cast<int>(t); }

// ---- values -----------------------------------------------------------------------

// The value of element i (converted to the tensor's dtype by static_cast).
using gen = std::function<double(rng&, std::int64_t)>;

gen uni(double lo, double hi) {
    return [=](rng& r, std::int64_t) { return r.uniform(lo, hi); };
}
gen ints(std::int64_t lo, std::int64_t hi) {
    return [=](rng& r, std::int64_t) { return static_cast<double>(r.integer(lo, hi)); };
}
// Multiples of `step` in [lo, hi]: many ties.
gen grid(std::int64_t lo, std::int64_t hi, double step) {
    return [=](rng& r, std::int64_t) { return step * static_cast<double>(r.integer(lo, hi)); };
}
// |v| in [lo, hi] with a random sign.
gen away_from_zero(double lo, double hi) {
    return [=](rng& r, std::int64_t) { return (r.integer(0, 1) ? 1.0 : -1.0) * r.uniform(lo, hi); };
}
gen nonzero_ints(std::int64_t lo, std::int64_t hi) {
    return [=](rng& r, std::int64_t) { return (r.integer(0, 1) ? 1.0 : -1.0) * static_cast<double>(r.integer(lo, hi)); };
}
// Positive values spread over binary exponents [e0, e1] (exact arithmetic).
gen wide_positive(int e0, int e1) {
    return [=](rng& r, std::int64_t) { return std::ldexp(r.uniform(1.0, 2.0), static_cast<int>(r.integer(e0, e1))); };
}
// `first` for the first elements, then `rest`.
gen special(std::vector<double> first, gen rest) {
    return [first = std::move(first), rest = std::move(rest)](rng& r, std::int64_t i) {
        return static_cast<std::size_t>(i) < first.size() ? first[static_cast<std::size_t>(i)] : rest(r, i);
    };
}

Tensor make(DataType t, const Shape& s, rng& r, const gen& f) {
    Tensor out(t, s);
    const std::int64_t n = s.numel();
    visit_dtype(t, [&]<class T>(type_tag<T>) {
        if constexpr (std::is_same_v<T, float16>) {
            // Raw half bits: FP16 is only stored and moved.
            auto* p = static_cast<std::uint16_t*>(out.raw());
            for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<std::uint16_t>(r.g() >> 48);
        } else {
            T* p = out.data<T>();
            for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(f(r, i));
        }
    });
    return out;
}

// Exact 64-bit integers (beyond what a double holds).
Tensor make_i64(const Shape& s, rng& r, std::int64_t lo, std::int64_t hi) {
    Tensor out(INT64, s);
    for (auto& v : out.values<std::int64_t>()) v = r.integer(lo, hi);
    return out;
}

// Rows of positive values that sum to 1 along the last dim.
Tensor prob_rows(DataType t, const Shape& s, rng& r, double lo = 0.05) {
    const std::int64_t d = s[s.rank() - 1], n = s.numel();
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = r.uniform(lo, 1.0);
    for (std::int64_t row = 0; d > 0 && row < n / d; ++row) {
        double sum = 0;
        for (std::int64_t k = 0; k < d; ++k) sum += v[static_cast<std::size_t>(row * d + k)];
        for (std::int64_t k = 0; k < d; ++k) v[static_cast<std::size_t>(row * d + k)] /= sum;
    }
    return make(t, s, r, [&](rng&, std::int64_t i) { return v[static_cast<std::size_t>(i)]; });
}

// Class indices in [0, classes).
Tensor labels(const Shape& s, rng& r, std::int64_t classes) { return make_i64(s, r, 0, classes - 1); }

// ---- building cases -------------------------------------------------------------------

using slots = std::vector<std::pair<std::string, std::vector<std::string>>>;

OpDesc make_op(const std::string& type, const slots& ins, const slots& outs, const std::vector<Attribute>& attrs) {
    OpDesc od;
    od.type = type;
    for (auto& [s, a] : ins) od.set_input(s, a);
    for (auto& [s, a] : outs) od.set_output(s, a);
    for (auto& a : attrs) od.set_attr(a);
    return od;
}

// Runs the shape inference of `od` over the metas of `blk`'s variables;
// returns the outputs' names (slot order) and sets their metas.
std::vector<std::string> infer_outputs(const BlockDesc& blk, const OpDesc& od, std::vector<VarMeta>& out_metas,
                                       const std::string& where) {
    const OpDef* def = find_op(od.type);
    if (!def) throw std::logic_error(where + ": unknown op " + od.type);
    const std::vector<Attribute> attrs = normalize_attrs(*def, od, where);
    std::vector<VarMeta> in_metas;
    for (auto& n : slot_args(def->inputs, od.inputs)) {
        const VarDesc* v = blk.find_var(n);
        if (!v) throw std::logic_error(where + ": input '" + n + "' is not declared");
        in_metas.push_back({v->data_type, Shape(v->dims)});
    }
    std::vector<std::string> out_names = slot_args(def->outputs, od.outputs);
    out_metas.assign(out_names.size(), VarMeta{});
    std::vector<const VarMeta*> ip;
    std::vector<VarMeta*> op;
    for (auto& m : in_metas) ip.push_back(&m);
    for (auto& m : out_metas) op.push_back(&m);
    infer_op(*def, od, attrs, ip, op, where);
    return out_names;
}

class case_builder {
public:
    explicit case_builder(std::string name) { c_.name = std::move(name); }

    // The generator of input `var`: seeded by the case's and the variable's names.
    rng rng_for(std::string_view var) const { return rng(fnv1a(var, fnv1a("|", fnv1a(c_.name)))); }

    // Declares `var` (exact dims) and feeds it `t`.
    case_builder& in(const std::string& var, Tensor t, bool persistable = false) {
        VarDesc vd;
        vd.name = var;
        vd.data_type = t.dtype();
        vd.dims = t.shape().vec();
        vd.persistable = persistable;
        block().vars.push_back(std::move(vd));
        c_.feeds.emplace_back(var, std::move(t));
        return *this;
    }
    case_builder& in(const std::string& var, DataType t, const Shape& s, const gen& f, bool persistable = false) {
        rng r = rng_for(var);
        return in(var, make(t, s, r, f), persistable);
    }
    // A persistable input (optimizer state, a weight).
    case_builder& param(const std::string& var, DataType t, const Shape& s, const gen& f) { return in(var, t, s, f, true); }

    // Appends the op; its outputs not yet declared are declared with the
    // dtypes and dims its shape inference gives.
    case_builder& op(const std::string& type, const slots& ins, const slots& outs, const std::vector<Attribute>& attrs = {}) {
        OpDesc od = make_op(type, ins, outs, attrs);
        std::vector<VarMeta> metas;
        last_outs_ = infer_outputs(block(), od, metas, c_.name);
        for (std::size_t k = 0; k < last_outs_.size(); ++k) {
            if (block().find_var(last_outs_[k])) continue;
            VarDesc vd;
            vd.name = last_outs_[k];
            vd.data_type = metas[k].dtype;
            vd.dims = metas[k].shape.vec();
            block().vars.push_back(std::move(vd));
        }
        block().ops.push_back(std::move(od));
        return *this;
    }
    case_builder& fetch(const std::string& var) {
        c_.fetch.push_back(var);
        return *this;
    }
    // Fetches every output of the last op unless fetch() chose.
    op_case done() {
        if (c_.fetch.empty()) c_.fetch = last_outs_;
        return std::move(c_);
    }

private:
    BlockDesc& block() { return c_.program.blocks[0]; }
    op_case c_;
    std::vector<std::string> last_outs_;
};

// The shape op `type` gives output `out_slot` for inputs of these shapes
// (used to shape the Out@GRAD inputs of grad ops).
Shape forward_shape(const std::string& type, DataType t, const std::vector<std::pair<std::string, Shape>>& ins,
                    const std::vector<Attribute>& attrs, const std::string& out_slot) {
    BlockDesc blk;
    slots in_slots;
    for (auto& [slot, s] : ins) {
        VarDesc vd;
        vd.name = "in_" + slot;
        vd.data_type = t;
        vd.dims = s.vec();
        blk.vars.push_back(vd);
        in_slots.push_back({slot, {vd.name}});
    }
    const OpDef* def = find_op(type);
    slots out_slots;
    for (auto& sd : def->outputs) out_slots.push_back({std::string(sd.name), {"out_" + std::string(sd.name)}});
    const OpDesc od = make_op(type, in_slots, out_slots, attrs);
    std::vector<VarMeta> metas;
    const std::vector<std::string> names = infer_outputs(blk, od, metas, "forward_shape(" + type + ")");
    for (std::size_t k = 0; k < names.size(); ++k)
        if (names[k] == "out_" + out_slot) return metas[k].shape;
    throw std::logic_error("forward_shape: no output " + out_slot);
}

std::string case_name(std::string_view op, DataType t, std::string_view variant) {
    return std::string(op) + "/" + to_string(t) + "/" + std::string(variant);
}

Attribute a_int(const char* n, std::int64_t v) { return Attribute::make_int(n, v); }
Attribute a_long(const char* n, std::int64_t v) { return Attribute::make_long(n, v); }
Attribute a_float(const char* n, double v) { return Attribute::make_float(n, v); }
Attribute a_bool(const char* n, bool v) { return Attribute::make_bool(n, v); }
Attribute a_ints(const char* n, std::vector<std::int64_t> v) { return Attribute::make_ints(n, std::move(v)); }

using case_list = std::vector<op_case>;

// ---- element-wise binary ops and their grads -------------------------------------------------

struct binary_spec {
    const char* op;
    gen x_fp, y_fp, x_int, y_int;
};

std::vector<binary_spec> binary_specs() {
    return {
        {"elementwise_add", uni(-2, 2), uni(-2, 2), ints(-1000, 1000), ints(-1000, 1000)},
        {"elementwise_sub", uni(-2, 2), uni(-2, 2), ints(-1000, 1000), ints(-1000, 1000)},
        {"elementwise_mul", uni(-2, 2), uni(-2, 2), ints(-100, 100), ints(-100, 100)},
        {"elementwise_div", uni(-2, 2), away_from_zero(0.25, 2), ints(-1000, 1000), nonzero_ints(1, 9)},
        // Coarse grids, so X and Y tie often (max/min grads send ties to Y).
        {"elementwise_max", grid(-4, 4, 0.5), grid(-4, 4, 0.5), ints(-3, 3), ints(-3, 3)},
        {"elementwise_min", grid(-4, 4, 0.5), grid(-4, 4, 0.5), ints(-3, 3), ints(-3, 3)},
        // A positive base; integer exponents may be negative (truncated results).
        {"elementwise_pow", uni(0.1, 3), uni(-2, 3), ints(1, 9), ints(-2, 6)},
    };
}

constexpr std::int64_t no_axis = -1;

void binary_cases(case_list& out) {
    for (const binary_spec& b : binary_specs()) {
        auto one = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, std::int64_t axis = no_axis) {
            const bool fp = is_fp(t);
            case_builder cb(case_name(b.op, t, variant));
            cb.in("x", t, xs, fp ? b.x_fp : b.x_int).in("y", t, ys, fp ? b.y_fp : b.y_int);
            std::vector<Attribute> at;
            if (axis != no_axis) at.push_back(a_int("axis", axis));
            cb.op(b.op, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
        };
        one("same_shape_1023", FP32, {3, 341}, {3, 341});
        one("same_shape_7", FP64, {7}, {7});
        one("size_1", FP32, {1}, {1});
        one("scalar_y", FP32, {5, 7}, {1});
        one("scalar_x", FP64, {1}, {4, 9});
        one("numpy_broadcast", FP32, {4, 1, 5}, {3, 5});
        one("numpy_broadcast_y_longer", FP64, {5}, {2, 3, 5});
        one("broadcast_axis1", FP64, {2, 3, 4, 5}, {3, 4}, 1);
        one("broadcast_axis0", FP32, {6, 7}, {6}, 0);
        one("broadcast_row_axis1", FP32, {3, 17}, {17}, 1);
        one("empty", FP32, {0, 5}, {5});
        one("same_shape_1023", INT32, {3, 341}, {3, 341});
        one("broadcast_row", INT32, {3, 7}, {7});
        one("same_shape_7", INT64, {7}, {7});
        one("broadcast_axis1", INT64, {2, 3, 4}, {3}, 1);
    }
    // Large enough to be split on the thread pool (> 64K elements per thread).
    auto large = [&](const char* op, std::string_view variant, DataType t, const Shape& xs, const Shape& ys,
                     std::int64_t axis = no_axis) {
        for (const binary_spec& b : binary_specs()) {
            if (std::string_view(b.op) != op) continue;
            case_builder cb(case_name(op, t, variant));
            cb.in("x", t, xs, b.x_fp).in("y", t, ys, b.y_fp);
            std::vector<Attribute> at;
            if (axis != no_axis) at.push_back(a_int("axis", axis));
            cb.op(op, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
        }
    };
    large("elementwise_add", "large_same_shape_307200", FP32, {600, 512}, {600, 512});
    large("elementwise_sub", "large_broadcast_axis0_307200", FP64, {600, 512}, {600}, 0);
    large("elementwise_mul", "large_row_broadcast_307200", FP32, {600, 512}, {512});
    large("elementwise_div", "large_scalar_y_307201", FP32, {307201}, {1});
    large("elementwise_max", "large_same_shape_307200", FP64, {600, 512}, {600, 512});
    large("elementwise_min", "large_same_shape_300007", FP32, {300007}, {300007});
    large("elementwise_pow", "large_same_shape_307200", FP32, {600, 512}, {600, 512});
}

void binary_grad_cases(case_list& out) {
    for (const binary_spec& b : binary_specs()) {
        const std::string grad = std::string(b.op) + "_grad";
        auto one = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, std::int64_t axis,
                       bool want_dx = true, bool want_dy = true) {
            case_builder cb(case_name(grad, t, variant));
            std::vector<Attribute> at;
            if (axis != no_axis) at.push_back(a_int("axis", axis));
            const Shape os = forward_shape(b.op, t, {{"X", xs}, {"Y", ys}}, at, "Out");
            // Out and Out@GRAD are plain values of Out's shape: the kernels'
            // math does not need Out to be X op Y (div and pow read it).
            cb.in("x", t, xs, b.x_fp).in("y", t, ys, b.y_fp).in("out", t, os, uni(0.5, 2)).in("out@GRAD", t, os, uni(-1, 1));
            slots outs;
            if (want_dx) outs.push_back({"X@GRAD", {"x@GRAD"}});
            if (want_dy) outs.push_back({"Y@GRAD", {"y@GRAD"}});
            cb.op(grad, {{"X", {"x"}}, {"Y", {"y"}}, {"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, outs, at);
            out.push_back(cb.done());
        };
        one("same_shape_1023", FP32, {3, 341}, {3, 341}, no_axis);
        one("same_shape_7", FP64, {7}, {7}, no_axis);
        one("broadcast_axis1", FP32, {2, 3, 4, 5}, {3, 4}, 1);
        one("numpy_broadcast_both", FP64, {4, 1, 5}, {3, 5}, no_axis);
        one("scalar_y", FP64, {5, 7}, {1}, no_axis);
        one("only_x_grad", FP32, {4, 6}, {6}, no_axis, true, false);
        one("only_y_grad", FP64, {4, 6}, {4}, 0, false, true);
        one("empty", FP32, {0, 5}, {5}, no_axis);
        one("row_broadcast_32832", FP32, {64, 513}, {513}, no_axis);
    }
}

// ---- element-wise unary ops, their grads, scale and assign -------------------------------------

struct unary_spec {
    const char* op;
    gen fp;               // ordinary inputs
    gen extreme;          // edge values in the op's domain
    bool has_int = false;  // INT32 / INT64 kernels
};

std::vector<unary_spec> unary_specs() {
    const double fmax = std::numeric_limits<float>::max(), fmin = std::numeric_limits<float>::min();
    const double fden = std::numeric_limits<float>::denorm_min();
    const std::vector<double> signed_edges{0.0, -0.0, 1.5, -1.5, inf, -inf, nan, fden, -fden, fmin, -fmax, fmax, 1e20, -1e20};
    return {
        {"relu", uni(-3, 3), special(signed_edges, uni(-3, 3))},
        {"sigmoid", uni(-8, 8), special({0.0, -0.0, inf, -inf, 88.0, -88.0, 104.0, -104.0, 1e-30, -1e-30}, uni(-120, 120))},
        {"tanh", uni(-4, 4), special({0.0, -0.0, inf, -inf, 9.0, -9.0, 20.0, -20.0, 1e-30, -1e-30, 0.625}, uni(-30, 30))},
        {"exp", uni(-10, 10), special({0.0, -0.0, inf, -inf, 88.72, 88.73, -87.3, -103.9, -745.2, 709.8, 1e-30}, uni(-120, 120))},
        {"log", wide_positive(-20, 20), special({0.0, inf, fden, fmin, 1.0, fmax, 2.0, 0.5}, wide_positive(-120, 120))},
        {"sqrt", wide_positive(-20, 20), special({0.0, -0.0, inf, fden, fmin, 1.0, fmax, 4.0, 2.0}, wide_positive(-120, 120))},
        {"abs", uni(-3, 3), special(signed_edges, uni(-3, 3)), true},
        {"square", uni(-3, 3), special(signed_edges, uni(-3, 3)), true},
        {"softsign", uni(-3, 3), special(signed_edges, uni(-3, 3))},
        {"sin", uni(-4, 4), special({0.0, -0.0, inf, -inf, nan, 1e10, -1e10, 3.14159265, 1e-30}, uni(-100, 100))},
        {"cos", uni(-4, 4), special({0.0, -0.0, inf, -inf, nan, 1e10, -1e10, 1.5707963, 1e-30}, uni(-100, 100))},
        {"reciprocal", uni(-3, 3), special(signed_edges, uni(-3, 3))},
        {"rsqrt", wide_positive(-20, 20), special({0.0, -0.0, inf, fden, fmin, 1.0, fmax, 4.0, -1.0}, wide_positive(-120, 120))},
        {"floor", grid(-4, 4, 0.25), special(signed_edges, grid(-3, 3, 0.5))},
        {"ceil", grid(-4, 4, 0.25), special(signed_edges, grid(-3, 3, 0.5))},
        {"round", grid(-4, 4, 0.25), special({0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.0, inf, nan, 8388609.0},
                                              grid(-3, 3, 0.5))},
        {"sign", uni(-3, 3), special(signed_edges, uni(-3, 3))},
        {"gelu", uni(-5, 5), special(signed_edges, uni(-12, 12))},
    };
}

void unary_cases(case_list& out) {
    for (const unary_spec& u : unary_specs()) {
        auto one = [&](std::string_view variant, DataType t, const Shape& s, const gen& g) {
            case_builder cb(case_name(u.op, t, variant));
            cb.in("x", t, s, g).op(u.op, {{"X", {"x"}}}, {{"Out", {"out"}}});
            out.push_back(cb.done());
        };
        one("odd_1023", FP32, {1023}, u.fp);
        one("odd_7", FP64, {7}, u.fp);
        one("size_1", FP32, {1}, u.fp);
        one("rank3_3x5x7", FP64, {3, 5, 7}, u.fp);
        one("empty", FP32, {0, 4}, u.fp);
        one("edge_values_45", FP32, {45}, u.extreme);
        one("edge_values_45", FP64, {45}, u.extreme);
        one("large_307200", FP32, {307200}, u.fp);
        if (u.has_int) {
            one("odd_1023", INT32, {1023}, ints(-40000, 40000));
            one("odd_7", INT64, {7}, ints(-3000000000, 3000000000));
        }
    }
}

void unary_grad_cases(case_list& out) {
    for (const unary_spec& u : unary_specs()) {
        const std::string grad = std::string(u.op) + "_grad";
        const std::string_view op = u.op;
        // log_grad divides by X, sqrt_grad by Out: both kept away from 0.
        const gen x = op == "log" ? wide_positive(-4, 4) : op == "abs" ? grid(-8, 8, 0.25) : uni(-3, 3);
        const gen o = op == "sqrt" ? wide_positive(-4, 4) : op == "relu" ? grid(-4, 4, 0.5) : uni(-1, 1);
        auto one = [&](std::string_view variant, DataType t, const Shape& s) {
            case_builder cb(case_name(grad, t, variant));
            cb.in("x", t, s, x).in("out", t, s, o).in("out@GRAD", t, s, uni(-1, 1));
            cb.op(grad, {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}});
            out.push_back(cb.done());
        };
        one("odd_1023", FP32, {1023});
        one("odd_7", FP64, {7});
        one("rank2_13x17", FP32, {13, 17});
        one("size_1", FP64, {1});
        one("empty", FP32, {0, 3});
    }
}

// The activations with attributes: their defaults (none set) and other
// values, forward and grad; inputs on both sides of every breakpoint.
void activation_attr_cases(case_list& out) {
    struct spec {
        const char* op;
        std::vector<Attribute> other;  // attributes other than the defaults
    };
    const std::vector<spec> specs{
        {"gelu", {a_bool("approximate", true)}},
        {"leaky_relu", {a_float("alpha", 0.3)}},
        {"elu", {a_float("alpha", 0.5)}},
        {"relu6", {a_float("threshold", 1.5)}},
        {"hard_sigmoid", {a_float("slope", 0.5), a_float("offset", 0.25)}},
        {"hard_swish", {a_float("threshold", 4.0), a_float("scale", 5.0), a_float("offset", 2.0)}},
        {"softplus", {a_float("beta", 2.0), a_float("threshold", 3.0)}},
        {"swish", {a_float("beta", 1.7)}},
        {"clip", {a_float("min", -1.5), a_float("max", 2.25)}},
        {"pow", {a_float("factor", 3.0)}},
    };
    for (const spec& sp : specs) {
        for (const bool defaults : {true, false}) {
            const std::vector<Attribute> at = defaults ? std::vector<Attribute>{} : sp.other;
            const char* which = defaults ? "defaults" : "attrs";
            auto fwd = [&](std::string_view variant, DataType t, const Shape& s, const gen& g) {
                case_builder cb(case_name(sp.op, t, std::string(which) + "_" + std::string(variant)));
                cb.in("x", t, s, g).op(sp.op, {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
                out.push_back(cb.done());
            };
            fwd("odd_1023", FP32, {1023}, uni(-8, 8));
            fwd("rank2_5x7", FP64, {5, 7}, grid(-4, 4, 0.25));
            const std::string grad = std::string(sp.op) + "_grad";
            auto bwd = [&](std::string_view variant, DataType t, const Shape& s) {
                case_builder cb(case_name(grad, t, std::string(which) + "_" + std::string(variant)));
                cb.in("x", t, s, uni(-8, 8)).in("out", t, s, uni(-0.5, 7)).in("out@GRAD", t, s, uni(-1, 1));
                cb.op(grad, {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
                out.push_back(cb.done());
            };
            bwd("odd_1023", FP32, {1023});
            bwd("odd_7", FP64, {7});
        }
    }
}

void scale_assign_cases(case_list& out) {
    auto scale = [&](std::string_view variant, DataType t, const Shape& s, const gen& g, std::vector<Attribute> at) {
        case_builder cb(case_name("scale", t, variant));
        cb.in("x", t, s, g).op("scale", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    scale("bias_after_scale_1023", FP32, {1023}, uni(-3, 3), {a_float("scale", 1.7), a_float("bias", -0.3)});
    scale("bias_before_scale_7", FP64, {7}, uni(-3, 3),
          {a_float("scale", -2.5), a_float("bias", 0.125), a_bool("bias_after_scale", false)});
    scale("defaults", FP64, {3, 5}, uni(-3, 3), {});
    scale("empty", FP32, {0}, uni(-3, 3), {a_float("scale", 3.0)});
    scale("ints_1023", INT32, {1023}, ints(-1000, 1000), {a_float("scale", 3.0), a_float("bias", -7.0)});
    // Integer kernels truncate the attributes: scale 2.5 acts as 2, bias 1.9 as 1.
    scale("fractional_attrs", INT64, {9}, ints(-1000, 1000), {a_float("scale", 2.5), a_float("bias", 1.9)});
    scale("fractional_attrs_bias_before_scale", INT32, {9}, ints(-1000, 1000),
          {a_float("scale", -1.5), a_float("bias", 2.7), a_bool("bias_after_scale", false)});
    scale("large_307200", FP32, {307200}, uni(-3, 3), {a_float("scale", 0.3), a_float("bias", 1.1)});

    const Shape shapes[] = {{13}, {7, 3}, {1023}, {5}, {9}, {2, 3, 5}, {1}};
    // assign, and the planner's copies (memcpy_h2d/d2h: on the host, a copy).
    for (const char* op : {"assign", "memcpy_h2d", "memcpy_d2h"})
        for (std::size_t k = 0; k < std::size(all_dtypes); ++k) {
            const DataType t = all_dtypes[k];
            case_builder cb(case_name(op, t, "copy"));
            cb.in("x", t, shapes[k], t == BOOL ? ints(0, 1) : is_fp(t) ? uni(-5, 5) : ints(-30000, 30000));
            cb.op(op, {{"X", {"x"}}}, {{"Out", {"out"}}});
            out.push_back(cb.done());
        }
    case_builder cb(case_name("assign", FP32, "empty"));
    cb.in("x", FP32, {0, 2}, uni(-1, 1)).op("assign", {{"X", {"x"}}}, {{"Out", {"out"}}});
    out.push_back(cb.done());
}

// ---- creators ------------------------------------------------------------------------------------

void fill_cases(case_list& out) {
    auto fill = [&](std::string_view variant, DataType t, std::vector<std::int64_t> shape, double value) {
        case_builder cb(case_name("fill_constant", t, variant));
        cb.op("fill_constant", {}, {{"Out", {"out"}}},
              {a_ints("shape", std::move(shape)), a_float("value", value), a_int("dtype", dt(t))});
        out.push_back(cb.done());
    };
    fill("true_5", BOOL, {5}, 1.0);
    fill("minus3_2x3", INT16, {2, 3}, -3.0);
    fill("7_1023", INT32, {1023}, 7.0);
    fill("big_3", INT64, {3}, 123456789012.0);
    fill("pi_7x9", FP32, {7, 9}, 3.14159265358979);
    fill("tenth_4", FP64, {4}, -0.1);
    fill("rank0", FP32, {}, 2.5);
    fill("empty", FP32, {0, 3}, 1.0);

    // range: Start, End and Step fed, so the planner knows Out's length.
    auto range = [&](std::string_view variant, DataType t, double start, double end, double step) {
        case_builder cb(case_name("range", t, variant));
        const double v[] = {start, end, step};
        const char* names[] = {"start", "end", "step"};
        for (int k = 0; k < 3; ++k) cb.in(names[k], t, {1}, special({v[k]}, uni(0, 1)));
        cb.op("range", {{"Start", {"start"}}, {"End", {"end"}}, {"Step", {"step"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    };
    range("0_1_0.2", FP32, 0, 1, 0.2);
    range("10_1_minus2", FP64, 10, 1, -2);
    range("0_5_2", INT32, 0, 5, 2);
    range("minus1_minus10_minus2", INT64, -1, -10, -2);
    range("empty", INT32, 0, 0, 1);
    range("1000", FP64, -3.5, 1000, 0.75);

    auto uniform = [&](std::string_view variant, DataType t, std::vector<std::int64_t> shape, double lo, double hi,
                       std::int64_t seed) {
        case_builder cb(case_name("uniform_random", t, variant));
        cb.op("uniform_random", {}, {{"Out", {"out"}}},
              {a_ints("shape", std::move(shape)), a_float("min", lo), a_float("max", hi), a_int("seed", seed),
               a_int("dtype", dt(t))});
        out.push_back(cb.done());
    };
    uniform("seed17_7x13", FP32, {7, 13}, -2.0, 3.0, 17);
    uniform("seed5_1023", FP64, {1023}, -1.0, 1.0, 5);
    uniform("seed9_1", FP32, {1}, 0.0, 1.0, 9);

    auto gaussian = [&](std::string_view variant, DataType t, std::vector<std::int64_t> shape, double mean, double sd,
                        std::int64_t seed) {
        case_builder cb(case_name("gaussian_random", t, variant));
        cb.op("gaussian_random", {}, {{"Out", {"out"}}},
              {a_ints("shape", std::move(shape)), a_float("mean", mean), a_float("std", sd), a_int("seed", seed),
               a_int("dtype", dt(t))});
        out.push_back(cb.done());
    };
    gaussian("seed3_7x13", FP32, {7, 13}, 1.0, 2.0, 3);
    gaussian("seed11_1023", FP64, {1023}, 0.0, 1.0, 11);
    gaussian("std0", FP32, {5}, -1.5, 0.0, 4);

    auto like = [&](std::string_view variant, DataType x, const Shape& s, double value, std::int64_t to) {
        case_builder cb(case_name("fill_any_like", x, variant));
        cb.in("x", x, s, x == BOOL ? ints(0, 1) : ints(-9, 9));
        std::vector<Attribute> at{a_float("value", value)};
        if (to != -1) at.push_back(a_int("dtype", to));
        cb.op("fill_any_like", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    like("same_dtype", FP32, {3, 4}, 2.5, -1);
    like("to_FP32", FP64, {5}, 0.1, dt(FP32));
    like("to_INT32", FP64, {2, 3}, -3.0, dt(INT32));
    like("to_BOOL", INT32, {4}, 1.0, dt(BOOL));
    like("to_FP64", INT64, {3, 1}, 0.25, dt(FP64));
    like("to_INT64", BOOL, {6}, 7.0, dt(INT64));
    like("same_dtype", INT16, {2, 2}, -2.0, -1);
    like("to_INT16", FP32, {7}, 300.0, dt(INT16));
    like("empty", FP32, {0, 3}, 1.0, -1);
}

// ---- matrix products -------------------------------------------------------------------------------

void mul_cases(case_list& out) {
    auto mul = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, std::int64_t xn,
                   std::int64_t yn, bool weight = false) {
        case_builder cb(case_name("mul", t, variant));
        cb.in("x", t, xs, uni(-1, 1)).in("w", t, ys, uni(-1, 1), weight);
        cb.op("mul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"out"}}},
              {a_int("x_num_col_dims", xn), a_int("y_num_col_dims", yn)});
        out.push_back(cb.done());
    };
    mul("5x7x3", FP32, {5, 7}, {7, 3}, 1, 1);
    mul("x_num_col_dims2_y_num_col_dims2", FP64, {2, 3, 4, 5}, {4, 5, 6}, 2, 2);
    mul("x_num_col_dims1_rank3", FP32, {3, 4, 5}, {20, 6}, 1, 1);
    mul("small_m3_129x67", FP32, {3, 129}, {129, 67}, 1, 1);
    mul("packed_37x65x29", FP64, {37, 65}, {65, 29}, 1, 1);
    mul("empty_m", FP32, {0, 5}, {5, 3}, 1, 1);
    mul("empty_k", FP32, {4, 0}, {0, 3}, 1, 1);
    mul("weight_37x65x29", FP32, {37, 65}, {65, 29}, 1, 1, true);
    mul("weight_num_col_dims2_12x30x7", FP64, {3, 4, 5, 6}, {5, 6, 7}, 2, 2, true);
    mul("large_256x512x256_weight", FP32, {256, 512}, {512, 256}, 1, 1, true);
    // Few rows over many columns: the unpacked path, split by columns on threads.
    mul("large_m4_4x1024x1031", FP64, {4, 1024}, {1024, 1031}, 1, 1);

    auto grad = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, std::int64_t xn,
                    std::int64_t yn, bool want_dx = true, bool want_dy = true) {
        case_builder cb(case_name("mul_grad", t, variant));
        const std::vector<Attribute> at{a_int("x_num_col_dims", xn), a_int("y_num_col_dims", yn)};
        const Shape os = forward_shape("mul", t, {{"X", xs}, {"Y", ys}}, at, "Out");
        cb.in("x", t, xs, uni(-1, 1)).in("w", t, ys, uni(-1, 1)).in("out@GRAD", t, os, uni(-1, 1));
        slots outs;
        if (want_dx) outs.push_back({"X@GRAD", {"x@GRAD"}});
        if (want_dy) outs.push_back({"Y@GRAD", {"w@GRAD"}});
        cb.op("mul_grad", {{"X", {"x"}}, {"Y", {"w"}}, {"Out@GRAD", {"out@GRAD"}}}, outs, at);
        out.push_back(cb.done());
    };
    grad("5x7x3", FP32, {5, 7}, {7, 3}, 1, 1);
    grad("x_num_col_dims2_y_num_col_dims2", FP64, {2, 3, 4, 5}, {4, 5, 6}, 2, 2);
    grad("only_x_37x65x29", FP32, {37, 65}, {65, 29}, 1, 1, true, false);
    grad("only_y_37x65x29", FP64, {37, 65}, {65, 29}, 1, 1, false, true);
    grad("empty_k", FP32, {4, 0}, {0, 3}, 1, 1);
    grad("large_128x256x128", FP32, {128, 256}, {256, 128}, 1, 1);
}

void matmul_cases(case_list& out) {
    auto mm = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, bool tx, bool ty,
                  double alpha = 1.0, bool weight = false) {
        case_builder cb(case_name("matmul", t, variant));
        cb.in("x", t, xs, uni(-1, 1)).in("y", t, ys, uni(-1, 1), weight);
        std::vector<Attribute> at{a_bool("transpose_X", tx), a_bool("transpose_Y", ty)};
        if (alpha != 1.0) at.push_back(a_float("alpha", alpha));
        cb.op("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    mm("5x7x3", FP32, {5, 7}, {7, 3}, false, false);
    mm("transpose_x", FP64, {7, 5}, {7, 3}, true, false);
    mm("transpose_y", FP32, {5, 7}, {3, 7}, false, true);
    mm("transpose_both", FP64, {7, 5}, {3, 7}, true, true);
    mm("batch_broadcast", FP32, {2, 1, 3, 4}, {5, 4, 6}, false, false);
    mm("batch_broadcast", FP64, {2, 1, 3, 4}, {5, 4, 6}, false, false);
    mm("batch_shared_y", FP64, {3, 4, 5}, {5, 6}, false, false);
    mm("batch_y_only", FP32, {3, 4}, {2, 4, 5}, false, false);
    mm("batch_transpose_x", FP64, {2, 6, 5}, {2, 6, 4}, true, false);
    mm("x_rank1", FP32, {7}, {7, 3}, false, false);
    mm("y_rank1", FP64, {4, 7}, {7}, false, false);
    mm("both_rank1", FP32, {7}, {7}, false, false);
    mm("x_rank1_transposed", FP64, {7}, {1, 5}, true, false);  // Paddle: a column, Out [7, 5]
    mm("y_rank1_transposed", FP64, {2, 6, 1}, {5}, false, true);  // a row, Out [2, 6, 5]
    mm("alpha", FP64, {9, 10}, {10, 11}, false, false, 0.5);
    mm("empty_batch", FP64, {0, 3, 4}, {4, 5}, false, false);
    mm("packed_37x65x29", FP32, {37, 65}, {65, 29}, false, false);
    mm("large_256x512x256", FP32, {256, 512}, {512, 256}, false, false);
    mm("weight_batched_transpose_y", FP32, {2, 40, 96}, {72, 96}, false, true, 1.5, true);
    mm("weight_37x65x29", FP64, {37, 65}, {65, 29}, false, false, 1.0, true);

    auto grad = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, bool tx, bool ty,
                    double alpha = 1.0, bool want_dx = true, bool want_dy = true) {
        case_builder cb(case_name("matmul_grad", t, variant));
        std::vector<Attribute> at{a_bool("transpose_X", tx), a_bool("transpose_Y", ty)};
        if (alpha != 1.0) at.push_back(a_float("alpha", alpha));
        const Shape os = forward_shape("matmul", t, {{"X", xs}, {"Y", ys}}, at, "Out");
        cb.in("x", t, xs, uni(-1, 1)).in("y", t, ys, uni(-1, 1)).in("out@GRAD", t, os, uni(-1, 1));
        slots outs;
        if (want_dx) outs.push_back({"X@GRAD", {"x@GRAD"}});
        if (want_dy) outs.push_back({"Y@GRAD", {"y@GRAD"}});
        cb.op("matmul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"out@GRAD"}}}, outs, at);
        out.push_back(cb.done());
    };
    grad("5x7x3", FP32, {5, 7}, {7, 3}, false, false);
    grad("transpose_x", FP64, {7, 5}, {7, 3}, true, false);
    grad("transpose_y", FP32, {5, 7}, {3, 7}, false, true);
    grad("transpose_both", FP64, {7, 5}, {3, 7}, true, true);
    grad("batch_broadcast", FP32, {2, 1, 3, 4}, {5, 4, 6}, false, false);
    grad("batch_broadcast_transpose_both", FP64, {2, 1, 4, 3}, {5, 6, 4}, true, true);
    grad("batch_shared_y", FP64, {3, 4, 5}, {5, 6}, false, false);
    grad("batch_shared_y_transpose_y", FP32, {3, 4, 5}, {6, 5}, false, true);
    grad("x_rank1", FP32, {7}, {7, 3}, false, false);
    grad("y_rank1", FP64, {4, 7}, {7}, false, false);
    grad("rank1_transposed_outer", FP64, {7}, {5}, true, true);
    grad("alpha", FP64, {9, 10}, {10, 11}, false, false, 0.5);
    grad("only_x", FP32, {6, 5}, {5, 4}, false, false, 1.0, true, false);
    grad("only_y_transpose_x", FP64, {5, 6}, {5, 4}, true, false, 1.0, false, true);
    grad("empty_batch", FP32, {0, 3, 4}, {4, 5}, false, false);
    grad("large_128x256x128", FP32, {128, 256}, {256, 128}, false, false);

    // matmul_v2 (trans_x, trans_y; a 1-D operand is never transposed).
    auto v2 = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys, bool tx, bool ty) {
        const std::vector<Attribute> at{a_bool("trans_x", tx), a_bool("trans_y", ty)};
        case_builder cb(case_name("matmul_v2", t, variant));
        cb.in("x", t, xs, uni(-1, 1)).in("y", t, ys, uni(-1, 1));
        cb.op("matmul_v2", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
        const Shape os = forward_shape("matmul_v2", t, {{"X", xs}, {"Y", ys}}, at, "Out");
        case_builder g(case_name("matmul_v2_grad", t, variant));
        g.in("x", t, xs, uni(-1, 1)).in("y", t, ys, uni(-1, 1)).in("out@GRAD", t, os, uni(-1, 1));
        g.op("matmul_v2_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"out@GRAD"}}},
             {{"X@GRAD", {"x@GRAD"}}, {"Y@GRAD", {"y@GRAD"}}}, at);
        out.push_back(g.done());
    };
    v2("5x7x3", FP32, {5, 7}, {7, 3}, false, false);
    v2("trans_both_batched", FP64, {2, 1, 7, 5}, {3, 4, 7}, true, true);
    v2("x_rank1_trans_ignored", FP64, {7}, {3, 7, 4}, true, false);
    v2("y_rank1_trans_ignored", FP32, {2, 4, 7}, {7}, false, true);
    v2("dot", FP64, {6}, {6}, true, true);
}

// ---- softmax and losses ---------------------------------------------------------------------------

void softmax_cases(case_list& out) {
    auto sm = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t axis, const gen& g) {
        case_builder cb(case_name("softmax", t, variant));
        std::vector<Attribute> at;
        if (axis != -1) at.push_back(a_int("axis", axis));
        cb.in("x", t, s, g).op("softmax", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    sm("rows_3x1023", FP32, {3, 1023}, -1, uni(-5, 5));
    sm("rows_7x7", FP64, {7, 7}, -1, uni(-5, 5));
    sm("rows_of_1", FP32, {4, 1}, -1, uni(-5, 5));
    sm("axis1_strided_2x5x7", FP32, {2, 5, 7}, 1, uni(-5, 5));
    sm("axis0_strided_5x3x20", FP64, {5, 3, 20}, 0, uni(-5, 5));
    sm("negative_axis_3x4x33", FP32, {3, 4, 33}, -2, uni(-5, 5));
    sm("large_logits", FP32, {4, 37}, -1, uni(-1000, 1000));
    // Row 0 all -inf; row 1 mixes -inf with finite values.
    sm("infinite_logits", FP64, {3, 5}, -1, special({-inf, -inf, -inf, -inf, -inf, -inf, 1.0, -inf, 2.0, 0.5}, uni(-3, 3)));
    sm("empty", FP32, {0, 5}, -1, uni(-5, 5));
    sm("large_row_140000", FP32, {1, 140000}, -1, uni(-5, 5));

    auto grad = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t axis) {
        case_builder cb(case_name("softmax_grad", t, variant));
        std::vector<Attribute> at;
        if (axis != -1) at.push_back(a_int("axis", axis));
        cb.in("out", t, s, uni(0, 1)).in("out@GRAD", t, s, uni(-1, 1));
        cb.op("softmax_grad", {{"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
        out.push_back(cb.done());
    };
    grad("rows_3x1023", FP32, {3, 1023}, -1);
    grad("rows_7x7", FP64, {7, 7}, -1);
    grad("axis1_strided_2x5x7", FP32, {2, 5, 7}, 1);
    grad("axis0_strided_5x3x20", FP64, {5, 3, 20}, 0);
    grad("empty", FP32, {0, 5}, -1);
}

void log_softmax_cases(case_list& out) {
    auto ls = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t axis, const gen& g) {
        case_builder cb(case_name("log_softmax", t, variant));
        std::vector<Attribute> at;
        if (axis != -1) at.push_back(a_int("axis", axis));
        cb.in("x", t, s, g).op("log_softmax", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    ls("rows_3x1023", FP32, {3, 1023}, -1, uni(-5, 5));
    ls("rows_7x7", FP64, {7, 7}, -1, uni(-5, 5));
    ls("axis1_strided_2x5x7", FP32, {2, 5, 7}, 1, uni(-5, 5));
    ls("axis0_strided_5x3x20", FP64, {5, 3, 20}, 0, uni(-5, 5));
    ls("large_logits", FP32, {4, 37}, -1, uni(-1000, 1000));
    ls("empty", FP32, {0, 5}, -1, uni(-5, 5));

    auto grad = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t axis) {
        case_builder cb(case_name("log_softmax_grad", t, variant));
        std::vector<Attribute> at;
        if (axis != -1) at.push_back(a_int("axis", axis));
        cb.in("out", t, s, uni(-6, 0)).in("out@GRAD", t, s, uni(-1, 1));
        cb.op("log_softmax_grad", {{"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
        out.push_back(cb.done());
    };
    grad("rows_3x1023", FP32, {3, 1023}, -1);
    grad("axis1_strided_2x5x7", FP64, {2, 5, 7}, 1);
    grad("empty", FP32, {0, 5}, -1);
}

Shape with_last(Shape s, std::int64_t v) {
    s[s.rank() - 1] = v;
    return s;
}

void loss_cases(case_list& out) {
    // ignore: an ignore_index attribute; 3 of 10 classes ignores about a tenth of the rows.
    auto with_ignore = [](bool soft, std::optional<std::int64_t> ignore) {
        std::vector<Attribute> at{a_bool("soft_label", soft)};
        if (ignore) at.push_back(a_int("ignore_index", *ignore));
        return at;
    };
    auto ce = [&](std::string_view variant, DataType t, const Shape& s, bool soft,
                  std::optional<std::int64_t> ignore = {}) {
        case_builder cb(case_name("cross_entropy", t, variant));
        rng rx = cb.rng_for("x"), rl = cb.rng_for("label");
        const std::int64_t d = s[s.rank() - 1];
        cb.in("x", prob_rows(t, s, rx));
        cb.in("label", soft ? prob_rows(t, s, rl, 0.0) : labels(with_last(s, 1), rl, d));
        cb.op("cross_entropy", {{"X", {"x"}}, {"Label", {"label"}}}, {{"Y", {"y"}}}, with_ignore(soft, ignore));
        out.push_back(cb.done());
    };
    ce("hard_7x10", FP32, {7, 10}, false);
    ce("hard_rank3_2x3x5", FP64, {2, 3, 5}, false);
    ce("soft_7x10", FP32, {7, 10}, true);
    ce("soft_3x1023", FP64, {3, 1023}, true);
    ce("hard_empty", FP32, {0, 4}, false);
    ce("hard_ignore_index_3_40x10", FP32, {40, 10}, false, 3);

    auto ce_grad = [&](std::string_view variant, DataType t, const Shape& s, bool soft,
                       std::optional<std::int64_t> ignore = {}) {
        case_builder cb(case_name("cross_entropy_grad", t, variant));
        rng rx = cb.rng_for("x"), rl = cb.rng_for("label");
        const std::int64_t d = s[s.rank() - 1];
        cb.in("x", prob_rows(t, s, rx));
        cb.in("label", soft ? prob_rows(t, s, rl, 0.0) : labels(with_last(s, 1), rl, d));
        cb.in("y@GRAD", t, with_last(s, 1), uni(-1, 1));
        cb.op("cross_entropy_grad", {{"X", {"x"}}, {"Label", {"label"}}, {"Y@GRAD", {"y@GRAD"}}},
              {{"X@GRAD", {"x@GRAD"}}}, with_ignore(soft, ignore));
        out.push_back(cb.done());
    };
    ce_grad("hard_7x10", FP32, {7, 10}, false);
    ce_grad("hard_rank3_2x3x5", FP64, {2, 3, 5}, false);
    ce_grad("soft_7x10", FP32, {7, 10}, true);
    ce_grad("soft_3x1023", FP64, {3, 1023}, true);
    ce_grad("hard_ignore_index_3_40x10", FP64, {40, 10}, false, 3);

    auto swce = [&](std::string_view variant, DataType t, const Shape& s, bool soft, const gen& g,
                    std::optional<std::int64_t> ignore = {}) {
        case_builder cb(case_name("softmax_with_cross_entropy", t, variant));
        rng rl = cb.rng_for("label");
        const std::int64_t d = s[s.rank() - 1];
        cb.in("logits", t, s, g);
        cb.in("label", soft ? prob_rows(t, s, rl, 0.0) : labels(with_last(s, 1), rl, d));
        cb.op("softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
              {{"Softmax", {"softmax"}}, {"Loss", {"loss"}}}, with_ignore(soft, ignore));
        out.push_back(cb.done());
    };
    swce("hard_7x10", FP32, {7, 10}, false, uni(-5, 5));
    swce("hard_3x1023", FP64, {3, 1023}, false, uni(-5, 5));
    swce("soft_5x33", FP32, {5, 33}, true, uni(-5, 5));
    swce("soft_rank3_2x3x17", FP64, {2, 3, 17}, true, uni(-5, 5));
    swce("hard_large_logits", FP32, {6, 19}, false, uni(-500, 500));
    swce("hard_one_class", FP32, {4, 1}, false, uni(-5, 5));
    swce("hard_ignore_index_3_40x10", FP32, {40, 10}, false, uni(-5, 5), 3);

    auto swce_grad = [&](std::string_view variant, DataType t, const Shape& s, bool soft, bool normalized = true,
                         std::optional<std::int64_t> ignore = {}) {
        case_builder cb(case_name("softmax_with_cross_entropy_grad", t, variant));
        rng rs = cb.rng_for("softmax"), rl = cb.rng_for("label");
        const std::int64_t d = s[s.rank() - 1];
        cb.in("label", soft ? normalized ? prob_rows(t, s, rl, 0.0) : make(t, s, rl, uni(0, 1))
                            : labels(with_last(s, 1), rl, d));
        cb.in("softmax", prob_rows(t, s, rs));
        cb.in("loss@GRAD", t, with_last(s, 1), uni(-1, 1));
        cb.op("softmax_with_cross_entropy_grad",
              {{"Label", {"label"}}, {"Softmax", {"softmax"}}, {"Loss@GRAD", {"loss@GRAD"}}},
              {{"Logits@GRAD", {"logits@GRAD"}}}, with_ignore(soft, ignore));
        out.push_back(cb.done());
    };
    swce_grad("hard_7x10", FP32, {7, 10}, false);
    swce_grad("hard_3x1023", FP64, {3, 1023}, false);
    swce_grad("soft_5x33", FP32, {5, 33}, true);
    swce_grad("soft_unnormalized_labels", FP64, {2, 3, 17}, true, false);
    swce_grad("hard_ignore_index_3_40x10", FP64, {40, 10}, false, true, 3);

    // sigmoid_cross_entropy_with_logits, huber_loss, smooth_l1_loss, kldiv_loss and their grads.
    for (DataType t : {FP32, FP64}) {
        {
            const Shape s{7, 33};
            case_builder cb(case_name("sigmoid_cross_entropy_with_logits", t, "ignore_normalize_7x33"));
            cb.in("x", t, s, uni(-30, 30)).in("label", t, s, grid(-2, 2, 0.5));
            const std::vector<Attribute> at{a_bool("normalize", true), a_int("ignore_index", -1)};
            cb.op("sigmoid_cross_entropy_with_logits", {{"X", {"x"}}, {"Label", {"label"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
            case_builder g(case_name("sigmoid_cross_entropy_with_logits_grad", t, "ignore_normalize_7x33"));
            g.in("x", t, s, uni(-30, 30)).in("label", t, s, grid(-2, 2, 0.5)).in("out@GRAD", t, s, uni(-1, 1));
            g.op("sigmoid_cross_entropy_with_logits_grad", {{"X", {"x"}}, {"Label", {"label"}}, {"Out@GRAD", {"out@GRAD"}}},
                 {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(g.done());
        }
        {
            const Shape s{9, 5};
            const std::vector<Attribute> at{Attribute::make_float("delta", 0.75)};
            case_builder cb(case_name("huber_loss", t, "delta_0.75_9x5"));
            cb.in("x", t, s, uni(-2, 2)).in("y", t, s, uni(-2, 2));
            cb.op("huber_loss", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}, {"Residual", {"residual"}}}, at);
            out.push_back(cb.done());
            case_builder g(case_name("huber_loss_grad", t, "delta_0.75_9x5"));
            g.in("residual", t, s, uni(-2, 2)).in("out@GRAD", t, s, uni(-1, 1));
            g.op("huber_loss_grad", {{"Residual", {"residual"}}, {"Out@GRAD", {"out@GRAD"}}},
                 {{"X@GRAD", {"x@GRAD"}}, {"Y@GRAD", {"y@GRAD"}}}, at);
            out.push_back(g.done());
        }
        {
            const Shape s{6, 4, 3};
            const std::vector<Attribute> at{Attribute::make_float("sigma", 3.0)};
            case_builder cb(case_name("smooth_l1_loss", t, "weights_sigma3_6x4x3"));
            cb.in("x", t, s, uni(-1, 1)).in("y", t, s, uni(-1, 1)).in("iw", t, s, uni(0, 1)).in("ow", t, s, uni(0, 1));
            cb.op("smooth_l1_loss", {{"X", {"x"}}, {"Y", {"y"}}, {"InsideWeight", {"iw"}}, {"OutsideWeight", {"ow"}}},
                  {{"Diff", {"diff"}}, {"Out", {"out"}}}, at);
            out.push_back(cb.done());
            case_builder g(case_name("smooth_l1_loss_grad", t, "weights_sigma3_6x4x3"));
            g.in("iw", t, s, uni(0, 1)).in("ow", t, s, uni(0, 1)).in("diff", t, s, uni(-1, 1)).in("out@GRAD", t, {6, 1}, uni(-1, 1));
            g.op("smooth_l1_loss_grad", {{"InsideWeight", {"iw"}}, {"OutsideWeight", {"ow"}}, {"Diff", {"diff"}}, {"Out@GRAD", {"out@GRAD"}}},
                 {{"X@GRAD", {"x@GRAD"}}, {"Y@GRAD", {"y@GRAD"}}}, at);
            out.push_back(g.done());
        }
        for (const char* red : {"none", "batchmean"}) {
            const Shape s{4, 5, 6};
            const std::vector<Attribute> at{Attribute::make_string("reduction", red)};
            case_builder cb(case_name("kldiv_loss", t, std::string(red) + "_4x5x6"));
            cb.in("x", t, s, uni(-5, 0)).in("target", t, s, uni(-0.5, 1));
            cb.op("kldiv_loss", {{"X", {"x"}}, {"Target", {"target"}}}, {{"Loss", {"loss"}}}, at);
            out.push_back(cb.done());
            case_builder g(case_name("kldiv_loss_grad", t, std::string(red) + "_4x5x6"));
            g.in("x", t, s, uni(-5, 0)).in("target", t, s, uni(-0.5, 1)).in("loss@GRAD", t, std::string(red) == "none" ? s : Shape{1}, uni(-1, 1));
            g.op("kldiv_loss_grad", {{"X", {"x"}}, {"Target", {"target"}}, {"Loss@GRAD", {"loss@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(g.done());
        }
    }
    // bce_loss: probabilities with the edges 0 and 1 (logs clipped at -100)
    // against labels in [0, 1]; its gradient away from and at the edges.
    for (DataType t : {FP32, FP64}) {
        const std::string_view v = t == FP32 ? "edges_6x7" : "rank3_2x3x19";
        const Shape s = t == FP32 ? Shape{6, 7} : Shape{2, 3, 19};
        case_builder cb(case_name("bce_loss", t, v));
        cb.in("x", t, s, special({0.0, 1.0, 0.5, 1e-30, 1.0 - 1e-7}, uni(0, 1))).in("label", t, s, uni(0, 1));
        cb.op("bce_loss", {{"X", {"x"}}, {"Label", {"label"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
        case_builder g(case_name("bce_loss_grad", t, v));
        g.in("x", t, s, special({0.0, 1.0, 0.5}, uni(0.01, 0.99))).in("label", t, s, uni(0, 1));
        g.in("out@GRAD", t, s, uni(-1, 1));
        g.op("bce_loss_grad", {{"X", {"x"}}, {"Label", {"label"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}});
        out.push_back(g.done());
    }
}

// ---- reductions ------------------------------------------------------------------------------------

// X's dims that attributes (dim, keep_dim, reduce_all) fold.
std::vector<bool> folded(int rank, const std::vector<std::int64_t>& dims, bool all) {
    std::vector<bool> red(static_cast<std::size_t>(rank), all);
    for (auto d : dims) red[static_cast<std::size_t>(d < 0 ? d + rank : d)] = true;
    return red;
}

// The max, min or product of x over the folded dims, as the forward op lays
// it out (what the grad ops read as Out).
Tensor reduce_of(std::string_view op, const Tensor& x, const std::vector<bool>& red, const Shape& out_shape) {
    Tensor out(x.dtype(), out_shape);
    visit_dtype(x.dtype(), [&]<class T>(type_tag<T>) {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
            const T inf = std::numeric_limits<T>::infinity();
            const T init = op == "reduce_max" ? -inf : op == "reduce_min" ? inf : T(1);
            auto f = [&](T a, T b) { return op == "reduce_max" ? std::max(a, b) : op == "reduce_min" ? std::min(a, b) : a * b; };
            T* y = out.data<T>();
            std::fill(y, y + out.numel(), init);
            const Shape& s = x.shape();
            const T* xp = x.data<T>();
            std::vector<std::int64_t> idx(static_cast<std::size_t>(s.rank()), 0);
            for (std::int64_t i = 0; i < x.numel(); ++i) {
                std::int64_t o = 0;
                for (int k = 0; k < s.rank(); ++k)
                    if (!red[static_cast<std::size_t>(k)]) o = o * s[k] + idx[static_cast<std::size_t>(k)];
                y[o] = f(y[o], xp[i]);
                for (int k = s.rank() - 1; k >= 0; --k) {
                    if (++idx[static_cast<std::size_t>(k)] < s[k]) break;
                    idx[static_cast<std::size_t>(k)] = 0;
                }
            }
        } else {
            throw std::logic_error("reduce_of: FP32 or FP64 only");
        }
    });
    return out;
}

void reduce_cases(case_list& out) {
    auto red = [&](const char* op, std::string_view variant, DataType t, const Shape& s, std::vector<std::int64_t> dims,
                   bool keep = false, bool all = false, gen g = nullptr) {
        case_builder cb(case_name(op, t, variant));
        if (!g) g = is_fp(t) ? uni(-2, 2) : ints(-1000, 1000);
        std::vector<Attribute> at{a_ints("dim", std::move(dims))};
        if (keep) at.push_back(a_bool("keep_dim", true));
        if (all) at.push_back(a_bool("reduce_all", true));
        cb.in("x", t, s, g).op(op, {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
        const std::string_view o = op;
        const bool ints_ok = o != "reduce_mean";
        // Products of many values stay in range near 1.
        const gen g = o == "reduce_max" || o == "reduce_min" ? grid(-6, 6, 0.5)
                      : o == "reduce_prod"                  ? uni(0.99, 1.01)
                                                            : uni(-2, 2);
        red(op, "rows_dim1_7x1023", FP32, {7, 1023}, {1}, false, false, g);
        red(op, "columns_dim0_1023x7", FP64, {1023, 7}, {0}, false, false, g);
        red(op, "dims_0_2_keep_dim", FP32, {4, 5, 6}, {0, 2}, true, false, g);
        red(op, "reduce_all", FP64, {3, 4, 5}, {0}, false, true, g);
        red(op, "negative_dim", FP32, {3, 4, 5}, {-1}, false, false, g);
        red(op, "middle_dim_3x9x17", FP64, {3, 9, 17}, {1}, false, false, g);
        red(op, "unit_dims_1x7x1x3", FP64, {1, 7, 1, 3}, {0, 2}, false, false, g);
        red(op, "empty_dim0", FP32, {0, 5}, {0}, false, false, g);
        red(op, "large_rows_600x512", FP32, {600, 512}, {1}, false, false, g);
        red(op, "large_columns_600x512", FP32, {600, 512}, {0}, false, false, g);
        red(op, "large_all_307200", FP32, {307200}, {0}, false, true, g);
        if (o == "reduce_prod") red(op, "zeros_and_signs_6x7", FP64, {6, 7}, {1}, false, false, grid(-2, 2, 1));
        if (ints_ok) {
            red(op, "dim1_5x9", INT32, {5, 9}, {1});
            red(op, "dim0_keep_dim_6x4", INT64, {6, 4}, {0}, true);
            red(op, "reduce_all_3x11", INT32, {3, 11}, {0}, false, true);
        }
    }

    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
        const std::string grad = std::string(op) + "_grad";
        const bool reads_out = std::string_view(op) != "reduce_sum" && std::string_view(op) != "reduce_mean";
        auto one = [&](std::string_view variant, DataType t, const Shape& s, std::vector<std::int64_t> dims, bool keep,
                       bool all) {
            case_builder cb(case_name(grad, t, variant));
            std::vector<Attribute> at{a_ints("dim", dims)};
            if (keep) at.push_back(a_bool("keep_dim", true));
            if (all) at.push_back(a_bool("reduce_all", true));
            const Shape os = forward_shape(op, t, {{"X", s}}, at, "Out");
            rng rx = cb.rng_for("x"), ro = cb.rng_for("out");
            // Ties for max and min; zeros, alone and several in a group, for prod.
            Tensor x = make(t, s, rx, std::string_view(op) == "reduce_prod" ? grid(-2, 2, 0.5) : grid(-6, 6, 0.5));
            Tensor o = reads_out ? reduce_of(op, x, folded(s.rank(), dims, all), os) : make(t, os, ro, uni(-2, 2));
            cb.in("x", std::move(x)).in("out", std::move(o)).in("out@GRAD", t, os, uni(-1, 1));
            cb.op(grad, {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(cb.done());
        };
        one("rows_dim1_7x33", FP32, {7, 33}, {1}, false, false);
        one("columns_dim0_33x7", FP64, {33, 7}, {0}, false, false);
        one("dims_0_2_keep_dim", FP32, {4, 5, 6}, {0, 2}, true, false);
        one("reduce_all", FP64, {3, 4, 5}, {0}, false, true);
        one("negative_dim", FP32, {3, 4, 5}, {-1}, false, false);
        one("empty_dim0", FP64, {0, 5}, {0}, false, false);
    }

    for (const char* op : {"reduce_all", "reduce_any"}) {
        red(op, "rows_dim1_7x33", BOOL, {7, 33}, {1}, false, false, ints(0, 1));
        red(op, "columns_dim0_33x7", BOOL, {33, 7}, {0}, false, false, ints(0, 1));
        red(op, "dims_0_2_keep_dim", BOOL, {4, 5, 6}, {0, 2}, true, false, ints(0, 1));
        red(op, "reduce_all_3x4x5", BOOL, {3, 4, 5}, {0}, false, true, ints(0, 1));
        red(op, "empty_dim0", BOOL, {0, 5}, {0}, false, false, ints(0, 1));
    }

    auto mean = [&](std::string_view variant, DataType t, const Shape& s) {
        case_builder cb(case_name("mean", t, variant));
        cb.in("x", t, s, uni(-2, 2)).op("mean", {{"X", {"x"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    };
    mean("odd_1023", FP32, {1023});
    mean("rank3_3x5x7", FP64, {3, 5, 7});
    mean("size_1", FP32, {1});
    mean("empty", FP32, {0, 3});
    mean("large_307200", FP32, {600, 512});
    mean("large_100003", FP64, {100003});

    auto mean_grad = [&](std::string_view variant, DataType t, const Shape& s) {
        case_builder cb(case_name("mean_grad", t, variant));
        cb.in("x", t, s, uni(-2, 2)).in("out", t, {1}, uni(-2, 2)).in("out@GRAD", t, {1}, uni(-2, 2));
        cb.op("mean_grad", {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}});
        out.push_back(cb.done());
    };
    mean_grad("3x5", FP32, {3, 5});
    mean_grad("odd_1023", FP64, {1023});
    mean_grad("empty", FP32, {0});
}

// ---- data movement ----------------------------------------------------------------------------------

gen values_for(DataType t) { return t == BOOL ? ints(0, 1) : is_fp(t) ? uni(-5, 5) : ints(-30000, 30000); }

void shape_op_cases(case_list& out) {
    auto reshape = [&](std::string_view variant, DataType t, const Shape& s, std::vector<std::int64_t> shape) {
        case_builder cb(case_name("reshape", t, variant));
        cb.in("x", t, s, values_for(t)).op("reshape", {{"X", {"x"}}}, {{"Out", {"out"}}}, {a_ints("shape", std::move(shape))});
        out.push_back(cb.done());
    };
    reshape("minus1", FP32, {6, 35}, {-1, 7});
    reshape("zero_copies_dim", FP64, {4, 3, 5}, {0, -1});
    reshape("flatten", INT32, {2, 3, 4}, {24});
    reshape("to_rank3", INT64, {12}, {2, 3, 2});
    reshape("zero_and_minus1", BOOL, {3, 4, 2}, {0, -1, 2});
    reshape("to_rank1", INT16, {5, 7}, {-1});
    reshape("rank4", FP16, {6, 4}, {2, 3, 2, 2});
    reshape("empty", FP32, {0, 6}, {0, 3, 2});

    const Shape grad_shapes[] = {{13}, {7, 3}, {2, 3, 4}, {5}, {9, 2}, {2, 3, 5}, {4, 1}};
    for (std::size_t k = 0; k < std::size(all_dtypes); ++k) {
        const DataType t = all_dtypes[k];
        const Shape& xs = grad_shapes[k];
        case_builder cb(case_name("reshape_grad", t, "flat_to_x"));
        cb.in("x", t, xs, values_for(t)).in("out@GRAD", t, {xs.numel()}, values_for(t));
        cb.op("reshape_grad", {{"X", {"x"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}});
        out.push_back(cb.done());
    }

    // squeeze2 / unsqueeze2 and their grads (XShape: [0, X's dims]), flip: every stored dtype.
    struct sq_v {
        const char* name;
        Shape x;
        std::vector<std::int64_t> axes;
    };
    const sq_v squeezes[] = {{"all_1x7x1x3", {1, 7, 1, 3}, {}},  {"axis0_1x5", {1, 5}, {0}},   {"negative_4x1x2", {4, 1, 2}, {-2}},
                             {"kept_3x1", {3, 1}, {0, 1}},       {"all_1x1", {1, 1}, {}},      {"axis2_2x3x1", {2, 3, 1}, {2}},
                             {"empty_0x1", {0, 1}, {1}}};
    const sq_v unsqueezes[] = {{"front_7x3", {7, 3}, {0}},     {"back_5", {5}, {-1}},        {"two_2x3", {2, 3}, {0, 2}},
                               {"order_3x4", {3, 4}, {2, 0}},  {"negatives_6", {6}, {-1, -1}}, {"middle_2x2x2", {2, 2, 2}, {1}},
                               {"empty_0x3", {0, 3}, {1}}};
    const std::vector<std::int64_t> flips[] = {{0}, {-1}, {0, 1}, {1}, {0, 2}, {}, {0}};
    const Shape flip_shapes[] = {{5, 7}, {3, 33}, {4, 6}, {2, 3, 4}, {3, 2, 5}, {9}, {0, 3}};
    for (std::size_t k = 0; k < std::size(all_dtypes); ++k) {
        const DataType t = all_dtypes[k];
        for (bool squeeze : {true, false}) {
            const sq_v& v = squeeze ? squeezes[k] : unsqueezes[k];
            const std::string type = squeeze ? "squeeze2" : "unsqueeze2";
            const std::vector<Attribute> at{a_ints("axes", v.axes)};
            case_builder cb(case_name(type, t, v.name));
            cb.in("x", t, v.x, values_for(t)).op(type, {{"X", {"x"}}}, {{"Out", {"out"}}, {"XShape", {"xshape"}}}, at);
            out.push_back(cb.done());
            const Shape os = forward_shape(type, t, {{"X", v.x}}, at, "Out");
            Shape xshape{0};
            for (auto d : v.x) xshape.push_back(d);
            case_builder g(case_name(type + "_grad", t, v.name));
            g.in("xshape", t, xshape, values_for(t)).in("out@GRAD", t, os, values_for(t));
            g.op(type + "_grad", {{"XShape", {"xshape"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}});
            out.push_back(g.done());
        }
        case_builder f(case_name("flip", t, "case" + std::to_string(k)));
        f.in("x", t, flip_shapes[k], values_for(t)).op("flip", {{"X", {"x"}}}, {{"Out", {"out"}}}, {a_ints("axis", flips[k])});
        out.push_back(f.done());
    }

    // slice and slice_grad (Input@GRAD: zeros with the box set): every stored dtype.
    struct slice_v {
        const char* name;
        Shape x;
        std::vector<std::int64_t> axes, starts, ends, decrease;
    };
    const slice_v slices[] = {
        {"rows_6x5", {6, 5}, {0}, {1}, {4}, {}},
        {"negative_3x4x5", {3, 4, 5}, {-1, 1}, {-3, 0}, {-1, 2}, {}},
        {"clamped_7x3", {7, 3}, {0, 1}, {-100, 1}, {100, 2}, {}},
        {"decrease_4x5x2", {4, 5, 2}, {1, 0}, {3, 1}, {4, 3}, {1}},
        {"empty_5x4", {5, 4}, {1}, {3}, {1}, {}},
        {"inner_2x3x33", {2, 3, 33}, {2}, {5}, {32}, {}},
        {"to_one_3x2", {3, 2}, {0, 1}, {2, 1}, {3, 2}, {0, 1}},
    };
    for (std::size_t k = 0; k < std::size(all_dtypes); ++k) {
        const DataType t = all_dtypes[k];
        const slice_v& v = slices[k];
        const std::vector<Attribute> at{a_ints("axes", v.axes), a_ints("starts", v.starts), a_ints("ends", v.ends),
                                        a_ints("decrease_axis", v.decrease)};
        case_builder cb(case_name("slice", t, v.name));
        cb.in("x", t, v.x, values_for(t)).op("slice", {{"Input", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
        const Shape os = forward_shape("slice", t, {{"Input", v.x}}, at, "Out");
        case_builder g(case_name("slice_grad", t, v.name));
        g.in("x", t, v.x, values_for(t)).in("out@GRAD", t, os, values_for(t));
        g.op("slice_grad", {{"Input", {"x"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"Input@GRAD", {"x@GRAD"}}}, at);
        out.push_back(g.done());
    }

    auto transpose = [&](std::string_view variant, DataType t, const Shape& s, std::vector<std::int64_t> perm) {
        case_builder cb(case_name("transpose", t, variant));
        cb.in("x", t, s, values_for(t)).op("transpose", {{"X", {"x"}}}, {{"Out", {"out"}}}, {a_ints("axis", std::move(perm))});
        out.push_back(cb.done());
    };
    transpose("tiled_300x257", FP32, {300, 257}, {1, 0});
    transpose("runs_2x3x4_102", FP64, {2, 3, 4}, {1, 0, 2});
    transpose("rank4_0231", FP32, {2, 3, 4, 5}, {0, 2, 3, 1});
    transpose("rank4_3120", FP64, {3, 5, 2, 7}, {3, 1, 2, 0});
    transpose("2d_7x9", INT32, {7, 9}, {1, 0});
    transpose("3d_201", INT64, {4, 5, 6}, {2, 0, 1});
    transpose("2d_5x3", BOOL, {5, 3}, {1, 0});
    transpose("3d_021", INT16, {2, 33, 35}, {0, 2, 1});
    transpose("3d_120", FP16, {3, 4, 5}, {1, 2, 0});
    transpose("unit_dims_1x5x1x7", FP32, {1, 5, 1, 7}, {3, 2, 1, 0});
    transpose("identity", FP64, {3, 4}, {0, 1});
    transpose("empty", FP32, {0, 4}, {1, 0});

    auto concat = [&](std::string_view variant, DataType t, const std::vector<Shape>& shapes, std::int64_t axis) {
        case_builder cb(case_name("concat", t, variant));
        std::vector<std::string> names;
        for (std::size_t k = 0; k < shapes.size(); ++k) {
            names.push_back("x" + std::to_string(k));
            cb.in(names.back(), t, shapes[k], values_for(t));
        }
        cb.op("concat", {{"X", names}}, {{"Out", {"out"}}}, {a_int("axis", axis)});
        out.push_back(cb.done());
    };
    concat("axis0_3_inputs", FP32, {{2, 5}, {3, 5}, {1, 5}}, 0);
    concat("axis1", FP64, {{2, 3, 4}, {2, 1, 4}}, 1);
    concat("negative_axis", FP32, {{2, 3}, {2, 7}, {2, 1}}, -1);
    concat("axis1", INT32, {{3, 2}, {3, 5}}, 1);
    concat("axis0", INT64, {{2, 2}, {4, 2}}, 0);
    concat("axis2", BOOL, {{2, 2, 3}, {2, 2, 5}}, 2);
    concat("axis0", INT16, {{1, 9}, {2, 9}}, 0);
    concat("axis1", FP16, {{4, 3}, {4, 4}}, 1);
    concat("zero_size_part", FP32, {{2, 0, 3}, {2, 4, 3}}, 1);
    concat("single_input", FP64, {{3, 3}}, 0);

    auto concat_grad = [&](std::string_view variant, DataType t, const std::vector<Shape>& shapes, std::int64_t axis) {
        case_builder cb(case_name("concat_grad", t, variant));
        std::vector<std::string> xs, dxs;
        for (std::size_t k = 0; k < shapes.size(); ++k) {
            xs.push_back("x" + std::to_string(k));
            dxs.push_back(xs.back() + "@GRAD");
            cb.in(xs.back(), t, shapes[k], values_for(t));
        }
        // Out@GRAD: the shapes joined along axis.
        Shape os = shapes[0];
        const int a = static_cast<int>(axis < 0 ? axis + os.rank() : axis);
        for (std::size_t k = 1; k < shapes.size(); ++k) os[a] += shapes[k][a];
        cb.in("out@GRAD", t, os, values_for(t));
        cb.op("concat_grad", {{"X", xs}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", dxs}}, {a_int("axis", axis)});
        out.push_back(cb.done());
    };
    concat_grad("axis0_3_inputs", FP32, {{2, 5}, {3, 5}, {1, 5}}, 0);
    concat_grad("axis1", FP64, {{2, 3, 4}, {2, 1, 4}}, 1);
    concat_grad("negative_axis", INT32, {{2, 3}, {2, 7}}, -1);
    concat_grad("axis0", INT64, {{2, 2}, {4, 2}}, 0);
    concat_grad("axis1", BOOL, {{2, 2}, {2, 5}}, 1);
    concat_grad("axis0", INT16, {{1, 9}, {2, 9}}, 0);
    concat_grad("axis1", FP16, {{4, 3}, {4, 4}}, 1);
    concat_grad("zero_size_part", FP32, {{2, 0, 3}, {2, 4, 3}}, 1);

    auto split = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t axis, std::int64_t num,
                     std::vector<std::int64_t> sections) {
        case_builder cb(case_name("split", t, variant));
        const std::size_t n = num > 0 ? static_cast<std::size_t>(num) : sections.size();
        std::vector<std::string> outs;
        for (std::size_t k = 0; k < n; ++k) outs.push_back("out" + std::to_string(k));
        std::vector<Attribute> at{a_int("axis", axis)};
        if (num > 0) at.push_back(a_int("num", num));
        else at.push_back(a_ints("sections", std::move(sections)));
        cb.in("x", t, s, values_for(t)).op("split", {{"X", {"x"}}}, {{"Out", outs}}, at);
        out.push_back(cb.done());
    };
    split("num3_axis1", FP32, {4, 9}, 1, 3, {});
    split("sections_minus1_axis0", FP64, {10, 3}, 0, 0, {2, -1, 3});
    split("num2_negative_axis", INT32, {3, 4, 6}, -1, 2, {});
    split("sections_axis1", INT64, {2, 7, 2}, 1, 0, {3, 4});
    split("num2", BOOL, {6, 3}, 0, 2, {});
    split("sections", INT16, {5, 4}, 1, 0, {1, 3});
    split("num4", FP16, {8}, 0, 4, {});
    split("sections_with_zero", FP32, {2, 5}, 1, 0, {0, 5});
}

void cast_cases(case_list& out) {
    auto cast = [&](DataType from, DataType to, const Shape& s, const gen& g) {
        case_builder cb(case_name("cast", from, "to_" + to_string(to)));
        cb.in("x", from, s, g);
        cb.op("cast", {{"X", {"x"}}}, {{"Out", {"out"}}}, {a_int("in_dtype", dt(from)), a_int("out_dtype", dt(to))});
        out.push_back(cb.done());
    };
    cast(FP32, INT32, {37}, uni(-1000, 1000));
    cast(FP32, FP64, {3, 7}, uni(-5, 5));
    cast(FP32, BOOL, {21}, grid(-2, 2, 0.5));
    cast(FP32, INT16, {9}, uni(-30000, 30000));
    cast(FP32, FP32, {6}, uni(-5, 5));
    cast(FP64, FP32, {41}, special({1e-40, -1e-40, 1e38, 0.1, 1.0 / 3.0}, wide_positive(-60, 60)));
    cast(FP64, INT64, {9}, uni(-1e15, 1e15));
    cast(FP64, BOOL, {7}, grid(-1, 1, 0.25));
    cast(INT32, FP32, {33}, ints(-(1 << 30), 1 << 30));  // beyond FP32's 24 bits: rounded
    cast(INT32, INT16, {11}, ints(-32768, 32767));
    cast(INT32, BOOL, {10}, ints(-2, 2));
    cast(INT16, INT64, {8}, ints(-32768, 32767));
    cast(INT16, FP32, {8}, ints(-32768, 32767));
    cast(BOOL, FP32, {12}, ints(0, 1));
    cast(BOOL, INT32, {12}, ints(0, 1));
    {
        case_builder cb(case_name("cast", INT64, "to_FP64"));
        rng r = cb.rng_for("x");
        cb.in("x", make_i64({17}, r, -(std::int64_t(1) << 62), std::int64_t(1) << 62));  // beyond 53 bits: rounded
        cb.op("cast", {{"X", {"x"}}}, {{"Out", {"out"}}}, {a_int("in_dtype", dt(INT64)), a_int("out_dtype", dt(FP64))});
        out.push_back(cb.done());
    }
    cast(INT64, INT32, {9}, ints(-2000000000, 2000000000));
    cast(FP64, FP64, {0, 3}, uni(-1, 1));
}

void sum_cases(case_list& out) {
    auto sum = [&](std::string_view variant, DataType t, const Shape& s, int n) {
        case_builder cb(case_name("sum", t, variant));
        std::vector<std::string> names;
        for (int k = 0; k < n; ++k) {
            names.push_back("x" + std::to_string(k));
            cb.in(names.back(), t, s, is_fp(t) ? uni(-2, 2) : ints(-100000, 100000));
        }
        cb.op("sum", {{"X", names}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    };
    sum("one_input", FP32, {7, 3}, 1);
    sum("two_inputs_1023", FP32, {1023}, 2);
    sum("four_inputs", FP64, {5, 9}, 4);
    sum("three_inputs", INT32, {13}, 3);
    sum("two_inputs", INT64, {2, 3}, 2);
    sum("empty_three_inputs", FP32, {0, 4}, 3);
    sum("large_three_inputs_307200", FP32, {600, 512}, 3);
}

void eval_op_cases(case_list& out) {
    auto top_k = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t k, const gen& g) {
        case_builder cb(case_name("top_k", t, variant));
        cb.in("x", t, s, g).op("top_k", {{"X", {"x"}}}, {{"Out", {"out"}}, {"Indices", {"indices"}}}, {a_int("k", k)});
        out.push_back(cb.done());
    };
    top_k("k3_7x1023", FP32, {7, 1023}, 3, uni(-5, 5));
    top_k("k1_5x10", FP64, {5, 10}, 1, uni(-5, 5));
    top_k("ties_k4_5x20", INT32, {5, 20}, 4, ints(0, 5));
    top_k("k_equals_n_3x9", INT64, {3, 9}, 9, ints(-3, 3));
    top_k("nan_and_inf_k3", FP32, {2, 8}, 3, special({1.0, nan, 2.0, inf, -inf, nan, 0.0, -0.0, 5.0, nan}, uni(-5, 5)));
    top_k("rank3_2x3x10_k2", FP32, {2, 3, 10}, 2, grid(-3, 3, 1.0));
    top_k("rank1_k5", FP64, {50}, 5, uni(-5, 5));

    auto accuracy = [&](std::string_view variant, DataType t, std::int64_t n, std::int64_t k, std::int64_t classes) {
        case_builder cb(case_name("accuracy", t, variant));
        rng ri = cb.rng_for("indices"), rl = cb.rng_for("label");
        cb.in("out", t, {n, k}, is_fp(t) ? uni(0, 1) : ints(0, 100));
        cb.in("indices", make_i64({n, k}, ri, 0, classes - 1)).in("label", labels({n, 1}, rl, classes));
        cb.op("accuracy", {{"Out", {"out"}}, {"Indices", {"indices"}}, {"Label", {"label"}}},
              {{"Accuracy", {"accuracy"}}, {"Correct", {"correct"}}, {"Total", {"total"}}});
        out.push_back(cb.done());
    };
    accuracy("k1_n64", FP32, 64, 1, 3);
    accuracy("k3_n37", FP64, 37, 3, 5);
    accuracy("k2_n10", INT32, 10, 2, 4);
    accuracy("k1_n7", INT64, 7, 1, 2);
    accuracy("empty", FP32, 0, 2, 3);
}

// ---- optimizers ------------------------------------------------------------------------------------

// ParamOut and the other outputs are variables of their own: in a one-op
// program a persistable written by its only op would be taken for that op's
// initializer (and fetching a fed name never runs the op).
void optimizer_cases(case_list& out) {
    auto sgd = [&](std::string_view variant, DataType t, const Shape& s) {
        case_builder cb(case_name("sgd", t, variant));
        cb.param("param", t, s, uni(-1, 1)).in("grad", t, s, uni(-1, 1)).param("lr", t, {1}, uni(0.01, 0.1));
        cb.op("sgd", {{"Param", {"param"}}, {"Grad", {"grad"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"param_out"}}});
        out.push_back(cb.done());
    };
    sgd("odd_1023", FP32, {1023});
    sgd("odd_7", FP64, {7});
    sgd("rank2_13x17", FP32, {13, 17});
    sgd("large_307200", FP32, {600, 512});

    auto momentum = [&](std::string_view variant, DataType t, const Shape& s, bool nesterov, double mu) {
        case_builder cb(case_name("momentum", t, variant));
        cb.param("param", t, s, uni(-1, 1)).in("grad", t, s, uni(-1, 1)).param("velocity", t, s, uni(-0.5, 0.5));
        cb.param("lr", t, {1}, uni(0.01, 0.1));
        std::vector<Attribute> at{a_float("mu", mu)};
        if (nesterov) at.push_back(a_bool("use_nesterov", true));
        cb.op("momentum", {{"Param", {"param"}}, {"Grad", {"grad"}}, {"Velocity", {"velocity"}}, {"LearningRate", {"lr"}}},
              {{"ParamOut", {"param_out"}}, {"VelocityOut", {"velocity_out"}}}, at);
        out.push_back(cb.done());
    };
    momentum("plain_1023", FP32, {1023}, false, 0.9);
    momentum("nesterov_1023", FP32, {1023}, true, 0.9);
    momentum("plain_mu_half_7", FP64, {7}, false, 0.5);
    momentum("nesterov_7", FP64, {7}, true, 0.9);

    auto adam = [&](std::string_view variant, DataType t, const Shape& s, int step, std::vector<Attribute> at,
                    const std::string& type = "adam") {
        case_builder cb(case_name(type, t, variant));
        double b1 = 0.9, b2 = 0.999;
        for (auto& a : at) {
            if (a.name == "beta1") b1 = a.f;
            if (a.name == "beta2") b2 = a.f;
        }
        cb.param("param", t, s, uni(-1, 1)).in("grad", t, s, uni(-1, 1)).param("lr", t, {1}, uni(0.001, 0.01));
        cb.param("moment1", t, s, uni(-0.1, 0.1)).param("moment2", t, s, uni(0, 0.01));
        cb.param("beta1_pow", t, {1}, [=](rng&, std::int64_t) { return std::pow(b1, step); });
        cb.param("beta2_pow", t, {1}, [=](rng&, std::int64_t) { return std::pow(b2, step); });
        cb.op(type,
              {{"Param", {"param"}}, {"Grad", {"grad"}}, {"LearningRate", {"lr"}}, {"Moment1", {"moment1"}},
               {"Moment2", {"moment2"}}, {"Beta1Pow", {"beta1_pow"}}, {"Beta2Pow", {"beta2_pow"}}},
              {{"ParamOut", {"param_out"}}, {"Moment1Out", {"moment1_out"}}, {"Moment2Out", {"moment2_out"}},
               {"Beta1PowOut", {"beta1_pow_out"}}, {"Beta2PowOut", {"beta2_pow_out"}}},
              at);
        out.push_back(cb.done());
    };
    adam("first_step_1023", FP32, {1023}, 1, {});
    adam("step10_7", FP64, {7}, 10, {});
    adam("attrs_step3_13x5", FP32, {13, 5}, 3, {a_float("beta1", 0.8), a_float("beta2", 0.95), a_float("epsilon", 1e-6)});
    adam("large_65539", FP32, {65539}, 2, {});
    adam("decay_1023", FP32, {1023}, 1, {a_float("coeff", 0.1), a_bool("with_decay", true)}, "adamw");
    adam("decay_lr_ratio_step4_7", FP64, {7}, 4, {a_float("lr_ratio", 0.5), a_bool("with_decay", true)}, "adamw");
    adam("without_decay_13x5", FP32, {13, 5}, 2, {}, "adamw");
    adam("first_step_1023", FP32, {1023}, 1, {}, "lamb");
    adam("attrs_step5_13x5", FP64, {13, 5}, 5, {a_float("weight_decay", 0.1), a_float("epsilon", 1e-8)}, "lamb");

    for (DataType t : {FP32, FP64}) {
        case_builder cb(case_name("adagrad", t, "odd_1023"));
        cb.param("param", t, {1023}, uni(-1, 1)).in("grad", t, {1023}, uni(-1, 1)).param("moment", t, {1023}, uni(0, 0.5));
        cb.param("lr", t, {1}, uni(0.01, 0.1));
        cb.op("adagrad", {{"Param", {"param"}}, {"Grad", {"grad"}}, {"Moment", {"moment"}}, {"LearningRate", {"lr"}}},
              {{"ParamOut", {"param_out"}}, {"MomentOut", {"moment_out"}}}, {a_float("epsilon", 1e-6)});
        out.push_back(cb.done());
        for (bool centered : {false, true}) {
            case_builder r(case_name("rmsprop", t, centered ? "centered_momentum_13x5" : "plain_13x5"));
            r.param("param", t, {13, 5}, uni(-1, 1)).param("mean_square", t, {13, 5}, uni(0.5, 1)).in("grad", t, {13, 5}, uni(-1, 1));
            r.param("moment", t, {13, 5}, uni(-0.1, 0.1)).param("lr", t, {1}, uni(0.01, 0.1));
            slots ins{{"Param", {"param"}}, {"MeanSquare", {"mean_square"}}, {"Grad", {"grad"}}, {"Moment", {"moment"}}, {"LearningRate", {"lr"}}};
            slots outs{{"ParamOut", {"param_out"}}, {"MomentOut", {"moment_out"}}, {"MeanSquareOut", {"mean_square_out"}}};
            if (centered) {
                r.param("mean_grad", t, {13, 5}, uni(-0.2, 0.2));
                ins.push_back({"MeanGrad", {"mean_grad"}});
                outs.push_back({"MeanGradOut", {"mean_grad_out"}});
            }
            r.op("rmsprop", ins, outs, {a_float("decay", 0.95), a_float("momentum", centered ? 0.9 : 0.0), a_bool("centered", centered),
                                        a_float("epsilon", 1e-6)});
            out.push_back(r.done());
        }
    }
}

// ---- chains that the session fuses (and runs in place) ----------------------------------------------

void chain_cases(case_list& out) {
    {
        // 307200 elements: fused, split on threads; b is a row operand.
        case_builder cb("chain/FP32/mul_add_row_tanh_sub_relu_307200");
        const Shape s{600, 512};
        cb.in("x", FP32, s, uni(-2, 2)).in("y", FP32, s, uni(-2, 2)).in("b", FP32, {512}, uni(-1, 1));
        cb.in("z", FP32, s, uni(-1, 1));
        cb.op("elementwise_mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"t1"}}});
        cb.op("elementwise_add", {{"X", {"t1"}}, {"Y", {"b"}}}, {{"Out", {"t2"}}});
        cb.op("tanh", {{"X", {"t2"}}}, {{"Out", {"t3"}}});
        cb.op("elementwise_sub", {{"X", {"t3"}}, {"Y", {"z"}}}, {{"Out", {"t4"}}});
        cb.op("relu", {{"X", {"t4"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }
    {
        // A scalar operand, the running value as Y, transcendental functions.
        case_builder cb("chain/FP64/add_scalar_exp_div_sigmoid_1023");
        cb.in("x", FP64, {1023}, uni(-2, 2)).in("s", FP64, {1}, uni(-1, 1)).in("y", FP64, {1023}, away_from_zero(0.5, 2));
        cb.op("elementwise_add", {{"X", {"x"}}, {"Y", {"s"}}}, {{"Out", {"t1"}}});
        cb.op("exp", {{"X", {"t1"}}}, {{"Out", {"t2"}}});
        cb.op("elementwise_div", {{"X", {"y"}}, {"Y", {"t2"}}}, {{"Out", {"t3"}}});
        cb.op("sigmoid", {{"X", {"t3"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }
    {
        // A product with a packed weight, then bias and activation (fused).
        case_builder cb("chain/FP32/matmul_weight_add_bias_relu_64x300x77");
        cb.in("x", FP32, {64, 300}, uni(-1, 1)).param("w", FP32, {300, 77}, uni(-0.2, 0.2)).in("b", FP32, {77}, uni(-1, 1));
        cb.op("matmul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"mm"}}});
        cb.op("elementwise_add", {{"X", {"mm"}}, {"Y", {"b"}}}, {{"Out", {"h"}}});
        cb.op("relu", {{"X", {"h"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }
    {
        // A chain broken by a non-fusible op (scale), and an intermediate with
        // two readers (not fused past it), over an odd size.
        case_builder cb("chain/FP32/log_sqrt_scale_square_max_min_4099");
        cb.in("x", FP32, {4099}, wide_positive(-6, 6)).in("y", FP32, {4099}, uni(-2, 2));
        cb.op("log", {{"X", {"x"}}}, {{"Out", {"t1"}}});
        cb.op("abs", {{"X", {"t1"}}}, {{"Out", {"t2"}}});
        cb.op("sqrt", {{"X", {"t2"}}}, {{"Out", {"t3"}}});
        cb.op("scale", {{"X", {"t3"}}}, {{"Out", {"t4"}}}, {a_float("scale", 1.5), a_float("bias", -0.5)});
        cb.op("square", {{"X", {"t4"}}}, {{"Out", {"t5"}}});
        cb.op("elementwise_max", {{"X", {"t5"}}, {"Y", {"y"}}}, {{"Out", {"t6"}}});
        cb.op("elementwise_min", {{"X", {"t6"}}, {"Y", {"t5"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }
    {
        // The fusible math of issue 16 in chains long enough for threads, cut by
        // gelu and leaky_relu, which are not fusible (a fused block has no attributes).
        case_builder cb("chain/FP32/sin_softsign_gelu_leaky_round_sign_rsqrt_300007");
        cb.in("x", FP32, {300007}, uni(-6, 6)).in("y", FP32, {300007}, uni(1.5, 2.5));
        cb.op("sin", {{"X", {"x"}}}, {{"Out", {"t1"}}});
        cb.op("softsign", {{"X", {"t1"}}}, {{"Out", {"t2"}}});
        cb.op("gelu", {{"X", {"t2"}}}, {{"Out", {"t3"}}});
        cb.op("leaky_relu", {{"X", {"t3"}}}, {{"Out", {"t4"}}}, {a_float("alpha", 0.25)});
        cb.op("elementwise_mul", {{"X", {"t4"}}, {"Y", {"y"}}}, {{"Out", {"t5"}}});
        cb.op("round", {{"X", {"t5"}}}, {{"Out", {"t6"}}});
        cb.op("sign", {{"X", {"t6"}}}, {{"Out", {"t7"}}});
        cb.op("elementwise_add", {{"X", {"t7"}}, {"Y", {"y"}}}, {{"Out", {"t8"}}});
        cb.op("rsqrt", {{"X", {"t8"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }
    {
        // Gradients of exp/sin/erf-based ops fused into one pass over Out@GRAD: the
        // unfused kernels must give the fused bits, tail elements included.
        case_builder cb("chain/FP32/sin_grad_cos_grad_softsign_grad_1023");
        const Shape s{1023};
        cb.in("x1", FP32, s, uni(-4, 4)).in("x2", FP32, s, uni(-4, 4)).in("x3", FP32, s, uni(-4, 4));
        cb.in("o", FP32, s, uni(-1, 1)).in("d", FP32, s, uni(-1, 1));
        cb.op("sin_grad", {{"X", {"x1"}}, {"Out", {"o"}}, {"Out@GRAD", {"d"}}}, {{"X@GRAD", {"g1"}}});
        cb.op("cos_grad", {{"X", {"x2"}}, {"Out", {"o"}}, {"Out@GRAD", {"g1"}}}, {{"X@GRAD", {"g2"}}});
        cb.op("softsign_grad", {{"X", {"x3"}}, {"Out", {"o"}}, {"Out@GRAD", {"g2"}}}, {{"X@GRAD", {"out"}}});
        out.push_back(cb.done());
    }
    {
        // Large FP64 chain with a row operand of rank 2: threads and blocks of whole rows.
        case_builder cb("chain/FP64/sub_row_square_mul_exp_300x1031");
        const Shape s{300, 1031};
        cb.in("x", FP64, s, uni(-2, 2)).in("r", FP64, {1, 1031}, uni(-1, 1)).in("y", FP64, s, uni(-1, 1));
        cb.op("elementwise_sub", {{"X", {"x"}}, {"Y", {"r"}}}, {{"Out", {"t1"}}});
        cb.op("square", {{"X", {"t1"}}}, {{"Out", {"t2"}}});
        cb.op("elementwise_mul", {{"X", {"t2"}}, {"Y", {"y"}}}, {{"Out", {"t3"}}});
        cb.op("exp", {{"X", {"t3"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }
}

// ---- window ops: conv2d, pool2d, flatten_contiguous_range ------------------------------------------

Attribute a_str(const char* n, std::string v) { return Attribute::make_string(n, std::move(v)); }

void window_cases(case_list& out) {
    struct conv_v {
        const char* name;
        Shape x, f;
        std::vector<Attribute> at;
    };
    const std::vector<conv_v> convs = {
        {"3x3_7x6", {2, 3, 7, 6}, {4, 3, 3, 3}, {}},
        {"stride2_pad1", {2, 3, 9, 7}, {5, 3, 3, 3}, {a_ints("strides", {2, 2}), a_ints("paddings", {1, 1})}},
        {"pad4_dilation2", {1, 2, 10, 9}, {3, 2, 3, 3},
         {a_ints("paddings", {0, 2, 1, 3}), a_ints("dilations", {2, 2})}},
        {"same_stride2", {1, 2, 7, 8}, {3, 2, 3, 4}, {a_ints("strides", {2, 2}), a_str("padding_algorithm", "SAME")}},
        {"groups2", {2, 4, 6, 5}, {6, 2, 3, 3}, {a_int("groups", 2), a_ints("paddings", {1, 1})}},
        {"1x1", {2, 16, 5, 5}, {8, 16, 1, 1}, {}},
        {"large_32ch_28x28", {4, 16, 28, 28}, {32, 16, 3, 3}, {a_ints("paddings", {1, 1})}},
    };
    std::size_t k = 0;
    for (const conv_v& v : convs) {
        const DataType t = k++ % 2 ? FP64 : FP32;
        case_builder cb(case_name("conv2d", t, v.name));
        cb.in("x", t, v.x, uni(-1, 1)).in("f", t, v.f, uni(-1, 1));
        cb.op("conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", {"out"}}}, v.at);
        out.push_back(cb.done());
        for (int want = 0; want < 3; ++want) {  // both gradients, Input's, Filter's
            const DataType tg = want == 1 ? (t == FP32 ? FP64 : FP32) : t;
            case_builder g(case_name("conv2d_grad", tg, std::string(v.name) + (want == 0 ? "" : want == 1 ? "_input" : "_filter")));
            const Shape os = forward_shape("conv2d", tg, {{"Input", v.x}, {"Filter", v.f}}, v.at, "Output");
            g.in("x", tg, v.x, uni(-1, 1)).in("f", tg, v.f, uni(-1, 1)).in("out@GRAD", tg, os, uni(-1, 1));
            slots outs;
            if (want != 2) outs.push_back({"Input@GRAD", {"x@GRAD"}});
            if (want != 1) outs.push_back({"Filter@GRAD", {"f@GRAD"}});
            g.op("conv2d_grad", {{"Input", {"x"}}, {"Filter", {"f"}}, {"Output@GRAD", {"out@GRAD"}}}, outs, v.at);
            out.push_back(g.done());
        }
    }
    for (DataType t : {FP32, FP64}) {
        const std::vector<Attribute> at{a_int("groups", 3), a_ints("paddings", {1, 1}), a_ints("strides", {2, 1})};
        case_builder cb(case_name("depthwise_conv2d", t, "3ch_x2"));
        cb.in("x", t, {2, 3, 7, 6}, uni(-1, 1)).in("f", t, {6, 1, 3, 3}, uni(-1, 1));
        cb.op("depthwise_conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", {"out"}}}, at);
        out.push_back(cb.done());
        case_builder g(case_name("depthwise_conv2d_grad", t, "3ch_x2"));
        const Shape os = forward_shape("depthwise_conv2d", t, {{"Input", {2, 3, 7, 6}}, {"Filter", {6, 1, 3, 3}}}, at, "Output");
        g.in("x", t, {2, 3, 7, 6}, uni(-1, 1)).in("f", t, {6, 1, 3, 3}, uni(-1, 1)).in("out@GRAD", t, os, uni(-1, 1));
        g.op("depthwise_conv2d_grad", {{"Input", {"x"}}, {"Filter", {"f"}}, {"Output@GRAD", {"out@GRAD"}}},
             {{"Input@GRAD", {"x@GRAD"}}, {"Filter@GRAD", {"f@GRAD"}}}, at);
        out.push_back(g.done());
    }

    struct pool_v {
        const char* name;
        Shape x;
        std::vector<Attribute> at;
    };
    const std::vector<pool_v> pools = {
        {"2x2_stride2", {2, 3, 8, 6}, {a_ints("ksize", {2, 2}), a_ints("strides", {2, 2})}},
        {"3x3_stride2_pad1", {2, 2, 7, 7}, {a_ints("ksize", {3, 3}), a_ints("strides", {2, 2}), a_ints("paddings", {1, 1})}},
        {"ceil_not_exclusive", {1, 2, 8, 7},
         {a_ints("ksize", {3, 3}), a_ints("strides", {2, 2}), a_ints("paddings", {1, 1}), a_bool("ceil_mode", true),
          a_bool("exclusive", false)}},
        {"global", {2, 3, 5, 4}, {a_ints("ksize", {1, 1}), a_bool("global_pooling", true)}},
        {"adaptive_3x2", {1, 2, 7, 5}, {a_ints("ksize", {3, 2}), a_bool("adaptive", true)}},
    };
    k = 0;
    for (const pool_v& v : pools)
        for (const char* type : {"max", "avg"}) {
            const DataType t = (k++ / 2 + (std::string(type) == "avg")) % 2 ? FP64 : FP32;  // each type in both
            std::vector<Attribute> at = v.at;
            at.push_back(a_str("pooling_type", type));
            case_builder cb(case_name("pool2d", t, std::string(type) + "_" + v.name));
            cb.in("x", t, v.x, uni(-1, 1)).op("pool2d", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
            // The gradient. A max routes each output's gradient to the first
            // input equal to Out: small integers make such ties common.
            case_builder g(case_name("pool2d_grad", t, std::string(type) + "_" + v.name));
            const Shape os = forward_shape("pool2d", t, {{"X", v.x}}, at, "Out");
            g.in("x", t, v.x, ints(-2, 2)).in("out", t, os, ints(-2, 2)).in("out@GRAD", t, os, uni(-1, 1));
            g.op("pool2d_grad", {{"X", {"x"}}, {"Out", {"out"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(g.done());
        }

    const Shape flat_shapes[] = {{2, 3, 4}, {5, 2, 2}, {2, 3, 4, 5}, {6, 1, 2}, {3, 3, 3}, {2, 2, 2, 2}, {0, 4, 2}};
    for (std::size_t i = 0; i < std::size(all_dtypes); ++i) {
        const DataType t = all_dtypes[i];
        const Shape& xs = flat_shapes[i];
        const std::vector<Attribute> at{a_int("start_axis", i % 2 ? 0 : 1), a_int("stop_axis", -1)};
        case_builder cb(case_name("flatten_contiguous_range", t, "shape_" + std::to_string(i)));
        cb.in("x", t, xs, values_for(t)).op("flatten_contiguous_range", {{"X", {"x"}}},
                                            {{"Out", {"out"}}, {"XShape", {"xshape"}}}, at);
        out.push_back(cb.done());
        case_builder g(case_name("flatten_contiguous_range_grad", t, "shape_" + std::to_string(i)));
        const Shape os = forward_shape("flatten_contiguous_range", t, {{"X", xs}}, at, "Out");
        std::vector<std::int64_t> xshape{0};
        for (int d = 0; d < xs.rank(); ++d) xshape.push_back(xs[d]);
        g.in("xshape", t, Shape(xshape), values_for(t)).in("out@GRAD", t, os, values_for(t));
        g.op("flatten_contiguous_range_grad", {{"XShape", {"xshape"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}},
             at);
        out.push_back(g.done());
    }
}

void norm_cases(case_list& out) {
    struct bn_v {
        const char* name;
        Shape x;
        std::vector<Attribute> at;
    };
    const std::vector<bn_v> vs = {
        {"train_2x3x5x4", {2, 3, 5, 4}, {}},
        {"train_rank2_16x7", {16, 7}, {a_float("momentum", 0.5), a_float("epsilon", 1e-3)}},
        {"is_test_3x4x3x3", {3, 4, 3, 3}, {a_bool("is_test", true)}},
        {"global_stats_2x2x9", {2, 2, 9}, {a_bool("use_global_stats", true)}},
        {"large_8x32x28x28", {8, 32, 28, 28}, {}},
    };
    std::size_t k = 0;
    for (const bn_v& v : vs) {
        const DataType t = k++ % 2 ? FP64 : FP32;
        const Shape c{v.x[1]};
        case_builder cb(case_name("batch_norm", t, v.name));
        cb.in("x", t, v.x, uni(-2, 3)).in("scale", t, c, uni(0.5, 2)).in("bias", t, c, uni(-1, 1));
        cb.in("mean", t, c, uni(-0.5, 0.5)).in("var", t, c, uni(0.5, 1.5));
        cb.op("batch_norm",
              {{"X", {"x"}}, {"Scale", {"scale"}}, {"Bias", {"bias"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}},
              {{"Y", {"y"}}, {"MeanOut", {"mean_out"}}, {"VarianceOut", {"var_out"}}, {"SavedMean", {"saved_mean"}},
               {"SavedVariance", {"saved_inv"}}},
              v.at);
        out.push_back(cb.done());
        case_builder g(case_name("batch_norm_grad", t == FP32 ? FP64 : FP32, v.name));
        const DataType tg = t == FP32 ? FP64 : FP32;
        g.in("x", tg, v.x, uni(-2, 3)).in("scale", tg, c, uni(0.5, 2)).in("bias", tg, c, uni(-1, 1));
        g.in("saved_mean", tg, c, uni(-0.5, 0.5)).in("saved_inv", tg, c, uni(0.5, 2));
        g.in("mean", tg, c, uni(-0.5, 0.5)).in("var", tg, c, uni(0.5, 1.5)).in("y@GRAD", tg, v.x, uni(-1, 1));
        g.op("batch_norm_grad",
             {{"X", {"x"}}, {"Scale", {"scale"}}, {"Bias", {"bias"}}, {"SavedMean", {"saved_mean"}},
              {"SavedVariance", {"saved_inv"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}, {"Y@GRAD", {"y@GRAD"}}},
             {{"X@GRAD", {"x@GRAD"}}, {"Scale@GRAD", {"scale@GRAD"}}, {"Bias@GRAD", {"bias@GRAD"}}}, v.at);
        out.push_back(g.done());
    }
}

void layer_norm_cases(case_list& out) {
    struct ln_v {
        const char* name;
        DataType t;
        Shape x;
        int axis;
        bool scale, bias;
        std::vector<Attribute> at;
    };
    const std::vector<ln_v> vs = {
        {"rows_7x33", FP32, {7, 33}, 1, true, true, {}},
        {"axis2_no_scale_2x3x5", FP64, {2, 3, 5}, 2, false, true, {a_int("begin_norm_axis", 2)}},
        {"axis1_rank3_eps_2x3x4", FP64, {2, 3, 4}, 1, true, false, {a_float("epsilon", 1e-3)}},
        {"no_params_5x1", FP32, {5, 1}, 1, false, false, {}},
        {"large_300x260", FP32, {300, 260}, 1, true, true, {}},
    };
    for (const ln_v& v : vs) {
        std::int64_t left = 1, right = 1;
        for (int i = 0; i < v.x.rank(); ++i) (i < v.axis ? left : right) *= v.x[i];
        auto params = [&](case_builder& cb, DataType t, slots& ins) {
            if (v.scale) {
                cb.in("scale", t, {right}, uni(0.5, 2));
                ins.push_back({"Scale", {"scale"}});
            }
            if (v.bias) {
                cb.in("bias", t, {right}, uni(-1, 1));
                ins.push_back({"Bias", {"bias"}});
            }
        };
        case_builder cb(case_name("layer_norm", v.t, v.name));
        cb.in("x", v.t, v.x, uni(-2, 3));
        slots ins{{"X", {"x"}}};
        params(cb, v.t, ins);
        cb.op("layer_norm", ins, {{"Y", {"y"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}}, v.at);
        out.push_back(cb.done());

        const DataType tg = v.t == FP32 ? FP64 : FP32;
        case_builder g(case_name("layer_norm_grad", tg, v.name));
        g.in("x", tg, v.x, uni(-2, 3)).in("mean", tg, {left}, uni(-0.5, 1)).in("var", tg, {left}, uni(0.5, 2));
        g.in("y@GRAD", tg, v.x, uni(-1, 1));
        slots gins{{"X", {"x"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}, {"Y@GRAD", {"y@GRAD"}}};
        params(g, tg, gins);
        slots gouts{{"X@GRAD", {"x@GRAD"}}};
        if (v.scale) gouts.push_back({"Scale@GRAD", {"scale@GRAD"}});
        gouts.push_back({"Bias@GRAD", {"bias@GRAD"}});
        g.op("layer_norm_grad", gins, gouts, v.at);
        out.push_back(g.done());
    }
}

void lookup_table_cases(case_list& out) {
    struct lt_v {
        const char* name;
        bool v2;
        DataType t, id_t;
        std::int64_t rows, width;
        Shape ids;
        std::int64_t pad;
    };
    // Few rows against many ids: repeated ids, so the gradient adds rows up.
    const std::vector<lt_v> vs = {
        {"rows_10x16_ids_6x1", false, FP32, INT64, 10, 16, {6, 1}, -1},
        {"padding_2_rows_5x3_ids_2x3x1", false, FP64, INT64, 5, 3, {2, 3, 1}, 2},
        {"int32_ids_3x4_rows_7x33", true, FP32, INT32, 7, 33, {3, 4}, -1},
        {"padding_0_rows_4x5_ids_9", true, FP64, INT64, 4, 5, {9}, 0},
        {"empty_ids_0", true, FP32, INT64, 3, 4, {0}, -1},
    };
    for (const lt_v& v : vs) {
        const std::string type = v.v2 ? "lookup_table_v2" : "lookup_table";
        const std::vector<Attribute> at{a_long("padding_idx", v.pad)};
        case_builder cb(case_name(type, v.t, v.name));
        cb.in("w", v.t, {v.rows, v.width}, uni(-2, 2)).in("ids", v.id_t, v.ids, ints(0, v.rows - 1));
        cb.op(type, {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());

        Shape os;
        for (int i = 0; i < v.ids.rank() - (v.v2 ? 0 : 1); ++i) os.push_back(v.ids[i]);
        os.push_back(v.width);
        case_builder g(case_name(type + "_grad", v.t, v.name));
        g.in("w", v.t, {v.rows, v.width}, uni(-2, 2)).in("ids", v.id_t, v.ids, ints(0, v.rows - 1));
        g.in("out@GRAD", v.t, os, uni(-1, 1));
        g.op(type + "_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"W@GRAD", {"w@GRAD"}}}, at);
        out.push_back(g.done());
    }
}

// arg_max / arg_min (every X dtype; ties from a coarse grid), cumsum and
// its gradient, one_hot / one_hot_v2 (INT32 and INT64 ids; some out of
// range with allow_out_of_range).
void index_cases(case_list& out) {
    for (const char* op : {"arg_max", "arg_min"}) {
        auto one = [&](std::string_view variant, DataType t, const Shape& s, std::vector<Attribute> at) {
            case_builder cb(case_name(op, t, variant));
            cb.in("x", t, s, is_fp(t) ? grid(-3, 3, 0.5) : ints(-5, 5)).op(op, {{"X", {"x"}}}, {{"Out", {"out"}}}, std::move(at));
            out.push_back(cb.done());
        };
        one("axis1_7x33", FP32, {7, 33}, {a_long("axis", 1)});
        one("axis0_keepdims_int32_33x7", FP64, {33, 7}, {a_long("axis", 0), a_bool("keepdims", true), a_int("dtype", 2)});
        one("axis_minus2_3x9x5", INT32, {3, 9, 5}, {a_long("axis", -2)});
        one("flatten_4x6", INT64, {4, 6}, {a_long("axis", 0), a_bool("flatten", true)});
    }
    auto cum = [&](std::string_view variant, DataType t, const Shape& s, std::vector<Attribute> at) {
        case_builder cb(case_name("cumsum", t, variant));
        cb.in("x", t, s, is_fp(t) ? uni(-1, 1) : ints(-1000, 1000)).op("cumsum", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
        if (!is_fp(t)) return;
        const bool flat = std::any_of(at.begin(), at.end(), [](const Attribute& a) { return a.name == "flatten" && a.b; });
        case_builder g(case_name("cumsum_grad", t, variant));
        g.in("x", t, s, uni(-1, 1)).in("out@GRAD", t, flat ? Shape{s.numel()} : s, uni(-1, 1));
        g.op("cumsum_grad", {{"X", {"x"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, std::move(at));
        out.push_back(g.done());
    };
    cum("last_axis_7x1023", FP32, {7, 1023}, {});
    cum("axis0_exclusive_33x7", FP64, {33, 7}, {a_int("axis", 0), a_bool("exclusive", true)});
    cum("axis1_reverse_3x9x5", FP32, {3, 9, 5}, {a_int("axis", 1), a_bool("reverse", true)});
    cum("flatten_exclusive_reverse_4x6", FP64, {4, 6}, {a_bool("flatten", true), a_bool("exclusive", true), a_bool("reverse", true)});
    cum("axis1_5x9", INT32, {5, 9}, {a_int("axis", 1)});
    cum("axis0_reverse_6x4", INT64, {6, 4}, {a_int("axis", 0), a_bool("reverse", true)});
    for (bool v2 : {false, true}) {
        const std::string type = v2 ? "one_hot_v2" : "one_hot";
        auto one = [&](std::string_view variant, DataType t, const Shape& s, std::int64_t depth, DataType ot, bool allow) {
            case_builder cb(case_name(type, t, variant));
            cb.in("x", t, s, ints(allow ? -2 : 0, allow ? depth + 1 : depth - 1));
            cb.op(type, {{"X", {"x"}}}, {{"Out", {"out"}}},
                  {a_int("depth", depth), a_int("dtype", static_cast<int>(ot)), a_bool("allow_out_of_range", allow)});
            out.push_back(cb.done());
        };
        one("depth10_fp32", INT64, v2 ? Shape{6, 5} : Shape{6, 5, 1}, 10, FP32, false);
        one("depth3_int64_out_of_range_allowed", INT32, v2 ? Shape{17} : Shape{17, 1}, 3, INT64, true);
        one("depth7_fp64", INT32, v2 ? Shape{2, 3, 4} : Shape{2, 3, 1}, 7, FP64, false);
        one("depth4_int32", INT64, v2 ? Shape{9} : Shape{9, 1}, 4, INT32, false);
    }
}

// stack / unstack and their grads, tile / expand / expand_v2 and theirs, pad,
// gather, scatter, elementwise_mod / floordiv (issue 16).
void breadth_cases(case_list& out) {
    const Shape stack_shapes[] = {{2, 3}, {4}, {3, 1, 2}, {5, 2}, {2, 2}, {3, 33}, {2, 3, 4}};
    const std::int64_t stack_axes[] = {0, -1, 1, 2, -3, 1, 3};
    for (std::size_t k = 0; k < std::size(all_dtypes); ++k) {
        const DataType t = all_dtypes[k];
        const Shape& s = stack_shapes[k];
        const std::int64_t a = stack_axes[k];
        const std::string variant = "axis" + std::to_string(a) + "_" + std::to_string(k);
        case_builder cb(case_name("stack", t, variant));
        std::vector<std::string> names;
        for (int i = 0; i < 3; ++i) {
            names.push_back("x" + std::to_string(i));
            cb.in(names.back(), t, s, values_for(t));
        }
        cb.op("stack", {{"X", names}}, {{"Y", {"y"}}}, {a_int("axis", a)});
        out.push_back(cb.done());
        // unstack cuts a stacked shape back into its 3 parts.
        Shape ys;  // s with a dim of 3 at a (counted in the stacked rank)
        const int at = static_cast<int>(a < 0 ? a + s.rank() + 1 : a);
        for (int i = 0; i <= s.rank(); ++i) ys.push_back(i == at ? 3 : s[i < at ? i : i - 1]);
        case_builder u(case_name("unstack", t, variant));
        u.in("x", t, ys, values_for(t)).op("unstack", {{"X", {"x"}}}, {{"Y", {"y0", "y1", "y2"}}},
                                          {a_int("axis", a), a_int("num", 3)});
        out.push_back(u.done());
        if (!is_fp(t)) continue;
        case_builder g(case_name("stack_grad", t, variant));
        g.in("y@GRAD", t, ys, values_for(t));
        g.op("stack_grad", {{"Y@GRAD", {"y@GRAD"}}}, {{"X@GRAD", {"x0@GRAD", "x1@GRAD", "x2@GRAD"}}}, {a_int("axis", a)});
        out.push_back(g.done());
        case_builder ug(case_name("unstack_grad", t, variant));
        ug.in("y0@GRAD", t, s, values_for(t)).in("y1@GRAD", t, s, values_for(t)).in("y2@GRAD", t, s, values_for(t));
        ug.op("unstack_grad", {{"Y@GRAD", {"y0@GRAD", "y1@GRAD", "y2@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}},
              {a_int("axis", a), a_int("num", 3)});
        out.push_back(ug.done());
    }

    struct tile_v {
        const char* op;
        const char* attr;
        const char* name;
        Shape x;
        std::vector<std::int64_t> v;
    };
    const tile_v tiles[] = {
        {"tile", "repeat_times", "2x3_by_2x2", {2, 3}, {2, 2}},
        {"tile", "repeat_times", "longer_list_5", {5}, {3, 1, 2}},
        {"tile", "repeat_times", "shorter_list_2x1x3", {2, 1, 3}, {4}},
        {"tile", "repeat_times", "row_1x257_by_9", {1, 257}, {9, 1}},
        {"expand", "expand_times", "3x1x2_by_1x4x3", {3, 1, 2}, {1, 4, 3}},
        {"expand", "expand_times", "ones_4x5", {4, 5}, {1, 1}},
        {"expand_v2", "shape", "column_6x1_to_6x7", {6, 1}, {6, 7}},
        {"expand_v2", "shape", "new_dims_3_to_2x4x3", {3}, {2, 4, -1}},
        {"expand_v2", "shape", "keep_1x5_to_3x5", {1, 5}, {3, -1}},
    };
    for (const tile_v& v : tiles) {
        const std::vector<Attribute> at{a_ints(v.attr, v.v)};
        for (DataType t : {BOOL, INT32, INT64, FP32, FP64}) {
            case_builder cb(case_name(v.op, t, v.name));
            cb.in("x", t, v.x, values_for(t)).op(v.op, {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
            if (!is_fp(t)) continue;
            const std::string grad = std::string(v.op) + "_grad";
            case_builder g(case_name(grad, t, v.name));
            g.in("x", t, v.x, values_for(t)).in("out@GRAD", t, forward_shape(v.op, t, {{"X", v.x}}, at, "Out"), values_for(t));
            g.op(grad, {{"X", {"x"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(g.done());
        }
    }

    struct pad_v {
        const char* name;
        Shape x;
        std::vector<std::int64_t> p;
        double value;
    };
    const pad_v pads[] = {{"2d_3x4", {3, 4}, {1, 2, 0, 3}, 0.0},
                          {"3d_value_2x3x5", {2, 3, 5}, {0, 1, 2, 0, 1, 1}, -2.5},
                          {"none_4", {4}, {0, 0}, 1.0},
                          {"empty_0x2", {0, 2}, {1, 1, 2, 0}, 7.0}};
    for (const pad_v& v : pads) {
        const std::vector<Attribute> at{a_ints("paddings", v.p), Attribute::make_float("pad_value", v.value)};
        for (DataType t : {INT32, INT64, FP32, FP64}) {
            case_builder cb(case_name("pad", t, v.name));
            cb.in("x", t, v.x, values_for(t)).op("pad", {{"X", {"x"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
            if (!is_fp(t)) continue;
            case_builder g(case_name("pad_grad", t, v.name));
            g.in("out@GRAD", t, forward_shape("pad", t, {{"X", v.x}}, at, "Out"), values_for(t));
            g.op("pad_grad", {{"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(g.done());
        }
    }

    struct gather_v {
        const char* name;
        Shape x;
        Shape index;
        std::int64_t axis;
        DataType id_type;
        bool overwrite;
    };
    const gather_v gathers[] = {{"rows_10x20_by_4", {10, 20}, {4}, 0, INT64, false},
                                {"axis1_3x7x2_by_9_int32", {3, 7, 2}, {9}, 1, INT32, false},
                                {"column_ids_5x3_by_6x1", {5, 3}, {6, 1}, 0, INT64, true},
                                {"last_axis_4x33_by_40", {4, 33}, {40}, -1, INT32, true}};
    for (const gather_v& v : gathers) {
        const std::vector<Attribute> at{a_bool("overwrite", v.overwrite), a_int("axis", v.axis)};
        const std::int64_t d = v.x[static_cast<int>(v.axis < 0 ? v.axis + v.x.rank() : v.axis)];
        for (DataType t : {INT32, INT64, FP32, FP64}) {
            case_builder cb(case_name("gather", t, v.name));
            cb.in("x", t, v.x, values_for(t)).in("index", v.id_type, v.index, ints(0, d - 1));
            cb.op("gather", {{"X", {"x"}}, {"Index", {"index"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
            if (!is_fp(t)) continue;
            case_builder g(case_name("gather_grad", t, v.name));
            g.in("x", t, v.x, values_for(t)).in("index", v.id_type, v.index, ints(0, d - 1));
            Shape os = v.x;
            os[static_cast<int>(v.axis < 0 ? v.axis + v.x.rank() : v.axis)] = v.index[0];
            g.in("out@GRAD", t, os, values_for(t));
            g.op("gather_grad", {{"X", {"x"}}, {"Index", {"index"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}}, at);
            out.push_back(g.done());
        }
    }

    struct scatter_v {
        const char* name;
        Shape x;
        std::int64_t n;
        DataType id_type;
        bool overwrite;
    };
    const scatter_v scatters[] = {{"overwrite_8x5_by_6", {8, 5}, 6, INT64, true},
                                  {"add_8x5_by_12_int32", {8, 5}, 12, INT32, false},
                                  {"overwrite_3d_4x2x3_by_3", {4, 2, 3}, 3, INT32, true},
                                  {"add_1d_9_by_20", {9}, 20, INT64, false}};
    for (const scatter_v& v : scatters) {
        const std::vector<Attribute> at{a_bool("overwrite", v.overwrite)};
        Shape us = v.x;
        us[0] = v.n;
        for (DataType t : {INT32, INT64, FP32, FP64}) {
            case_builder cb(case_name("scatter", t, v.name));
            cb.in("x", t, v.x, values_for(t)).in("ids", v.id_type, {v.n}, ints(0, v.x[0] - 1)).in("updates", t, us, values_for(t));
            cb.op("scatter", {{"X", {"x"}}, {"Ids", {"ids"}}, {"Updates", {"updates"}}}, {{"Out", {"out"}}}, at);
            out.push_back(cb.done());
            if (!is_fp(t)) continue;
            case_builder g(case_name("scatter_grad", t, v.name));
            g.in("ids", v.id_type, {v.n}, ints(0, v.x[0] - 1)).in("updates", t, us, values_for(t)).in("out@GRAD", t, v.x, values_for(t));
            g.op("scatter_grad", {{"Ids", {"ids"}}, {"Updates", {"updates"}}, {"Out@GRAD", {"out@GRAD"}}},
                 {{"X@GRAD", {"x@GRAD"}}, {"Updates@GRAD", {"updates@GRAD"}}}, at);
            out.push_back(g.done());
        }
    }

    for (const char* op : {"elementwise_mod", "elementwise_floordiv"}) {
        auto one = [&](std::string_view variant, DataType t, const Shape& xs, const Shape& ys) {
            case_builder cb(case_name(op, t, variant));
            cb.in("x", t, xs, is_fp(t) ? uni(-9, 9) : ints(-1000, 1000)).in("y", t, ys, is_fp(t) ? away_from_zero(0.5, 4) : nonzero_ints(1, 9));
            cb.op(op, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
            out.push_back(cb.done());
        };
        one("same_shape_3x341", FP32, {3, 341}, {3, 341});
        one("broadcast_4x1x5_3x5", FP64, {4, 1, 5}, {3, 5});
        one("scalar_y_5x7", INT32, {5, 7}, {1});
        one("same_shape_33", INT64, {33}, {33});
    }
}

void logic_cases(case_list& out) {
    auto bin = [&](const std::string& type, std::string_view variant, DataType t, const Shape& xs, const Shape& ys,
                   const gen& g, std::vector<Attribute> at = {}) {
        case_builder cb(case_name(type, t, variant));
        cb.in("x", t, xs, g).in("y", t, ys, g);
        cb.op(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, at);
        out.push_back(cb.done());
    };
    // Integers from a small range: many ties, so == and <= differ from < .
    // Every dtype of every op (broadcast rows); integers from a small range,
    // so ties are many.
    const DataType logic_types[] = {BOOL, INT32, INT64, FP32, FP64};
    for (const char* type : {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal",
                             "logical_and", "logical_or", "logical_xor"})
        for (DataType t : logic_types) bin(type, "rows_4x5_5", t, {4, 5}, {5}, ints(-2, 2));
    for (const char* type : {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"}) {
        bin(type, "ties_5x7", INT64, {5, 7}, {5, 7}, ints(-2, 2));
        bin(type, "broadcast_3x4_4", FP32, {3, 4}, {4}, grid(-2, 2, 0.5));
    }
    bin("less_than", "axis0_4x3_4", FP64, {4, 3}, {4}, grid(-2, 2, 0.5), {a_int("axis", 0)});
    bin("equal", "nan_and_zeros", FP64, {6}, {6}, special({nan, 0.0, -0.0, 1.0, nan, 0.0}, uni(-1, 1)));
    bin("not_equal", "bool_4x4", BOOL, {4, 4}, {4, 4}, ints(0, 1));
    for (const char* type : {"logical_and", "logical_or", "logical_xor"}) {
        bin(type, "bool_6x5", BOOL, {6, 5}, {6, 5}, ints(0, 1));
        bin(type, "int32_broadcast_2x3x4_3x1", INT32, {2, 3, 4}, {3, 1}, ints(-1, 1));
        bin(type, "fp32_nan_6", FP32, {6}, {6}, special({nan, 0.0, -0.0, 2.0, nan, 0.0}, grid(-1, 1, 1)));
    }
    for (DataType t : logic_types) {
        case_builder cb(case_name("logical_not", t, "7x3"));
        cb.in("x", t, {7, 3}, ints(-1, 1)).op("logical_not", {{"X", {"x"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
    }

    auto where = [&](std::string_view variant, DataType t, const Shape& s) {
        case_builder cb(case_name("where", t, variant));
        cb.in("cond", BOOL, s, ints(0, 1)).in("x", t, s, uni(-3, 3)).in("y", t, s, uni(-3, 3));
        cb.op("where", {{"Condition", {"cond"}}, {"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
        out.push_back(cb.done());
        case_builder g(case_name("where_grad", t == FP32 ? FP64 : FP32, variant));
        const DataType tg = t == FP32 ? FP64 : FP32;
        g.in("cond", BOOL, s, ints(0, 1)).in("x", tg, s, uni(-3, 3)).in("y", tg, s, uni(-3, 3));
        g.in("out@GRAD", tg, s, uni(-1, 1));
        g.op("where_grad", {{"Condition", {"cond"}}, {"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"out@GRAD"}}},
             {{"X@GRAD", {"x@GRAD"}}, {"Y@GRAD", {"y@GRAD"}}});
        out.push_back(g.done());
    };
    where("5x7", FP32, {5, 7});
    where("rank3_2x3x33", FP64, {2, 3, 33});
    case_builder wl(case_name("where", INT64, "int_3x5"));
    wl.in("cond", BOOL, {3, 5}, ints(0, 1)).in("x", INT64, {3, 5}, ints(-9, 9)).in("y", INT64, {3, 5}, ints(-9, 9));
    wl.op("where", {{"Condition", {"cond"}}, {"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
    out.push_back(wl.done());
    case_builder wi(case_name("where", INT32, "int_4x4"));
    wi.in("cond", BOOL, {4, 4}, ints(0, 1)).in("x", INT32, {4, 4}, ints(-9, 9)).in("y", INT32, {4, 4}, ints(-9, 9));
    wi.op("where", {{"Condition", {"cond"}}, {"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
    out.push_back(wi.done());
}

void dropout_cases(case_list& out) {
    auto attrs = [](double prob, bool upscale, bool test) {
        return std::vector<Attribute>{a_float("dropout_prob", prob), a_bool("fix_seed", true), a_int("seed", 17),
                                      a_bool("is_test", test),
                                      a_str("dropout_implementation", upscale ? "upscale_in_train" : "downgrade_in_infer")};
    };
    struct v {
        const char* name;
        DataType t;
        double prob;
        bool upscale, test;
    };
    for (const v& c : {v{"p03_downgrade", FP32, 0.3, false, false}, v{"p05_upscale", FP64, 0.5, true, false},
                       v{"p1_upscale", FP32, 1.0, true, false}, v{"test_downgrade", FP64, 0.25, false, true},
                       v{"large_upscale_300000", FP32, 0.1, true, false}}) {
        const Shape sh = std::string(c.name).rfind("large", 0) == 0 ? Shape{300, 1000} : Shape{7, 33};
        case_builder cb(case_name("dropout", c.t, c.name));
        cb.in("x", c.t, sh, uni(-2, 2)).op("dropout", {{"X", {"x"}}}, {{"Out", {"out"}}, {"Mask", {"mask"}}},
                                           attrs(c.prob, c.upscale, c.test));
        out.push_back(cb.done());
        if (c.test) continue;
        case_builder g(case_name("dropout_grad", c.t == FP32 ? FP64 : FP32, c.name));
        const DataType tg = c.t == FP32 ? FP64 : FP32;
        g.in("mask", BOOL, sh, ints(0, 1)).in("out@GRAD", tg, sh, uni(-1, 1));
        g.op("dropout_grad", {{"Mask", {"mask"}}, {"Out@GRAD", {"out@GRAD"}}}, {{"X@GRAD", {"x@GRAD"}}},
             attrs(c.prob, c.upscale, false));
        out.push_back(g.done());
    }
    {  // the seed from the Seed input
        case_builder cb(case_name("dropout", FP32, "seed_input"));
        cb.in("x", FP32, {5, 40}, uni(-2, 2)).in("seed", INT32, {1}, ints(1, 1000));
        cb.op("dropout", {{"X", {"x"}}, {"Seed", {"seed"}}}, {{"Out", {"out"}}, {"Mask", {"mask"}}},
              {a_float("dropout_prob", 0.4)});
        out.push_back(cb.done());
    }
    for (DataType t : {INT32, INT64, FP32, FP64}) {
        case_builder cb(case_name("increment", t, "step"));
        cb.in("x", t, {1}, ints(-100, 100)).op("increment", {{"X", {"x"}}}, {{"Out", {"out"}}}, {a_float("step", 3.0)});
        out.push_back(cb.done());
    }
}

}  // namespace

std::vector<op_case> all_op_cases() {
    case_list out;
    binary_cases(out);
    binary_grad_cases(out);
    unary_cases(out);
    unary_grad_cases(out);
    activation_attr_cases(out);
    layer_norm_cases(out);
    lookup_table_cases(out);
    index_cases(out);
    breadth_cases(out);
    logic_cases(out);
    scale_assign_cases(out);
    fill_cases(out);
    mul_cases(out);
    matmul_cases(out);
    softmax_cases(out);
    log_softmax_cases(out);
    loss_cases(out);
    reduce_cases(out);
    shape_op_cases(out);
    cast_cases(out);
    sum_cases(out);
    eval_op_cases(out);
    optimizer_cases(out);
    chain_cases(out);
    window_cases(out);
    norm_cases(out);
    dropout_cases(out);
    return out;
}

std::vector<Tensor> run_op_case(const op_case& c, const SessionOptions& options, op_case_run_info* info,
                                persistables where) {
    Session<cpu> session(c.program, options);
    std::vector<std::string> fed;
    std::vector<Tensor> out = run_op_case_in(session, c, where, &fed);
    if (info) {
        const std::vector<TargetRef> targets(c.fetch.begin(), c.fetch.end());
        info->fused_chains = session.fused_steps(targets, fed).size();
        info->packed_steps = session.packed_steps(targets, fed).size();
        info->arena_bytes = session.memory_plan(targets, fed).host().arena_bytes;
    }
    return out;
}

std::uint64_t tensor_hash(const Tensor& t) {
    std::uint64_t h = fnv_offset;
    auto byte = [&](unsigned char b) {
        h ^= b;
        h *= fnv_prime;
    };
    auto le = [&](std::uint64_t v, int bytes) {
        for (int k = 0; k < bytes; ++k) byte(static_cast<unsigned char>(v >> (8 * k)));
    };
    le(static_cast<std::uint32_t>(t.dtype()), 4);
    le(static_cast<std::uint32_t>(t.rank()), 4);
    for (auto d : t.shape()) le(static_cast<std::uint64_t>(d), 8);
    const auto* p = static_cast<const unsigned char*>(t.raw());
    for (std::size_t i = 0; i < t.bytes(); ++i) byte(p[i]);
    return h;
}

std::string hash_hex(std::uint64_t h) {
    static const char digits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, h >>= 4) s[static_cast<std::size_t>(i)] = digits[h & 0xf];
    return s;
}
