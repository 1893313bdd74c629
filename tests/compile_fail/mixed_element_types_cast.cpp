// The twin of mixed_element_types.cpp that must compile: the same sum with
// the explicit cast it asks for. If this fails, the compile-fail test proves
// nothing about the cast.
#include <dlgraph/dlgraph.hpp>
int main() {
    dlgraph::Program p;
    auto a = p.input<float>("a", {2});
    auto b = p.input<double>("b", {2});
    auto c = a + dlgraph::cast<float>(b);
    (void)c;
}
