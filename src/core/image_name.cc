#include "core/image_name.h"

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

}  // namespace berth
