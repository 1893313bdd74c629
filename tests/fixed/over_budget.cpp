// Must not compile: the demo's MLP emitted with an arena budget of 1000
// bytes, which its arena (1,072 bytes) exceeds. The compiler's message names
// both (tests/CMakeLists.txt checks it).
#include "over_budget.hpp"

int main() { return static_cast<int>(mlp::arena_bytes); }
