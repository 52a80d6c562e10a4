// tokenizer.json "model" of type BPE: vocabulary, ranked merges, byte fallback, unk handling,
// continuing_subword_prefix / end_of_word_suffix and ignore_merges, as HF's models::bpe does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace bifocal::tokenizer {

// Hash that lets unordered_map<std::string, ...> be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using TokenIdMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `spec` is tokenizer.json's "model" object. Throws Error "<where>: ..." on bad input, e.g. a
  // merge that names a token missing from the vocabulary.
  static BpeModel from_json(const nlohmann::json& spec, const std::string& where);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::optional<std::int32_t> token_id(std::string_view token) const;
  const std::string* token_text(std::int32_t id) const;  // nullptr when the vocabulary lacks `id`
  std::int32_t id_end() const { return static_cast<std::int32_t>(id_to_token_.size()); }

 private:
  BpeModel();
  struct Merge {
    std::uint32_t rank;
    std::int32_t merged_id;
  };
  struct WordCache;

  std::vector<std::int32_t> merge_word(std::string_view word) const;
  const Merge* find_merge(std::int32_t left, std::int32_t right) const;

  TokenIdMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_known_;
  std::unordered_map<std::uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::optional<std::string> unk_token_;
  std::optional<std::int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace bifocal::tokenizer
