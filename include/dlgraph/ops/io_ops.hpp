// Ops that move tensors between a program and files (PaddlePaddle's names):
//   save          X -> FILE.npy                   attrs file_path, overwrite
//   load          FILE.npy -> Out                 attr  file_path
//   save_combine  X[...] -> FILE.npz              attrs file_path, overwrite
//   load_combine  FILE.npz -> Out[...]            attr  file_path
// A .npz is NumPy's archive (np.savez / np.load): an uncompressed ZIP whose
// entries are "<variable name>.npy". Writes are atomic (a temporary file,
// fsync, rename), and a missing parent directory is created.
//
// load and load_combine check the file against the variable they write:
// dtype and shape must equal the declared ones (the declared dims must be
// fully known, since shapes are inferred before any file is read); every
// error names the file and the variable. load_combine checks every entry
// before it writes any output, so a failure leaves all outputs as they were.
//
// Nothing here needs a library beyond the C++ standard one (CRC-32 is
// computed here, not by zlib), so that the umbrella header stays usable
// with a plain compiler.
#pragma once

#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dlgraph/npy.hpp"
#include "dlgraph/op.hpp"

namespace dlgraph {

namespace detail {

// ---- CRC-32 (ISO-HDLC, as ZIP and zlib compute it) -------------------------

inline constexpr std::array<std::uint32_t, 256> crc32_table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    return t;
}();

// Continues a CRC-32 (start with crc = 0).
inline std::uint32_t crc32_update(std::uint32_t crc, std::string_view bytes) {
    crc = ~crc;
    for (char ch : bytes) crc = crc32_table[(crc ^ static_cast<unsigned char>(ch)) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

// ---- files -------------------------------------------------------------------

// Creates the directory that will hold `path`, if it is missing.
inline void make_parent_dir(const std::string& path, const std::string& who) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) return;
    std::error_code ec;
    if (std::filesystem::is_directory(parent, ec)) return;
    std::filesystem::create_directories(parent, ec);
    if (ec || !std::filesystem::is_directory(parent))
        throw io_error("dlgraph.io.mkdir", who + ": cannot create directory '" + parent.string() + "' for '" + path +
                                               "'" + (ec ? ": " + ec.message() : std::string()));
}

// Refuses to replace an existing file unless `overwrite`.
inline void check_overwrite(const std::string& path, bool overwrite, const std::string& who) {
    std::error_code ec;
    if (!overwrite && std::filesystem::exists(path, ec))
        throw io_error("dlgraph.io.exists", who + ": '" + path + "' exists and the op's overwrite attribute is false");
}


// ---- ZIP (.npz) ----------------------------------------------------------------

inline void put16(std::string& s, std::uint32_t v) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>((v >> 8) & 0xff);
}
inline void put32(std::string& s, std::uint32_t v) {
    put16(s, v & 0xffff);
    put16(s, v >> 16);
}
inline void put64(std::string& s, std::uint64_t v) {
    put32(s, static_cast<std::uint32_t>(v & 0xffffffffu));
    put32(s, static_cast<std::uint32_t>(v >> 32));
}
inline std::uint64_t get_le(const char* p, int n) {
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(p[k]);
    return v;
}

inline constexpr std::uint32_t zip_local_sig = 0x04034b50, zip_central_sig = 0x02014b50, zip_end_sig = 0x06054b50,
                                zip64_end_sig = 0x06064b50, zip64_locator_sig = 0x07064b50;
inline constexpr std::uint64_t zip_max32 = 0xffffffffu;
inline constexpr std::uint32_t zip_dos_date = (0u << 9) | (1u << 5) | 1u;  // 1980-01-01, 00:00

