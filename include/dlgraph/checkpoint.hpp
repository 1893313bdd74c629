// Checkpoints: a session's program and the values of its persistable
// variables (parameters, optimizer moments, learning rates, ...) in one
// directory, so that training can stop and resume, or a model be served.
//
//   DIR/program.json        the ProgramDesc (save_program)
//   DIR/<escaped NAME>.npy  one file per persistable LOD_TENSOR variable of
//                           block 0 (escape_file_name: "fc.w@0" -> "fc.w%400")
//
// save_checkpoint writes everything into a hidden sibling directory
// (".NAME.tmp-..."), fsyncs it, and only then puts it in place of DIR, so a
// failure part-way leaves the previous checkpoint untouched and no temporary
// directory behind. load_checkpoint reads and checks every file first and
// reports every problem at once; only if all fit does it assign the values
// into the session's root scope (never a partial load). The layout is
// described in docs/format.md; `dlgraph run --params DIR` reads it.
//
// Neither function may run while another thread evaluates on the session.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <list>
#include <string>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <unistd.h>
#endif
#include <cstdio>  // renameat2 and RENAME_EXCHANGE (glibc, _GNU_SOURCE)

#include "dlgraph/config.hpp"
#include "dlgraph/npy.hpp"
#include "dlgraph/session.hpp"
#include "dlgraph/validate.hpp"

