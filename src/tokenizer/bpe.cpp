#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace bifocal::tokenizer {

// Words already split, as HF's BPE cache keeps them (10,000 entries; once full, new words are
// computed but not stored). Only words shorter than 256 bytes are cached, as in HF.
struct BpeModel::WordCache {
  static constexpr std::size_t kCapacity = 10000;
  static constexpr std::size_t kMaxWordBytes = 256;
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> words;
};

namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

// A merge from tokenizer.json: ["a", "b"] (current files) or "a b" (older files).
std::pair<std::string, std::string> parse_merge(const nlohmann::json& merge, std::size_t index, const std::string& where) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    // HF splits the legacy form on ' ' and wants exactly two parts.
    const auto text = merge.get<std::string>();
    const std::size_t space = text.find(' ');
    if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos)
      return {text.substr(0, space), text.substr(space + 1)};
  }
  fail(where, "merge #" + std::to_string(index) + " must be [\"left\", \"right\"] or \"left right\", got " + merge.dump());
}

std::string byte_fallback_token(unsigned char byte) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", byte);
  return name;
}

}  // namespace

BpeModel::BpeModel() : cache_(std::make_unique<WordCache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::from_json(const nlohmann::json& spec, const std::string& where) {
  BpeModel model;
  const auto vocab = json_get<nlohmann::json>(spec, "vocab", where);
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX)
      fail(where, "vocab entry '" + token + "' must map to a non-negative integer id, got " + id.dump());
    const auto token_id = static_cast<std::int32_t>(id.get<std::int64_t>());
    model.vocab_.emplace(token, token_id);
    if (static_cast<std::size_t>(token_id) >= model.id_to_token_.size()) {
      model.id_to_token_.resize(token_id + 1);
      model.id_known_.resize(token_id + 1, false);
    }
    if (!model.id_known_[token_id]) {
      model.id_to_token_[token_id] = token;
      model.id_known_[token_id] = true;
    }
  }

  model.continuing_subword_prefix_ = json_get_or<std::string>(spec, "continuing_subword_prefix", "", where);
  model.end_of_word_suffix_ = json_get_or<std::string>(spec, "end_of_word_suffix", "", where);
  model.fuse_unk_ = json_get_or<bool>(spec, "fuse_unk", false, where);
  model.byte_fallback_ = json_get_or<bool>(spec, "byte_fallback", false, where);
  model.ignore_merges_ = json_get_or<bool>(spec, "ignore_merges", false, where);
  if (spec.contains("dropout") && !spec.at("dropout").is_null()) {
    const double dropout = json_get<double>(spec, "dropout", where);
    if (dropout > 0.0 && dropout < 1.0)
      fail(where, "BPE dropout " + std::to_string(dropout) + " is not supported (it makes encoding random)");
  }
  if (spec.contains("unk_token") && !spec.at("unk_token").is_null()) {
    model.unk_token_ = json_get<std::string>(spec, "unk_token", where);
    model.unk_id_ = model.token_id(*model.unk_token_);
  }

  const nlohmann::json& merges = json_array(spec, "merges", where);
  model.merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    // Not a structured binding: id_of captures these, which clang before 16 refuses for bindings
    // (Debian 12's clang 14 builds scripts/fuzz.sh).
    const auto merge = parse_merge(merges[rank], rank, where);
    const std::string& left = merge.first;
    const std::string& right = merge.second;
    auto id_of = [&](const std::string& token) {
      const auto id = model.token_id(token);
      if (!id)
        fail(where, "merge #" + std::to_string(rank) + " (\"" + left + "\", \"" + right + "\") refers to token '" + token +
                        "', which is not in the vocabulary");
      return *id;
    };
    // The merged token is left + right without right's continuing_subword_prefix (HF's rule).
    const std::string& prefix = model.continuing_subword_prefix_;
    const std::string merged = left + (right.starts_with(prefix) ? right.substr(prefix.size()) : right);
    const std::int32_t left_id = id_of(left), right_id = id_of(right), merged_id = id_of(merged);
    // Later duplicates overwrite earlier ones, as collecting into HF's HashMap does.
    model.merges_[pair_key(left_id, right_id)] = Merge{static_cast<std::uint32_t>(rank), merged_id};
  }
  return model;
}

