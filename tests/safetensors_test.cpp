// Safetensors loading: the HF-written golden checkpoints decode exactly (checked against values
// decoded by hand from the raw file bytes), and every malformed file or index is an Error that
// names the file and the problem.
#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bifocal/error.h"
#include "io/safetensors.h"

namespace bifocal {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kModels = fs::path(BIFOCAL_GOLDEN_DIR) / "models";

// ---- helpers --------------------------------------------------------------------------------

// Passes when `action` throws bifocal::Error whose message contains every word; the message is
// shown on failure so a reader sees what was said instead.
::testing::AssertionResult throws_error_with(const std::function<void()>& action,
                                             const std::vector<std::string>& words) {
  try {
    action();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& word : words)
      if (message.find(word) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << word << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-bifocal exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "no Error was thrown";
}

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string u64_le(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((value >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file as the format lays it out: u64 LE header length, the header, the data.
void write_safetensors(const fs::path& path, const std::string& header, const std::string& data) {
  write_bytes(path, u64_le(header.size()) + header + data);
}

// The header and data start of a file, read independently of the code under test.
struct RawFile {
  std::vector<std::uint8_t> bytes;
  json header;
  std::size_t data_start = 0;

  explicit RawFile(const fs::path& path) : bytes(read_bytes(path)) {
    std::uint64_t length = 0;
    for (int i = 0; i < 8; ++i) length |= std::uint64_t(bytes.at(i)) << (8 * i);
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(length));
    data_start = 8 + length;
  }
  const std::uint8_t* tensor_data(const std::string& name) const {
    return bytes.data() + data_start + header.at(name).at("data_offsets").at(0).get<std::size_t>();
  }
};

// IEEE binary formats decoded from the definition, not by bit shifting:
// (-1)^s × 2^(e − bias) × (1 + m / 2^M) for normal numbers, (-1)^s × 2^(1 − bias) × m / 2^M for
// subnormals. Weights hold no inf/NaN, so those are reported as a failure.
double decode_by_definition(std::uint32_t bits, int exponent_bits, int mantissa_bits) {
  const std::uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  const std::uint32_t exponent = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
  const double sign = (bits >> (exponent_bits + mantissa_bits)) & 1 ? -1.0 : 1.0;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const double fraction = std::ldexp(double(mantissa), -mantissa_bits);
  if (exponent == (1u << exponent_bits) - 1) {
    ADD_FAILURE() << "unexpected inf/NaN bit pattern " << bits;
    return 0.0;
  }
  if (exponent == 0) return sign * std::ldexp(fraction, 1 - bias);
  return sign * std::ldexp(1.0 + fraction, int(exponent) - bias);
}

// Every element of every tensor of a 16-bit file equals its by-definition decoding, bit for bit.
void expect_all_16bit_elements_exact(const fs::path& file_path, DType dtype) {
  const RawFile raw(file_path);
  const auto file = SafetensorsFile::open(file_path);
  const int exponent_bits = dtype == DType::F16 ? 5 : 8;
  const int mantissa_bits = dtype == DType::F16 ? 10 : 7;
  ASSERT_FALSE(file->tensors().empty());
  for (const TensorView& view : file->tensors()) {
    ASSERT_EQ(view.dtype, dtype) << view.name;
    const std::vector<float> values = view.to_f32();
    const std::uint8_t* data = raw.tensor_data(view.name);
    ASSERT_EQ(std::int64_t(values.size()), view.numel());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t bits = std::uint32_t(data[2 * i]) | std::uint32_t(data[2 * i + 1]) << 8;
      const float expected = float(decode_by_definition(bits, exponent_bits, mantissa_bits));
      ASSERT_EQ(std::bit_cast<std::uint32_t>(values[i]), std::bit_cast<std::uint32_t>(expected))
          << view.name << "[" << i << "] bits " << bits;
    }
  }
}

// A fresh directory per test, removed afterwards.
class SafetensorsBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("bifocal_safetensors_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `header` with `data_bytes` zero bytes after it, then expects open() to fail naming the
  // file and every word.
  ::testing::AssertionResult rejects(const std::string& file_name, const std::string& header, std::size_t data_bytes,
                                     std::vector<std::string> words) {
    const fs::path path = dir_ / file_name;
    write_safetensors(path, header, std::string(data_bytes, '\0'));
    words.insert(words.begin(), path.string());
    return throws_error_with([&] { SafetensorsFile::open(path); }, words);
  }

  fs::path dir_;
};

using SafetensorsIndex = SafetensorsBadInput;
using SafetensorsCrafted = SafetensorsBadInput;

// ---- golden checkpoints ----------------------------------------------------------------------

TEST(SafetensorsGolden, ShardedLlamaResolvesEveryIndexedName) {
  const fs::path dir = kModels / "llama_fp32_sharded";
  const json index = json::parse(read_bytes(dir / "model.safetensors.index.json"));
  const json& weight_map = index.at("weight_map");
  const WeightStore store = WeightStore::open(dir);

  EXPECT_EQ(store.names().size(), weight_map.size());
  for (const auto& [name, shard] : weight_map.items()) {
    const TensorView* view = store.find(name);
    ASSERT_NE(view, nullptr) << name;
    EXPECT_EQ(fs::path(view->file).filename(), shard.get<std::string>()) << name;
    EXPECT_EQ(view->dtype, DType::F32) << name;
    // The bytes the view exposes are the shard's own bytes at the header's offsets.
    const RawFile raw(dir / shard.get<std::string>());
    ASSERT_EQ(view->bytes.size(), std::size_t(view->numel()) * 4) << name;
    EXPECT_EQ(std::memcmp(view->bytes.data(), raw.tensor_data(name), view->bytes.size()), 0) << name;
  }
  // embed_tokens[0][0] in model-00001 is stored as bytes f2 5f 64 3d (little-endian 0x3d645ff2).
  const TensorView& embed = store.require("model.embed_tokens.weight", {792, 128});
  EXPECT_EQ(embed.to_f32()[0], std::bit_cast<float>(std::uint32_t{0x3d645ff2}));
  EXPECT_EQ(store.find("model.layers.9.mlp.up_proj.weight"), nullptr);
}

TEST(SafetensorsGolden, MistralF16DecodesExactly) {
  const fs::path path = kModels / "mistral_fp16_swa" / "model.safetensors";
  expect_all_16bit_elements_exact(path, DType::F16);
  // embed_tokens[0][0] = 0xade4: sign 1, exponent 01011 (11), mantissa 0x1e4 (484):
  // −2^(11−15) × (1 + 484/1024) = −1508/16384.
  const WeightStore store = WeightStore::open(path.parent_path());
  EXPECT_EQ(store.require("model.embed_tokens.weight", {792, 96}).to_f32()[0], -1508.0f / 16384.0f);
}

TEST(SafetensorsGolden, Qwen3Bf16DecodesExactly) {
  const fs::path path = kModels / "qwen3_bf16" / "model.safetensors";
  expect_all_16bit_elements_exact(path, DType::BF16);
  // embed_tokens[0][2] = 0xbe15: sign 1, exponent 0x7c (124), mantissa 0x15 (21):
  // −2^(124−127) × (1 + 21/128) = −149/1024.
  const WeightStore store = WeightStore::open(path.parent_path());
  const TensorView& embed = store.require("model.embed_tokens.weight", {792, 128});
  EXPECT_EQ(embed.to_f32()[2], -149.0f / 1024.0f);
  EXPECT_EQ(store.require("model.layers.0.input_layernorm.weight", {128}).to_f32()[0], 1.0f);
}

TEST(SafetensorsGolden, ReferenceIntegersAndFloats) {
  const fs::path path = kModels / "qwen3_bf16" / "reference.safetensors";
  const RawFile raw(path);
  const auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file->metadata().empty());

  const TensorView* ids = file->find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, DType::I64);
  const std::vector<std::int64_t> values = ids->to_i64();
  ASSERT_EQ(values.size(), 139u);
  const std::uint8_t* data = raw.tensor_data("input_ids");
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint64_t expected = 0;
    for (int b = 0; b < 8; ++b) expected |= std::uint64_t(data[8 * i + b]) << (8 * b);
    ASSERT_EQ(values[i], std::int64_t(expected)) << i;
  }
  EXPECT_EQ((std::vector<std::int64_t>(values.begin(), values.begin() + 5)),
            (std::vector<std::int64_t>{54, 275, 570, 73, 348}));

