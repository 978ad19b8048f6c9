// Docker's multiplexed stream format, which berth's log API speaks too (`GET
// /v1/jobs/{id}/logs?frames=1`) so that clients keep a job's stdout and stderr apart: each frame
// is an 8-byte header [stream (1 stdout, 2 stderr), 0, 0, 0, payload size as big-endian uint32]
// followed by the payload.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace berth {

// [from, to) byte ranges of a text that were written to stderr, in order, not overlapping.
using StderrSpans = std::vector<std::pair<size_t, size_t>>;

// The text as frames: one per stretch of one stream (the rest of the text is stdout).
std::string MultiplexedFrames(const std::string& text, const StderrSpans& stderr_spans);

// Reads frames from a stream that may split them anywhere.
class FrameReader {
 public:
  using Each = std::function<void(bool stderr_stream, const char* payload, size_t size)>;
  explicit FrameReader(Each each) : each_(std::move(each)) {}
  // Calls `each` for every frame completed by these bytes. False when a header is not one
  // (a stream other than 0, 1 or 2, nonzero padding): the rest is not frames.
  bool Add(const char* data, size_t size);

 private:
  Each each_;
  std::string pending_;  // bytes of a frame not yet complete
};

}  // namespace berth
