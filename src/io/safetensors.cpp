// Mapping and validating .safetensors files, and gathering the files of one checkpoint.
// Format (huggingface/safetensors README, "Format"): u64 little-endian header size N, N bytes of
// UTF-8 JSON (may be padded with spaces), then the data section. Each header entry is
// {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the data section;
// "__metadata__" is a string-to-string map. Every check below turns a malformed file into an
// Error naming the file (and tensor) before any view into it is handed out.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bifocal/error.h"
#include "io/json_file.h"

namespace bifocal {

// Elements are read in place (memcpy from the mapping), which is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB (safetensors MAX_HEADER_SIZE); a
// larger length means a corrupt or non-safetensors file, not a real header.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::uint64_t kLengthFieldBytes = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Closes a file descriptor on every exit path; the mapping outlives it (POSIX mmap keeps its own
// reference to the file).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() { if (fd_ >= 0) ::close(fd_); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// One header entry after its JSON has been checked, before it becomes a view.
struct TensorEntry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

// Parses the header text; a repeated top-level key (two tensors with one name) would otherwise be
// dropped silently by the JSON parser, so the parser callback watches depth-1 keys.
json parse_header(std::string_view text, const std::string& where) {
  std::optional<std::string> duplicate;
  std::vector<std::string> seen;
  auto watch_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !duplicate) {
      std::string key = parsed.get<std::string>();
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) duplicate = key;
      else seen.push_back(std::move(key));
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), watch_keys);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    fail(where, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) fail(where, std::string("header must be a JSON object, not ") + header.type_name());
  if (duplicate) fail(where, "header names tensor " + in_quotes(*duplicate) + " twice");
  return header;
}

// A JSON integer as a non-negative int64; `what` says which value, for the message.
std::int64_t non_negative(const json& value, const std::string& what, const std::string& where) {
  if (!value.is_number_integer()) fail(where, what + " must be an integer, not " + value.dump());
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v > std::uint64_t(std::numeric_limits<std::int64_t>::max())) fail(where, what + " " + value.dump() + " is too large");
    return std::int64_t(v);
  }
  const auto v = value.get<std::int64_t>();
  if (v < 0) fail(where, what + " is negative (" + std::to_string(v) + ")");
  return v;
}

const json& entry_field(const json& entry, const char* key, const std::string& context, const std::string& where) {
  if (!entry.contains(key)) fail(where, context + "missing \"" + key + "\"");
  return entry.at(key);
}

// numel × dtype size, refusing shapes whose byte count does not fit in 64 bits.
std::uint64_t byte_length(const std::vector<std::int64_t>& shape, DType dtype, const std::string& context,
                          const std::string& where) {
  std::uint64_t bytes = dtype_bytes(dtype);
  for (std::int64_t dim : shape) {
    if (dim != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / std::uint64_t(dim))
      fail(where, context + "shape " + shape_string(shape) + " is too large");
    bytes *= std::uint64_t(dim);
  }
  return bytes;
}

TensorEntry read_entry(const std::string& name, const json& entry, std::uint64_t data_size, const std::string& where) {
  const std::string context = "tensor " + in_quotes(name) + ": ";
  if (!entry.is_object()) fail(where, context + "entry must be a JSON object, not " + entry.dump());
  TensorEntry out{name, DType::F32, {}, 0, 0};

  const json& dtype = entry_field(entry, "dtype", context, where);
  if (!dtype.is_string()) fail(where, context + "\"dtype\" must be a string, not " + dtype.dump());
  if (!parse_dtype(dtype.get<std::string>(), out.dtype))
    fail(where, context + "unknown dtype " + in_quotes(dtype.get<std::string>()));

  const json& shape = entry_field(entry, "shape", context, where);
  if (!shape.is_array()) fail(where, context + "\"shape\" must be an array, not " + shape.dump());
  for (std::size_t i = 0; i < shape.size(); ++i)
    out.shape.push_back(non_negative(shape[i], context + "dimension " + std::to_string(i), where));

  const json& offsets = entry_field(entry, "data_offsets", context, where);
  if (!offsets.is_array() || offsets.size() != 2)
    fail(where, context + "\"data_offsets\" must be an array [begin, end], not " + offsets.dump());
  out.begin = std::uint64_t(non_negative(offsets[0], context + "data_offsets begin", where));
  out.end = std::uint64_t(non_negative(offsets[1], context + "data_offsets end", where));
  const std::string range = "data_offsets [" + std::to_string(out.begin) + ", " + std::to_string(out.end) + "]";
  if (out.begin > out.end) fail(where, context + range + ": begin is after end");

  const std::uint64_t expected = byte_length(out.shape, out.dtype, context, where);
  if (out.end - out.begin != expected)
    fail(where, context + range + " hold " + std::to_string(out.end - out.begin) + " bytes, but shape " +
                    shape_string(out.shape) + " of " + std::string(dtype_name(out.dtype)) + " needs " +
                    std::to_string(expected) + " bytes");
  if (out.end > data_size)
    fail(where, context + range + " extend beyond the data section (" + std::to_string(data_size) +
                    " bytes; file truncated?)");
  return out;
}