  const TensorView* logits = file->find("logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->dtype, DType::F32);
  EXPECT_EQ(logits->shape, (std::vector<std::int64_t>{155, 792}));
  std::vector<float> copied(std::size_t(logits->numel()));
  logits->copy_to_f32(copied);
  EXPECT_EQ(std::memcmp(copied.data(), raw.tensor_data("logits"), copied.size() * 4), 0);

  EXPECT_TRUE(throws_error_with([&] { ids->to_f32(); }, {path.string(), "input_ids", "I64"}));
  EXPECT_TRUE(throws_error_with([&] { logits->to_i64(); }, {path.string(), "logits", "F32"}));
  std::vector<float> too_small(3);
  EXPECT_TRUE(throws_error_with([&] { logits->copy_to_f32(too_small); }, {"logits", "destination"}));
}

TEST(SafetensorsGolden, MetadataIsAStringMap) {
  const auto file = SafetensorsFile::open(kModels / "mistral_fp16_swa" / "model.safetensors");
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(file->find("__metadata__"), nullptr);
}

TEST(SafetensorsGolden, ViewsLiveAsLongAsTheStore) {
  const fs::path dir = kModels / "llama_fp32_sharded";
  const float expected = WeightStore::open(dir).require("model.norm.weight", {128}).to_f32()[5];
  std::optional<WeightStore> copy;
  {
    const WeightStore original = WeightStore::open(dir);
    copy = original;  // the original and its handles go out of scope; the copy shares the files
  }
  const TensorView& norm = copy->require("model.norm.weight", {128});
  EXPECT_EQ(norm.to_f32()[5], expected);
  const WeightStore moved = std::move(*copy);
  copy.reset();
  EXPECT_EQ(moved.require("model.norm.weight", {128}).to_f32()[5], expected);
}

TEST(SafetensorsGolden, RequireNamesTheFileOnMissingOrMisshapen) {
  const fs::path single = kModels / "qwen3_bf16";
  const WeightStore store = WeightStore::open(single);
  EXPECT_TRUE(throws_error_with([&] { store.require("model.layers.7.mlp.up_proj.weight", {256, 128}); },
                                {single.string() + ": missing tensor 'model.layers.7.mlp.up_proj.weight'",
                                 "model.safetensors"}));
  EXPECT_TRUE(throws_error_with([&] { store.require("model.embed_tokens.weight", {128, 792}); },
                                {(single / "model.safetensors").string(), "model.embed_tokens.weight",
                                 "[792, 128]", "expected [128, 792]"}));

  const fs::path sharded = kModels / "llama_fp32_sharded";
  const WeightStore shards = WeightStore::open(sharded);
  EXPECT_TRUE(throws_error_with([&] { shards.require("lm_head.bias", {792}); },
                                {sharded.string() + ": missing tensor 'lm_head.bias'",
                                 "model.safetensors.index.json"}));
  EXPECT_TRUE(throws_error_with([&] { shards.require("lm_head.weight", {792}); },
                                {"model-00022-of-00023.safetensors", "lm_head.weight", "[792, 128]",
                                 "expected [792]"}));
}

// ---- well-formed crafted files ---------------------------------------------------------------

TEST_F(SafetensorsCrafted, OtherDtypesAndEmptyTensors) {
  // F64 1.5 then -0.25, I32 -7 then 2^31−1, an empty F32 tensor and a scalar; spaces pad the header.
  std::string data;
  for (double v : {1.5, -0.25}) data.append(reinterpret_cast<const char*>(&v), 8);
  for (std::int32_t v : {-7, 2147483647}) data.append(reinterpret_cast<const char*>(&v), 4);
  const float scalar = 3.0f;
  data.append(reinterpret_cast<const char*>(&scalar), 4);
  const std::string header =
      R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
      R"("i":{"dtype":"I32","shape":[2],"data_offsets":[16,24]},)"
      R"("e":{"dtype":"F32","shape":[0,4],"data_offsets":[24,24]},)"
      R"("s":{"dtype":"F32","shape":[],"data_offsets":[24,28]},)"
      R"("__metadata__":{"author":"test"}}    )";
  const fs::path path = dir_ / "crafted.safetensors";
  write_safetensors(path, header, data);
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->find("d")->to_f32(), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(file->find("i")->to_i64(), (std::vector<std::int64_t>{-7, 2147483647}));
  EXPECT_EQ(file->find("e")->numel(), 0);
  EXPECT_TRUE(file->find("e")->to_f32().empty());
  EXPECT_EQ(file->find("s")->to_f32(), (std::vector<float>{3.0f}));
  EXPECT_EQ(file->metadata().at("author"), "test");
  // Where each tensor's bytes sit in the file: after the length field and the header.
  EXPECT_EQ(file->find("d")->file_offset, 8 + header.size());
  EXPECT_EQ(file->find("i")->file_offset, 8 + header.size() + 16);
  EXPECT_EQ(file->find("s")->file_offset, 8 + header.size() + 24);
}

// ---- malformed files -------------------------------------------------------------------------

TEST_F(SafetensorsBadInput, FileMissing) {
  const fs::path path = dir_ / "absent.safetensors";
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(path); }, {path.string(), "not found"}));
}

