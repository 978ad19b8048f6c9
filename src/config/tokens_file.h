// Loads a tokens file (YAML; format in docs/api.md): who may call the server, and as what.
//
// Each entry holds the SHA-256 of a bearer token, never the token itself, so the file can be
// read without handing out access. A user token names the user and the queues it may submit
// to ("*": any); an admin may also see every job and change policy, queues and nodes. An agent
// token is for node agents only. Mistakes throw ConfigError with file, line and field.
#pragma once

#include <string>
#include <vector>

namespace berth {

struct TokenEntry {
  std::string sha256;  // 64 lowercase hex digits
  std::string user;
  std::vector<std::string> queues;  // "*" allows every queue
  bool admin = false;
  bool agent = false;  // kind: agent
};

std::vector<TokenEntry> LoadTokensFile(const std::string& path);
// As LoadTokensFile, for text already in memory; `source_name` stands for the file.
std::vector<TokenEntry> ParseTokensYaml(const std::string& text, const std::string& source_name);

}  // namespace berth
