// dlgraph's one exception hierarchy. Every message starts with a stable id in
// brackets ("[dlgraph.shape.broadcast] ...") so tests and tools can match on
// it, followed by the facts: op, variable names and shapes involved.
#pragma once

#include <stdexcept>
#include <string>

namespace dlgraph {

class error : public std::runtime_error {
public:
    error(const std::string& id, const std::string& message)
        : std::runtime_error("[" + id + "] " + message), id_(id) {}
    // The stable id, e.g. "dlgraph.shape.broadcast".
    const std::string& id() const noexcept { return id_; }

private:
    std::string id_;
};

// Malformed or inconsistent program descriptions (JSON or built in C++).
class format_error : public error { using error::error; };
// Data-type mismatches: wrong dtype of a feed, a read, an op input.
class type_error : public error { using error::error; };
// Shapes that do not fit an op, a feed or a variable declaration.
class shape_error : public error { using error::error; };
// Graph problems: unknown ops, undeclared variables, cycles, bad targets.
class graph_error : public error { using error::error; };
// Feeds that are missing or name nothing.
class feed_error : public error { using error::error; };
// Reading a value that was never set, or as the wrong kind.
class value_error : public error { using error::error; };
// Use of a closed session and similar lifecycle errors.
class session_error : public error { using error::error; };
// Files: .npy and program files that cannot be read or written.
class io_error : public error { using error::error; };
// Limits: a shape, file or document that would take more memory than
// allowed (SessionOptions::max_tensor_bytes, max_shape_bytes, JSON depth).
class resource_error : public error { using error::error; };
// Collective communication (comm.hpp): ranks whose calls do not match, a peer
// that does not answer in time, a missing communicator, the transport's own
// errors.
class comm_error : public error { using error::error; };

}  // namespace dlgraph
