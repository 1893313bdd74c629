// Scope: hierarchy, shadowing, lazy allocation, and concurrent use (this file
// also runs under ThreadSanitizer; its thread tests have "thread" in the name).
#include <dlgraph/scope.hpp>

#include <thread>

#include "test_helpers.hpp"

using namespace dlgraph;

TEST_CASE("a child finds its parent's variables, never the reverse") {
    Scope root;
    root.var("w");
    Scope& kid = root.new_child();
    kid.var("h");
    CHECK(kid.find("w") == root.find("w"));
    CHECK(root.find("h") == nullptr);
    CHECK(kid.find_local("w") == nullptr);
    CHECK(root.find("nothing") == nullptr);
    CHECK(root.size() == 1);  // find never creates
}

TEST_CASE("a local variable shadows the parent's") {
    Scope root;
    root.var("x").get_mutable<Tensor>() = Tensor::scalar(1.0f);
    Scope& kid = root.new_child();
    kid.var("x").get_mutable<Tensor>() = Tensor::scalar(2.0f);
    CHECK(kid.find("x")->get<Tensor>().item<float>() == 2.0f);
    CHECK(root.find("x")->get<Tensor>().item<float>() == 1.0f);
    root.drop_child(kid);
    CHECK(root.child_count() == 0);
}

TEST_CASE("memory is allocated when a variable is first written with a known shape") {
    Scope s;
    Variable& v = s.var("t");
    CHECK_FALSE(v.initialized());
    Tensor& t = v.get_mutable<Tensor>();
    CHECK_FALSE(v.initialized());
    CHECK(t.capacity() == 0);
    t.resize(DataType::FP64, {3, 4});
    CHECK(v.initialized());
    CHECK(t.capacity() >= 96);
    CHECK(reinterpret_cast<std::uintptr_t>(t.raw()) % 64 == 0);
    CHECK_THROWS_AS(t.resize(DataType::FP32, {-1, 2}), shape_error);
}

TEST_CASE("variables hold scalars, strings and tensor lists") {
    Scope s;
    s.var("s").get_mutable<std::string>() = "hello";
    s.var("n").get_mutable<Scalar>() = Scalar{DataType::INT64, 7, 7.0};
    s.var("l").get_mutable<TensorList>().push_back(Tensor::scalar(1));
    CHECK(s.find("s")->get<std::string>() == "hello");
    CHECK(s.find("n")->get<Scalar>().i == 7);
    CHECK(s.find("l")->get<TensorList>().size() == 1);
    CHECK_THROWS_AS(s.find("s")->get_mutable<Tensor>(), type_error);
}

TEST_CASE("scope thread safety: concurrent creation and lookup") {
    Scope root;
    for (int i = 0; i < 16; ++i) root.var("p" + std::to_string(i));
    std::vector<std::thread> threads;
    std::vector<int> found(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            Scope& kid = root.new_child();
            for (int i = 0; i < 500; ++i) {
                kid.var("local" + std::to_string(i % 50));
                root.var("shared" + std::to_string(i % 20));
                if (kid.find("p" + std::to_string(i % 16))) ++found[static_cast<std::size_t>(t)];
                (void)root.find("shared" + std::to_string(i % 7));
            }
        });
    for (auto& th : threads) th.join();
    for (int f : found) CHECK(f == 500);
    CHECK(root.size() == 36);
    CHECK(root.child_count() == 4);
}