// Sorted by begin, two non-empty ranges overlap when one starts before the furthest end so far.
void check_no_overlap(std::vector<TensorEntry>& entries, const std::string& where) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const TensorEntry* furthest = nullptr;
  for (const TensorEntry& entry : entries) {
    if (entry.begin == entry.end) continue;  // an empty tensor occupies no bytes
    if (furthest && entry.begin < furthest->end)
      fail(where, "tensors " + in_quotes(furthest->name) + " and " + in_quotes(entry.name) + " overlap in the data section");
    if (!furthest || entry.end > furthest->end) furthest = &entry;
  }
}

std::map<std::string, std::string> read_metadata(const json& metadata, const std::string& where) {
  if (!metadata.is_object()) fail(where, "\"__metadata__\" must be an object of strings, not " + metadata.dump());
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) fail(where, "\"__metadata__\" value for " + in_quotes(key) + " must be a string, not " + value.dump());
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

std::uint64_t read_u64_le(std::span<const std::byte> bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) value |= std::uint64_t(bytes[i]) << (8 * i);
  return value;
}

// Shard names come from the index file; they must stay inside the checkpoint directory.
bool is_plain_relative(const fs::path& shard) {
  if (shard.empty() || shard.is_absolute()) return false;
  return std::none_of(shard.begin(), shard.end(), [](const fs::path& part) { return part == ".."; });
}

template <typename Stored>
Stored load_element(const std::byte* at) {
  Stored value;
  std::memcpy(&value, at, sizeof(Stored));
  return value;
}

}  // namespace

// ---- TensorView ----------------------------------------------------------------------------

std::int64_t TensorView::numel() const {
  std::int64_t count = 1;
  for (std::int64_t dim : shape) count *= dim;
  return count;
}

void TensorView::copy_to_f32(std::span<float> out) const {
  const std::size_t count = std::size_t(numel());
  if (out.size() != count)
    fail(file, "tensor " + in_quotes(name) + ": destination holds " + std::to_string(out.size()) +
                   " floats, tensor has " + std::to_string(count));
  if (bytes.size() != count * dtype_bytes(dtype))
    fail(file, "tensor " + in_quotes(name) + ": view holds " + std::to_string(bytes.size()) + " bytes, shape " +
                   shape_string(shape) + " needs " + std::to_string(count * dtype_bytes(dtype)));
  const std::byte* data = bytes.data();
  switch (dtype) {
    case DType::F32:
      // An empty tensor's view and destination may both be null, and memcpy from null is undefined
      // even for 0 bytes (UBSan).
      if (count > 0) std::memcpy(out.data(), data, count * sizeof(float));
      return;
    case DType::F16:
      for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_f32(load_element<std::uint16_t>(data + 2 * i));
      return;
    case DType::BF16:
      for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(load_element<std::uint16_t>(data + 2 * i));
      return;
    case DType::F64:
      for (std::size_t i = 0; i < count; ++i) out[i] = float(load_element<double>(data + 8 * i));
      return;
    default:
      fail(file, "tensor " + in_quotes(name) + " is " + std::string(dtype_name(dtype)) +
                     ", not a floating-point type (F32, F16, BF16, F64)");
  }
}

std::vector<float> TensorView::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  copy_to_f32(out);
  return out;
}

std::vector<std::int64_t> TensorView::to_i64() const {
  const std::size_t count = std::size_t(numel());
  if (dtype != DType::I64 && dtype != DType::I32)
    fail(file, "tensor " + in_quotes(name) + " is " + std::string(dtype_name(dtype)) + ", not an integer type (I64, I32)");
  if (bytes.size() != count * dtype_bytes(dtype))
    fail(file, "tensor " + in_quotes(name) + ": view holds " + std::to_string(bytes.size()) + " bytes, shape " +
                   shape_string(shape) + " needs " + std::to_string(count * dtype_bytes(dtype)));
  std::vector<std::int64_t> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = dtype == DType::I64 ? load_element<std::int64_t>(bytes.data() + 8 * i)
                                 : std::int64_t(load_element<std::int32_t>(bytes.data() + 4 * i));
  return out;
}

