// Ops that move or regroup data without arithmetic on it (reshape,
// squeeze2, unsqueeze2, transpose, flip, concat, split, cast) plus sum of
// several tensors, their
// definitions: slots, shape inference and gradients. The copy loops are in
// kernels/shape.hpp (the kernel core), the CPU kernels in cpu/shape_ops.hpp.
#pragma once

#include <algorithm>

#include <cstdint>
#include <string>
#include <vector>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// ---- reshape --------------------------------------------------------------------------

struct reshape_op {
    enum { X = 0 };
    enum { shape = 0 };
    static void infer(const InferContext& c) {
        const Shape& in = c.shape(X);
        const auto& want = c.attr(shape).ints;
        const Shape want_s(want);
        auto fail = [&](const std::string& why) {
            c.fail("dlgraph.shape.reshape", "cannot reshape X of shape " + to_string(in) + " to " + to_string(want_s) +
                                                ": " + why);
        };
        Shape out;
        int infer_at = -1;
        bool copied[max_rank] = {};
        for (std::size_t i = 0; i < want.size(); ++i) {
            const std::int64_t v = want[i];
            const int ii = static_cast<int>(i);
            if (v == 0) {
                if (ii >= in.rank()) fail("0 at position " + std::to_string(i) + " copies a dim X does not have");
                out.push_back(in[ii]);
                copied[ii] = true;
            } else if (v == -1) {
                if (infer_at >= 0) fail("only one dim may be -1");
                infer_at = ii;
                out.push_back(-1);
            } else if (v < 0) {
                fail("dim " + std::to_string(v) + " is negative");
            } else {
                out.push_back(v);
            }
        }
        // Dims copied through a 0 are equal on both sides and cancel, so the
        // count is decidable whenever X's unknown dims are all copied (the
        // usual [0, -1] with a -1 or 0 batch).
        std::int64_t rest_in = 1, rest_out = 1;
        bool rest_known = true;
        for (int i = 0; i < in.rank(); ++i) {
            if (copied[i]) continue;
            if (in[i] < 0) rest_known = false;
            else rest_in *= in[i];
        }
        for (std::size_t i = 0; i < want.size(); ++i)
            if (want[i] > 0) rest_out = dim_mul(c, rest_out, want[i], "the dims of shape " + ints_text(want));
        if (infer_at >= 0) {
            if (rest_known) {
                if (rest_out == 0) fail("the -1 is ambiguous when other dims are 0");
                if (rest_in % rest_out != 0)
                    fail(std::to_string(rest_in) + " elements do not divide into parts of " + std::to_string(rest_out));
                out[infer_at] = rest_in / rest_out;
            }
        } else if (in.known()) {
            // Compare whole counts: [0,3] to [0,5] is fine (both empty).
            if (in.numel() != checked_numel(c, out, "the dims of shape " + ints_text(want)))
                fail("X has " + std::to_string(in.numel()) + " elements but the shape holds " +
                     std::to_string(out.numel()));
        } else if (rest_known && rest_in != rest_out) {
            fail("the dims not copied hold " + std::to_string(rest_in) + " elements in X but " +
                 std::to_string(rest_out) + " in the shape");
        }
        c.set(0, c.dtype(X), out);
    }
};

inline OpDef reshape_def() {
    OpDef d{"reshape", {{"X"}}, {{"Out"}}, {{"shape", Attribute::make_ints("shape", {}), true}}, &reshape_op::infer};
    d.doc = "Out = X with a new shape (0 copies a dim, one -1 is inferred)";
    // reshape_grad reads X only for its shape (Out@GRAD has the elements).
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "reshape_grad";
        g.set_input("X", r.fwd.input("X")->arguments)
            .set_input("Out@GRAD", {r.out_grad("Out", 0)})
            .set_output("X@GRAD", {dx});
        return {g};
    };
    return d;
}

