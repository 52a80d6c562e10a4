// One sequence being processed: every layer's mixer state (key/value cache, window or
// recurrent state) and the scratch buffers of the forward pass, all allocated once when the
// session starts so that decoding allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace bifocal {

class DeviceSession;
class Model;
struct MixerState;

class Session {
 public:
  std::int64_t position() const { return position_; }  // tokens processed so far
  std::int64_t capacity() const { return capacity_; }  // most tokens the cache can hold
  // Bytes of per-layer state allocated (caches, windows, recurrent states; not scratch).
  std::size_t cache_bytes() const;
  std::size_t layer_state_bytes(int layer) const;

  // The device state behind a --backend cuda session (null on the CPU), for `bifocal bench`.
  DeviceSession* device_session() { return device_.get(); }

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

 private:
  friend class Model;
  Session();
  std::vector<MixerState> layers_;
  std::unique_ptr<DeviceSession> device_;  // --backend cuda: states and scratch on the device
  // Model::copy_session copies every member below: a new member goes there too.
  // Scratch for up to `chunk_` tokens at a time.
  std::vector<float> residual_, normed_, queries_, keys_, values_, attention_, projected_;
  std::vector<float> gate_, up_, logits_;
  std::vector<std::int64_t> positions_;
  std::int64_t position_ = 0;
  std::int64_t capacity_ = 0;
  int chunk_ = 0;
};

}  // namespace bifocal
