// NumPy's .npz archives: an uncompressed ZIP (ZIP64 where needed) whose
// entries are "<variable name>.npy", as np.savez writes and np.load reads.
// Writes are atomic (a temporary file, fsync, rename). Nothing here needs a
// library beyond the C++ standard one (CRC-32 is computed here, not by
// zlib), so that the umbrella header stays usable with a plain compiler.
#pragma once

#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dlgraph/npy.hpp"

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

// The ZIP records of one stored (uncompressed) entry, ZIP64 where its size
// or offset needs it: the local header before its bytes, and its central
// directory record.
struct zip_entry_records {
    std::string local, central;
};

inline zip_entry_records zip_records(const std::string& path, const npz_member& m, std::uint64_t offset) {
    if (m.name.size() > 0xffff)
        throw io_error("dlgraph.io.npz", "cannot write '" + path + "': variable name of " +
                                             std::to_string(m.name.size()) + " bytes is too long for a ZIP entry");
    const std::uint64_t size = m.header.size() + m.data.size();
    const std::uint32_t crc = crc32_update(crc32_update(0, m.header), m.data);
    const bool big = size >= zip_max32;
    const bool far = offset >= zip_max32;
    const std::uint32_t flags = is_ascii(m.name) ? 0 : 0x0800;  // bit 11: the name is UTF-8
    const std::uint32_t version = big || far ? 45 : 20;
    const auto size32 = big ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(size);
    zip_entry_records r;
    std::string& local = r.local;
    put32(local, zip_local_sig);
    put16(local, version);
    put16(local, flags);
    put16(local, 0);  // stored
    put16(local, 0);  // time
    put16(local, zip_dos_date);
    put32(local, crc);
    put32(local, size32);
    put32(local, size32);
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
    std::string& central = r.central;
    put32(central, zip_central_sig);
    put16(central, (3u << 8) | version);  // made by: Unix
    put16(central, version);
    put16(central, flags);
    put16(central, 0);
    put16(central, 0);
    put16(central, zip_dos_date);
    put32(central, crc);
    put32(central, size32);
    put32(central, size32);
    put16(central, static_cast<std::uint32_t>(m.name.size()));
    put16(central, static_cast<std::uint32_t>(extra.size()));
    put16(central, 0);                  // comment
    put16(central, 0);                  // disk
    put16(central, 0);                  // internal attributes
    put32(central, 0100644u << 16);     // external: a regular file, rw-r--r--
    put32(central, far ? static_cast<std::uint32_t>(zip_max32) : static_cast<std::uint32_t>(offset));
    central += m.name;
    central += extra;
    return r;
}

// The end of the central directory (n entries, cd_size bytes from
// cd_offset), with the ZIP64 records first where a count or offset needs them.
inline void put_zip_end(std::string& out, std::uint64_t n, std::uint64_t cd_size, std::uint64_t cd_offset) {
    if (n >= 0xffff || cd_size >= zip_max32 || cd_offset >= zip_max32) {
        put32(out, zip64_end_sig);
        put64(out, 44);
        put16(out, 45);
        put16(out, 45);
        put32(out, 0);
        put32(out, 0);
        put64(out, n);
        put64(out, n);
        put64(out, cd_size);
        put64(out, cd_offset);
        put32(out, zip64_locator_sig);
        put32(out, 0);
        put64(out, cd_offset + cd_size);
        put32(out, 1);
    }
    put32(out, zip_end_sig);
    put16(out, 0);
    put16(out, 0);
    put16(out, static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 0xffff)));
    put16(out, static_cast<std::uint32_t>(std::min<std::uint64_t>(n, 0xffff)));
    put32(out, static_cast<std::uint32_t>(std::min(cd_size, zip_max32)));
    put32(out, static_cast<std::uint32_t>(std::min(cd_offset, zip_max32)));
    put16(out, 0);
}

// Lays out a stored ZIP archive of `members` and writes it atomically: each
// entry's local header and bytes, then the central directory and its end.
inline void write_npz_members(const std::string& path, std::vector<npz_member>& members) {
    std::vector<std::string> locals;
    locals.reserve(members.size());
    std::string central;
    std::uint64_t offset = 0;
    for (auto& m : members) {
        zip_entry_records r = zip_records(path, m, offset);
        offset += r.local.size() + m.header.size() + m.data.size();
        locals.push_back(std::move(r.local));
        central += r.central;
    }
    const std::uint64_t cd_size = central.size();
    put_zip_end(central, members.size(), cd_size, offset);
    std::vector<std::string_view> pieces;
    pieces.reserve(3 * members.size() + 1);
    for (std::size_t i = 0; i < members.size(); ++i) {
        pieces.push_back(locals[i]);
        pieces.push_back(members[i].header);
        pieces.push_back(members[i].data);
    }
    pieces.push_back(central);
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

}  // namespace dlgraph
