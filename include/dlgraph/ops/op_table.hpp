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

#include <iterator>
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
    X(dropout) X(dropout_grad) X(increment)                                                                   \
    X(softsign) X(sin) X(cos) X(reciprocal) X(rsqrt) X(floor) X(ceil) X(round) X(sign) X(gelu) X(leaky_relu)    \
    X(elu) X(relu6) X(hard_sigmoid) X(hard_swish) X(softplus) X(swish)                                          \
    X(softsign_grad) X(sin_grad) X(cos_grad) X(reciprocal_grad) X(rsqrt_grad) X(floor_grad) X(ceil_grad)        \
    X(round_grad) X(sign_grad) X(gelu_grad) X(leaky_relu_grad) X(elu_grad) X(relu6_grad) X(hard_sigmoid_grad)  \
    X(hard_swish_grad) X(softplus_grad) X(swish_grad) X(layer_norm) X(layer_norm_grad) X(log_softmax)             \
    X(log_softmax_grad) X(lookup_table) X(lookup_table_grad) X(lookup_table_v2) X(lookup_table_v2_grad)  \
    X(less_than) X(less_equal) X(greater_than) X(greater_equal) X(equal) X(not_equal) X(logical_and) X(logical_or) \
    X(logical_xor) X(logical_not) X(where) X(where_grad) X(clip) X(clip_grad) X(pow) X(pow_grad)            \
    X(reduce_min) X(reduce_prod) X(reduce_all) X(reduce_any) X(reduce_min_grad) X(reduce_prod_grad)          \
    X(arg_max) X(arg_min) X(cumsum) X(cumsum_grad) X(one_hot) X(one_hot_v2) X(adamw) X(squeeze2)             \
    X(unsqueeze2) X(squeeze2_grad) X(unsqueeze2_grad) X(flip)                  \
    X(c_allreduce_sum) X(c_allreduce_max) X(c_allreduce_min) X(c_allreduce_prod) X(c_broadcast) X(c_allgather) \
    X(slice) X(slice_grad) X(bce_loss) X(bce_loss_grad)                                                           \
    X(stack) X(stack_grad) X(unstack) X(unstack_grad) X(tile) X(tile_grad) X(expand) X(expand_grad)              \
    X(expand_v2) X(expand_v2_grad) X(pad) X(pad_grad) X(gather) X(gather_grad) X(scatter) X(scatter_grad)        \
    X(elementwise_mod) X(elementwise_floordiv) X(sigmoid_cross_entropy_with_logits)                              \
    X(sigmoid_cross_entropy_with_logits_grad) X(huber_loss) X(huber_loss_grad) X(smooth_l1_loss)                \
    X(smooth_l1_loss_grad) X(kldiv_loss) X(kldiv_loss_grad) X(adagrad) X(rmsprop) X(lamb) X(range) X(matmul_v2) X(matmul_v2_grad)

namespace dlgraph {

enum class op_id : int {
#define DLGRAPH_X(name) name,
    DLGRAPH_OP_LIST(DLGRAPH_X)
#undef DLGRAPH_X
    count
};
inline constexpr int op_count = static_cast<int>(op_id::count);

namespace detail {
#define DLGRAPH_X(name) std::string_view(#name),
inline constexpr std::string_view op_row_names[] = {DLGRAPH_OP_LIST(DLGRAPH_X)};
#undef DLGRAPH_X
// The table's rows are well formed: no type twice, and every "T_grad" row
// comes after a row "T" (a grad op without its forward op is a typo).
template <std::size_t N> consteval bool op_rows_valid(const std::string_view (&rows)[N]) {
    constexpr std::string_view suffix = "_grad";
    for (std::size_t i = 0; i < N; ++i) {
        const std::string_view n = rows[i];
        for (std::size_t j = 0; j < i; ++j)
            if (rows[j] == n) return false;
        if (n.size() > suffix.size() && n.substr(n.size() - suffix.size()) == suffix) {
            bool forward = false;
            for (std::size_t j = 0; j < i; ++j) forward = forward || rows[j] == n.substr(0, n.size() - suffix.size());
            if (!forward) return false;
        }
    }
    return true;
}
static_assert(std::size(op_row_names) == static_cast<std::size_t>(op_count));
static_assert(op_rows_valid(op_row_names), "DLGRAPH_OP_LIST: a type is listed twice, or a T_grad row has no row T before it");
}  // namespace detail

namespace detail {
// The built-in op `type` (op_table's row), or nullptr.
DLGRAPH_INLINE const OpDef* find_builtin_op(std::string_view type);
}  // namespace detail

// Every built-in op's definition, in DLGRAPH_OP_LIST's order.
DLGRAPH_INLINE const std::vector<OpDef>& op_table();
// The definition of op `type` (built-in or registered), or nullptr.
DLGRAPH_INLINE const OpDef* find_op(std::string_view type);

// ---- ops from user code -------------------------------------------------------
//
// A user defines an OpDef in their own file (slots, attributes, `infer`, CPU
// kernels, optionally `device_kernels`, a GradSpec or grad maker, `fusible`
// when element-wise) and registers it once; from then on the builder
// (Program::append, apply), JSON loading, the planner, fusion, autodiff and
// the CLI (a build of it that links the registration, dlgraph_add_cli) treat
// it as a built-in op. Registration copies the definition's strings, so
// they may come from anywhere. It throws graph_error
// "dlgraph.op.duplicate" for a type that exists (built-in or registered) and
// "dlgraph.op.definition" for a definition that contradicts itself
// (check_op_definition); nothing is registered then. Thread-safe; a
// registered op stays for the life of the program.
DLGRAPH_INLINE const OpDef& register_op(OpDef def);
// The registered (non-built-in) ops, in registration order.
DLGRAPH_INLINE std::vector<const OpDef*> registered_ops();
// Throws graph_error "dlgraph.op.definition" naming the first inconsistency
// of `def`: no type or shape inference, a slot or attribute named twice, an
// attribute whose default has another name, a kernel choice that points at
// nothing, no CPU kernel, a GradSpec and a grad maker both, or slots of
// the GradSpec, no_grad_inputs or the fusion contract that the op lacks.
DLGRAPH_INLINE void check_op_definition(const OpDef& def);

}  // namespace dlgraph

// Registers op definition `make()` (a function returning an OpDef) when
// the program starts: DLGRAPH_REGISTER_OP(my_op_def); at namespace scope.
#define DLGRAPH_REGISTER_OP(make) DLGRAPH_REGISTER_OP_AT(make, __COUNTER__)
#define DLGRAPH_REGISTER_OP_AT(make, n) DLGRAPH_REGISTER_OP_AT2(make, n)
#define DLGRAPH_REGISTER_OP_AT2(make, n) \
    [[maybe_unused]] static const ::dlgraph::OpDef& dlgraph_registered_op_##n = ::dlgraph::register_op(make())

#if DLGRAPH_DEFINE_OPS
#include "dlgraph/ops/all_ops.hpp"
#endif
