// Every op's definition and CPU kernels, and the table over them (see
// op_table.hpp for the two ways they are compiled). Row NAME of the table is
// ops::NAME_def() (the definition) given its CPU kernels by
// cpu_ops::NAME_kernels(OpDef&); a missing one fails the build.
#pragma once

#include <unordered_map>

#include "dlgraph/cpu/conv.hpp"
#include "dlgraph/cpu/dropout.hpp"
#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/cpu/eval_ops.hpp"
#include "dlgraph/cpu/feed_fetch.hpp"
#include "dlgraph/cpu/fill.hpp"
#include "dlgraph/cpu/io_ops.hpp"
#include "dlgraph/cpu/matmul.hpp"
#include "dlgraph/cpu/memcpy.hpp"
#include "dlgraph/cpu/norm.hpp"
#include "dlgraph/cpu/optimizers.hpp"
#include "dlgraph/cpu/reduce.hpp"
#include "dlgraph/cpu/shape_ops.hpp"
#include "dlgraph/cpu/softmax.hpp"
#include "dlgraph/ops/op_table.hpp"

namespace dlgraph {

DLGRAPH_INLINE const std::vector<OpDef>& op_table() {
    static const std::vector<OpDef> table = [] {
        std::vector<OpDef> t;
        t.reserve(static_cast<std::size_t>(op_count));
#define DLGRAPH_X(name)                  \
    t.push_back(ops::name##_def());      \
    cpu_ops::name##_kernels(t.back());
        DLGRAPH_OP_LIST(DLGRAPH_X)
#undef DLGRAPH_X
        return t;
    }();
    return table;
}

DLGRAPH_INLINE const OpDef* find_op(std::string_view type) {
    static const std::unordered_map<std::string_view, const OpDef*> index = [] {
        std::unordered_map<std::string_view, const OpDef*> m;
        for (auto& d : op_table()) m.emplace(d.type, &d);
        return m;
    }();
    auto it = index.find(type);
    return it == index.end() ? nullptr : it->second;
}

}  // namespace dlgraph