TEST_F(SafetensorsBadInput, NotARegularFile) {
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(dir_); }, {dir_.string(), "not a regular file"}));
}

TEST_F(SafetensorsBadInput, ShorterThanEightBytes) {
  const fs::path path = dir_ / "short.safetensors";
  write_bytes(path, std::string("\x05\0\0\0\0", 5));
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(path); }, {path.string(), "5 bytes", "shorter"}));
  write_bytes(path, "");
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(path); }, {path.string(), "0 bytes", "shorter"}));
}

TEST_F(SafetensorsBadInput, HeaderLengthBeyondFile) {
  const fs::path path = dir_ / "long_header.safetensors";
  write_bytes(path, u64_le(1000) + R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})" + "abcd");
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(path); },
                                {path.string(), "header length 1000", "exceeds the file size"}));
}

TEST_F(SafetensorsBadInput, HugeHeaderLength) {
  const fs::path path = dir_ / "huge_header.safetensors";
  write_bytes(path, u64_le(0xffffffffffffff00ull) + "{}");
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(path); },
                                {path.string(), "header length 18446744073709551360", "absurd"}));
}

TEST_F(SafetensorsBadInput, HeaderNotJson) {
  EXPECT_TRUE(rejects("not_json.safetensors", R"({"a": {"dtype": "F32", )", 0, {"header", "not valid JSON"}));
}

