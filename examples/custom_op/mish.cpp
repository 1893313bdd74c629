// Registers mish and mish_grad when the program starts. A program (or a
// build of the dlgraph CLI: dlgraph_add_cli in CMake) that links this file
// knows the ops; one that does not names them as unknown when it loads a
// program that uses them. The grad op goes first, so that registering mish
// checks its GradSpec against mish_grad's slots.
#include "mish.hpp"

DLGRAPH_REGISTER_OP(mish_op::mish_grad_def);
DLGRAPH_REGISTER_OP(mish_op::mish_def);
