// Must not compile: a fixed:: sum of [2,3] and [4] (trailing dims 3 and 4
// differ, neither is 1). The message names the op and both shapes.
#include <dlgraph/fixed/expr.hpp>

namespace fx = dlgraph::fixed;

float x[6], b[4], y[6];

int main() {
    fx::Var<float, 2, 3> vx{x};
    fx::Var<float, 4> vb{b};
    auto z = vx + vb;
    fx::arena<decltype(z)> a;
    fx::run(z, y, a);
}
