// dlgraph::prebuilt, first half: every op's definition and kernels compiled
// once, for programs built with DLGRAPH_PREBUILT (see
// include/dlgraph/config.hpp). The rest of the runtime is in src/runtime.cpp.
#define DLGRAPH_BUILDING_OPS
#include "dlgraph/ops/all_ops.hpp"
