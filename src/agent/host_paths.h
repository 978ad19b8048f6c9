// Host paths a job mounts, as this host resolves them. The server admits a volume's host path
// when it lies under an allowed directory, comparing the path as written; a symbolic link on
// the way (one a job may have made inside an allowed directory) could lead anywhere on the
// host, so the agent mounts only paths without one. An adapter: it reads the file system.
#pragma once

#include <string>

namespace berth {

// "" when no component of the absolute path `path` is a symbolic link (components that do not
// exist yet are none); else why not, naming the link and where it leads.
std::string WhyHostPathIsNotPlain(const std::string& path);

}  // namespace berth