// ---- SafetensorsFile -----------------------------------------------------------------------

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  const std::string where = path.string();
  // O_NONBLOCK keeps a FIFO at this path from blocking open(); it has no effect on regular files.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) fail(where, "file not found");
    fail(where, std::string("cannot open file (") + std::strerror(errno) + ")");
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) fail(where, std::string("cannot stat file (") + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) fail(where, "not a regular file");
  const auto file_size = std::uint64_t(info.st_size);
  if (file_size < kLengthFieldBytes)
    fail(where, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");

  // Owned from here on, so that any failure below unmaps through the destructor.
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  void* mapping = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapping == MAP_FAILED) fail(where, std::string("cannot map file (") + std::strerror(errno) + ")");
  file->mapping_ = mapping;
  file->mapping_size_ = file_size;
  const std::span<const std::byte> whole(static_cast<const std::byte*>(mapping), file_size);

  const std::uint64_t header_size = read_u64_le(whole.first(kLengthFieldBytes));
  if (header_size > kMaxHeaderBytes)
    fail(where, "header length " + std::to_string(header_size) + " is absurd (limit " +
                    std::to_string(kMaxHeaderBytes) + " bytes); not a safetensors file?");
  if (header_size > file_size - kLengthFieldBytes)
    fail(where, "header length " + std::to_string(header_size) + " exceeds the file size (" +
                    std::to_string(file_size) + " bytes)");
  const auto header_bytes = whole.subspan(kLengthFieldBytes, header_size);
  const json header = parse_header(
      std::string_view(reinterpret_cast<const char*>(header_bytes.data()), header_bytes.size()), where);

  const auto data = whole.subspan(kLengthFieldBytes + header_size);
  std::vector<TensorEntry> entries;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) file->metadata_ = read_metadata(entry, where);
    else entries.push_back(read_entry(name, entry, data.size(), where));
  }
  check_no_overlap(entries, where);

  // Views in data order; they point into the mapping, nothing is copied.
  for (TensorEntry& entry : entries) {
    file->by_name_.emplace(entry.name, file->tensors_.size());
    file->tensors_.push_back(TensorView{std::move(entry.name), entry.dtype, std::move(entry.shape),
                                        data.subspan(entry.begin, entry.end - entry.begin), where,
                                        kLengthFieldBytes + header_size + entry.begin});
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, mapping_size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

// ---- WeightStore ---------------------------------------------------------------------------

WeightStore WeightStore::open(const fs::path& model_dir) {
  WeightStore store;
  store.directory_ = model_dir;
  const std::string dir = model_dir.string();
  std::error_code error;
  if (!fs::is_directory(model_dir, error))
    fail(dir, fs::exists(model_dir, error) ? "not a directory" : "directory not found");

  // Like transformers, a single model.safetensors wins over an index when both are present.
  const fs::path single = model_dir / "model.safetensors";
  const fs::path index_path = model_dir / "model.safetensors.index.json";
  if (fs::exists(single, error)) {
    store.source_ = single;
    std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(single);
    for (const TensorView& view : file->tensors()) store.tensors_.emplace(view.name, &view);
    store.files_.push_back(std::move(file));
    return store;
  }
  if (!fs::exists(index_path, error))
    fail(dir, "no model.safetensors or model.safetensors.index.json (not a safetensors checkpoint)");

  // The index is the authority on which shard holds each name; tensors a shard holds beyond the
  // index are not exposed, so a name can never resolve to two files.
  store.source_ = index_path;
  const std::string where = index_path.string();
  const json index = read_json_file(index_path);
  if (!index.is_object()) fail(where, std::string("must be a JSON object, not ") + index.type_name());
  const json weight_map = json_get<json>(index, "weight_map", where);
  if (!weight_map.is_object()) fail(where, "'weight_map' must be an object");
  if (weight_map.empty()) fail(where, "\"weight_map\" lists no tensors");

  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;  // each shard opened once
  for (const auto& [name, shard_value] : weight_map.items()) {
    if (!shard_value.is_string())
      fail(where, "\"weight_map\" entry " + in_quotes(name) + " must be a shard file name, not " + shard_value.dump());
    const std::string shard = shard_value.get<std::string>();
    if (!is_plain_relative(shard))
      fail(where, "shard " + in_quotes(shard) + " for tensor " + in_quotes(name) + " must be a file inside " + dir);
    auto [it, inserted] = shards.try_emplace(shard);
    if (inserted) {
      const fs::path shard_path = model_dir / shard;
      if (!fs::exists(shard_path, error))
        fail(where, "shard " + in_quotes(shard) + " (listed for tensor " + in_quotes(name) + ") not found: " +
                        shard_path.string());
      it->second = SafetensorsFile::open(shard_path);
      store.files_.push_back(it->second);
    }
    const TensorView* view = it->second->find(name);
    if (!view)
      fail(where, "tensor " + in_quotes(name) + " is listed in shard " + in_quotes(shard) + ", but " +
                      it->second->path().string() + " does not contain it");
    store.tensors_.emplace(name, view);
  }
  return store;
}

const TensorView* WeightStore::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

const TensorView& WeightStore::require(const std::string& name, const std::vector<std::int64_t>& shape) const {
  const TensorView* view = find(name);
  if (!view) {
    std::string what = "missing tensor " + in_quotes(name);
    if (!source_.empty())
      what += source_.extension() == ".json" ? " (not listed in " + source_.string() + ")"
                                             : " (not in " + source_.string() + ")";
    fail(directory_.string(), what);
  }
  if (view->shape != shape)
    fail(view->file, "tensor " + in_quotes(name) + " has shape " + shape_string(view->shape) + ", expected " +
                         shape_string(shape));
  return *view;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) out.push_back(name);
  return out;
}

}  // namespace bifocal