namespace dlgraph {

namespace detail {

// Test hook: when set, save_checkpoint calls it with the path of each file
// it is about to write (inside its temporary directory). Tests make it throw
// to inject a failure part-way through a save.
inline std::function<void(const std::string& path)> checkpoint_write_hook;
// Test hook: when true, save_checkpoint replaces a previous checkpoint with
// two renames even where the system could exchange the two directories.
inline bool checkpoint_no_exchange = false;

// The variables a checkpoint holds: persistable tensors of block 0.
DLGRAPH_INLINE std::vector<const VarDesc*> checkpoint_vars(const ProgramDesc& p);

DLGRAPH_INLINE std::string checkpoint_file(const std::filesystem::path& dir, const std::string& name);

// "" when `t` fits the declaration (same dtype; dims equal where declared,
// -1 matching any size; empty dims matching any shape), else one line.
DLGRAPH_INLINE std::string checkpoint_mismatch(const VarDesc& vd, const Tensor& t, const std::string& where);

[[noreturn]] inline void checkpoint_fail(const std::string& verb, const std::string& dir,
                                         const std::vector<std::string>& problems) {
    std::string msg = "cannot " + verb + " checkpoint '" + dir + "': " + std::to_string(problems.size()) +
                      (problems.size() == 1 ? " problem" : " problems");
    for (auto& p : problems) msg += "\n  " + p;
    throw io_error("dlgraph.io.checkpoint", msg);
}

// The message of a dlgraph error without its "[id] " prefix.
DLGRAPH_INLINE std::string message_of(const error& e);

// Flushes a directory's entries to disk (best effort: not every system can).
DLGRAPH_INLINE void fsync_directory(const std::filesystem::path& dir);

// Swaps two directory entries in one step where the system can (Linux
// renameat2 with RENAME_EXCHANGE); false where it cannot.
DLGRAPH_INLINE bool exchange_entries(const std::filesystem::path& a, const std::filesystem::path& b);

// A name no other save (in this or another process) uses at the same time.
DLGRAPH_INLINE std::string checkpoint_unique_suffix();

// Where a checkpoint goes: `dir` checked (a directory name; an existing one
// must be a checkpoint or empty, not a link), its parent, and whether an old
// checkpoint is replaced.
struct checkpoint_target {
    std::string dir;                 // as given, for messages
    std::filesystem::path path, parent;
    std::string name;                // the last component
    std::string suffix;              // unique to this save: temporary names
    bool replace = false;
};
DLGRAPH_INLINE checkpoint_target checkpoint_target_of(const std::string& dir);

// Writes program.json and one .npy per value into a new temporary sibling
// of the target and returns it; on failure removes it and throws.
DLGRAPH_INLINE std::filesystem::path write_checkpoint_aside(
        const checkpoint_target& t, const ProgramDesc& program,
        const std::vector<std::pair<const VarDesc*, const Tensor*>>& values);

// Puts the written directory `tmp` in the target's place: a rename, or an
// atomic exchange with the old checkpoint where the system has one, else two
// renames (the old one aside, the new one in).
DLGRAPH_INLINE void swap_in_checkpoint(const checkpoint_target& t, const std::filesystem::path& tmp);

// Writes one file of a checkpoint, calling the test hook first.
template <class F> void checkpoint_write(const std::string& path, F&& write) {
    if (checkpoint_write_hook) checkpoint_write_hook(path);
    write();
}

}  // namespace detail

// The program of a checkpoint (DIR/program.json), loaded and validated.
DLGRAPH_INLINE ProgramDesc load_checkpoint_program(const std::string& dir);

// Writes the session's program and every persistable tensor variable of
// block 0 to directory `dir`, replacing a previous checkpoint there.
// Persistables without a value get one first from their initializer ops
// (Session::initialize_persistables). An existing `dir` must be a
// checkpoint (it holds program.json) or empty: anything else is refused,
// so a mistyped path never deletes unrelated files. On any failure the
// previous checkpoint is left as it was and no temporary directory remains.
template <device_policy D> void save_checkpoint(Session<D>& session, const std::string& dir) {
    const detail::checkpoint_target target = detail::checkpoint_target_of(dir);
    session.initialize_persistables();
    std::list<Tensor> on_host;  // host copies of values in device memory
    std::vector<std::pair<const VarDesc*, const Tensor*>> values;
    std::vector<std::string> problems;
    for (const VarDesc* vd : detail::checkpoint_vars(session.program())) {
        const Variable* v = session.scope().find_local(vd->name);
        if (!v || !v->initialized()) {
            problems.push_back("variable '" + vd->name + "' has no value");
        } else if (!v->is<Tensor>()) {
            problems.push_back("variable '" + vd->name + "' holds " + v->kind() + ", not a tensor");
        } else {
            const Tensor* t = &v->get<Tensor>();
            if (t->place() != Place::host) t = &on_host.emplace_back(*t);
            std::string m = detail::checkpoint_mismatch(*vd, *t, "the session's value is");
            if (m.empty()) values.emplace_back(vd, t);
            else problems.push_back(std::move(m));
        }
    }
    if (!problems.empty()) detail::checkpoint_fail("save", dir, problems);
    const std::filesystem::path tmp = detail::write_checkpoint_aside(target, session.program(), values);
    detail::swap_in_checkpoint(target, tmp);
}

// Reads every persistable tensor variable of the session's program (block
// 0) from DIR/<escaped NAME>.npy and, only if every file exists, is readable
// and fits its declaration (dtype equal; dims equal where declared, -1
// matching any size), assigns them all into the session's root scope. Else
// throws one io_error [dlgraph.io.checkpoint] listing every problem, one per
// line, and the session is unchanged. Files of other variables are ignored.
template <device_policy D> void load_checkpoint(Session<D>& session, const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw io_error("dlgraph.io.open", "cannot load checkpoint '" + dir + "': " +
                                              (fs::exists(dir, ec) ? "it is not a directory" : "no such directory"));
    std::vector<std::pair<std::string, Tensor>> loaded;
    std::vector<std::string> problems;
    Scope& root = session.scope();
    for (const VarDesc* vd : detail::checkpoint_vars(session.program())) {
        const std::string path = detail::checkpoint_file(dir, vd->name);
        if (!fs::exists(path, ec)) {
            problems.push_back("variable '" + vd->name + "': missing file '" + path + "'");
            continue;
        }
        if (const Variable* v = root.find_local(vd->name); v && v->initialized() && !v->is<Tensor>()) {
            problems.push_back("variable '" + vd->name + "' holds " + v->kind() + " in the session, not a tensor");
            continue;
        }
        try {
            Tensor t = read_npy(path);
            std::string m = detail::checkpoint_mismatch(*vd, t, "'" + path + "' holds");
            if (m.empty()) loaded.emplace_back(vd->name, std::move(t));
            else problems.push_back(std::move(m));
        } catch (const error& e) {
            problems.push_back("variable '" + vd->name + "': " + detail::message_of(e));
        }
    }
    if (!problems.empty()) detail::checkpoint_fail("load", dir, problems);
    // Into the existing Tensor objects: cached plans point at them.
    for (auto& entry : loaded) root.var(entry.first).get_mutable<Tensor>() = std::move(entry.second);
}

}  // namespace dlgraph

