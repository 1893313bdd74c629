// Checkpoints and the file ops: save_checkpoint / load_checkpoint round
// trips (several dtypes and shapes, values changed after initialization),
// every problem of a bad checkpoint reported at once with the live session
// unchanged, a failure injected part-way through a save leaving the previous
// checkpoint intact and no temporary directory, refusing to replace what is
// not a checkpoint; the save / load / save_combine / load_combine ops run as
// op targets (with the .npz checked by Python's zipfile when python3 is
// there); and the CLI's --backward and --params on a checkpoint directory.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include <dlgraph/builder.hpp>
#include <dlgraph/checkpoint.hpp>
#include <dlgraph/ops/io_ops.hpp>

#include "test_helpers.hpp"

#ifndef DLGRAPH_CLI
#define DLGRAPH_CLI ""
#endif

using namespace dlgraph;
namespace fs = std::filesystem;

namespace {

using CkTempDir = test_temp_dir;

// Clears the test hooks however the test ends.
struct HookGuard {
    ~HookGuard() {
        detail::checkpoint_write_hook = nullptr;
        detail::checkpoint_no_exchange = false;
    }
};

bool same(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && a.bytes() == b.bytes() &&
           (a.bytes() == 0 || std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

const Tensor& value(Session<cpu>& s, const std::string& name) {
    const Variable* v = s.scope().find(name);
    REQUIRE_MESSAGE(v != nullptr, "no variable '" << name << "' in the session");
    return v->get<Tensor>();
}

// A model with parameters of several dtypes and shapes: w FP32 [3,2]
// (uniform), b FP64 [2] (constant), step INT64 [1] (constant, not
// trainable), and mask INT32 [2,2]: persistable with no initializer (its
// value must be set in the scope). Targets: y = mul(x, w) (FP32 [N,2]) and
// z = b * 2 + 1 (FP64 [2]).
struct Model {
    Program p;
    Var<float> x, w, y;
    Var<double> b, z;
    Var<std::int64_t> step;
    Model() {
        x = p.input<float>("x", {-1, 3});
        w = p.parameter<float>("w", {3, 2}, init::uniform(-1, 1, 7));
        b = p.parameter<double>("fc.b@0", {2}, init::constant(0.5));
        step = p.parameter<std::int64_t>("step", {1}, init::constant(3), false);
        p.edit([](ProgramDesc& d) {
            d.blocks[0].vars.push_back({"mask", VarType::LOD_TENSOR, DataType::INT32, {2, 2}, 0, true});
        });
        y = mul(x, w);
        z = b * 2.0 + 1.0;
    }
    static Tensor feed_x() {
        Tensor t(DataType::FP32, {2, 3});
        float v = 0.25f;
        for (auto& e : t.values<float>()) e = v += 0.5f;
        return t;
    }
    static void set_mask(Session<cpu>& s, std::int32_t base) {
        Tensor m(DataType::INT32, {2, 2});
        for (int i = 0; i < 4; ++i) m.data<std::int32_t>()[i] = base + i;
        s.scope().var("mask").get_mutable<Tensor>() = std::move(m);
    }
};


// Single-quoted for /bin/sh.
std::string shq(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

int shell(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have_python() { return shell("python3 -c 'import zipfile, ast' >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("checkpoint: save, then load into a new session over the saved program") {
    CkTempDir tmp;
    const std::string dir = tmp.file("ckpt");
    Model m;
    const Tensor x = Model::feed_x();
    Tensor y_saved, z_saved;
    {
        Session<cpu> s(m.p);
        Model::set_mask(s, 10);
        const Tensor y_init = s.eval(TargetRef(m.y), {{m.x, x}});
        const Tensor z_init = s.eval(TargetRef(m.z));
        // Change parameters after initialization: the checkpoint must hold these.
        auto wv = s.scope().find("w")->get_mutable<Tensor>().values<float>();
        for (auto& v : wv) v = v * 2 - 0.125f;
        s.scope().find("fc.b@0")->get_mutable<Tensor>().data<double>()[1] = -7.5;
        y_saved = s.eval(TargetRef(m.y), {{m.x, x}});
        z_saved = s.eval(TargetRef(m.z));
        CHECK_FALSE(same(y_saved, y_init));
        CHECK_FALSE(same(z_saved, z_init));
        save_checkpoint(s, dir);

        // Every persistable has a file; the escaped name is used.
        CHECK(tmp.listing("ckpt") ==
              std::vector<std::string>{"fc.b%400.npy", "mask.npy", "program.json", "step.npy", "w.npy"});
        CHECK(tmp.listing() == std::vector<std::string>{"ckpt"});  // no temporary directory left
        CHECK(same(read_npy(tmp.file("ckpt/w.npy")), value(s, "w")));
        CHECK(read_npy(tmp.file("ckpt/step.npy")).item<std::int64_t>() == 3);
    }

    ProgramDesc loaded = load_checkpoint_program(dir);
    CHECK(loaded == m.p.desc());
    Session<cpu> s2(std::move(loaded));
    load_checkpoint(s2, dir);
    CHECK(same(s2.eval(TargetRef(m.y), {{m.x, x}}), y_saved));
    CHECK(same(s2.eval(TargetRef(m.z)), z_saved));
    CHECK(value(s2, "fc.b@0").data<double>()[1] == -7.5);
    CHECK(value(s2, "mask").data<std::int32_t>()[3] == 13);
    CHECK(value(s2, "step").item<std::int64_t>() == 3);

    // Saving again over the checkpoint replaces it; a trailing slash is fine.
    // Both ways of replacing: one exchange (Linux), or two renames.
    HookGuard guard;
    for (bool no_exchange : {false, true}) {
        CAPTURE(no_exchange);
        detail::checkpoint_no_exchange = no_exchange;
        const std::int32_t base = no_exchange ? 30 : 20;
        Model::set_mask(s2, base);
        save_checkpoint(s2, dir + "/");
        CHECK(read_npy(tmp.file("ckpt/mask.npy")).data<std::int32_t>()[0] == base);
        CHECK(tmp.listing() == std::vector<std::string>{"ckpt"});
        CHECK(tmp.listing("ckpt") ==
              std::vector<std::string>{"fc.b%400.npy", "mask.npy", "program.json", "step.npy", "w.npy"});
    }
}

TEST_CASE("checkpoint: persistables never read are initialized before saving") {
    CkTempDir tmp;
    Model m;
    Session<cpu> s(m.p);
    Model::set_mask(s, 0);
    CHECK(s.scope().find("w") == nullptr);
    save_checkpoint(s, tmp.file("a/b/ckpt"));  // missing parents are created
    const Tensor b = read_npy(tmp.file("a/b/ckpt/fc.b%400.npy"));
    CHECK(b.dtype() == DataType::FP64);
    CHECK(b.data<double>()[0] == 0.5);
    CHECK(read_npy(tmp.file("a/b/ckpt/w.npy")).shape() == Shape{3, 2});
    // The session now holds the values it saved (the initializers ran once).
    CHECK(same(value(s, "w"), read_npy(tmp.file("a/b/ckpt/w.npy"))));

    SUBCASE("a persistable that no op initializes and that has no value") {
        Session<cpu> s3(m.p);
        CHECK_THROWS_CONTAINING(save_checkpoint(s3, tmp.file("c")), value_error, "'mask'", "no op initializes it");
        CHECK_FALSE(fs::exists(tmp.file("c")));
    }
    SUBCASE("a value of the wrong shape set in the scope is refused before anything is written") {
        s.scope().find("fc.b@0")->get_mutable<Tensor>() = Tensor(DataType::FP64, {3});
        CHECK_THROWS_CONTAINING(save_checkpoint(s, tmp.file("c")), io_error, "[dlgraph.io.checkpoint]", "'fc.b@0'",
                                "shape mismatch");
        CHECK_FALSE(fs::exists(tmp.file("c")));
    }
}

TEST_CASE("checkpoint: load reports every problem at once and leaves the session unchanged") {
    CkTempDir tmp;
    const std::string dir = tmp.file("ckpt");
    Model m;
    Session<cpu> s(m.p);
    Model::set_mask(s, 1);
    save_checkpoint(s, dir);

    // A second session with other values: a failed load must not touch them.
    Session<cpu> live(m.p);
    Model::set_mask(live, 100);
    live.initialize_persistables();
    const Tensor x = Model::feed_x();
    const Tensor y_before = live.eval(TargetRef(m.y), {{m.x, x}});
    const Tensor w_before = value(live, "w"), b_before = value(live, "fc.b@0"), mask_before = value(live, "mask");

    Tensor wrong_dtype(DataType::FP64, {3, 2});
    for (auto& v : wrong_dtype.values<double>()) v = 1;
    write_npy(tmp.file("ckpt/w.npy"), wrong_dtype);                      // dtype
    write_npy(tmp.file("ckpt/fc.b%400.npy"), Tensor(DataType::FP64, {3}));  // shape
    fs::remove(tmp.file("ckpt/step.npy"));                                // missing
    const std::string mask_bytes = read_file_bytes(tmp.file("ckpt/mask.npy"));
    write_file_bytes(tmp.file("ckpt/mask.npy"), mask_bytes.substr(0, mask_bytes.size() - 3));  // truncated

    bool thrown = false;
    try {
        load_checkpoint(live, dir);
    } catch (const io_error& e) {
        thrown = true;
        const std::string msg = e.what();
        INFO(msg);
        CHECK(e.id() == "dlgraph.io.checkpoint");
        CHECK(msg.find("4 problems") != std::string::npos);
        CHECK(msg.find("variable 'w': '" + tmp.file("ckpt/w.npy") + "' holds FP64 [3,2], the program declares FP32 [3,2] (dtype mismatch)") != std::string::npos);
        CHECK(msg.find("variable 'fc.b@0': '" + tmp.file("ckpt/fc.b%400.npy") + "' holds FP64 [3], the program declares FP64 [2] (shape mismatch)") != std::string::npos);
        CHECK(msg.find("variable 'step': missing file '" + tmp.file("ckpt/step.npy") + "'") != std::string::npos);
        CHECK(msg.find("variable 'mask': '" + tmp.file("ckpt/mask.npy") + "': file is truncated") != std::string::npos);
        CHECK(std::count(msg.begin(), msg.end(), '\n') == 4);  // one problem per line
    }
    CHECK(thrown);
    CHECK(same(value(live, "w"), w_before));
    CHECK(same(value(live, "fc.b@0"), b_before));
    CHECK(same(value(live, "mask"), mask_before));
    CHECK(same(live.eval(TargetRef(m.y), {{m.x, x}}), y_before));

    SUBCASE("one problem") {
        save_checkpoint(s, dir);
        fs::remove(tmp.file("ckpt/mask.npy"));
        CHECK_THROWS_CONTAINING(load_checkpoint(live, dir), io_error, "1 problem\n  variable 'mask': missing file");
        CHECK(same(value(live, "w"), w_before));
    }
    SUBCASE("a directory that does not exist") {
        CHECK_THROWS_CONTAINING(load_checkpoint(live, tmp.file("nope")), io_error, "[dlgraph.io.open]", "nope",
                                "no such directory");
        CHECK_THROWS_CONTAINING(load_checkpoint_program(tmp.file("nope")), io_error, "program.json");
    }
    SUBCASE("declared -1 dims match any size; extra files are ignored") {
        Program p;
        auto v = p.parameter<float>("v", {2}, init::constant(1));
        p.edit([](ProgramDesc& d) { d.blocks[0].vars[0].dims = {-1}; });
        Session<cpu> a(p);
        a.scope().var("v").get_mutable<Tensor>() = Tensor(DataType::FP32, {5});
        for (auto& e : a.scope().find("v")->get_mutable<Tensor>().values<float>()) e = 4;
        save_checkpoint(a, tmp.file("dyn"));
        write_npy(tmp.file("dyn/unrelated.npy"), Tensor(DataType::INT16, {1}));
        Session<cpu> b(p);
        load_checkpoint(b, tmp.file("dyn"));
        CHECK(value(b, "v").shape() == Shape{5});
        CHECK(b.eval(v)(4) == 4.0f);
    }
}

TEST_CASE("checkpoint: a failure part-way through a save keeps the previous checkpoint") {
    CkTempDir tmp;
    const std::string dir = tmp.file("ckpt");
    Model m;
    Session<cpu> s(m.p);
    Model::set_mask(s, 1);
    save_checkpoint(s, dir);
    const Tensor w_good = value(s, "w");
    const std::string json_good = read_file_bytes(tmp.file("ckpt/program.json"));

    // New values, then saves that fail after 0, 1, ... files.
    for (auto& v : s.scope().find("w")->get_mutable<Tensor>().values<float>()) v += 1;
    Model::set_mask(s, 50);
    HookGuard guard;
    for (int fail_after : {0, 1, 2, 4}) {
        CAPTURE(fail_after);
        int written = 0;
        std::vector<std::string> seen;
        detail::checkpoint_write_hook = [&](const std::string& path) {
            seen.push_back(path);
            if (written++ == fail_after) throw io_error("dlgraph.io.write", "injected failure at '" + path + "'");
        };
        CHECK_THROWS_CONTAINING(save_checkpoint(s, dir), io_error, "injected failure");
        // The files went to a temporary sibling, never into DIR.
        for (auto& p : seen) CHECK(fs::path(p).parent_path() != fs::path(dir));
        CHECK(tmp.listing() == std::vector<std::string>{"ckpt"});
        CHECK(tmp.listing("ckpt") ==
              std::vector<std::string>{"fc.b%400.npy", "mask.npy", "program.json", "step.npy", "w.npy"});
        CHECK(read_file_bytes(tmp.file("ckpt/program.json")) == json_good);
        Session<cpu> back(load_checkpoint_program(dir));
        load_checkpoint(back, dir);
        CHECK(same(value(back, "w"), w_good));
        CHECK(value(back, "mask").data<std::int32_t>()[0] == 1);
    }
    // Without a failure the save goes through, and the hook saw program.json
    // and one file per persistable.
    std::vector<std::string> seen;
    detail::checkpoint_write_hook = [&](const std::string& path) { seen.push_back(fs::path(path).filename().string()); };
    save_checkpoint(s, dir);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<std::string>{"fc.b%400.npy", "mask.npy", "program.json", "step.npy", "w.npy"});
    CHECK(tmp.listing() == std::vector<std::string>{"ckpt"});
    CHECK(read_npy(tmp.file("ckpt/mask.npy")).data<std::int32_t>()[0] == 50);
    CHECK(same(read_npy(tmp.file("ckpt/w.npy")), value(s, "w")));

    SUBCASE("a first save that fails leaves nothing") {
        detail::checkpoint_write_hook = [](const std::string&) { throw io_error("dlgraph.io.write", "injected"); };
        CHECK_THROWS_AS(save_checkpoint(s, tmp.file("fresh")), io_error);
        CHECK(tmp.listing() == std::vector<std::string>{"ckpt"});
    }
}

TEST_CASE("checkpoint: save refuses to replace what is not a checkpoint") {
    CkTempDir tmp;
    Model m;
    Session<cpu> s(m.p);
    Model::set_mask(s, 1);
    fs::create_directories(tmp.file("home"));
    write_file_bytes(tmp.file("home/notes.txt"), "keep me");
    CHECK_THROWS_CONTAINING(save_checkpoint(s, tmp.file("home")), io_error, "not a checkpoint", "refusing");
    CHECK(read_file_bytes(tmp.file("home/notes.txt")) == "keep me");
    write_file_bytes(tmp.file("file"), "x");
    CHECK_THROWS_CONTAINING(save_checkpoint(s, tmp.file("file")), io_error, "not a directory");
    CHECK_THROWS_CONTAINING(save_checkpoint(s, "."), io_error, "name a directory");
    // An empty directory is fine.
    fs::create_directories(tmp.file("empty"));
    save_checkpoint(s, tmp.file("empty"));
    CHECK(fs::exists(tmp.file("empty/program.json")));
}

namespace {

// A program whose block 0 declares `vars` (persistable) and holds `ops`.
ProgramDesc program_of(std::vector<VarDesc> vars, std::vector<OpDesc> ops) {
    ProgramDesc d;
    d.blocks[0].vars = std::move(vars);
    d.blocks[0].ops = std::move(ops);
    return d;
}
VarDesc pvar(const std::string& name, DataType t, std::vector<std::int64_t> dims) {
    return {name, VarType::LOD_TENSOR, t, std::move(dims), 0, true};
}
OpDesc io_op(const std::string& type, const std::string& slot, std::vector<std::string> vars, const std::string& path,
             bool is_input) {
    OpDesc op;
    op.type = type;
    if (is_input) op.set_input(slot, std::move(vars));
    else op.set_output(slot, std::move(vars));
    op.set_attr(Attribute::make_string("file_path", path));
    return op;
}

}  // namespace

TEST_CASE("ops: save and load as op targets") {
    CkTempDir tmp;
    Program p;
    auto w = p.parameter<float>("w", {2, 3}, init::uniform(-1, 1, 3));
    const std::string file = tmp.file("sub/w.npy");
    const int save = p.append("save", {{"X", {"w"}}}, {}, {Attribute::make_string("file_path", file)});
    Session<cpu> s(p);
    CHECK(s.eval(TargetRef::op_only(save)).initialized() == false);
    CHECK(same(read_npy(file), value(s, "w")));
    CHECK_FALSE(fs::exists(file + ".tmp"));

    SUBCASE("overwrite false refuses an existing file") {
        const int keep = p.append("save", {{"X", {"w"}}}, {},
                                  {Attribute::make_string("file_path", file), Attribute::make_bool("overwrite", false)});
        CHECK_THROWS_CONTAINING(s.eval(TargetRef::op_only(keep)), io_error, "[dlgraph.io.exists]", file.c_str());
    }
    SUBCASE("load is the initializer of the variable it writes") {
        Session<cpu> l(program_of({pvar("w", DataType::FP32, {2, 3})}, {io_op("load", "Out", {"w"}, file, false)}));
        CHECK(same(l.eval(TargetRef("w")), value(s, "w")));
        // As an op target it loads again: a changed file is read.
        Tensor t(DataType::FP32, {2, 3});
        for (auto& v : t.values<float>()) v = 9;
        write_npy(file, t);
        l.eval(TargetRef::op_only(0));
        CHECK(same(value(l, "w"), t));
    }
    SUBCASE("load checks the file against the declared variable") {
        Session<cpu> shape(program_of({pvar("v", DataType::FP32, {3, 2})}, {io_op("load", "Out", {"v"}, file, false)}));
        CHECK_THROWS_CONTAINING(shape.eval(TargetRef("v")), shape_error, "[dlgraph.shape.load]", file.c_str(), "'v'",
                                "FP32 [2,3]", "FP32 [3,2]");
        Session<cpu> dtype(program_of({pvar("v", DataType::INT32, {2, 3})}, {io_op("load", "Out", {"v"}, file, false)}));
        CHECK_THROWS_CONTAINING(dtype.eval(TargetRef("v")), type_error, "[dlgraph.type.load]", file.c_str(), "'v'",
                                "FP32 [2,3]", "INT32 [2,3]");
        Session<cpu> missing(program_of({pvar("v", DataType::FP32, {2, 3})},
                                        {io_op("load", "Out", {"v"}, tmp.file("none.npy"), false)}));
        CHECK_THROWS_CONTAINING(missing.eval(TargetRef("v")), io_error, "none.npy");
    }
    SUBCASE("load needs known dims and a file_path") {
        CHECK_THROWS_CONTAINING(Session<cpu>(program_of({pvar("v", DataType::FP32, {-1, 3})},
                                                        {io_op("load", "Out", {"v"}, file, false)})),
                                shape_error, "load", "[-1,3]", "known dims");
        CHECK_THROWS_CONTAINING(Session<cpu>(program_of({pvar("v", DataType::FP32, {2, 3})},
                                                        {io_op("load", "Out", {"v"}, "", false)})),
                                format_error, "file_path");
    }
}

TEST_CASE("ops: save_combine and load_combine write and read one .npz") {
    CkTempDir tmp;
    Program p;
    auto w = p.parameter<float>("fc.w@0", {2, 3}, init::uniform(-1, 1, 5));
    auto k = p.parameter<std::int64_t>("k", {4}, init::constant(5), false);
    auto e = p.parameter<double>("e", {0}, init::constant(1), false);  // empty
    const std::string file = tmp.file("all.npz");
    const int save = p.append("save_combine", {{"X", {"fc.w@0", "k", "e"}}}, {},
                              {Attribute::make_string("file_path", file)});
    Session<cpu> s(p);
    s.eval(TargetRef::op_only(save));
    CHECK_FALSE(fs::exists(file + ".tmp"));
    CHECK(read_file_bytes(file).substr(0, 4) == std::string("PK\x03\x04", 4));

    auto entries = read_npz(file);
    REQUIRE(entries.size() == 3);
    CHECK(entries[0].first == "fc.w@0");
    CHECK(same(entries[0].second, value(s, "fc.w@0")));
    CHECK(entries[1].first == "k");
    CHECK(entries[1].second.data<std::int64_t>()[3] == 5);
    CHECK(entries[2].second.shape() == Shape{0});

    const std::vector<VarDesc> decls{pvar("k", DataType::INT64, {4}), pvar("fc.w@0", DataType::FP32, {2, 3})};
    SUBCASE("load_combine reads by name, in any order") {
        Session<cpu> l(program_of(decls, {io_op("load_combine", "Out", {"k", "fc.w@0"}, file, false)}));
        l.eval(TargetRef::op_only(0));
        CHECK(same(value(l, "fc.w@0"), value(s, "fc.w@0")));
        CHECK(same(value(l, "k"), value(s, "k")));
    }
    SUBCASE("a missing entry or a mismatch changes no output") {
        auto decls2 = decls;
        decls2.push_back(pvar("absent", DataType::FP32, {1}));
        Session<cpu> l(program_of(decls2, {io_op("load_combine", "Out", {"k", "fc.w@0", "absent"}, file, false)}));
        Tensor k0(DataType::INT64, {4});
        for (auto& v : k0.values<std::int64_t>()) v = -1;
        l.scope().var("k").get_mutable<Tensor>() = k0;
        CHECK_THROWS_CONTAINING(l.eval(TargetRef::op_only(0)), io_error, "[dlgraph.io.npz_missing]", "'absent'",
                                "fc.w@0.npy, k.npy, e.npy");
        CHECK(same(value(l, "k"), k0));

        auto decls3 = decls;
        decls3[1].dims = {3, 2};
        Session<cpu> m(program_of(decls3, {io_op("load_combine", "Out", {"k", "fc.w@0"}, file, false)}));
        m.scope().var("k").get_mutable<Tensor>() = k0;
        const std::string entry = file + ":fc.w@0.npy";
        CHECK_THROWS_CONTAINING(m.eval(TargetRef::op_only(0)), shape_error, entry.c_str(), "'fc.w@0'",
                                "[2,3]", "[3,2]");
        CHECK(same(value(m, "k"), k0));
    }
    SUBCASE("a corrupt archive is an error naming the file") {
        std::string bytes = read_file_bytes(file);
        const std::size_t at = bytes.find("\x93NUMPY") + 100;  // inside fc.w@0's data
        bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
        write_file_bytes(file, bytes);
        CHECK_THROWS_CONTAINING(read_npz(file), io_error, file.c_str(), "'fc.w@0.npy' is corrupt (CRC-32 mismatch)");
        write_file_bytes(file, bytes.substr(0, bytes.size() - 10));
        CHECK_THROWS_CONTAINING(read_npz(file), io_error, file.c_str(), "truncated");
        write_file_bytes(file, "not a zip file at all, but long enough to look for an end record");
        CHECK_THROWS_CONTAINING(read_npz(file), io_error, file.c_str(), "not a .npz file");
    }
    SUBCASE("Python's zipfile reads the archive; dlgraph reads Python's (as np.savez writes it)") {
        if (!have_python()) {
            MESSAGE("python3 not found: skipped");
            return;
        }
        // What np.load does: zipfile, then the .npy header and data of each entry.
        const std::string check = tmp.file("check.py");
        write_file_bytes(check,
             "import ast, sys, zipfile\n"
             "z = zipfile.ZipFile(sys.argv[1])\n"
             "assert z.testzip() is None\n"
             "out = []\n"
             "for n in z.namelist():\n"
             "    b = z.read(n)\n"
             "    assert b[:6] == b'\\x93NUMPY', n\n"
             "    hl = int.from_bytes(b[8:10], 'little')\n"
             "    h = ast.literal_eval(b[10:10 + hl].decode('latin1'))\n"
             "    size = {'<f4': 4, '<f8': 8, '<i8': 8}[h['descr']]\n"
             "    count = 1\n"
             "    for d in h['shape']: count *= d\n"
             "    assert len(b) == 10 + hl + size * count, n\n"
             "    out.append('%s:%s:%s' % (n, h['descr'], ','.join(map(str, h['shape']))))\n"
             "print(' '.join(out))\n");
        const std::string listing = tmp.file("listing.txt");
        REQUIRE(shell("python3 " + shq(check) + " " + shq(file) + " > " + shq(listing)) == 0);
        CHECK(read_file_bytes(listing) == "fc.w@0.npy:<f4:2,3 k.npy:<i8:4 e.npy:<f8:0\n");

        // np.savez writes each entry through ZipFile.open(name, 'w', force_zip64=True).
        const std::string make = tmp.file("make.py");
        write_file_bytes(make,
             "import sys, zipfile\n"
             "src, dst, comp = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
             "with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, 'w', compression=comp) as b:\n"
             "    for n in a.namelist():\n"
             "        with b.open(n, 'w', force_zip64=True) as f: f.write(a.read(n))\n");
        const std::string py = tmp.file("py.npz");
        REQUIRE(shell("python3 " + shq(make) + " " + shq(file) + " " + shq(py) + " 0") == 0);
        auto back = read_npz(py);
        REQUIRE(back.size() == 3);
        CHECK(same(back[0].second, value(s, "fc.w@0")));
        CHECK(same(back[1].second, value(s, "k")));
        REQUIRE(shell("python3 " + shq(make) + " " + shq(file) + " " + shq(py) + " 8") == 0);
        CHECK_THROWS_CONTAINING(read_npz(py), io_error, "compressed", "np.savez_compressed");
    }
}

// ---- the CLI --------------------------------------------------------------------

namespace {

const bool no_cli = std::string_view(DLGRAPH_CLI).empty();

struct CliRun {
    int status = -1;
    std::string out, err;
};
CliRun cli(const CkTempDir& dir, const std::string& args) {
    REQUIRE_MESSAGE(std::filesystem::exists(DLGRAPH_CLI), "the CLI " DLGRAPH_CLI " is not built (target dlgraph_cli)");
    const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
    CliRun r;
    r.status = shell(shq(DLGRAPH_CLI) + " " + args + " >" + shq(out) + " 2>" + shq(err));
    r.out = read_file_bytes(out);
    r.err = read_file_bytes(err);
    fs::remove(out);
    fs::remove(err);
    return r;
}

}  // namespace

TEST_CASE("cli: run --backward LOSS fetches gradients, --params reads a checkpoint" * doctest::skip(no_cli)) {
    CkTempDir tmp;
    // loss = reduce_sum(w * x): d loss / d w = x. x is fed, not a parameter: it gets no gradient.
    Program p;
    auto x = p.input<float>("x", {3});
    auto w = p.parameter<float>("fc.w@0", {3}, init::constant(0.5));
    auto n = p.parameter<std::int64_t>("n", {1}, init::constant(2), false);
    auto loss = reduce_sum(x * w);
    (void)n;
    const std::string program = tmp.file("net.json");
    write_file_bytes(program, p.to_json());
    Tensor xv(DataType::FP32, {3});
    for (int i = 0; i < 3; ++i) xv.data<float>()[i] = static_cast<float>(i + 1);
    write_npy(tmp.file("x.npy"), xv);
    const std::string base = "run " + shq(program) + " --feed x=" + shq(tmp.file("x.npy")) + " --out " +
                             shq(tmp.file("o")) + " --backward " + loss.name();

    auto r = cli(tmp, base + " --fetch " + shq("fc.w@0@GRAD") + " --fetch " + loss.name());
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("fc.w@0@GRAD FP32 [3] ") == 0);
    const Tensor g = read_npy(tmp.file("o/fc.w%400%40GRAD.npy"));
    REQUIRE(g.shape() == Shape{3});
    for (int i = 0; i < 3; ++i) CHECK(g.data<float>()[i] == static_cast<float>(i + 1));
    CHECK(read_npy(tmp.file("o/" + loss.name() + ".npy")).item<float>() == 3.0f);  // 0.5 * (1 + 2 + 3)

    // A checkpoint as --params: its program, its values.
    Session<cpu> s(p);
    Tensor w2(DataType::FP32, {3});
    for (auto& v : w2.values<float>()) v = 2;
    s.scope().var("fc.w@0").get_mutable<Tensor>() = w2;
    save_checkpoint(s, tmp.file("ckpt"));
    r = cli(tmp, "run " + shq(tmp.file("ckpt/program.json")) + " --params " + shq(tmp.file("ckpt")) + " --feed x=" +
                     shq(tmp.file("x.npy")) + " --out " + shq(tmp.file("o2")) + " --backward " + loss.name() +
                     " --fetch " + loss.name() + " --fetch " + shq("fc.w@0@GRAD"));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(read_npy(tmp.file("o2/" + loss.name() + ".npy")).item<float>() == 12.0f);  // 2 * 6
    const Tensor g2 = read_npy(tmp.file("o2/fc.w%400%40GRAD.npy"));
    CHECK(same(g2, g));

    // plan and dot take --backward too.
    r = cli(tmp, "plan " + shq(program) + " --backward " + loss.name() + " --fetch " + shq("fc.w@0@GRAD"));
    CHECK(r.status == 0);
    CHECK(r.out.find("elementwise_mul_grad") != std::string::npos);

    // Errors: one line, with an id.
    r = cli(tmp, base + " --fetch " + shq("n@GRAD"));
    CHECK(r.status == 1);
    CHECK(r.err.rfind("dlgraph: error: [dlgraph.graph.backward] cannot fetch 'n@GRAD'", 0) == 0);
    r = cli(tmp, base + " --fetch " + shq("x@GRAD"));
    CHECK(r.status == 1);
    CHECK(r.err.rfind("dlgraph: error: [dlgraph.graph.backward] cannot fetch 'x@GRAD': the backward pass gives "
                      "'x' no gradient", 0) == 0);
    r = cli(tmp, "run " + shq(program) + " --backward nope --fetch " + loss.name());
    CHECK(r.status == 1);
    CHECK(r.err.rfind("dlgraph: error: [dlgraph.graph.backward] loss 'nope' is not declared", 0) == 0);
    r = cli(tmp, base + " --backward " + loss.name() + " --fetch " + loss.name());
    CHECK(r.status == 1);
    CHECK(r.err.find("[dlgraph.cli.usage] option --backward is given twice") != std::string::npos);
}
