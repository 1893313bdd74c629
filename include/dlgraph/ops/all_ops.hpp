// Every op's definition and kernels, and the table over them (see
// op_table.hpp for the two ways they are compiled).
#pragma once

#include <unordered_map>

#include "dlgraph/ops/elementwise.hpp"
#include "dlgraph/ops/eval_ops.hpp"
#include "dlgraph/ops/feed_fetch.hpp"
#include "dlgraph/ops/fill.hpp"
#include "dlgraph/ops/io_ops.hpp"
#include "dlgraph/ops/matmul.hpp"
#include "dlgraph/ops/memcpy.hpp"
#include "dlgraph/ops/op_table.hpp"
#include "dlgraph/ops/optimizers.hpp"
#include "dlgraph/ops/reduce.hpp"
#include "dlgraph/ops/shape_ops.hpp"
#include "dlgraph/ops/softmax.hpp"

namespace dlgraph {

DLGRAPH_INLINE const std::vector<OpDef>& op_table() {
    static const std::vector<OpDef> table = [] {
        std::vector<OpDef> t{
#define DLGRAPH_X(name) ops::name##_def(),
            DLGRAPH_OP_LIST(DLGRAPH_X)
#undef DLGRAPH_X
        };
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
