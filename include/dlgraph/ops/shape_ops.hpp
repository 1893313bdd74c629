// Ops that move or regroup data without arithmetic on it (reshape,
// transpose, concat, split, cast) plus sum of several tensors. Copies go by
// contiguous runs wherever the layout allows, so they are memcpy-bound.
#pragma once

#include <algorithm>
#include <cstring>

#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// Copies n elements; memcpy with a null pointer is undefined even for 0 bytes.
template <class T> inline void copy_elements(const T* src, std::int64_t n, T* dst) {
    if (n > 0 && src != dst) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
}

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
            if (want[i] > 0) rest_out *= want[i];
        if (infer_at >= 0) {
            if (rest_known) {
                if (rest_out == 0) fail("the -1 is ambiguous when other dims are 0");
                if (rest_in % rest_out != 0)
                    fail(std::to_string(rest_in) + " elements do not divide into parts of " + std::to_string(rest_out));
                out[infer_at] = rest_in / rest_out;
            }
        } else if (in.known()) {
            // Compare whole counts: [0,3] to [0,5] is fine (both empty).
            if (in.numel() != out.numel())
                fail("X has " + std::to_string(in.numel()) + " elements but the shape holds " +
                     std::to_string(out.numel()));
        } else if (rest_known && rest_in != rest_out) {
            fail("the dims not copied hold " + std::to_string(rest_in) + " elements in X but " +
                 std::to_string(rest_out) + " in the shape");
        }
        c.set(0, c.dtype(X), out);
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        copy_elements(c.in(X).data<T>(), c.in(X).numel(), c.out(0).data<T>());
    }
};