inline bool is_ascii(std::string_view s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

// One entry's .npy bytes as views: the header text, and the data (in place
// on little-endian hosts, swapped into `owned` otherwise).
struct npz_member {
    std::string name;  // "<variable>.npy"
    std::string header;
    std::string owned;
    std::string_view data;
};

inline npz_member npz_member_of(const std::string& var, const Tensor& t) {
    npz_member m;
    m.name = var + ".npy";
    check_writable(t, var);
    m.header = npy_header_text(t);
    if constexpr (std::endian::native == std::endian::little) {
        m.data = tensor_bytes(t);
    } else {
        m.owned = std::string(tensor_bytes(t));
        npy_swap_if_big_endian(m.owned.data(), static_cast<std::size_t>(t.numel()), dtype_size(t.dtype()));
        m.data = m.owned;
    }
    return m;
}

// Lays out a stored (uncompressed) ZIP archive of `members`, ZIP64 where a
// size or offset needs it, and writes it atomically.
inline void write_npz_members(const std::string& path, std::vector<npz_member>& members) {
    std::vector<std::string> headers;  // local headers, then the central directory and end records
    headers.reserve(members.size() + 1);
    std::string central;
    std::uint64_t offset = 0;
    for (auto& m : members) {
        const std::uint64_t size = m.header.size() + m.data.size();
        const std::uint32_t crc = crc32_update(crc32_update(0, m.header), m.data);
        const bool big = size >= zip_max32;
        const bool far = offset >= zip_max32;
        const std::uint32_t flags = is_ascii(m.name) ? 0 : 0x0800;  // bit 11: the name is UTF-8
        const std::uint32_t version = big || far ? 45 : 20;
        if (m.name.size() > 0xffff)
            throw io_error("dlgraph.io.npz", "cannot write '" + path + "': variable name of " +
                                                 std::to_string(m.name.size()) + " bytes is too long for a ZIP entry");
        std::string local;
        put32(local, zip_local_sig);
        put16(local, version);
        put16(local, flags);
        put16(local, 0);  // stored
        put16(local, 0);  // time
        put16(local, zip_dos_date);
        put32(local, crc);
        put32(local, big ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(size));
        put32(local, big ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(size));
        put16(local, static_cast<std::uint32_t>(m.name.size()));
        put16(local, big ? 20 : 0);
        local += m.name;
        if (big) {
            put16(local, 1);
            put16(local, 16);
            put64(local, size);
            put64(local, size);
        }
        std::string extra;
        if (big || far) {
            put16(extra, 1);
            put16(extra, (big ? 16 : 0) + (far ? 8 : 0));
            if (big) {
                put64(extra, size);
                put64(extra, size);
            }
            if (far) put64(extra, offset);
        }
        put32(central, zip_central_sig);
        put16(central, (3u << 8) | version);  // made by: Unix
        put16(central, version);
        put16(central, flags);
        put16(central, 0);
        put16(central, 0);
        put16(central, zip_dos_date);
        put32(central, crc);
        put32(central, big ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(size));
        put32(central, big ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(size));
        put16(central, static_cast<std::uint32_t>(m.name.size()));
        put16(central, static_cast<std::uint32_t>(extra.size()));
        put16(central, 0);                  // comment
        put16(central, 0);                  // disk
        put16(central, 0);                  // internal attributes
        put32(central, 0100644u << 16);     // external: a regular file, rw-r--r--
        put32(central, far ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(offset));
        central += m.name;
        central += extra;
        offset += local.size() + size;
        headers.push_back(std::move(local));
    }
    const std::uint64_t n = members.size(), cd_size = central.size(), cd_offset = offset;
    if (n >= 0xffff || cd_size >= zip_max32 || cd_offset >= zip_max32) {
        put32(central, zip64_end_sig);
        put64(central, 44);
        put16(central, 45);
        put16(central, 45);
        put32(central, 0);
        put32(central, 0);
        put64(central, n);
        put64(central, n);
        put64(central, cd_size);
        put64(central, cd_offset);
        put32(central, zip64_locator_sig);
        put32(central, 0);
        put64(central, cd_offset + cd_size);
        put32(central, 1);
    }
    put32(central, zip_end_sig);
    put16(central, 0);
    put16(central, 0);
    put16(central, static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 0xffff)));
    put16(central, static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 0xffff)));
    put32(central, static_cast<std::uint32_t>(std::min(cd_size, zip_max32)));
    put32(central, static_cast<std::uint32_t>(std::min(cd_offset, zip_max32)));
    put16(central, 0);
    headers.push_back(std::move(central));

    std::vector<std::string_view> pieces;
    pieces.reserve(3 * members.size() + 1);
    for (std::size_t i = 0; i < members.size(); ++i) {
        pieces.push_back(headers[i]);
        pieces.push_back(members[i].header);
        pieces.push_back(members[i].data);
    }
    pieces.push_back(headers.back());
    write_file_atomic(path, pieces);
}

