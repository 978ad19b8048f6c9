#include "config/tokens_file.h"

#include <algorithm>
#include <set>

#include "config/file_text.h"
#include "config/yaml_reader.h"

namespace berth {
namespace {

// Far more than any team has people, and small enough that a lookup table is nothing.
constexpr size_t kMaxTokens = 10000;
constexpr size_t kMaxQueuesPerToken = 1000;

bool IsSha256Hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::vector<TokenEntry> ParseTokensYaml(const std::string& text, const std::string& source_name) {
  const YamlReader r(source_name);
  const YAML::Node root = r.Parse(text);
  r.CheckFields(root, "", {"tokens"});
  const YAML::Node list = r.Sequence(r.Required(root, "", "tokens"), "tokens");
  // With no token at all the server would take every caller for an anonymous admin.
  if (list.size() == 0)
    r.Fail(list, "tokens",
           "the list is empty, so the server would let every caller in as an admin; list at "
           "least one token (berth token new prints one and its hash), or start without "
           "--tokens (loopback only)");
  if (list.size() > kMaxTokens)
    r.Fail(list, "tokens",
           std::to_string(list.size()) + " tokens, more than the limit of " +
               std::to_string(kMaxTokens));
  std::vector<TokenEntry> out;
  std::set<std::string> hashes;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& t = list[i];
    const std::string path = IndexPath("tokens", i);
    r.CheckFields(t, path, {"sha256", "user", "queues", "admin", "kind"});
    TokenEntry entry;
    const YAML::Node hash = r.Required(t, path, "sha256");
    entry.sha256 = r.String(hash, FieldPath(path, "sha256"));
    if (!IsSha256Hex(entry.sha256))
      r.Fail(hash, FieldPath(path, "sha256"),
             "expected the token's SHA-256 as 64 lowercase hex digits (`berth token hash` "
             "prints it), not the token itself");
    if (!hashes.insert(entry.sha256).second)
      r.Fail(hash, FieldPath(path, "sha256"), "the same token is listed twice; keep one entry");
    entry.user = r.Name(r.Required(t, path, "user"), FieldPath(path, "user"));
    if (const YAML::Node kind = t["kind"]) {
      const std::string k = r.String(kind, FieldPath(path, "kind"));
      if (k != "user" && k != "agent")
        r.Fail(kind, FieldPath(path, "kind"), "expected user or agent, got \"" + k + "\"");
      entry.agent = k == "agent";
    }
    if (const YAML::Node admin = t["admin"]) {
      entry.admin = r.Bool(admin, FieldPath(path, "admin"));
      if (entry.admin && entry.agent)
        r.Fail(admin, FieldPath(path, "admin"),
               "an agent token cannot be an admin; give the admin a user token of its own");
    }
    if (const YAML::Node queues = t["queues"]) {
      const std::string queues_path = FieldPath(path, "queues");
      r.Sequence(queues, queues_path);
      if (entry.agent)
        r.Fail(queues, queues_path, "an agent token submits no jobs; drop its queues");
      if (queues.size() > kMaxQueuesPerToken)
        r.Fail(queues, queues_path,
               std::to_string(queues.size()) + " queues, more than the limit of " +
                   std::to_string(kMaxQueuesPerToken));
      for (size_t q = 0; q < queues.size(); ++q)
        entry.queues.push_back(r.Name(queues[q], IndexPath(queues_path, q)));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<TokenEntry> LoadTokensFile(const std::string& path) {
  return ParseTokensYaml(ReadFileText(path), path);
}

}  // namespace berth