inline OpDef reshape_def() {
    OpDef d{"reshape", {{"X"}}, {{"Out"}}, {{"shape", Attribute::make_ints("shape", {}), true}}, &reshape_op::infer};
    d.kernels = cpu_kernels<reshape_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
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

// Kernel tables of the ops that only move elements (any stored dtype).
template <class Op> KernelTable copy_kernels() {
    return cpu_kernels<Op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
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
    template <class T> static void compute(cpu, const KernelContext& c) {
        copy_elements(c.in(DOut).data<T>(), c.in(DOut).numel(), c.out(0).data<T>());
    }
};

inline OpDef reshape_grad_def() {
    OpDef d{"reshape_grad", {{"X"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &reshape_grad_op::infer};
    d.kernels = copy_kernels<reshape_grad_op>();
    d.doc = "X@GRAD = Out@GRAD with X's shape";
    return d;
}

// ---- transpose ---------------------------------------------------------------------------

// y = x with dims permuted (Out dim i is X dim perm[i]). Unit dims are
// dropped and dims that stay neighbours are merged first; then either X's
// last dim stays last (contiguous runs) or the copy goes by square tiles
// over the two dims that hold X's and Out's contiguous axes.
template <class T> void transpose_copy(const T* x, const Shape& xs, const std::int64_t* perm, T* y) {
    const int r = xs.rank();
    const std::int64_t total = xs.numel();
    if (total == 0) return;
    // Renumber X's non-unit dims, then merge runs of Out dims that are
    // consecutive in X.
    int newid[max_rank];
    int nk = 0;
    for (int i = 0; i < r; ++i) newid[i] = xs[i] == 1 ? -1 : nk++;
    std::int64_t kept_dims[max_rank];
    for (int i = 0; i < r; ++i)
        if (newid[i] >= 0) kept_dims[newid[i]] = xs[i];
    int q[max_rank];  // Out order over kept X dims
    int nq = 0;
    for (int i = 0; i < r; ++i)
        if (newid[perm[i]] >= 0) q[nq++] = newid[perm[i]];
    // group[g] = [first X dim, count]; merged in Out order.
    int gfirst[max_rank], gcount[max_rank];
    int ng = 0;
    for (int i = 0; i < nq; ++i) {
        if (ng > 0 && gfirst[ng - 1] + gcount[ng - 1] == q[i]) ++gcount[ng - 1];
        else {
            gfirst[ng] = q[i];
            gcount[ng] = 1;
            ++ng;
        }
    }
    if (ng <= 1) return copy_elements(x, total, y);
    // Merged dims in X order: sort groups by their first X dim.
    int xorder[max_rank];  // xorder[k] = group index of the k-th group in X order
    for (int g = 0; g < ng; ++g) xorder[g] = g;
    // Insertion sort: at most max_rank entries (and std::sort's inlined
    // 16-element insertion pass trips GCC 12's -Warray-bounds here).
    for (int i = 1; i < ng; ++i)
        for (int j = i; j > 0 && gfirst[xorder[j - 1]] > gfirst[xorder[j]]; --j) std::swap(xorder[j - 1], xorder[j]);
    std::int64_t gdim[max_rank], gxstride[max_rank];
    for (int g = 0; g < ng; ++g) {
        gdim[g] = 1;
        for (int k = 0; k < gcount[g]; ++k) gdim[g] *= kept_dims[gfirst[g] + k];
    }
    {
        std::int64_t st = 1;
        for (int k = ng - 1; k >= 0; --k) {
            gxstride[xorder[k]] = st;
            st *= gdim[xorder[k]];
        }
    }
    std::int64_t gystride[max_rank];
    {
        std::int64_t st = 1;
        for (int g = ng - 1; g >= 0; --g) {
            gystride[g] = st;
            st *= gdim[g];
        }
    }
    const int last_x = xorder[ng - 1];  // Out position of X's contiguous group
    std::int64_t idx[max_rank] = {};
    if (last_x == ng - 1) {
        // Runs of X's last group are contiguous in both.
        const std::int64_t run = gdim[ng - 1];
        std::int64_t yo = 0;
        do {
            std::int64_t xo = 0;
            for (int g = 0; g < ng - 1; ++g) xo += idx[g] * gxstride[g];
            copy_elements(x + xo, run, y + yo);
            yo += run;
        } while (next_index(idx, gdim, ng - 1));
        return;
    }
    // Tiles over (Out group a = last_x, Out group b = ng - 1): x reads run
    // along a, y writes run along b.
    constexpr std::int64_t tile = 32;
    const int a = last_x, b = ng - 1;
    const std::int64_t na = gdim[a], nb = gdim[b], ya = gystride[a], xb = gxstride[b];
    std::int64_t odims[max_rank];
    int oid[max_rank];
    int no = 0;
    for (int g = 0; g < ng; ++g)
        if (g != a && g != b) {
            odims[no] = gdim[g];
            oid[no++] = g;
        }
    do {
        std::int64_t xo = 0, yo = 0;
        for (int k = 0; k < no; ++k) {
            xo += idx[k] * gxstride[oid[k]];
            yo += idx[k] * gystride[oid[k]];
        }
        for (std::int64_t a0 = 0; a0 < na; a0 += tile)
            for (std::int64_t b0 = 0; b0 < nb; b0 += tile) {
                const std::int64_t a1 = std::min(na, a0 + tile), b1 = std::min(nb, b0 + tile);
                for (std::int64_t i = a0; i < a1; ++i)
                    for (std::int64_t j = b0; j < b1; ++j) y[yo + i * ya + j] = x[xo + i + j * xb];
            }
    } while (next_index(idx, odims, no));
}

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
    template <class T> static void compute(cpu, const KernelContext& c) {
        transpose_copy(c.in(X).data<T>(), c.in(X).shape(), c.attr(axis).ints.data(), c.out(0).data<T>());
    }
};

inline OpDef transpose_def() {
    OpDef d{"transpose", {{"X"}}, {{"Out"}}, {{"axis", Attribute::make_ints("axis", {}), true}}, &transpose_op::infer};
    d.kernels = cpu_kernels<transpose_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
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
                    out[i] = out[i] < 0 || s[i] < 0 ? -1 : out[i] + s[i];
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
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        const Shape& os = out.shape();
        const int a = static_cast<int>(c.attr(axis).i < 0 ? c.attr(axis).i + os.rank() : c.attr(axis).i);
        const std::int64_t outer = dim_product(os, 0, a), inner = dim_product(os, a + 1, os.rank());
        T* y = out.data<T>();
        const int n = c.in_count(X);
        for (std::int64_t o = 0; o < outer; ++o)
            for (int k = 0; k < n; ++k) {
                const Tensor& x = c.in(X, k);
                const std::int64_t chunk = x.shape()[a] * inner;
                copy_elements(x.data<T>() + o * chunk, chunk, y);
                y += chunk;
            }
    }
};

inline OpDef concat_def() {
    OpDef d{"concat", {{"X", true}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", 0)}}, &concat_op::infer};
    d.kernels = cpu_kernels<concat_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
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
            total = total < 0 || s[a] < 0 ? -1 : total + s[a];
            c.set(0, k, c.dtype(X, k), s);
        }
        if (total >= 0 && ds[a] >= 0 && total != ds[a])
            c.fail("dlgraph.shape.grad", "the X add up to " + std::to_string(total) + " along axis " +
                                             std::to_string(a) + " but Out@GRAD has " + std::to_string(ds[a]));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& dout = c.in(DOut);
        const Shape& ds = dout.shape();
        const int a = static_cast<int>(c.attr(axis).i < 0 ? c.attr(axis).i + ds.rank() : c.attr(axis).i);
        const std::int64_t outer = dim_product(ds, 0, a), inner = dim_product(ds, a + 1, ds.rank());
        const T* src = dout.data<T>();
        const int n = c.out_count(0);
        for (std::int64_t o = 0; o < outer; ++o)
            for (int k = 0; k < n; ++k) {
                Tensor& dx = c.out(0, k);
                const std::int64_t chunk = dx.shape()[a] * inner;
                copy_elements(src, chunk, dx.data<T>() + o * chunk);
                src += chunk;
            }
    }
};

inline OpDef concat_grad_def() {
    OpDef d{"concat_grad", {{"X", true}, {"Out@GRAD"}}, {{"X@GRAD", true}}, {{"axis", Attribute::make_int("axis", 0)}},
            &concat_grad_op::infer};
    d.kernels = copy_kernels<concat_grad_op>();
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
                                              to_string(Shape(secs)) + ", not both");
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
        const std::string sdesc = desc + ", sections " + to_string(Shape(secs));
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
                known += secs[k];
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
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Shape& xs = x.shape();
        const int a = static_cast<int>(c.attr(axis).i < 0 ? c.attr(axis).i + xs.rank() : c.attr(axis).i);
        const std::int64_t outer = dim_product(xs, 0, a), inner = dim_product(xs, a + 1, xs.rank());
        const T* xp = x.data<T>();
        const int n = c.out_count(0);
        for (std::int64_t o = 0; o < outer; ++o)
            for (int k = 0; k < n; ++k) {
                Tensor& y = c.out(0, k);
                const std::int64_t chunk = y.shape()[a] * inner;
                copy_elements(xp, chunk, y.data<T>() + o * chunk);
                xp += chunk;
            }
    }
};

