#include "core/image_name.h"

#include <algorithm>

namespace berth {

std::string NormalizedImageName(const std::string& image) {
  std::string name = image;
  for (const char* hub : {"docker.io/", "index.docker.io/", "registry-1.docker.io/"})
    if (name.rfind(hub, 0) == 0) {
      name.erase(0, std::string(hub).size());
      if (name.rfind("library/", 0) == 0) name.erase(0, 8);
      break;
    }
  if (name.rfind("library/", 0) == 0) name.erase(0, 8);
  const size_t at = name.find('@');
  const size_t slash = name.rfind('/', at);
  if (at != std::string::npos) {
    // The digest names the content; a tag beside it ("name:tag@sha256:...") says nothing more.
    const size_t colon = name.rfind(':', at);
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash))
      name.erase(colon, at - colon);
    return name;
  }
  const size_t colon = name.rfind(':');
  const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  return tagged ? name : name + ":latest";
}

namespace {

bool Lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool Alnum(char c) { return Lower(c) || (c >= 'A' && c <= 'Z'); }

// One path component: lowercase runs joined by ".", "_", "__" or a run of "-".
bool PathComponent(const std::string& c) {
  size_t i = 0;
  for (;;) {
    const size_t run = i;
    while (i < c.size() && Lower(c[i])) ++i;
    if (i == run) return false;
    if (i == c.size()) return true;
    if (c[i] == '.' || c[i] == '_') {
      i += c.compare(i, 2, "__") == 0 ? 2 : 1;
    } else if (c[i] == '-') {
      while (i < c.size() && c[i] == '-') ++i;
    } else {
      return false;
    }
  }
}

// HOST[:PORT]: dot-separated labels of letters, digits and inner hyphens, or an IPv6 address
// in brackets; PORT digits.
bool Domain(const std::string& d) {
  const bool bracketed = !d.empty() && d[0] == '[';
  const size_t close = bracketed ? d.find(']') : 0;
  if (bracketed &&
      (close == std::string::npos || close == 1 ||
       d.substr(1, close - 1).find_first_not_of("0123456789abcdefABCDEF:") != std::string::npos ||
       (close + 1 < d.size() && d[close + 1] != ':')))
    return false;
  const size_t colon = d.find(':', bracketed ? close : 0);
  const std::string host = d.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = d.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos)
      return false;
  }
  if (bracketed) return true;
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(host.find('.', start), host.size());
    const std::string label = host.substr(start, end - start);
    if (label.empty() || !Alnum(label.front()) || !Alnum(label.back())) return false;
    for (char c : label)
      if (!Alnum(c) && c != '-') return false;
    if (end == host.size()) return true;
    start = end + 1;
  }
}

}  // namespace

std::string ImageReferenceProblem(const std::string& image) {
  std::string name = image;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    const std::string digest = name.substr(at + 1);
    const size_t colon = digest.find(':');
    const std::string algorithm = digest.substr(0, colon);
    const std::string encoded = colon == std::string::npos ? "" : digest.substr(colon + 1);
    const bool algorithm_ok =
        !algorithm.empty() && Alnum(algorithm[0]) &&
        algorithm.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+._-") ==
            std::string::npos;
    if (!algorithm_ok || encoded.size() < 32 ||
        encoded.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      return "its digest \"" + digest + "\" is not ALGORITHM:HEX (sha256: and 64 hex digits)";
    name.erase(at);
  }
  if (const size_t colon = name.rfind(':');
      colon != std::string::npos &&
      (name.find('/') == std::string::npos || colon > name.rfind('/'))) {
    const std::string tag = name.substr(colon + 1);
    const bool tag_ok = !tag.empty() && tag.size() <= 128 && (Alnum(tag[0]) || tag[0] == '_') &&
                        tag.find_first_not_of(
                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
                            std::string::npos;
    if (!tag_ok)
      return "its tag \"" + tag +
             "\" is not 1 to 128 letters, digits, \"_\", \".\" or \"-\" (not first: \".\", "
             "\"-\")";
    name.erase(colon);
  }
  if (name.size() > 255) return "its name is longer than 255 characters";
  size_t start = 0;
  const size_t first_slash = name.find('/');
  if (first_slash != std::string::npos) {
    // The first component names a registry when it could not be a path: Docker's rule.
    const std::string first = name.substr(0, first_slash);
    if (first.find_first_of(".:") != std::string::npos || first == "localhost" ||
        first.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos) {
      if (!Domain(first)) return "its registry \"" + first + "\" is not HOST or HOST:PORT";
      start = first_slash + 1;
    }
  }
  for (;;) {
    const size_t end = std::min(name.find('/', start), name.size());
    if (!PathComponent(name.substr(start, end - start)))
      return "its repository \"" + name.substr(start) +
             "\" is not lowercase letters and digits, with \".\", \"_\", \"__\" or \"-\" "
             "between them, in parts split by \"/\"";
    if (end == name.size()) return "";
    start = end + 1;
  }
}

}  // namespace berth
