// Ops that create values, their definitions: fill_constant, uniform_random,
// gaussian_random, fill_any_like, range. The fills are in kernels/fill.hpp (the
// kernel core), the CPU kernels in cpu/fill.hpp. Random ops draw from
// std::mt19937_64 seeded by the `seed` attribute, so a seed gives the same
// values on every run and machine; seed 0 draws a fresh seed each run.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

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
    d.constant = true;  // a range's Start, End and Step are usually these
    return d;
}

// range (paddle.arange): Out = [Start, Start + Step, ...) up to End, each
// input a one-element tensor. Out's length depends on the three values, so
// the op reads them while planning (OpDef::reads_values): they must be
// known before the run (fed, in the scope and not written by the plan, or
// made by fill_constant); before that (builder, validation) Out is [-1].
// The length is Paddle's: exact for integers, ceil(|(End - Start) / Step|)
// computed in T for floats; Step 0, or a Step pointing away from End, is an
// error (Paddle's too).
struct range_op {
    enum { Start = 0, End = 1, Step = 2 };
    template <class T> static std::string text(T v) {
        if constexpr (std::is_integral_v<T>) {
            return std::to_string(v);
        } else {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.*g", std::is_same_v<T, float> ? 9 : 17, static_cast<double>(v));
            return buf;
        }
    }
    template <class T> static std::int64_t length(const InferContext& c, T start, T end, T step) {
        const auto values = [&] { return "Start " + text(start) + ", End " + text(end) + ", Step " + text(step); };
        if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(start) || std::isnan(end) || std::isnan(step))
                c.fail("dlgraph.shape.value", values() + ": a value is not a number");
        if (step == T(0)) c.fail("dlgraph.shape.value", values() + ": Step must not be 0");
        if ((start < end && !(step > T(0))) || (start > end && !(step < T(0))))
            c.fail("dlgraph.shape.value", values() + ": Step must point from Start towards End");
        constexpr double most = static_cast<double>(std::int64_t{1} << 62);
        double n;
        if constexpr (std::is_integral_v<T>) {
            using U = std::uint64_t;  // |End - Start| and |Step| fit, whatever T's range
            const U d = start < end ? static_cast<U>(end) - static_cast<U>(start) : static_cast<U>(start) - static_cast<U>(end);
            const U s = step > 0 ? static_cast<U>(step) : U{0} - static_cast<U>(step);
            n = static_cast<double>(d / s + (d % s != 0));
        } else {
            n = static_cast<double>(std::ceil(std::abs((end - start) / step)));
        }
        if (!(n <= most)) c.fail("dlgraph.resource.size", values() + " give more than 2^62 elements");
        return static_cast<std::int64_t>(n);
    }
    static void infer(const InferContext& c) {
        c.dtype_in(Start, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        c.same_dtype({Start, End, Step});
        for (int s : {Start, End, Step})
            if (c.shape(s).known() && (c.shape(s).rank() > 1 || c.shape(s).numel() != 1))
                c.fail("dlgraph.shape.operand", c.slot_name(s) + " must hold one value (shape [1]), not " + to_string(c.shape(s)));
        const Tensor* v[3] = {c.in_value(Start), c.in_value(End), c.in_value(Step)};
        if (!v[0] || !v[1] || !v[2]) {
            if (c.knows_values())
                for (int s : {Start, End, Step})
                    if (!v[s])
                        c.fail("dlgraph.shape.value", c.slot_name(s) + " sets Out's length, so its value must be known before the run: "
                                                      "feed it, keep it in the scope (not written by this program), or make it "
                                                      "with fill_constant");
            c.set(0, c.dtype(Start), Shape{-1});
            return;
        }
        visit_dtype(c.dtype(Start), [&]<class T>(type_tag<T>) {
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                          std::is_same_v<T, std::int64_t>)
                c.set(0, c.dtype(Start), Shape{length<T>(c, *v[0]->data<T>(), *v[1]->data<T>(), *v[2]->data<T>())});
        });
    }
};
inline OpDef range_def() {
    OpDef d{"range", {{"Start"}, {"End"}, {"Step"}}, {{"Out"}}, {}, &range_op::infer};
    d.doc = "Out = [Start, Start + Step, ...) short of End (numpy.arange); its length is set by the values";
    d.reads_values = true;
    d.no_grad_inputs = {"Start", "End", "Step"};
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