inline OpDef split_def() {
    OpDef d{"split", {{"X"}}, {{"Out", true}},
            {{"sections", Attribute::make_ints("sections", {})},
             {"num", Attribute::make_int("num", 0)},
             {"axis", Attribute::make_int("axis", 0)}},
            &split_op::infer};
    d.kernels = cpu_kernels<split_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
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
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& out = c.out(0);
        const T* xp = x.data<T>();
        const std::int64_t n = x.numel();
        visit_dtype(out.dtype(), [&]<class U>(type_tag<U>) {
            if constexpr (std::is_same_v<U, float16>) {
                throw type_error("dlgraph.type.op", "cast: FP16 has no conversions yet");
            } else if constexpr (std::is_same_v<U, T>) {
                copy_elements(xp, n, out.data<U>());
            } else {
                U* y = out.data<U>();
                for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<U>(xp[i]);
            }
        });
    }
};

inline OpDef cast_def() {
    OpDef d{"cast", {{"X"}}, {{"Out"}},
            {{"in_dtype", Attribute::make_int("in_dtype", 0), true},
             {"out_dtype", Attribute::make_int("out_dtype", 0), true}},
            &cast_op::infer};
    d.kernels = cpu_kernels<cast_op, bool, std::int16_t, std::int32_t, std::int64_t, float, double>();
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
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        T* y = out.data<T>();
        const std::int64_t n = out.numel();
        const int count = c.in_count(X);
        // Paddle programs accumulate gradients in place (Out is one of the
        // X): then that input is already in Out and only the others add.
        int alias = -1;
        for (int k = 0; k < count; ++k)
            if (c.in(X, k).raw() == out.raw()) alias = k;
        int k = 0;
        if (alias < 0) {
            if (count == 1) return copy_elements(c.in(X, 0).data<T>(), n, y);
            binary_loop(n, c.in(X, 0).data<T>(), 1, c.in(X, 1).data<T>(), 1, y, add_fn{});
            k = 2;
        }
        for (; k < count; ++k)
            if (k != alias) binary_loop(n, y, 1, c.in(X, k).data<T>(), 1, y, add_fn{});
    }
};

inline OpDef sum_def() {
    OpDef d{"sum", {{"X", true}}, {{"Out"}}, {}, &sum_op::infer};
    d.kernels = cpu_kernels<sum_op, float, double, std::int32_t, std::int64_t>();
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
    return d;
}

}  // namespace dlgraph::ops