// A .npz opened for reading: its central directory, and entries read on
// demand. Every error is an io_error naming the file.
class npz_archive {
public:
    struct entry {
        std::string name;
        std::uint64_t local_offset = 0, size = 0, compressed = 0;
        std::uint32_t crc = 0, method = 0, flags = 0;
    };

    explicit npz_archive(std::string path) : path_(std::move(path)) {
        std::error_code ec;
        if (std::filesystem::is_directory(path_, ec))
            throw io_error("dlgraph.io.open", "cannot open '" + path_ + "' for reading: it is a directory");
        in_.open(path_, std::ios::binary);
        if (!in_) throw io_error("dlgraph.io.open", "cannot open '" + path_ + "' for reading");
        in_.seekg(0, std::ios::end);
        const auto end = in_.tellg();
        if (end < 0 || !in_) fail("dlgraph.io.read", "its size is unknown (not a regular file?)");
        size_ = static_cast<std::uint64_t>(end);
        read_directory();
    }

    const std::vector<entry>& entries() const { return entries_; }
    const entry* find(std::string_view name) const {
        const entry* hit = nullptr;
        for (auto& e : entries_)
            if (e.name == name) hit = &e;  // the last one, as Python's zipfile does
        return hit;
    }
    const std::string& path() const { return path_; }

    // The entry's bytes, checked against its CRC-32.
    std::string read(const entry& e) {
        if (e.flags & 1) fail("dlgraph.io.npz", "entry '" + e.name + "' is encrypted");
        if (e.method != 0)
            fail("dlgraph.io.npz", "entry '" + e.name + "' is compressed (ZIP method " + std::to_string(e.method) +
                                       "); dlgraph reads uncompressed archives only (np.savez, not np.savez_compressed)");
        if (e.compressed != e.size) fail("dlgraph.io.npz", "entry '" + e.name + "' is stored but its two sizes differ");
        const std::string local = bytes_at(e.local_offset, 30, "the local header of '" + e.name + "'");
        if (get_le(local.data(), 4) != zip_local_sig)
            fail("dlgraph.io.npz", "entry '" + e.name + "' has no local header where the directory says");
        const std::uint64_t data_at = e.local_offset + 30 + get_le(local.data() + 26, 2) + get_le(local.data() + 28, 2);
        if (e.size > size_ || data_at > size_ - e.size)
            fail("dlgraph.io.npz", "entry '" + e.name + "' is truncated: it needs " + std::to_string(e.size) +
                                       " bytes at offset " + std::to_string(data_at) + ", the file has " +
                                       std::to_string(size_));
        std::string data = bytes_at(data_at, e.size, "entry '" + e.name + "'");
        if (crc32_update(0, data) != e.crc) fail("dlgraph.io.npz", "entry '" + e.name + "' is corrupt (CRC-32 mismatch)");
        return data;
    }
    // The entry as a tensor; messages name "FILE:ENTRY".
    Tensor read_tensor(const entry& e) { return parse_npy(read(e), path_ + ":" + e.name); }

private:
    [[noreturn]] void fail(const std::string& id, const std::string& msg) const {
        throw io_error(id, "'" + path_ + "': " + msg);
    }
    std::string bytes_at(std::uint64_t at, std::uint64_t n, const std::string& what) {
        if (at > size_ || n > size_ - at)
            fail("dlgraph.io.npz", what + " lies outside the file (truncated archive?)");
        std::string s(static_cast<std::size_t>(n), '\0');
        in_.clear();
        in_.seekg(static_cast<std::streamoff>(at));
        if (n && !in_.read(s.data(), static_cast<std::streamsize>(n)))
            fail("dlgraph.io.read", "cannot read " + what + " (it changed while being read?)");
        return s;
    }

