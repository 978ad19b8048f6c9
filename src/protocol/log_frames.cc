#include "protocol/log_frames.h"

#include <algorithm>
#include <cstdint>

namespace berth {
namespace {

void AppendFrame(std::string* out, bool stderr_stream, const char* data, size_t size) {
  const auto n = static_cast<uint32_t>(size);
  const char header[8] = {static_cast<char>(stderr_stream ? 2 : 1),
                          0,
                          0,
                          0,
                          static_cast<char>(n >> 24),
                          static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8),
                          static_cast<char>(n)};
  out->append(header, 8);
  out->append(data, size);
}

}  // namespace

std::string MultiplexedFrames(const std::string& text, const StderrSpans& stderr_spans) {
  std::string out;
  out.reserve(text.size() + 8 * (2 * stderr_spans.size() + 1));
  size_t at = 0;
  auto stdout_until = [&](size_t end) {
    if (end > at) AppendFrame(&out, false, text.data() + at, end - at);
    at = end;
  };
  for (const auto& [from, to] : stderr_spans) {
    const size_t start = std::min(std::max(from, at), text.size());
    const size_t end = std::min(to, text.size());
    if (end <= start) continue;
    stdout_until(start);
    AppendFrame(&out, true, text.data() + start, end - start);
    at = end;
  }
  stdout_until(text.size());
  return out;
}

bool FrameReader::Add(const char* data, size_t size) {
  pending_.append(data, size);
  size_t at = 0;
  bool ok = true;
  while (pending_.size() - at >= 8) {
    const auto* h = reinterpret_cast<const unsigned char*>(pending_.data() + at);
    if (h[0] > 2 || h[1] != 0 || h[2] != 0 || h[3] != 0) {
      ok = false;
      break;
    }
    const size_t n = (size_t{h[4]} << 24) | (size_t{h[5]} << 16) | (size_t{h[6]} << 8) | h[7];
    if (pending_.size() - at - 8 < n) break;
    each_(h[0] == 2, pending_.data() + at + 8, n);
    at += 8 + n;
  }
  pending_.erase(0, at);
  return ok;
}

}  // namespace berth
