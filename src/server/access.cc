#include "server/access.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "server/control_plane.h"

namespace berth {
namespace {

std::string Hex(const unsigned char* bytes, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

bool Caller::MayUseQueue(const std::string& queue) const {
  return admin || std::find(queues.begin(), queues.end(), "*") != queues.end() ||
         std::find(queues.begin(), queues.end(), queue) != queues.end();
}

AccessControl::AccessControl(const std::vector<TokenEntry>& tokens) {
  for (const TokenEntry& t : tokens)
    by_hash_[t.sha256] = Caller{t.user, t.admin, t.agent, t.queues, ""};
}

Caller AccessControl::Authenticate(const std::string& authorization) const {
  if (!enabled()) return Caller();
  // The scheme's case does not matter (RFC 7235).
  const std::string scheme = "bearer ";
  const bool bearer =
      authorization.size() > scheme.size() &&
      std::equal(scheme.begin(), scheme.end(), authorization.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
  if (authorization.empty())
    throw ApiError(401,
                   "this server needs a token: set BERTH_TOKEN (an Authorization: Bearer header)");
  if (!bearer)
    throw ApiError(401, "the Authorization header is not \"Bearer TOKEN\"; send the token so");
  const auto it = by_hash_.find(Sha256Hex(authorization.substr(scheme.size())));
  if (it == by_hash_.end())
    throw ApiError(401, "the token is not in the server's tokens file; ask its admin for one");
  return it->second;
}

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed in OpenSSL");
  return Hex(digest, size);
}

std::string NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("the system's random source failed (OpenSSL RAND_bytes)");
  return "berth_" + Hex(bytes, sizeof bytes);
}

}  // namespace berth
