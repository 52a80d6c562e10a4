// One sequence being processed: its key/value cache and the scratch buffers of the forward
// pass, all allocated once when the session starts so that decoding allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bifocal {

class Model;

class Session {
 public:
  std::int64_t position() const { return position_; }  // tokens processed so far
  std::int64_t capacity() const { return capacity_; }  // most tokens the cache can hold
  std::size_t cache_bytes() const;                     // bytes of key/value cache allocated
  void reset() { position_ = 0; }                      // start a new sequence, same buffers

 private:
  friend class Model;
  struct LayerCache {
    std::vector<float> keys;    // [capacity, kv_heads, head_dim], row p = position p
    std::vector<float> values;
  };
  std::vector<LayerCache> layers_;
  // Scratch for up to `chunk_` tokens at a time.
  std::vector<float> residual_, normed_, queries_, keys_, values_, attention_, projected_;
  std::vector<float> gate_, up_, logits_;
  std::vector<std::int64_t> positions_;
  std::int64_t position_ = 0;
  std::int64_t capacity_ = 0;
  int chunk_ = 0;
};

}  // namespace bifocal
