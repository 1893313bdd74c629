// Must not compile: a fixed:: product of [1,784] and [783,256]. The
// message names the op and both shapes (tests/CMakeLists.txt checks it).
#include <dlgraph/fixed/expr.hpp>

namespace fx = dlgraph::fixed;

float x[784], w[783 * 256], y[256];

int main() {
    fx::Var<float, 1, 784> vx{x};
    fx::Var<float, 783, 256> vw(w);
    auto h = fx::relu(fx::matmul(vx, vw));
    fx::arena<decltype(h)> a;
    fx::run(h, y, a);
}
