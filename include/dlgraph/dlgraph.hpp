// The umbrella header: everything a user of dlgraph needs.
#pragma once

#include "dlgraph/builder.hpp"
#include "dlgraph/checkpoint.hpp"
#include "dlgraph/comm.hpp"
#include "dlgraph/dot.hpp"
#include "dlgraph/json.hpp"
#include "dlgraph/npy.hpp"
#include "dlgraph/npz.hpp"
#include "dlgraph/ops/op_table.hpp"
#include "dlgraph/parallel.hpp"
#include "dlgraph/plan_io.hpp"
#include "dlgraph/planner.hpp"
#include "dlgraph/scope.hpp"
#include "dlgraph/session.hpp"
#include "dlgraph/tensor.hpp"
#include "dlgraph/validate.hpp"
#include "dlgraph/xtensor.hpp"
