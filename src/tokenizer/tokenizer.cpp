// Tokenizer: loads tokenizer.json and runs HF's encode pipeline (added tokens, normalizer,
// pre-tokenizer, BPE, post-processor) and decode pipeline (token strings, decoder).
#include "bifocal/tokenizer.h"

#include "bifocal/error.h"
#include "io/json_file.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace bifocal {

using namespace bifocal::tokenizer;

namespace {

const nlohmann::json& member_or_null(const nlohmann::json& object, const char* key) {
  static const nlohmann::json null_value;
  const auto it = object.find(key);
  return it == object.end() ? null_value : *it;
}

BpeModel load_model(const nlohmann::json& spec, const std::string& where) {
  if (!spec.is_object()) fail(where, "missing or malformed 'model'");
  // Files written by old HF versions may leave out the type; a model with merges is BPE.
  std::string type = spec.contains("merges") ? "BPE" : "";
  if (spec.contains("type")) type = json_get<std::string>(spec, "type", where);
  if (type != "BPE")
    fail(where, "unsupported model type '" + (type.empty() ? std::string("(none)") : type) + "' (bifocal supports BPE)");
  return BpeModel::from_json(spec, where);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  const nlohmann::json spec = read_json_file(tokenizer_json);
  const std::string file = tokenizer_json.string();
  if (!spec.is_object()) fail(file, "expected a JSON object");
  auto where = [&](const char* part) { return file + ": " + part; };

  Normalizer normalizer = Normalizer::from_json(member_or_null(spec, "normalizer"), where("normalizer"));
  AddedVocabulary added = AddedVocabulary::from_json(member_or_null(spec, "added_tokens"), normalizer, where("added_tokens"));
  return Tokenizer(std::make_unique<Impl>(
      load_model(member_or_null(spec, "model"), where("model")), std::move(added), std::move(normalizer),
      PreTokenizer::from_json(member_or_null(spec, "pre_tokenizer"), where("pre_tokenizer")),
      PostProcessor::from_json(member_or_null(spec, "post_processor"), where("post_processor")),
      Decoder::from_json(member_or_null(spec, "decoder"), where("decoder"))));
}

Tokenizer Tokenizer::from_dir(const std::filesystem::path& dir) {
  Tokenizer tokenizer = from_file(dir / "tokenizer.json");
  tokenizer.impl_->load_special_token_config(dir);
  return tokenizer;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (!is_valid_utf8(text)) fail("tokenizer input", "text is not valid UTF-8");
  std::vector<std::int32_t> ids;
  std::vector<PreToken> pieces;
  for (TextSegment& segment : impl_->added.split_and_normalize(text, impl_->normalizer)) {
    if (segment.added_id) {
      ids.push_back(*segment.added_id);
      continue;
    }
    pieces.assign(1, PreToken{std::move(segment.text), segment.at_text_start});
    impl_->pre_tokenizer.pre_tokenize(pieces);
    for (const PreToken& piece : pieces) impl_->model.tokenize(piece.text, ids);
  }
  if (!add_special_tokens) return ids;
  ids = impl_->post_processor.process(std::move(ids));
  if (impl_->prepend_on_special) ids.insert(ids.begin(), *impl_->prepend_on_special);
  if (impl_->append_on_special) ids.push_back(*impl_->append_on_special);
  return ids;
}

std::vector<std::string> Tokenizer::Impl::tokens_for(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    const std::string* token = nullptr;
    if (const AddedToken* added_token = added.find(id)) token = &added_token->decoded_form;
    else token = model.token_text(id);
    if (token == nullptr) continue;  // HF's decode skips ids it does not know
    if (skip_special_tokens && added.is_special(*token)) continue;
    tokens.push_back(*token);
  }
  return tokens;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  return impl_->decoder.decode(impl_->tokens_for(ids, skip_special_tokens));
}

std::int32_t Tokenizer::vocab_size() const { return std::max(impl_->model.id_end(), impl_->added.id_end()); }

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const auto id = impl_->added.id_of(token)) return id;
  return impl_->model.token_id(token);
}

std::string Tokenizer::token_text(std::int32_t id) const {
  if (const AddedToken* added_token = impl_->added.find(id)) return added_token->content;
  if (const std::string* token = impl_->model.token_text(id)) return *token;
  fail("token id " + std::to_string(id), "not in the vocabulary");
}

bool Tokenizer::is_special(std::int32_t id) const {
  const AddedToken* added_token = impl_->added.find(id);
  return added_token != nullptr && added_token->special;
}

std::optional<std::int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }

std::vector<std::int32_t> Tokenizer::eos_ids() const { return impl_->eos_ids; }

}  // namespace bifocal