    void read_directory() {
        // The end record is the last 22 bytes, unless a comment follows it.
        const std::uint64_t tail_len = std::min<std::uint64_t>(size_, 22 + 0xffff);
        const std::string tail = bytes_at(size_ - tail_len, tail_len, "the end of the archive");
        std::size_t at = std::string::npos;
        for (std::size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;)
            if (get_le(tail.data() + i, 4) == zip_end_sig && i + 22 + get_le(tail.data() + i + 20, 2) == tail.size()) {
                at = i;
                break;
            }
        if (at == std::string::npos) {
            if (size_ >= 4 && bytes_at(0, 4, "the start of the file") == std::string_view("PK\x03\x04", 4))
                fail("dlgraph.io.npz", "the archive is truncated (no end-of-central-directory record)");
            fail("dlgraph.io.npz", "not a .npz file (no ZIP end-of-central-directory record)");
        }
        const char* e = tail.data() + at;
        std::uint64_t n = get_le(e + 10, 2), cd_size = get_le(e + 12, 4), cd_offset = get_le(e + 16, 4);
        if (get_le(e + 4, 2) != 0 || get_le(e + 6, 2) != 0) fail("dlgraph.io.npz", "multi-part archives are not supported");
        const std::uint64_t end_at = size_ - tail_len + at;
        if (n == 0xffff || cd_size == zip_max32 || cd_offset == zip_max32) {
            if (end_at < 20) fail("dlgraph.io.npz", "the ZIP64 end record is missing");
            const std::string loc = bytes_at(end_at - 20, 20, "the ZIP64 locator");
            if (get_le(loc.data(), 4) == zip64_locator_sig) {
                const std::string z = bytes_at(get_le(loc.data() + 8, 8), 56, "the ZIP64 end record");
                if (get_le(z.data(), 4) != zip64_end_sig) fail("dlgraph.io.npz", "the ZIP64 end record is malformed");
                n = get_le(z.data() + 32, 8);
                cd_size = get_le(z.data() + 40, 8);
                cd_offset = get_le(z.data() + 48, 8);
            }
        }
        const std::string cd = bytes_at(cd_offset, cd_size, "the central directory");
        std::size_t p = 0;
        for (std::uint64_t k = 0; k < n; ++k) {
            if (p + 46 > cd.size() || get_le(cd.data() + p, 4) != zip_central_sig)
                fail("dlgraph.io.npz", "the central directory is malformed at entry " + std::to_string(k));
            const char* h = cd.data() + p;
            entry en;
            en.flags = static_cast<std::uint32_t>(get_le(h + 8, 2));
            en.method = static_cast<std::uint32_t>(get_le(h + 10, 2));
            en.crc = static_cast<std::uint32_t>(get_le(h + 16, 4));
            en.compressed = get_le(h + 20, 4);
            en.size = get_le(h + 24, 4);
            const std::size_t name_len = get_le(h + 28, 2), extra_len = get_le(h + 30, 2), comment_len = get_le(h + 32, 2);
            en.local_offset = get_le(h + 42, 4);
            if (p + 46 + name_len + extra_len + comment_len > cd.size())
                fail("dlgraph.io.npz", "the central directory is malformed at entry " + std::to_string(k));
            en.name.assign(h + 46, name_len);
            // ZIP64: the fields saturated at 0xffffffff follow, in this order.
            for (std::size_t x = 0; x + 4 <= extra_len;) {
                const char* ex = h + 46 + name_len + x;
                const std::size_t tag = get_le(ex, 2), len = get_le(ex + 2, 2);
                if (x + 4 + len > extra_len) break;
                if (tag == 1) {
                    std::size_t q = 4;
                    auto take = [&](std::uint64_t& field) {
                        if (field != zip_max32) return;
                        if (q + 8 > 4 + len) fail("dlgraph.io.npz", "entry '" + en.name + "' has a short ZIP64 field");
                        field = get_le(ex + q, 8);
                        q += 8;
                    };
                    take(en.size);
                    take(en.compressed);
                    take(en.local_offset);
                }
                x += 4 + len;
            }
            entries_.push_back(std::move(en));
            p += 46 + name_len + extra_len + comment_len;
        }
    }

    std::string path_;
    std::ifstream in_;
    std::uint64_t size_ = 0;
    std::vector<entry> entries_;
};

}  // namespace detail