// A number past a double's range is valid JSON syntax but not parseable (nlohmann throws
// out_of_range, not parse_error): still one error naming the file, never std::terminate (found by
// scripts/fuzz.sh).
TEST_F(SafetensorsBadInput, HeaderNumberPastADoublesRange) {
  EXPECT_TRUE(rejects("overflow.safetensors", R"({"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})", 4,
                      {"header", "not valid JSON", "number overflow"}));
}

TEST_F(SafetensorsBadInput, HeaderNotAnObject) {
  EXPECT_TRUE(rejects("array.safetensors", "[1, 2, 3]", 0, {"header must be a JSON object", "array"}));
}

TEST_F(SafetensorsBadInput, EntryNotAnObject) {
  EXPECT_TRUE(rejects("entry.safetensors", R"({"w": [0, 4]})", 4, {"tensor 'w'", "must be a JSON object"}));
}

TEST_F(SafetensorsBadInput, MissingDtype) {
  EXPECT_TRUE(rejects("no_dtype.safetensors", R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "missing \"dtype\""}));
}

TEST_F(SafetensorsBadInput, MissingShape) {
  EXPECT_TRUE(rejects("no_shape.safetensors", R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "missing \"shape\""}));
}

TEST_F(SafetensorsBadInput, MissingDataOffsets) {
  EXPECT_TRUE(rejects("no_offsets.safetensors", R"({"w":{"dtype":"F32","shape":[1]}})", 4,
                      {"tensor 'w'", "missing \"data_offsets\""}));
}

