// Access control: bearer tokens name the caller; the caller's kind says what it may do.
//
// A user sees, stops and removes only its own jobs and submits only to its queues; an admin
// also sees every job and changes policy, queues and nodes; an agent token calls only the
// agent API. A server without a tokens file treats every caller as an anonymous admin, which
// is why it then listens on loopback only (server.h). Tokens are compared by their SHA-256:
// the server never holds a token itself.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/tokens_file.h"

namespace berth {

struct Caller {
  std::string user;  // "" when the server has no tokens: anonymous
  bool admin = true;
  bool agent = false;
  std::vector<std::string> queues = {"*"};
  // Anonymous: the login the client names (Berth-User), the user of a job spec naming none.
  std::string login;

  bool MayUseQueue(const std::string& queue) const;
  // Whether a job of `job_user` is the caller's to see, stop or remove.
  bool MayTouch(const std::string& job_user) const { return admin || job_user == user; }
};

class AccessControl {
 public:
  // No tokens: every caller is an anonymous admin.
  explicit AccessControl(const std::vector<TokenEntry>& tokens);
  bool enabled() const { return !by_hash_.empty(); }
  // The caller an Authorization header ("Bearer TOKEN") names; ApiError 401 when it names
  // nobody. Always the anonymous admin when not enabled().
  Caller Authenticate(const std::string& authorization) const;

 private:
  std::map<std::string, Caller> by_hash_;
};

// The SHA-256 of `text` as 64 lowercase hex digits.
std::string Sha256Hex(const std::string& text);
// A fresh token: 32 random bytes from the system's CSPRNG, as hex after "berth_".
std::string NewToken();

}  // namespace berth