#if DLGRAPH_EXTERN_TEMPLATES
namespace dlgraph {
extern template void save_checkpoint<cpu>(Session<cpu>&, const std::string&);
extern template void load_checkpoint<cpu>(Session<cpu>&, const std::string&);
}  // namespace dlgraph
#endif

#if DLGRAPH_DEFINE_RUNTIME

namespace dlgraph::detail {

DLGRAPH_INLINE checkpoint_target checkpoint_target_of(const std::string& dir) {
    namespace fs = std::filesystem;
    checkpoint_target t;
    t.dir = dir;
    t.path = dir;
    if (!t.path.empty() && !t.path.has_filename()) t.path = t.path.parent_path();  // "ck/" -> "ck"
    t.name = t.path.filename().string();
    if (t.path.empty() || t.name == "." || t.name == "..")
        throw io_error("dlgraph.io.checkpoint", "cannot save checkpoint '" + dir + "': name a directory (not '" +
                                                    (dir.empty() ? std::string() : t.name) + "')");
    t.parent = t.path.parent_path();
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(t.path, ec);
    t.replace = fs::exists(st);
    if (t.replace) {
        if (fs::is_symlink(st))
            throw io_error("dlgraph.io.checkpoint", "cannot save checkpoint '" + dir +
                                                        "': it is a symbolic link; name the directory itself");
        if (!fs::is_directory(st))
            throw io_error("dlgraph.io.checkpoint", "cannot save checkpoint '" + dir + "': it exists and is not a directory");
        if (!fs::exists(t.path / "program.json", ec) && !fs::is_empty(t.path, ec))
            throw io_error("dlgraph.io.checkpoint", "cannot save checkpoint '" + dir +
                                                        "': the directory exists and is not a checkpoint (it has no "
                                                        "program.json); refusing to replace it");
    }
    t.suffix = checkpoint_unique_suffix();
    return t;
}

DLGRAPH_INLINE std::filesystem::path write_checkpoint_aside(
        const checkpoint_target& t, const ProgramDesc& program,
        const std::vector<std::pair<const VarDesc*, const Tensor*>>& values) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!t.parent.empty() && !fs::is_directory(t.parent, ec)) {
        fs::create_directories(t.parent, ec);
        if (ec || !fs::is_directory(t.parent))
            throw io_error("dlgraph.io.mkdir", "cannot save checkpoint '" + t.dir + "': cannot create directory '" +
                                                   t.parent.string() + "'" + (ec ? ": " + ec.message() : std::string()));
    }
    const fs::path tmp = t.parent / ("." + t.name + ".tmp-" + t.suffix);
    if (!fs::create_directory(tmp, ec) || ec)
        throw io_error("dlgraph.io.mkdir", "cannot save checkpoint '" + t.dir + "': cannot create temporary directory '" +
                                               tmp.string() + "'" + (ec ? ": " + ec.message() : std::string()));
    try {
        const std::string json_path = (tmp / "program.json").string();
        const std::string text = save_program(program);
        checkpoint_write(json_path, [&] { write_file_atomic(json_path, {text}); });
        for (auto& entry : values) {
            const std::string path = checkpoint_file(tmp, entry.first->name);
            checkpoint_write(path, [&] { write_npy(path, *entry.second); });
        }
        fsync_directory(tmp);
    } catch (...) {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);
        throw;
    }
    return tmp;
}