TEST_F(SafetensorsBadInput, WrongJsonTypes) {
  EXPECT_TRUE(rejects("dtype_number.safetensors", R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "\"dtype\" must be a string"}));
  EXPECT_TRUE(rejects("shape_string.safetensors", R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "\"shape\" must be an array"}));
  EXPECT_TRUE(rejects("shape_float.safetensors", R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "dimension 0 must be an integer"}));
  EXPECT_TRUE(rejects("offsets_three.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8,
                      {"tensor 'w'", "\"data_offsets\" must be an array [begin, end]"}));
  EXPECT_TRUE(rejects("offsets_string.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", 4,
                      {"tensor 'w'", "data_offsets begin must be an integer"}));
}

TEST_F(SafetensorsBadInput, UnknownDtype) {
  EXPECT_TRUE(rejects("f8.safetensors", R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "unknown dtype 'F8_E4M3'"}));
}

TEST_F(SafetensorsBadInput, NegativeDimension) {
  EXPECT_TRUE(rejects("negative.safetensors", R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w'", "dimension 1 is negative"}));
}

TEST_F(SafetensorsBadInput, ByteLengthDoesNotMatchShape) {
  EXPECT_TRUE(rejects("mismatch.safetensors", R"({"w":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,8]}})", 8,
                      {"tensor 'w'", "8 bytes", "[3, 2]", "BF16", "needs 12 bytes"}));
  // A shape whose byte count overflows 64 bits must not wrap around to a small number.
  EXPECT_TRUE(rejects("overflow.safetensors",
                      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0,
                      {"tensor 'w'", "too large"}));
}

TEST_F(SafetensorsBadInput, EndBeyondDataSection) {
  EXPECT_TRUE(rejects("beyond.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8,
                      {"tensor 'w'", "[4, 12]", "beyond the data section", "8 bytes"}));
}

TEST_F(SafetensorsBadInput, BeginAfterEnd) {
  EXPECT_TRUE(rejects("reversed.safetensors", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8,
                      {"tensor 'w'", "[8, 4]", "begin is after end"}));
}

TEST_F(SafetensorsBadInput, OverlappingTensors) {
  EXPECT_TRUE(rejects("overlap.safetensors",
                      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                      16, {"'a'", "'b'", "overlap"}));
  // Containment is an overlap too.
  EXPECT_TRUE(rejects("contained.safetensors",
                      R"({"big":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                      R"("inner":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                      32, {"'big'", "'inner'", "overlap"}));
}

TEST_F(SafetensorsBadInput, DuplicateTensorName) {
  EXPECT_TRUE(rejects("duplicate.safetensors",
                      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                      8, {"'w'", "twice"}));
}

TEST_F(SafetensorsBadInput, MetadataNotAStringMap) {
  EXPECT_TRUE(rejects("metadata_number.safetensors", R"({"__metadata__":{"format":"pt","step":100}})", 0,
                      {"__metadata__", "'step'", "must be a string"}));
  EXPECT_TRUE(rejects("metadata_array.safetensors", R"({"__metadata__":["pt"]})", 0,
                      {"__metadata__", "must be an object"}));
}

TEST_F(SafetensorsBadInput, TruncatedRealFixture) {
  const fs::path original = kModels / "qwen3_bf16" / "model.safetensors";
  std::vector<std::uint8_t> bytes = read_bytes(original);
  ASSERT_GT(bytes.size(), 4096u);
  bytes.erase(bytes.end() - 100, bytes.end());  // the header survives; the last tensor's data is cut short
  const fs::path path = dir_ / "truncated.safetensors";
  write_bytes(path, std::string(bytes.begin(), bytes.end()));
  EXPECT_TRUE(throws_error_with([&] { SafetensorsFile::open(path); },
                                {path.string(), "tensor '", "beyond the data section", "truncated"}));
}

// ---- checkpoint directories and the shard index ---------------------------------------------

TEST_F(SafetensorsIndex, DirectoryWithoutWeights) {
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); }, {dir_.string(), "no model.safetensors"}));
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_ / "nope"); }, {"nope", "directory not found"}));
}