std::optional<std::int32_t> BpeModel::token_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token_text(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !id_known_[id]) return nullptr;
  return &id_to_token_[id];
}

const BpeModel::Merge* BpeModel::find_merge(std::int32_t left, std::int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& ids) const {
  if (word.empty()) return;
  // ignore_merges (Llama-3): a word that is itself a token is taken whole.
  if (ignore_merges_)
    if (const auto id = token_id(word)) {
      ids.push_back(*id);
      return;
    }
  {
    std::shared_lock lock(cache_->mutex);
    if (const auto it = cache_->words.find(word); it != cache_->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> word_ids = merge_word(word);
  ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  if (word.size() < WordCache::kMaxWordBytes) {
    std::unique_lock lock(cache_->mutex);
    if (cache_->words.size() < WordCache::kCapacity) cache_->words.emplace(std::string(word), std::move(word_ids));
  }
}

std::vector<std::int32_t> BpeModel::merge_word(std::string_view word) const {
  // The word as a doubly linked list of symbols, one per character to start with (BPE::merge_word).
  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add_symbol = [&](std::int32_t id) {
    const auto index = static_cast<std::int32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, true});
  };

  std::optional<std::int32_t> pending_unk;  // an unknown run not yet added (fuse_unk joins runs)
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t begin = pos;
    next_code_point(word, pos);
    std::string piece(word.substr(begin, pos - begin));
    if (begin > 0) piece.insert(0, continuing_subword_prefix_);
    if (pos == word.size()) piece.append(end_of_word_suffix_);

    if (const auto id = token_id(piece)) {
      if (pending_unk) add_symbol(*std::exchange(pending_unk, std::nullopt));
      add_symbol(*id);
      continue;
    }
    if (byte_fallback_) {
      // Every byte of the piece (affixes included) as <0xNN>, or none if one is missing. As in
      // HF, a pending unknown run is not flushed first.
      std::vector<std::int32_t> byte_ids;
      for (const char byte : piece) {
        const auto id = token_id(byte_fallback_token(static_cast<unsigned char>(byte)));
        if (!id) break;
        byte_ids.push_back(*id);
      }
      if (byte_ids.size() == piece.size()) {
        for (const std::int32_t id : byte_ids) add_symbol(id);
        continue;
      }
    }
    if (unk_token_) {
      if (!unk_id_) fail("tokenizer", "unk_token '" + *unk_token_ + "' is not in the vocabulary");
      if (pending_unk && !fuse_unk_) add_symbol(*pending_unk);
      pending_unk = *unk_id_;
    }
    // Without an unk_token HF drops the character.
  }
  if (pending_unk) add_symbol(*pending_unk);

  // Merge by rank with a min-heap on (rank, position), skipping stale entries the way
  // Word::merge_all does (an entry is stale when its pair no longer yields the same token).
  struct Candidate {
    std::uint32_t rank;
    std::int32_t position;
    std::int32_t merged_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::vector<Candidate> heap;
  auto push = [&](std::int32_t position, const Merge* merge) {
    if (merge == nullptr) return;
    heap.push_back({merge->rank, position, merge->merged_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
    push(static_cast<std::int32_t>(i), find_merge(symbols[i].id, symbols[i + 1].id));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.position];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* current = find_merge(left.id, right.id);
    if (current == nullptr || current->merged_id != top.merged_id) continue;

    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.position;
    if (left.prev >= 0) push(left.prev, find_merge(symbols[left.prev].id, left.id));
    if (left.next >= 0) push(top.position, find_merge(left.id, symbols[left.next].id));
  }

  std::vector<std::int32_t> ids;
  for (const Symbol& symbol : symbols)
    if (symbol.alive) ids.push_back(symbol.id);
  return ids;
}

}  // namespace bifocal::tokenizer
