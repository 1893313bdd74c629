// Header-only or prebuilt. dlgraph works as plain headers: every function is
// inline and every template is instantiated where it is used. A program can
// instead link the library dlgraph::prebuilt (CMake), which defines
// DLGRAPH_PREBUILT for it: then the headers only declare the non-template
// code (planner, validation, JSON, checkpoints, the op kernels, Session<cpu>)
// and the library holds it compiled once, so a program's own files compile
// in a fraction of the time. One program uses one mode in all its files.
//
// The library itself is built from src/ops.cpp (DLGRAPH_BUILDING_OPS: the op
// table and kernels) and src/runtime.cpp (DLGRAPH_BUILDING_RUNTIME: the
// rest); each defines its half and declares the other.
#pragma once

#if defined(DLGRAPH_PREBUILT) && (defined(DLGRAPH_BUILDING_OPS) || defined(DLGRAPH_BUILDING_RUNTIME))
#error "dlgraph's library sources define the code that DLGRAPH_PREBUILT declares; build them without it"
#endif

#if defined(DLGRAPH_PREBUILT) || defined(DLGRAPH_BUILDING_OPS) || defined(DLGRAPH_BUILDING_RUNTIME)
// Non-template functions are ordinary functions of the library, defined in
// the source that builds their half. Templates the library instantiates
// (Session<cpu>, ...) are declared `extern template` everywhere else.
#define DLGRAPH_INLINE
#ifdef DLGRAPH_BUILDING_OPS
#define DLGRAPH_DEFINE_OPS 1
#else
#define DLGRAPH_DEFINE_OPS 0
#endif
#ifdef DLGRAPH_BUILDING_RUNTIME
#define DLGRAPH_DEFINE_RUNTIME 1
#define DLGRAPH_EXTERN_TEMPLATES 0
#else
#define DLGRAPH_DEFINE_RUNTIME 0
#define DLGRAPH_EXTERN_TEMPLATES 1
#endif
#else
#define DLGRAPH_INLINE inline
#define DLGRAPH_DEFINE_OPS 1
#define DLGRAPH_DEFINE_RUNTIME 1
#define DLGRAPH_EXTERN_TEMPLATES 0
#endif
