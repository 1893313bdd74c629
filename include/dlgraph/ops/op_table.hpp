// The one list of every op dlgraph knows. Adding an op is one row here plus
// its definition (a `NAME_def()` function in ops/); a row without a
// definition fails the build, and `op_count` is checked against the table.
//
// The kernels themselves are instantiated where `op_table()` is defined:
// inline in every translation unit that includes this header
// (ops/all_ops.hpp) in header-only use, or once in the library
// dlgraph::prebuilt (src/ops.cpp) for a program built with DLGRAPH_PREBUILT
// (see config.hpp), which cuts its compile time to parsing the headers.
#pragma once

#include <string_view>
#include <vector>

#include "dlgraph/config.hpp"
#include "dlgraph/op.hpp"

#define DLGRAPH_OP_LIST(X)                                                                                     \
    X(elementwise_add) X(elementwise_sub) X(elementwise_mul) X(elementwise_div) X(elementwise_max)             \
    X(elementwise_min) X(elementwise_pow) X(relu) X(sigmoid) X(tanh) X(exp) X(log) X(sqrt) X(abs)              \
    X(square) X(scale) X(assign) X(fill_constant) X(uniform_random) X(gaussian_random) X(fill_any_like) X(mul) X(matmul)        \
    X(save) X(load) X(save_combine) X(load_combine)                                                                             \
    X(softmax) X(cross_entropy) X(softmax_with_cross_entropy) X(mean) X(reduce_sum) X(reduce_mean)             \
    X(reduce_max) X(reshape) X(transpose) X(concat) X(split) X(cast) X(sum) X(feed) X(fetch) \
    X(mul_grad) X(matmul_grad) X(softmax_grad) X(cross_entropy_grad) X(softmax_with_cross_entropy_grad)        \
    X(reshape_grad) X(concat_grad)                                                                              \
    X(top_k) X(accuracy)                                                                                        \
    X(relu_grad) X(sigmoid_grad) X(tanh_grad) X(exp_grad) X(log_grad) X(sqrt_grad) X(abs_grad) X(square_grad) \
    X(elementwise_add_grad) X(elementwise_sub_grad) X(elementwise_mul_grad) X(elementwise_div_grad)             \
    X(elementwise_max_grad) X(elementwise_min_grad) X(elementwise_pow_grad) X(mean_grad) X(reduce_sum_grad)    \
    X(reduce_mean_grad) X(reduce_max_grad) X(sgd) X(momentum) X(adam) X(memcpy_h2d) X(memcpy_d2h)             \
    X(conv2d) X(depthwise_conv2d) X(conv2d_grad) X(depthwise_conv2d_grad) X(pool2d) X(pool2d_grad)             \
    X(flatten_contiguous_range) X(flatten_contiguous_range_grad) X(batch_norm) X(batch_norm_grad)    \
    X(dropout) X(dropout_grad) X(increment)

namespace dlgraph {

enum class op_id : int {
#define DLGRAPH_X(name) name,
    DLGRAPH_OP_LIST(DLGRAPH_X)
#undef DLGRAPH_X
    count
};
inline constexpr int op_count = static_cast<int>(op_id::count);

// Every op's definition, in DLGRAPH_OP_LIST's order.
DLGRAPH_INLINE const std::vector<OpDef>& op_table();
// The definition of op `type`, or nullptr.
DLGRAPH_INLINE const OpDef* find_op(std::string_view type);

}  // namespace dlgraph

#if DLGRAPH_DEFINE_OPS
#include "dlgraph/ops/all_ops.hpp"
#endif
