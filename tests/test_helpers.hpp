// Shared helpers for dlgraph's tests.
#pragma once

#include <doctest/doctest.h>

#include <string>

// Checks that `expr` throws an exception of type `type` whose message
// contains every one of the given substrings.
#define CHECK_THROWS_CONTAINING(expr, type, ...)                                                    \
    do {                                                                                            \
        bool thrown_ = false;                                                                       \
        try {                                                                                       \
            (void)(expr);                                                                           \
        } catch (const type& e_) {                                                                  \
            thrown_ = true;                                                                         \
            std::string msg_ = e_.what();                                                           \
            for (std::string part_ : {__VA_ARGS__}) {                                               \
                INFO("message: " << msg_);                                                          \
                CHECK_MESSAGE(msg_.find(part_) != std::string::npos, "missing '" << part_ << "'"); \
            }                                                                                       \
        }                                                                                           \
        CHECK_MESSAGE(thrown_, "expected " #type " from " #expr);                                   \
    } while (0)
