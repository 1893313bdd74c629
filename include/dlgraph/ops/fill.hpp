// Ops that create values, their definitions: fill_constant, uniform_random,
// gaussian_random, fill_any_like. The fills are in kernels/fill.hpp (the
// kernel core), the CPU kernels in cpu/fill.hpp. Random ops draw from
// std::mt19937_64 seeded by the `seed` attribute, so a seed gives the same
// values on every run and machine; seed 0 draws a fresh seed each run.
#pragma once

#include <string>

#include "dlgraph/op.hpp"

namespace dlgraph::ops {

inline void fill_infer(const InferContext& c) {
    Shape s(c.attr(0).ints);
    for (auto d : s)
        if (d < 0) c.fail("dlgraph.shape.attr", "shape " + to_string(s) + " must be fully known");
    c.set(0, dtype_from_int(c.attr(2).i), s);
}

struct fill_constant_op {
    enum { shape = 0, value = 1, dtype = 2 };
};
inline OpDef fill_constant_def() {
    OpDef d{"fill_constant", {}, {{"Out"}},
            {{"shape", Attribute::make_ints("shape", {}), true},
             {"value", Attribute::make_float("value", 0.0)},
             {"dtype", Attribute::make_int("dtype", static_cast<int>(DataType::FP32))}},
            &fill_infer, -1, fill_constant_op::dtype};
    d.doc = "Out = a tensor of `shape` filled with `value`";
    return d;
}

struct uniform_random_op {
    enum { shape = 0, min = 1, max = 2, seed = 3, dtype = 4 };
};
inline void uniform_infer(const InferContext& c) {
    if (c.attr(uniform_random_op::min).f > c.attr(uniform_random_op::max).f)
        c.fail("dlgraph.shape.attr", "min " + std::to_string(c.attr(1).f) + " is above max " + std::to_string(c.attr(2).f));
    Shape s(c.attr(0).ints);
    if (!s.known()) c.fail("dlgraph.shape.attr", "shape " + to_string(s) + " must be fully known");
    c.set(0, dtype_from_int(c.attr(uniform_random_op::dtype).i), s);
}
inline OpDef uniform_random_def() {
    OpDef d{"uniform_random", {}, {{"Out"}},
            {{"shape", Attribute::make_ints("shape", {}), true},
             {"min", Attribute::make_float("min", -1.0)},
             {"max", Attribute::make_float("max", 1.0)},
             {"seed", Attribute::make_int("seed", 0)},
             {"dtype", Attribute::make_int("dtype", static_cast<int>(DataType::FP32))}},
            &uniform_infer, -1, uniform_random_op::dtype};
    d.doc = "Out = uniform random values in [min, max)";
    return d;
}

struct gaussian_random_op {
    enum { shape = 0, mean = 1, std_ = 2, seed = 3, dtype = 4 };
};
inline void gaussian_infer(const InferContext& c) {
    if (c.attr(gaussian_random_op::std_).f < 0) c.fail("dlgraph.shape.attr", "std must not be negative");
    Shape s(c.attr(0).ints);
    if (!s.known()) c.fail("dlgraph.shape.attr", "shape " + to_string(s) + " must be fully known");
    c.set(0, dtype_from_int(c.attr(gaussian_random_op::dtype).i), s);
}
inline OpDef gaussian_random_def() {
    OpDef d{"gaussian_random", {}, {{"Out"}},
            {{"shape", Attribute::make_ints("shape", {}), true},
             {"mean", Attribute::make_float("mean", 0.0)},
             {"std", Attribute::make_float("std", 1.0)},
             {"seed", Attribute::make_int("seed", 0)},
             {"dtype", Attribute::make_int("dtype", static_cast<int>(DataType::FP32))}},
            &gaussian_infer, -1, gaussian_random_op::dtype};
    d.doc = "Out = normal random values with `mean` and `std`";
    return d;
}

// fill_any_like: a tensor shaped like X (whose dims may be unknown until
// run time) filled with `value`; dtype -1 keeps X's dtype. append_backward
// seeds loss@GRAD with it and gives unused outputs zero gradients.
struct fill_any_like_op {
    enum { value = 0, dtype = 1 };
};
// FP16 is only stored and moved, so there is no FP16 fill: a `dtype` of
// FP16 is refused here, with the error the kernel used to throw at run time
// (an FP16 X without one has no kernel, which the kernel check reports).
inline void fill_any_like_infer(const InferContext& c) {
    const std::int64_t t = c.attr(fill_any_like_op::dtype).i;
    const DataType out = t < 0 ? c.dtype(0) : dtype_from_int(t);
    if (t >= 0 && out == DataType::FP16)
        throw type_error("dlgraph.type.kernel", std::string(c.label()) + ": FP16 output is not supported");
    c.set(0, out, c.shape(0));
}
inline OpDef fill_any_like_def() {
    OpDef d{"fill_any_like", {{"X"}}, {{"Out"}},
            {{"value", Attribute::make_float("value", 0.0)}, {"dtype", Attribute::make_int("dtype", -1)}},
            &fill_any_like_infer};
    d.doc = "Out = a tensor shaped like X filled with `value`";
    return d;
}

}  // namespace dlgraph::ops