DLGRAPH_INLINE void swap_in_checkpoint(const checkpoint_target& t, const std::filesystem::path& tmp) {
    namespace fs = std::filesystem;
    std::error_code ec;
    auto discard_tmp = [&] {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);
    };
    auto fail = [&](const std::string& why) {
        throw io_error("dlgraph.io.write", "cannot save checkpoint '" + t.dir + "': " + why);
    };
    if (!t.replace) {
        fs::rename(tmp, t.path, ec);
        if (ec) {
            discard_tmp();
            fail("rename from '" + tmp.string() + "' failed: " + ec.message());
        }
    } else if (!checkpoint_no_exchange && exchange_entries(tmp, t.path)) {
        discard_tmp();  // now holds the previous checkpoint
    } else {
        // Two renames: the old checkpoint aside, the new one in. Between
        // them (a crash there) the old one is at `old`.
        const fs::path old = t.parent / ("." + t.name + ".old-" + t.suffix);
        fs::rename(t.path, old, ec);
        if (ec) {
            discard_tmp();
            fail("cannot move the previous one aside: " + ec.message());
        }
        fs::rename(tmp, t.path, ec);
        if (ec) {
            std::error_code back;
            fs::rename(old, t.path, back);
            discard_tmp();
            fail("rename from '" + tmp.string() + "' failed: " + ec.message() +
                 (back ? "; the previous checkpoint is at '" + old.string() + "'" : std::string()));
        }
        std::error_code ignored;
        fs::remove_all(old, ignored);
    }
    fsync_directory(t.parent);
}

}  // namespace dlgraph::detail

namespace dlgraph::detail {

DLGRAPH_INLINE std::vector<const VarDesc*> checkpoint_vars(const ProgramDesc& p) {
    std::vector<const VarDesc*> out;
    for (auto& v : p.blocks.at(0).vars)
        if (v.persistable && v.type == VarType::LOD_TENSOR) out.push_back(&v);
    return out;
}

DLGRAPH_INLINE std::string checkpoint_file(const std::filesystem::path& dir, const std::string& name) {
    return (dir / (escape_file_name(name) + ".npy")).string();
}

DLGRAPH_INLINE std::string checkpoint_mismatch(const VarDesc& vd, const Tensor& t, const std::string& where) {
    const bool dtype_ok = t.dtype() == vd.data_type;
    const bool shape_ok = vd.dims.empty() || dims_compatible(Shape(vd.dims), t.shape());
    if (dtype_ok && shape_ok) return {};
    return "variable '" + vd.name + "': " + where + " " + to_string(t.dtype()) + " " + to_string(t.shape()) +
           ", the program declares " + to_string(vd.data_type) + " " + to_string(Shape(vd.dims)) + " (" +
           (dtype_ok ? "shape" : shape_ok ? "dtype" : "dtype and shape") + " mismatch)";
}

DLGRAPH_INLINE std::string message_of(const error& e) {
    std::string s = e.what();
    return s.size() >= e.id().size() + 3 ? s.substr(e.id().size() + 3) : s;
}

DLGRAPH_INLINE void fsync_directory(const std::filesystem::path& dir) {
#if defined(__unix__) || defined(__APPLE__)
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY);
    if (fd < 0) return;
    (void)::fsync(fd);
    ::close(fd);
#else
    (void)dir;
#endif
}

DLGRAPH_INLINE bool exchange_entries(const std::filesystem::path& a, const std::filesystem::path& b) {
#if defined(__linux__) && defined(RENAME_EXCHANGE) && defined(AT_FDCWD)
    return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
#else
    (void)a, (void)b;
    return false;
#endif
}

DLGRAPH_INLINE std::string checkpoint_unique_suffix() {
    static std::atomic<unsigned> counter{0};
    std::string s;
#if defined(__unix__) || defined(__APPLE__)
    s += std::to_string(::getpid()) + "-";
#endif
    s += std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" +
         std::to_string(counter++);
    return s;
}

}  // namespace dlgraph::detail

namespace dlgraph {

DLGRAPH_INLINE ProgramDesc load_checkpoint_program(const std::string& dir) {
    return load_program_file((std::filesystem::path(dir) / "program.json").string());
}

}  // namespace dlgraph
#endif  // DLGRAPH_DEFINE_RUNTIME
