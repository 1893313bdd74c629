// dlgraph::ops: every op's kernels compiled once, for programs built with
// DLGRAPH_PREBUILT_OPS (see include/dlgraph/ops/op_table.hpp).
#define DLGRAPH_BUILDING_OPS
#ifdef DLGRAPH_PREBUILT_OPS
#error "src/ops.cpp defines the op table; compile it without DLGRAPH_PREBUILT_OPS"
#endif
#include "dlgraph/ops/all_ops.hpp"
