// Must not compile: adding a Var<float> to a Var<double> needs an explicit cast.
#include <dlgraph/dlgraph.hpp>
int main() {
    dlgraph::Program p;
    auto a = p.input<float>("a", {2});
    auto b = p.input<double>("b", {2});
    auto c = a + b;
    (void)c;
}
