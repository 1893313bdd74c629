// The collective ops, with PaddlePaddle's names and attributes:
// c_allreduce_{sum,max,min,prod}, c_broadcast, c_allgather. They are
// ordinary ops of the program (JSON, plans, DOT); `ring_id` picks the
// communicator the session was given for it (SessionOptions::comms,
// comm.hpp), and the session refuses to plan one whose ring has none.
// `use_calc_stream` is accepted for Paddle's programs and has no effect (a
// host collective runs in the step's order). Every rank must run the same
// collective ops in the same order with the same shapes and dtypes; the MPI
// communicator checks that and names the ranks that differ.
#pragma once

#include <string>

#include "dlgraph/op.hpp"

namespace dlgraph::ops {

struct collective_op {
    enum { X = 0 };
    enum { ring_id = 0, use_calc_stream = 1 };
};

inline std::vector<AttrDef> collective_attrs() {
    return {{"ring_id", Attribute::make_int("ring_id", 0)}, {"use_calc_stream", Attribute::make_bool("use_calc_stream", false)}};
}

inline void check_ring(const InferContext& c) {
    if (c.attr(collective_op::ring_id).i < 0)
        c.fail("dlgraph.shape.attr", "ring_id " + std::to_string(c.attr(collective_op::ring_id).i) + " is negative");
}

// ---- c_allreduce_* -------------------------------------------------------------------------
//
// The op type of an all-reduce by `op`.
inline const char* allreduce_type(ReduceOp op) {
    static constexpr const char* types[] = {"c_allreduce_sum", "c_allreduce_max", "c_allreduce_min", "c_allreduce_prod"};
    return types[static_cast<int>(op)];
}
//
// Out = op over every rank's X (every rank gets the same Out). The
// gradient of a sum is the sum of the gradients (Paddle's grad maker):
// X@GRAD = c_allreduce_sum(Out@GRAD). max, min and prod have no gradient.
struct c_allreduce_op : collective_op {
    static void infer(const InferContext& c) {
        check_ring(c);
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef c_allreduce_def(const char* type, const char* doc) {
    OpDef d{type, {{"X"}}, {{"Out"}}, collective_attrs(), &c_allreduce_op::infer};
    d.doc = doc;
    d.comm_ring_attr = collective_op::ring_id;
    d.may_fail = true;  // a peer may not answer
    d.in_place = true;  // Out = X, as data-parallel programs reduce gradients
    return d;
}
inline OpDef c_allreduce_sum_def() {
    OpDef d = c_allreduce_def("c_allreduce_sum", "Out = the sum over every rank's X");
    d.grad_maker = &self_adjoint_grad;
    return d;
}
inline OpDef c_allreduce_max_def() { return c_allreduce_def("c_allreduce_max", "Out = the largest of every rank's X"); }
inline OpDef c_allreduce_min_def() { return c_allreduce_def("c_allreduce_min", "Out = the smallest of every rank's X"); }
inline OpDef c_allreduce_prod_def() { return c_allreduce_def("c_allreduce_prod", "Out = the product of every rank's X"); }

// ---- c_broadcast ---------------------------------------------------------------------------
//
// Out = X of rank `root`, on every rank (any dtype; every rank's X has the
// same shape).
struct c_broadcast_op : collective_op {
    enum { root = 2 };
    static void infer(const InferContext& c) {
        check_ring(c);
        if (c.attr(root).i < 0)
            c.fail("dlgraph.shape.attr", "root " + std::to_string(c.attr(root).i) + " is negative");
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef c_broadcast_def() {
    auto attrs = collective_attrs();
    attrs.push_back({"root", Attribute::make_int("root", 0)});
    OpDef d{"c_broadcast", {{"X"}}, {{"Out"}}, std::move(attrs), &c_broadcast_op::infer};
    d.doc = "Out = X of rank root, on every rank";
    d.comm_ring_attr = collective_op::ring_id;
    d.may_fail = true;
    d.in_place = true;  // Out = X: the root sends its buffer, the others receive into it
    return d;
}

// ---- c_allgather ---------------------------------------------------------------------------
//
// Out = every rank's X stacked along dim 0 in rank order: [nranks * d0,
// d1, ...] (any dtype). `nranks` is the group's size, known when the
// program is built; the kernel checks it against the communicator.
struct c_allgather_op : collective_op {
    enum { nranks = 2 };
    static void infer(const InferContext& c) {
        check_ring(c);
        const std::int64_t n = c.attr(nranks).i;
        if (n < 1) c.fail("dlgraph.shape.attr", "nranks " + std::to_string(n) + " must be at least 1");
        Shape s = c.shape(X);
        if (s.rank() == 0) c.fail("dlgraph.shape.rank", "X is a scalar: it needs a dim 0 to gather along");
        std::int64_t d0 = 0;
        if (s[0] >= 0) {
            if (__builtin_mul_overflow(s[0], n, &d0) || static_cast<std::uint64_t>(d0) > max_shape_bytes)
                c.fail("dlgraph.resource.size", "nranks " + std::to_string(n) + " times dim 0 of X " + to_string(s) +
                                                    " is too large");
            s[0] = d0;
        }
        c.set(0, c.dtype(X), s);
    }
};
inline OpDef c_allgather_def() {
    auto attrs = collective_attrs();
    attrs.push_back({"nranks", Attribute::make_int("nranks", 1), true});
    OpDef d{"c_allgather", {{"X"}}, {{"Out"}}, std::move(attrs), &c_allgather_op::infer};
    d.doc = "Out = every rank's X, stacked along dim 0 in rank order";
    d.comm_ring_attr = collective_op::ring_id;
    d.may_fail = true;
    return d;
}

}  // namespace dlgraph::ops
