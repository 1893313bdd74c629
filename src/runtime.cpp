// dlgraph::prebuilt, second half: the planner, validation, JSON, .npy and
// checkpoint code and Session<cpu>, compiled once for programs built with
// DLGRAPH_PREBUILT (see include/dlgraph/config.hpp). The op kernels are in
// src/ops.cpp.
#define DLGRAPH_BUILDING_RUNTIME
#include "dlgraph/dlgraph.hpp"
#include "dlgraph/optimizer.hpp"

namespace dlgraph {
template class Session<cpu>;
template void save_checkpoint<cpu>(Session<cpu>&, const std::string&);
template void load_checkpoint<cpu>(Session<cpu>&, const std::string&);
}  // namespace dlgraph