TEST_F(SafetensorsIndex, MalformedJson) {
  const fs::path index = dir_ / "model.safetensors.index.json";
  write_bytes(index, R"({"weight_map": {"a": "model-1.safetensors",)");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); }, {index.string(), "malformed JSON"}));
}

TEST_F(SafetensorsIndex, MissingWeightMap) {
  const fs::path index = dir_ / "model.safetensors.index.json";
  write_bytes(index, R"({"metadata": {"total_size": 4}})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); }, {index.string(), "'weight_map'"}));
  write_bytes(index, R"({"weight_map": ["a"]})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); }, {index.string(), "'weight_map' must be an object"}));
  write_bytes(index, R"({"weight_map": {"a": 7}})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); }, {index.string(), "'a'", "shard file name"}));
}

TEST_F(SafetensorsIndex, ShardDoesNotExist) {
  write_safetensors(dir_ / "model-1.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                    std::string(4, '\0'));
  const fs::path index = dir_ / "model.safetensors.index.json";
  write_bytes(index, R"({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); },
                                {index.string(), "shard 'model-2.safetensors'", "'b'", "not found"}));
}

TEST_F(SafetensorsIndex, ShardOutsideTheDirectory) {
  const fs::path index = dir_ / "model.safetensors.index.json";
  write_bytes(index, R"({"weight_map": {"a": "../model-1.safetensors"}})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); },
                                {index.string(), "'../model-1.safetensors'", "must be a file inside"}));
}

TEST_F(SafetensorsIndex, TensorAbsentFromItsShard) {
  const fs::path shard = dir_ / "model-1.safetensors";
  write_safetensors(shard, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  const fs::path index = dir_ / "model.safetensors.index.json";
  write_bytes(index, R"({"weight_map": {"a": "model-1.safetensors", "b": "model-1.safetensors"}})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); },
                                {index.string(), "tensor 'b'", shard.string(), "does not contain it"}));
}

TEST_F(SafetensorsIndex, BadShardErrorNamesTheShard) {
  const fs::path shard = dir_ / "model-1.safetensors";
  write_safetensors(shard, R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'));
  write_bytes(dir_ / "model.safetensors.index.json", R"({"weight_map": {"a": "model-1.safetensors"}})");
  EXPECT_TRUE(throws_error_with([&] { WeightStore::open(dir_); }, {shard.string(), "unknown dtype 'Q4'"}));
}

TEST_F(SafetensorsIndex, EachShardOpenedOnceAndSharedByItsTensors) {
  write_safetensors(dir_ / "model-1.safetensors",
                    R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    std::string(8, '\0'));
  write_bytes(dir_ / "model.safetensors.index.json",
              R"({"weight_map": {"a": "model-1.safetensors", "b": "model-1.safetensors"}})");
  const WeightStore store = WeightStore::open(dir_);
  ASSERT_NE(store.find("a"), nullptr);
  ASSERT_NE(store.find("b"), nullptr);
  // One mapping: b's bytes follow a's directly in memory.
  EXPECT_EQ(store.find("a")->bytes.data() + 4, store.find("b")->bytes.data());
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace bifocal