// Writes `entries` (variable name, tensor) as a NumPy .npz archive (entries
// "<name>.npy", uncompressed), atomically. np.load(path)[name] reads them.
inline void write_npz(const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& entries) {
    std::vector<detail::npz_member> members;
    members.reserve(entries.size());
    for (auto& [name, t] : entries) {
        for (auto& m : members)
            if (m.name == name + ".npy")
                throw io_error("dlgraph.io.npz", "cannot write '" + path + "': variable '" + name + "' appears twice");
        members.push_back(detail::npz_member_of(name, *t));
    }
    detail::write_npz_members(path, members);
}

// Reads every "<name>.npy" entry of a .npz archive (np.savez's), in archive
// order, as (name, tensor); other entries are skipped.
inline std::vector<std::pair<std::string, Tensor>> read_npz(const std::string& path) {
    detail::npz_archive a(path);
    std::vector<std::pair<std::string, Tensor>> out;
    for (auto& e : a.entries())
        if (e.name.size() > 4 && e.name.ends_with(".npy")) out.emplace_back(e.name.substr(0, e.name.size() - 4), a.read_tensor(e));
    return out;
}

namespace ops {

// The kernels copy bytes and do not depend on the dtype: one function goes
// under every dtype of the CPU table.
inline KernelTable io_kernels(KernelFn f) {
    KernelTable t{};
    t.fill(f);
    return t;
}

inline void check_file_path(const InferContext& c, int attr) {
    if (c.attr(attr).s.empty())
        throw format_error("dlgraph.format.attr", std::string(c.label()) + ": attribute file_path must not be empty");
}

// Throws unless tensor `t` read from `file` fits variable `var` (whose
// storage `out` the plan sized from its declaration).
inline void check_loaded(const std::string& who, const std::string& file, const std::string& var, const Tensor& t,
                         const Tensor& out) {
    const std::string facts = who + ": '" + file + "' holds " + to_string(t.dtype()) + " " + to_string(t.shape()) +
                              " but variable '" + var + "' is " + to_string(out.dtype()) + " " + to_string(out.shape());
    if (t.dtype() != out.dtype()) throw type_error("dlgraph.type.load", facts);
    if (!(t.shape() == out.shape())) throw shape_error("dlgraph.shape.load", facts);
}

// ---- save ----

struct save_op {
    enum { file_path = 0, overwrite = 1 };
    static void run(const KernelContext& c) {
        const std::string& path = c.attr(file_path).s;
        const std::string& name = c.in_var(0).name();
        const Tensor& x = c.in(0);
        if (!x.initialized()) throw value_error("dlgraph.value.unset", "save: variable '" + name + "' holds no value");
        detail::check_overwrite(path, c.attr(overwrite).b, "save of '" + name + "'");
        detail::make_parent_dir(path, "save of '" + name + "'");
        write_npy(path, x);
    }
};
inline void save_infer(const InferContext& c) { check_file_path(c, save_op::file_path); }
inline OpDef save_def() {
    OpDef d{"save", {{"X"}}, {},
            {{"file_path", Attribute::make_string("file_path", ""), true},
             {"overwrite", Attribute::make_bool("overwrite", true)}},
            &save_infer};
    d.kernels = io_kernels(&save_op::run);
    d.doc = "writes X to the .npy file `file_path`";
    return d;
}

// ---- load ----

struct load_op {
    enum { file_path = 0 };
    static void run(const KernelContext& c) {
        const std::string& path = c.attr(file_path).s;
        Tensor& out = c.out(0);
        Tensor t = read_npy(path);
        check_loaded("load", path, c.out_var(0).name(), t, out);
        if (t.bytes()) std::memcpy(out.raw(), t.raw(), t.bytes());
    }
};
// Out keeps its declared meta: the file is read only when the op runs.
inline void load_infer(const InferContext& c) {
    check_file_path(c, load_op::file_path);
    const VarMeta& m = c.out_meta(0);
    if (!m.shape.known())
        c.fail("dlgraph.shape.load", "Out is declared " + to_string(m.shape) +
                                         "; load needs fully known dims (shapes are inferred before the file is read)");
    c.set(0, m.dtype, m.shape);
}
inline OpDef load_def() {
    // No input and no dtype attribute: the kernel follows Out's dtype (it is
    // the same byte copy under every dtype).
    OpDef d{"load", {}, {{"Out"}}, {{"file_path", Attribute::make_string("file_path", ""), true}}, &load_infer, -1, -1};
    d.kernels = io_kernels(&load_op::run);
    d.doc = "Out = the tensor in the .npy file `file_path` (its dtype and shape must be Out's)";
    return d;
}

// ---- save_combine ----

struct save_combine_op {
    enum { file_path = 0, overwrite = 1 };
    static void run(const KernelContext& c) {
        const std::string& path = c.attr(file_path).s;
        std::vector<std::pair<std::string, const Tensor*>> entries;
        for (int k = 0; k < c.in_count(0); ++k) {
            const std::string& name = c.in_var(0, k).name();
            if (!c.in(0, k).initialized())
                throw value_error("dlgraph.value.unset", "save_combine: variable '" + name + "' holds no value");
            entries.emplace_back(name, &c.in(0, k));
        }
        detail::check_overwrite(path, c.attr(overwrite).b, "save_combine");
        detail::make_parent_dir(path, "save_combine");
        write_npz(path, entries);
    }
};
inline void save_combine_infer(const InferContext& c) { check_file_path(c, save_combine_op::file_path); }
inline OpDef save_combine_def() {
    OpDef d{"save_combine", {{"X", true}}, {},
            {{"file_path", Attribute::make_string("file_path", ""), true},
             {"overwrite", Attribute::make_bool("overwrite", true)}},
            &save_combine_infer};
    d.kernels = io_kernels(&save_combine_op::run);
    d.doc = "writes every X to the .npz archive `file_path` (entries <name>.npy)";
    return d;
}

// ---- load_combine ----

struct load_combine_op {
    enum { file_path = 0 };
    // Reads and checks every entry first; writes the outputs only when all fit.
    static void run(const KernelContext& c) {
        detail::npz_archive a(c.attr(file_path).s);
        std::vector<Tensor> loaded;
        loaded.reserve(static_cast<std::size_t>(c.out_count(0)));
        for (int k = 0; k < c.out_count(0); ++k) {
            const std::string& name = c.out_var(0, k).name();
            const auto* e = a.find(name + ".npy");
            if (!e) {
                std::string have;
                for (auto& x : a.entries()) have += (have.empty() ? "" : ", ") + x.name;
                throw io_error("dlgraph.io.npz_missing", "load_combine: '" + a.path() + "' has no entry '" + name +
                                                             ".npy' for variable '" + name +
                                                             "' (it has: " + (have.empty() ? "none" : have) + ")");
            }
            loaded.push_back(a.read_tensor(*e));
            check_loaded("load_combine", a.path() + ":" + e->name, name, loaded.back(), c.out(0, k));
        }
        for (int k = 0; k < c.out_count(0); ++k) {
            const Tensor& t = loaded[static_cast<std::size_t>(k)];
            if (t.bytes()) std::memcpy(c.out(0, k).raw(), t.raw(), t.bytes());
        }
    }
};
inline void load_combine_infer(const InferContext& c) {
    check_file_path(c, load_combine_op::file_path);
    for (int k = 0; k < c.out_count(0); ++k) {
        const VarMeta& m = c.out_meta(0, k);
        if (!m.shape.known())
            c.fail("dlgraph.shape.load", "Out[" + std::to_string(k) + "] is declared " + to_string(m.shape) +
                                             "; load_combine needs fully known dims (shapes are inferred before the "
                                             "file is read)");
        c.set(0, k, m.dtype, m.shape);
    }
}
inline OpDef load_combine_def() {
    // As for load: the kernel follows the first output's dtype.
    OpDef d{"load_combine", {}, {{"Out", true}}, {{"file_path", Attribute::make_string("file_path", ""), true}},
            &load_combine_infer, -1, -1};
    d.kernels = io_kernels(&load_combine_op::run);
    d.doc = "Out[...] = the entries <name>.npy of the .npz archive `file_path`";
    return d;
}

}  // namespace ops
}  // namespace dlgraph

