// Container image names as one canonical string, so that the names users write in job specs and
// the names an engine reports compare equal: "busybox", "busybox:latest",
// "docker.io/library/busybox" and "index.docker.io/library/busybox:latest" are all
// "busybox:latest". A name without a tag or digest gets ":latest" (a registry's port is not a
// tag); Docker Hub's host and its "library/" namespace are dropped. A digest reference
// ("name@sha256:...") keeps its digest and drops a tag written beside it ("name:tag@sha256:..."
// is "name@sha256:..."), which is how an engine lists the digests it pulled (RepoDigests).
#pragma once

#include <string>

namespace berth {

std::string NormalizedImageName(const std::string& image);

// Why `image` is not a reference an engine takes, or "" when it is: Docker's grammar,
// [HOST[:PORT]/]PATH[:TAG][@ALGORITHM:DIGEST], a PATH of lowercase components ("a.b", "a_b",
// "a__b", "a-b"), a TAG of at most 128 characters, at most 255 in the name. Checked when a job
// is submitted, so that a job the engine could never pull is refused then, not retried after
// its wait.
std::string ImageReferenceProblem(const std::string& image);

}  // namespace berth