// X, Out@GRAD -> X@GRAD: Out@GRAD's elements with X's shape.
struct reshape_grad_op {
    enum { X = 0, DOut = 1 };
    static void infer(const InferContext& c) {
        if (c.dtype(X) != c.dtype(DOut))
            c.fail_type("X is " + to_string(c.dtype(X)) + " but Out@GRAD is " + to_string(c.dtype(DOut)));
        const std::int64_t nx = c.shape(X).numel(), nd = c.shape(DOut).numel();
        if (nx >= 0 && nd >= 0 && nx != nd)
            c.fail("dlgraph.shape.grad", "X is " + to_string(c.shape(X)) + " but Out@GRAD is " +
                                             to_string(c.shape(DOut)) + ": element counts differ");
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline OpDef reshape_grad_def() {
    OpDef d{"reshape_grad", {{"X"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &reshape_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD with X's shape";
    return d;
}

// ---- transpose ---------------------------------------------------------------------------

struct transpose_op {
    enum { X = 0 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        const Shape& in = c.shape(X);
        const auto& perm = c.attr(axis).ints;
        const std::string desc = "axis " + to_string(Shape(perm)) + " for X of shape " + to_string(in);
        if (static_cast<int>(perm.size()) != in.rank())
            c.fail("dlgraph.shape.transpose", desc + ": axis must list all " + std::to_string(in.rank()) + " dims");
        bool seen[max_rank] = {};
        Shape out;
        for (auto p : perm) {
            if (p < 0 || p >= in.rank() || seen[p])
                c.fail("dlgraph.shape.transpose", desc + ": axis must be a permutation of 0.." +
                                                      std::to_string(in.rank() - 1));
            seen[p] = true;
            out.push_back(in[static_cast<int>(p)]);
        }
        c.set(0, c.dtype(X), out);
    }
};

inline OpDef transpose_def() {
    OpDef d{"transpose", {{"X"}}, {{"Out"}}, {{"axis", Attribute::make_ints("axis", {}), true}}, &transpose_op::infer};
    d.doc = "Out = X with dims permuted: Out dim i is X dim axis[i]";
    // The gradient is Out@GRAD transposed back: by the inverse permutation.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        const Attribute* a = r.fwd.attr("axis");
        const std::vector<std::int64_t> perm = a ? a->ints : std::vector<std::int64_t>{};
        std::vector<std::int64_t> inv(perm.size());
        for (std::size_t i = 0; i < perm.size(); ++i) inv.at(static_cast<std::size_t>(perm[i])) = static_cast<std::int64_t>(i);
        OpDesc g;
        g.type = "transpose";
        g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
        g.set_attr(Attribute::make_ints("axis", inv));
        return {g};
    };
    return d;
}

// ---- concat and split ------------------------------------------------------------------------

struct concat_op {
    enum { X = 0 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        const int n = c.in_count(X);
        const Shape& first = c.shape(X, 0);
        const int a = infer_axis(c, c.attr(axis).i, first, "X[0]");
        Shape out = first;
        for (int k = 1; k < n; ++k) {
            const Shape& s = c.shape(X, k);
            if (c.dtype(X, k) != c.dtype(X, 0))
                c.fail_type("X[0] is " + to_string(c.dtype(X, 0)) + " but X[" + std::to_string(k) + "] is " +
                            to_string(c.dtype(X, k)));
            const std::string both = "X[0] is " + to_string(first) + " but X[" + std::to_string(k) + "] is " +
                                     to_string(s);
            if (s.rank() != first.rank()) c.fail("dlgraph.shape.concat", both + ": ranks differ");
            for (int i = 0; i < s.rank(); ++i) {
                if (i == a) {
                    out[i] = out[i] < 0 || s[i] < 0 ? -1 : dim_add(c, out[i], s[i], "the X along the axis");
                } else if (!dims_agree(out[i], s[i])) {
                    c.fail("dlgraph.shape.concat", both + ": all dims but axis " + std::to_string(a) +
                                                       " must match (dim " + std::to_string(i) + ": " +
                                                       std::to_string(out[i]) + " vs " + std::to_string(s[i]) + ")");
                } else {
                    out[i] = merge_dim(out[i], s[i]);
                }
            }
        }
        c.set(0, c.dtype(X), out);
    }
};

inline OpDef concat_def() {
    OpDef d{"concat", {{"X", true}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", 0)}}, &concat_op::infer};
    d.doc = "Out = the X joined along axis";
    // concat_grad writes a gradient for every X; autodiff names those not
    // wanted (they are computed and never read).
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const OpSlot* xs = r.fwd.input("X");
        std::vector<std::string> names;
        bool any = false;
        for (std::size_t k = 0; k < xs->arguments.size(); ++k) {
            names.push_back(r.grad_name("X", k));
            any = any || !names.back().empty();
        }
        if (!any) return {};
        OpDesc g;
        g.type = "concat_grad";
        g.set_input("X", xs->arguments).set_input("Out@GRAD", {r.out_grad("Out", 0)}).set_output("X@GRAD", names);
        g.attrs = r.fwd.attrs;
        return {g};
    };
    return d;
}

// X (several), Out@GRAD -> X@GRAD (one per X): Out@GRAD cut along axis into
// pieces shaped like the X.
struct concat_grad_op {
    enum { X = 0, DOut = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        const int n = c.in_count(X);
        if (c.out_count(0) != n)
            c.fail("dlgraph.shape.grad", std::to_string(n) + " X but " + std::to_string(c.out_count(0)) + " X@GRAD");
        const Shape& ds = c.shape(DOut);
        const int a = infer_axis(c, c.attr(axis).i, ds, "Out@GRAD");
        std::int64_t total = 0;
        for (int k = 0; k < n; ++k) {
            const Shape& s = c.shape(X, k);
            if (c.dtype(X, k) != c.dtype(DOut))
                c.fail_type("X[" + std::to_string(k) + "] is " + to_string(c.dtype(X, k)) + " but Out@GRAD is " +
                            to_string(c.dtype(DOut)));
            bool ok = s.rank() == ds.rank();
            for (int i = 0; ok && i < s.rank(); ++i) ok = i == a || dims_agree(s[i], ds[i]);
            if (!ok)
                c.fail("dlgraph.shape.grad", "X[" + std::to_string(k) + "] is " + to_string(s) + " but Out@GRAD is " +
                                                 to_string(ds) + " (axis " + std::to_string(a) + ")");
            total = total < 0 || s[a] < 0 ? -1 : dim_add(c, total, s[a], "the X along the axis");
            c.set(0, k, c.dtype(X, k), s);
        }
        if (total >= 0 && ds[a] >= 0 && total != ds[a])
            c.fail("dlgraph.shape.grad", "the X add up to " + std::to_string(total) + " along axis " +
                                             std::to_string(a) + " but Out@GRAD has " + std::to_string(ds[a]));
    }
};

inline OpDef concat_grad_def() {
    OpDef d{"concat_grad", {{"X", true}, {"Out@GRAD"}}, {{"X@GRAD", true}}, {{"axis", Attribute::make_int("axis", 0)}},
            &concat_grad_op::infer};
    d.kernel_slot = 1;
    d.doc = "X@GRAD = Out@GRAD cut along axis into pieces shaped like the X";
    return d;
}

struct split_op {
    enum { X = 0 };
    enum { sections = 0, num = 1, axis = 2 };
    static void infer(const InferContext& c) {
        const Shape& in = c.shape(X);
        const int a = infer_axis(c, c.attr(axis).i, in, "X");
        const std::int64_t dim = in[a];
        const std::int64_t n = c.attr(num).i;
        const auto& secs = c.attr(sections).ints;
        const int outs = c.out_count(0);
        const std::string desc = "X is " + to_string(in) + ", axis " + std::to_string(a);
        auto out_with = [&](int k, std::int64_t d) {
            Shape s = in;
            s[a] = d;
            c.set(0, k, c.dtype(X), s);
        };
        if (n < 0) c.fail("dlgraph.shape.split", desc + ": num " + std::to_string(n) + " is negative");
        if (n > 0 && !secs.empty())
            c.fail("dlgraph.shape.split", desc + ": give either num (" + std::to_string(n) + ") or sections " +
                                              ints_text(secs) + ", not both");
        if (n > 0) {
            if (outs != n)
                c.fail("dlgraph.shape.split", desc + ": num is " + std::to_string(n) + " but there are " +
                                                  std::to_string(outs) + " Out variables");
            if (dim >= 0 && dim % n != 0)
                c.fail("dlgraph.shape.split", desc + ": dim " + std::to_string(dim) + " does not split into " +
                                                  std::to_string(n) + " equal parts");
            for (int k = 0; k < outs; ++k) out_with(k, dim < 0 ? -1 : dim / n);
            return;
        }
        if (secs.empty()) c.fail("dlgraph.shape.split", desc + ": give num or sections");
        const std::string sdesc = desc + ", sections " + ints_text(secs);
        if (outs != static_cast<int>(secs.size()))
            c.fail("dlgraph.shape.split", sdesc + ": " + std::to_string(secs.size()) + " sections but " +
                                              std::to_string(outs) + " Out variables");
        int infer_at = -1;
        std::int64_t known = 0;
        for (std::size_t k = 0; k < secs.size(); ++k) {
            if (secs[k] == -1) {
                if (infer_at >= 0) c.fail("dlgraph.shape.split", sdesc + ": only one section may be -1");
                infer_at = static_cast<int>(k);
            } else if (secs[k] < 0) {
                c.fail("dlgraph.shape.split", sdesc + ": section " + std::to_string(secs[k]) + " is negative");
            } else {
                known = dim_add(c, known, secs[k], "the sections");
            }
        }
        std::int64_t rest = -1;
        if (dim >= 0) {
            if (infer_at >= 0 ? known > dim : known != dim)
                c.fail("dlgraph.shape.split", sdesc + ": sections add up to " + std::to_string(known) + " but dim " +
                                                  std::to_string(a) + " is " + std::to_string(dim));
            rest = dim - known;
        }
        for (int k = 0; k < outs; ++k) out_with(k, k == infer_at ? rest : secs[static_cast<std::size_t>(k)]);
    }
};

inline OpDef split_def() {
    OpDef d{"split", {{"X"}}, {{"Out", true}},
            {{"sections", Attribute::make_ints("sections", {})},
             {"num", Attribute::make_int("num", 0)},
             {"axis", Attribute::make_int("axis", 0)}},
            &split_op::infer};
    d.doc = "Out = X cut along axis into num equal parts or parts of the given sections";
    // The gradient joins the parts' gradients back (zeros for parts that do
    // not reach the loss).
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        std::vector<std::string> parts;
        for (std::size_t k = 0; k < r.fwd.output("Out")->arguments.size(); ++k) parts.push_back(r.out_grad("Out", k));
        const Attribute* a = r.fwd.attr("axis");
        OpDesc g;
        g.type = "concat";
        g.set_input("X", parts).set_output("Out", {dx});
        g.set_attr(Attribute::make_int("axis", a ? a->i : 0));
        return {g};
    };
    return d;
}

// ---- cast ----------------------------------------------------------------------------------

struct cast_op {
    enum { X = 0 };
    enum { in_dtype = 0, out_dtype = 1 };
    static void infer(const InferContext& c) {
        const DataType in = dtype_from_int(c.attr(in_dtype).i);
        const DataType out = dtype_from_int(c.attr(out_dtype).i);
        if (in != c.dtype(X)) c.fail_type("in_dtype is " + to_string(in) + " but X is " + to_string(c.dtype(X)));
        if (out == DataType::FP16 || in == DataType::FP16)
            c.fail_type("cast from " + to_string(in) + " to " + to_string(out) + ": FP16 has no conversions yet");
        c.set(0, out, c.shape(X));
    }
};

inline OpDef cast_def() {
    OpDef d{"cast", {{"X"}}, {{"Out"}},
            {{"in_dtype", Attribute::make_int("in_dtype", 0), true},
             {"out_dtype", Attribute::make_int("out_dtype", 0), true}},
            &cast_op::infer};
    d.doc = "Out = X converted to out_dtype";
    // Between FP32 and FP64 the gradient is cast back; nothing flows to or
    // from an integer (or FP16) side.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const Attribute* in = r.fwd.attr("in_dtype");
        const Attribute* out = r.fwd.attr("out_dtype");
        auto is_float = [](const Attribute* a) {
            return a && (a->i == static_cast<int>(DataType::FP32) || a->i == static_cast<int>(DataType::FP64));
        };
        if (!is_float(in) || !is_float(out)) return {};
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "cast";
        g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
        g.set_attr(Attribute::make_int("in_dtype", out->i)).set_attr(Attribute::make_int("out_dtype", in->i));
        return {g};
    };
    return d;
}

// ---- squeeze2, unsqueeze2 ----------------------------------------------------------------
//
// Paddle's squeeze2 and unsqueeze2: Out is X with dims of 1 taken out (the
// listed `axes` that are 1, or every 1 when axes is empty) or put in (at
// `axes`, in order, each counted in the shape so far), and XShape is
// [0, X's dims...], an empty tensor whose shape the grad ops read, so that X
// need not stay alive. Deviations: a listed axis of unknown size is refused
// (its rank would be unknown), squeezing every dim gives [1] (Paddle 2: a
// 0-D tensor), and the AxesTensor inputs are not supported.
struct squeeze2_op {
    enum { X = 0 };
    enum { Out = 0, XShape = 1 };
    enum { axes = 0 };
    static Shape xshape(const InferContext& c, const Shape& s) {
        if (s.rank() == max_rank)
            c.fail("dlgraph.shape.squeeze", "X is " + to_string(s) + ": XShape would have more than " +
                                                std::to_string(max_rank) + " dims");
        Shape x{0};
        for (auto d : s) x.push_back(d);
        return x;
    }
    static void infer(const InferContext& c) {
        const Shape& s = c.shape(X);
        const auto& ax = c.attr(axes).ints;
        bool drop[max_rank] = {};
        for (int i = 0; i < s.rank() && ax.empty(); ++i) drop[i] = s[i] == 1;
        for (auto a : ax) {
            const int i = infer_axis(c, a, s, "X", "axes entry");
            if (s[i] < 0)
                c.fail("dlgraph.shape.squeeze", "X is " + to_string(s) + ": axis " + std::to_string(a) +
                                                    " of unknown size cannot be squeezed (Out's rank would be unknown)");
            drop[i] = s[i] == 1;  // a listed dim other than 1 stays, as in Paddle
        }
        Shape out;
        for (int i = 0; i < s.rank(); ++i)
            if (!drop[i]) out.push_back(s[i]);
        if (out.rank() == 0) out.push_back(1);  // [1] for a squeezed [1, 1], as the reductions give
        c.set(Out, c.dtype(X), out);
        c.set(XShape, c.dtype(X), xshape(c, s));
    }
};
struct unsqueeze2_op {
    enum { X = 0 };
    enum { Out = 0, XShape = 1 };
    enum { axes = 0 };
    static void infer(const InferContext& c) {
        const Shape& s = c.shape(X);
        const auto& ax = c.attr(axes).ints;
        const std::int64_t rank = s.rank() + static_cast<std::int64_t>(ax.size());
        if (rank > max_rank)
            c.fail("dlgraph.shape.squeeze", "axes " + ints_text(ax) + " for X of shape " + to_string(s) +
                                                ": Out would have more than " + std::to_string(max_rank) + " dims");
        // Paddle's order: each axis counts in the shape so far (negative from
        // its end, past the last dim), the dims of 1 placed before move right.
        bool one[max_rank] = {};
        std::int64_t cur = s.rank();
        for (auto a : ax) {
            const std::int64_t at = a < 0 ? a + cur + 1 : a;
            if (at < 0 || at > cur)
                c.fail("dlgraph.shape.axis", "axes entry " + std::to_string(a) + " is out of range for a shape of " +
                                                 std::to_string(cur) + " dims (X is " + to_string(s) + ")");
            for (std::int64_t i = cur; i > at; --i) one[i] = one[i - 1];
            one[at] = true;
            ++cur;
        }
        Shape out;
        for (std::int64_t i = 0, k = 0; i < rank; ++i) out.push_back(one[i] ? 1 : s[static_cast<int>(k++)]);
        c.set(Out, c.dtype(X), out);
        c.set(XShape, c.dtype(X), squeeze2_op::xshape(c, s));
    }
};

// XShape, Out@GRAD -> X@GRAD: Out@GRAD's elements with X's shape (XShape
// without its leading 0).
struct squeeze2_grad_op {
    enum { XShape = 0, DOut = 1 };
    static void infer(const InferContext& c) {
        const Shape& xs = c.shape(XShape);
        if (xs.rank() < 1 || xs[0] != 0)
            c.fail("dlgraph.shape.grad", "XShape is " + to_string(xs) + ": it must be [0, X's dims...]");
        Shape x;
        for (int i = 1; i < xs.rank(); ++i) x.push_back(xs[i]);
        const std::int64_t nx = x.numel(), nd = c.shape(DOut).numel();
        if (nx >= 0 && nd >= 0 && nx != nd)
            c.fail("dlgraph.shape.grad", "XShape is " + to_string(xs) + " but Out@GRAD is " + to_string(c.shape(DOut)) +
                                             ": element counts differ");
        c.set(0, c.dtype(DOut), x);
    }
};

inline GradMaker xshape_grad_maker(std::string_view grad_type) {
    // One maker per grad type: a GradMaker is a plain function pointer.
    if (grad_type == "squeeze2_grad")
        return [](const GradRequest& r) -> std::vector<OpDesc> {
            const std::string dx = r.grad_name("X", 0);
            if (dx.empty()) return {};
            OpDesc g;
            g.type = "squeeze2_grad";
            g.set_input("XShape", {r.fwd.output("XShape")->arguments.at(0)})
                .set_input("Out@GRAD", {r.out_grad("Out", 0)})
                .set_output("X@GRAD", {dx});
            return {g};
        };
    return [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "unsqueeze2_grad";
        g.set_input("XShape", {r.fwd.output("XShape")->arguments.at(0)})
            .set_input("Out@GRAD", {r.out_grad("Out", 0)})
            .set_output("X@GRAD", {dx});
        return {g};
    };
}

inline OpDef squeeze2_def() {
    OpDef d{"squeeze2", {{"X"}}, {{"Out"}, {"XShape"}}, {{"axes", Attribute::make_ints("axes", {})}}, &squeeze2_op::infer};
    d.doc = "Out = X without its dims of 1 (those in axes, or all); XShape = [0, X's dims]";
    d.grad_maker = xshape_grad_maker("squeeze2_grad");
    return d;
}
inline OpDef unsqueeze2_def() {
    OpDef d{"unsqueeze2", {{"X"}}, {{"Out"}, {"XShape"}}, {{"axes", Attribute::make_ints("axes", {}), true}},
            &unsqueeze2_op::infer};
    d.doc = "Out = X with dims of 1 inserted at axes; XShape = [0, X's dims]";
    d.grad_maker = xshape_grad_maker("unsqueeze2_grad");
    return d;
}
inline OpDef squeeze2_grad_def() {
    OpDef d{"squeeze2_grad", {{"XShape"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &squeeze2_grad_op::infer};
    d.kernel_slot = squeeze2_grad_op::DOut;
    d.doc = "X@GRAD = Out@GRAD with X's shape (from XShape)";
    return d;
}
inline OpDef unsqueeze2_grad_def() {
    OpDef d = squeeze2_grad_def();
    d.type = "unsqueeze2_grad";
    return d;
}

// ---- flip --------------------------------------------------------------------------------
//
// Out = X with the order of its elements reversed along each dim in `axis`
// (paddle.flip). The gradient is Out@GRAD flipped along the same dims.
struct flip_op {
    enum { X = 0 };
    enum { axis = 0 };
    // Which dims of a rank-r X are flipped.
    static void flipped(const InferContext* c, const std::vector<std::int64_t>& ax, const Shape& s, bool* f) {
        for (int i = 0; i < s.rank(); ++i) f[i] = false;
        for (auto a : ax) {
            const int i = c ? infer_axis(*c, a, s, "X") : static_cast<int>(a < 0 ? a + s.rank() : a);
            if (c && f[i])
                c->fail("dlgraph.shape.axis", "axis " + ints_text(ax) + " lists dim " + std::to_string(i) + " twice");
            f[i] = true;
        }
    }
    static void infer(const InferContext& c) {
        bool f[max_rank];
        flipped(&c, c.attr(axis).ints, c.shape(X), f);
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef flip_def() {
    OpDef d{"flip", {{"X"}}, {{"Out"}}, {{"axis", Attribute::make_ints("axis", {}), true}}, &flip_op::infer};
    d.doc = "Out = X reversed along each dim in axis";
    d.grad_maker = &self_adjoint_grad;  // flipping back
    return d;
}

// ---- slice -------------------------------------------------------------------------------
//
// Out = Input[starts[k] : ends[k]] along each dim axes[k] (Paddle's slice,
// with its attributes; the tensor-valued StartsTensor/EndsTensor slots are
// not supported). A negative start or end counts from the dim's end; both are
// then clamped to [0, dim], and an end at or before its start gives an empty
// dim. decrease_axis drops listed dims (each sliced to size 1); dropping
// every dim gives [1], as Paddle's static graphs do. infer_flags is accepted
// and ignored. slice_grad reads Input for its shape and writes Out@GRAD into
// that box of zeros.
struct slice_op {
    enum { Input = 0 };
    enum { axes = 0, starts = 1, ends = 2, infer_flags = 3, decrease_axis = 4 };
    // The box of `in` the slice takes: start[i] and extent sub[i] for every
    // dim (the whole dim where no axis names it; -1 extents for unknown
    // dims). With an inference context, checks the attributes.
    static void box(const InferContext* c, const Attribute* attrs, const Shape& in, std::int64_t* start, std::int64_t* sub) {
        const auto& ax = attrs[axes].ints;
        const auto& st = attrs[starts].ints;
        const auto& en = attrs[ends].ints;
        if (c && (st.size() != ax.size() || en.size() != ax.size()))
            c->fail("dlgraph.shape.attr", "axes " + ints_text(ax) + ", starts " + ints_text(st) + " and ends " +
                                              ints_text(en) + " must have the same length");
        for (int i = 0; i < in.rank(); ++i) {
            start[i] = 0;
            sub[i] = in[i];
        }
        bool seen[max_rank] = {};
        for (std::size_t k = 0; k < ax.size(); ++k) {
            const int a = c ? infer_axis(*c, ax[k], in, "Input", "axes entry") : static_cast<int>(ax[k] < 0 ? ax[k] + in.rank() : ax[k]);
            if (c && seen[a]) c->fail("dlgraph.shape.axis", "axes " + ints_text(ax) + " lists dim " + std::to_string(a) + " twice");
            seen[a] = true;
            const std::int64_t d = in[a];
            if (d < 0) {  // unknown until run time
                sub[a] = -1;
                continue;
            }
            auto clamp = [d](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + d : v, 0, d); };
            start[a] = clamp(st[k]);
            sub[a] = std::max<std::int64_t>(clamp(en[k]) - start[a], 0);
        }
    }
    static void infer(const InferContext& c) {
        const Shape& in = c.shape(Input);
        std::int64_t start[max_rank], sub[max_rank];
        box(&c, &c.attr(0), in, start, sub);
        const auto& dec = c.attr(decrease_axis).ints;
        bool drop[max_rank] = {};
        for (auto a : dec) {
            const int i = infer_axis(c, a, in, "Input", "decrease_axis entry");
            bool sliced = false;
            for (auto x : c.attr(axes).ints) sliced = sliced || (x < 0 ? x + in.rank() : x) == i;
            if (!sliced || (sub[i] >= 0 && sub[i] != 1))
                c.fail("dlgraph.shape.attr", "decrease_axis " + ints_text(dec) + " drops dim " + std::to_string(i) +
                                                 ", which must be sliced to size 1 (it is " +
                                                 (sliced ? std::to_string(sub[i]) : std::string("not in axes")) + ")");
            drop[i] = true;
        }
        Shape out;
        for (int i = 0; i < in.rank(); ++i)
            if (!drop[i]) out.push_back(sub[i]);
        if (out.rank() == 0 && in.rank() > 0) out.push_back(1);
        c.set(0, c.dtype(Input), out);
    }
};
inline std::vector<AttrDef> slice_attrs() {
    return {{"axes", Attribute::make_ints("axes", {}), true},
            {"starts", Attribute::make_ints("starts", {}), true},
            {"ends", Attribute::make_ints("ends", {}), true},
            {"infer_flags", Attribute::make_ints("infer_flags", {})},
            {"decrease_axis", Attribute::make_ints("decrease_axis", {})}};
}
inline OpDef slice_def() {
    OpDef d{"slice", {{"Input"}}, {{"Out"}}, slice_attrs(), &slice_op::infer};
    d.doc = "Out = Input[starts:ends] along each dim in axes (decrease_axis drops dims of 1)";
    d.grad_spec = {"slice_grad", {"Input"}, {}, {"Input"}, {"Out"}};
    return d;
}
// Input, Out@GRAD -> Input@GRAD: zeros of Input's shape with the slice's box
// set to Out@GRAD.
struct slice_grad_op {
    enum { Input = 0, DOut = 1 };
    static void infer(const InferContext& c) {
        c.same_dtype({Input, DOut});
        std::int64_t start[max_rank], sub[max_rank];
        slice_op::box(&c, &c.attr(0), c.shape(Input), start, sub);
        std::int64_t n = 1;
        for (int i = 0; i < c.shape(Input).rank(); ++i) n = sub[i] < 0 || n < 0 ? -1 : n * sub[i];
        const std::int64_t nd = c.shape(DOut).numel();
        if (n >= 0 && nd >= 0 && n != nd)
            c.fail("dlgraph.shape.grad", "the slice of Input " + to_string(c.shape(Input)) + " has " + std::to_string(n) +
                                             " elements but Out@GRAD " + to_string(c.shape(DOut)) + " has " +
                                             std::to_string(nd));
        c.set(0, c.dtype(Input), c.shape(Input));
    }
};
inline OpDef slice_grad_def() {
    OpDef d{"slice_grad", {{"Input"}, {"Out@GRAD"}}, {{"Input@GRAD"}}, slice_attrs(), &slice_grad_op::infer};
    d.kernel_slot = slice_grad_op::DOut;
    d.doc = "Input@GRAD = zeros of Input's shape, with the slice's box = Out@GRAD";
    return d;
}

// ---- stack and unstack -----------------------------------------------------------------------
//
// stack: the X (one shape and dtype) joined along a new dim `axis` of Y
// (in [-(rank+1), rank]); unstack: X cut along dim `axis` into `num` Y
// without that dim. Each is the other's gradient; Paddle's stack_grad and
// unstack_grad are their own op types (slots Y@GRAD and X@GRAD), with the
// same kernels.

// The dim of the joined tensor (rank r + 1) that `axis` names.
inline int stack_axis(const InferContext* c, std::int64_t axis, const Shape& part) {
    const std::int64_t r = part.rank() + 1;
    const std::int64_t a = axis < 0 ? axis + r : axis;
    if (c && (a < 0 || a >= r))
        c->fail("dlgraph.shape.axis", "axis " + std::to_string(axis) + " is out of range for stacking parts of shape " +
                                          to_string(part) + " (it must be in [" + std::to_string(-r) + ", " +
                                          std::to_string(r - 1) + "])");
    return static_cast<int>(a);
}

// Joins the parts of input slot 0 (stack, unstack_grad) into output 0.
struct stack_op {
    enum { axis = 0, num = 1 };
    static void infer(const InferContext& c) {
        const int n = c.in_count(0);
        Shape part = c.shape(0, 0);
        for (int k = 1; k < n; ++k) {
            if (c.dtype(0, k) != c.dtype(0, 0))
                c.fail_type("input 0 is " + to_string(c.dtype(0, 0)) + " but input " + std::to_string(k) + " is " +
                            to_string(c.dtype(0, k)));
            const Shape& s = c.shape(0, k);
            bool ok = s.rank() == part.rank();
            for (int i = 0; ok && i < s.rank(); ++i) ok = dims_agree(part[i], s[i]);
            if (!ok)
                c.fail("dlgraph.shape.stack", "input 0 is " + to_string(c.shape(0, 0)) + " but input " +
                                                  std::to_string(k) + " is " + to_string(s) + ": all must have one shape");
            for (int i = 0; i < s.rank(); ++i) part[i] = merge_dim(part[i], s[i]);
        }
        if (part.rank() == max_rank)
            c.fail("dlgraph.shape.stack", "the parts are " + to_string(part) + ": the result would have more than " +
                                              std::to_string(max_rank) + " dims");
        const int a = stack_axis(&c, c.attr(axis).i, part);
        if (c.def().attr_index("num") == num && c.attr(num).i != n)  // unstack_grad
            c.fail("dlgraph.shape.stack", "num is " + std::to_string(c.attr(num).i) + " but there are " +
                                              std::to_string(n) + " Y@GRAD");
        Shape out;
        for (int i = 0; i <= part.rank(); ++i) out.push_back(i == a ? n : part[i < a ? i : i - 1]);
        c.set(0, c.dtype(0), out);
    }
};

// Cuts input 0 (unstack's X, stack_grad's Y@GRAD) along `axis` into the
// outputs of slot 0, one per index of that dim.
struct unstack_op {
    enum { axis = 0, num = 1 };
    static void infer(const InferContext& c) {
        const Shape& in = c.shape(0);
        if (in.rank() < 2)
            c.fail("dlgraph.shape.stack", "the input is " + to_string(in) +
                                              ": its parts would have no dims (dlgraph has no 0-D tensors; reshape it "
                                              "to [n, 1] first)");
        const int a = infer_axis(c, c.attr(axis).i, in, "the input");
        const int n = c.out_count(0);
        if (in[a] >= 0 && in[a] != n)
            c.fail("dlgraph.shape.stack", "the input is " + to_string(in) + ": dim " + std::to_string(a) + " is " +
                                              std::to_string(in[a]) + " but there are " + std::to_string(n) + " outputs");
        if (c.def().attr_index("num") == num && c.attr(num).i != n)  // unstack
            c.fail("dlgraph.shape.stack", "num is " + std::to_string(c.attr(num).i) + " but there are " +
                                              std::to_string(n) + " Y");
        Shape part;
        for (int i = 0; i < in.rank(); ++i)
            if (i != a) part.push_back(in[i]);
        for (int k = 0; k < n; ++k) c.set(0, k, c.dtype(0), part);
    }
};

inline OpDef stack_def() {
    OpDef d{"stack", {{"X", true}}, {{"Y"}}, {{"axis", Attribute::make_int("axis", 0)}}, &stack_op::infer};
    d.doc = "Y = the X joined along a new dim axis";
    d.grad_spec = {"stack_grad", {}, {}, {"X"}, {"Y"}};
    return d;
}
inline OpDef stack_grad_def() {
    OpDef d{"stack_grad", {{"Y@GRAD"}}, {{"X@GRAD", true}}, {{"axis", Attribute::make_int("axis", 0)}}, &unstack_op::infer};
    d.doc = "X@GRAD = Y@GRAD cut along axis, that dim dropped";
    return d;
}
inline std::vector<AttrDef> unstack_attrs() {
    return {{"axis", Attribute::make_int("axis", 0)}, {"num", Attribute::make_int("num", 0), true}};
}
inline OpDef unstack_def() {
    OpDef d{"unstack", {{"X"}}, {{"Y", true}}, unstack_attrs(), &unstack_op::infer};
    d.doc = "Y = X cut along axis into num parts, that dim dropped";
    d.grad_spec = {"unstack_grad", {}, {}, {"X"}, {"Y"}};
    return d;
}
inline OpDef unstack_grad_def() {
    OpDef d{"unstack_grad", {{"Y@GRAD", true}}, {{"X@GRAD"}}, unstack_attrs(), &stack_op::infer};
    d.doc = "X@GRAD = the Y@GRAD joined along a new dim axis";
    return d;
}

// ---- tile, expand, expand_v2 -------------------------------------------------------------------
//
// Out = X repeated along its dims, three ways of saying how (Paddle's):
// - tile: repeat_times (each >= 1); a shorter list is padded with 1s in
//   front, a longer one pads X's shape with 1s in front;
// - expand (v1): expand_times, one per dim of X (each >= 1);
// - expand_v2: the target `shape`, at least X's rank: X padded with 1s in
//   front, each dim of 1 broadcast to the target, -1 keeping X's dim.
// Their gradients sum Out@GRAD's copies back to X's shape. The tensor-valued
// slots (RepeatTimes, ExpandTimes, Shape and their lists) are not supported.
enum class tile_kind { tile, expand, expand_v2 };

template <tile_kind K> struct tile_op {
    enum { X = 0, DOut = 1 };
    static constexpr const char* attr_name = K == tile_kind::tile ? "repeat_times" : K == tile_kind::expand ? "expand_times" : "shape";
    // X's dims padded to the result's rank r (xd) and the repeats of each
    // (reps); unknown dims of X give -1 in xd (and 1 in reps, for expand_v2
    // with a known target, the target in out). With an inference context,
    // checks the attribute.
    static int geometry(const InferContext* c, const Shape& x, const std::vector<std::int64_t>& at, std::int64_t* xd,
                        std::int64_t* reps, std::int64_t* out) {
        const int n = x.rank(), m = static_cast<int>(at.size());
        auto bad = [&](const std::string& why) {
            c->fail("dlgraph.shape.attr", std::string(attr_name) + " " + ints_text(at) + " for X of shape " + to_string(x) +
                                              ": " + why);
        };
        const int r = K == tile_kind::expand ? n : std::max(n, m);
        if (c && K == tile_kind::expand && m != n) bad("it must have one entry per dim of X");
        if (c && K == tile_kind::expand_v2 && m < n) bad("it must have at least X's rank");
        if (c && r > max_rank) bad("the result would have more than " + std::to_string(max_rank) + " dims");
        for (int i = 0; i < r; ++i) {
            const int xi = i - (r - n), ai = i - (r - m);
            xd[i] = xi >= 0 ? x[xi] : 1;
            const std::int64_t v = ai >= 0 ? at[static_cast<std::size_t>(ai)] : 1;
            if constexpr (K == tile_kind::expand_v2) {
                if (c && (v == 0 || v < -1 || (v == -1 && xi < 0)))
                    bad("entry " + std::to_string(v) + (v == -1 ? " (keep X's dim) names no dim of X" : " must be positive or -1"));
                const std::int64_t want = v == -1 ? xd[i] : v;
                if (c && xd[i] >= 0 && xd[i] != 1 && want != xd[i])
                    bad("dim " + std::to_string(i) + " of X (padded) is " + std::to_string(xd[i]) + ", which cannot become " +
                        std::to_string(want) + " (only dims of 1 broadcast)");
                reps[i] = xd[i] == 1 ? want : 1;
                out[i] = want;
            } else {
                if (c && v < 1) bad("entry " + std::to_string(v) + " must be at least 1");
                reps[i] = v;
                out[i] = xd[i] < 0 ? -1 : c ? dim_mul(*c, xd[i], v, "the repeated dims") : xd[i] * v;
            }
        }
        return r;
    }
    static Shape out_shape(const InferContext& c) {
        std::int64_t xd[max_rank], reps[max_rank], out[max_rank];
        const int r = geometry(&c, c.shape(X), c.attr(0).ints, xd, reps, out);
        Shape s(std::span<const std::int64_t>(out, static_cast<std::size_t>(r)));
        if (s.known()) checked_numel(c, s, "the repeated dims");
        return s;
    }
    static void infer(const InferContext& c) { c.set(0, c.dtype(X), out_shape(c)); }
    // X, Out@GRAD -> X@GRAD
    static void infer_grad(const InferContext& c) {
        c.same_dtype({X, DOut});
        check_grad_shape(c, out_shape(c), DOut, "Out@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
    static OpDef def(std::string_view type, std::string_view grad) {
        OpDef d{type, {{"X"}}, {{"Out"}}, {{attr_name, Attribute::make_ints(attr_name, {}), true}}, &infer};
        d.doc = K == tile_kind::expand_v2 ? "Out = X broadcast to shape (-1 keeps a dim)"
                                          : "Out = X repeated along each dim as many times as the attribute says";
        d.grad_spec = {grad, {"X"}, {}, {"X"}, {"Out"}};
        return d;
    }
    static OpDef grad_def(std::string_view grad) {
        OpDef d{grad, {{"X"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {{attr_name, Attribute::make_ints(attr_name, {}), true}},
                &infer_grad};
        d.kernel_slot = DOut;
        d.doc = "X@GRAD = the sum of Out@GRAD's copies of each element of X";
        return d;
    }
};
using tile_x_op = tile_op<tile_kind::tile>;
using expand_op = tile_op<tile_kind::expand>;
using expand_v2_op = tile_op<tile_kind::expand_v2>;
inline OpDef tile_def() { return tile_x_op::def("tile", "tile_grad"); }
inline OpDef tile_grad_def() { return tile_x_op::grad_def("tile_grad"); }
inline OpDef expand_def() { return expand_op::def("expand", "expand_grad"); }
inline OpDef expand_grad_def() { return expand_op::grad_def("expand_grad"); }
inline OpDef expand_v2_def() { return expand_v2_op::def("expand_v2", "expand_v2_grad"); }
inline OpDef expand_v2_grad_def() { return expand_v2_op::grad_def("expand_v2_grad"); }

// ---- pad ---------------------------------------------------------------------------------------
//
// Out = X with paddings[2i] elements of pad_value before it and
// paddings[2i+1] after it along each dim i (each >= 0; Paddle's pad);
// pad_grad: X@GRAD = the box of Out@GRAD that X fills.
struct pad_op {
    enum { X = 0 };
    enum { paddings = 0, pad_value = 1 };
    // before[i], after[i] of a rank-r tensor; with an inference context,
    // checks the attribute.
    static void split(const InferContext* c, const std::vector<std::int64_t>& p, int r, std::int64_t* before, std::int64_t* after) {
        if (c && static_cast<int>(p.size()) != 2 * r)
            c->fail("dlgraph.shape.attr", "paddings " + ints_text(p) + " must have 2 entries per dim (" + std::to_string(2 * r) + ")");
        for (int i = 0; i < r; ++i) {
            before[i] = p[static_cast<std::size_t>(2 * i)];
            after[i] = p[static_cast<std::size_t>(2 * i + 1)];
            if (c && (before[i] < 0 || after[i] < 0))
                c->fail("dlgraph.shape.attr", "paddings " + ints_text(p) + ": entries must not be negative");
        }
    }
    // The padded shape of `x`.
    static Shape padded(const InferContext& c, const Shape& x) {
        std::int64_t before[max_rank], after[max_rank];
        split(&c, c.attr(paddings).ints, x.rank(), before, after);
        Shape out;
        for (int i = 0; i < x.rank(); ++i)
            out.push_back(x[i] < 0 ? -1 : dim_add(c, dim_add(c, x[i], before[i], "the padded dims"), after[i], "the padded dims"));
        if (out.known()) checked_numel(c, out, "the padded dims");
        return out;
    }
    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        c.set(0, c.dtype(X), padded(c, c.shape(X)));
    }
};
inline std::vector<AttrDef> pad_attrs() {
    return {{"paddings", Attribute::make_ints("paddings", {}), true}, {"pad_value", Attribute::make_float("pad_value", 0.0f)}};
}
inline OpDef pad_def() {
    OpDef d{"pad", {{"X"}}, {{"Out"}}, pad_attrs(), &pad_op::infer};
    d.doc = "Out = X padded with pad_value: paddings[2i] before and paddings[2i+1] after dim i";
    d.grad_spec = {"pad_grad", {}, {}, {"X"}, {"Out"}};
    return d;
}
// Out@GRAD -> X@GRAD: Out@GRAD without the padding.
struct pad_grad_op {
    enum { DOut = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(DOut, {DataType::FP32, DataType::FP64});
        const Shape& d = c.shape(DOut);
        std::int64_t before[max_rank], after[max_rank];
        pad_op::split(&c, c.attr(pad_op::paddings).ints, d.rank(), before, after);
        Shape x;
        for (int i = 0; i < d.rank(); ++i) {
            if (d[i] >= 0 && (before[i] > d[i] || after[i] > d[i] - before[i]))
                c.fail("dlgraph.shape.grad", "Out@GRAD is " + to_string(d) + ": dim " + std::to_string(i) +
                                                 " is smaller than its padding " + ints_text(c.attr(pad_op::paddings).ints));
            x.push_back(d[i] < 0 ? -1 : d[i] - before[i] - after[i]);
        }
        c.set(0, c.dtype(DOut), x);
    }
};
inline OpDef pad_grad_def() {
    OpDef d{"pad_grad", {{"Out@GRAD"}}, {{"X@GRAD"}}, pad_attrs(), &pad_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD without the padding";
    return d;
}

// ---- sum -------------------------------------------------------------------------------------

struct sum_op {
    enum { X = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        Shape out = c.shape(X, 0);
        for (int k = 1; k < c.in_count(X); ++k) {
            const Shape& s = c.shape(X, k);
            if (c.dtype(X, k) != c.dtype(X, 0))
                c.fail_type("X[0] is " + to_string(c.dtype(X, 0)) + " but X[" + std::to_string(k) + "] is " +
                            to_string(c.dtype(X, k)));
            bool ok = s.rank() == out.rank();
            for (int i = 0; ok && i < s.rank(); ++i) ok = dims_agree(out[i], s[i]);
            if (!ok)
                c.fail("dlgraph.shape.sum", "X[0] is " + to_string(c.shape(X, 0)) + " but X[" + std::to_string(k) +
                                                "] is " + to_string(s) + ": all inputs must have one shape");
            for (int i = 0; i < s.rank(); ++i) out[i] = merge_dim(out[i], s[i]);
        }
        c.set(0, c.dtype(X), out);
    }
};

inline OpDef sum_def() {
    OpDef d{"sum", {{"X", true}}, {{"Out"}}, {}, &sum_op::infer};
    d.doc = "Out = the sum of all X (same shape and dtype)";
    // Each input's gradient is Out@GRAD itself: one assign per wanted input.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        std::vector<OpDesc> ops;
        const std::size_t n = r.fwd.input("X")->arguments.size();
        std::string dout;
        for (std::size_t k = 0; k < n; ++k) {
            const std::string dx = r.grad_name("X", k);
            if (dx.empty()) continue;
            if (dout.empty()) dout = r.out_grad("Out", 0);
            OpDesc g;
            g.type = "assign";
            g.set_input("X", {dout}).set_output("Out", {dx});
            ops.push_back(std::move(g));
        }
        return ops;
    };
    d.in_place = true;  // Paddle accumulates gradients with Out one of the X
    return d;
}

}  // namespace dlgraph::ops

