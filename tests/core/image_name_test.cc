#include "core/image_name.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace berth {
namespace {

TEST(ImageReferenceTest, TakesWhatDockerRunTakes) {
  for (const std::string& good : std::vector<std::string>{
           "x", "busybox", "busybox:latest", "berth-test:1", "library/busybox",
           "team/a.b_c__d-e--f", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
           "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "localhost/trainer",
           "localhost:5000/team/trainer:1", "registry.example.com/t:v1.0_RC",
           "Registry.Example.com/t", "[::1]:5000/x", "[2001:db8::1]/team/x:1",
           "busybox@sha256:" + std::string(64, 'a'), "busybox:1@sha256:" + std::string(64, 'F'),
           "0", "x:" + std::string(128, 'a')})
    EXPECT_EQ(ImageReferenceProblem(good), "") << good;
}

TEST(ImageReferenceTest, SaysWhatIsWrongWithOneItCannotPull) {
  const auto problem = [](const std::string& image) { return ImageReferenceProblem(image); };
  for (const std::string& bad : std::vector<std::string>{
           "Busybox", "team/Trainer", "a b", "-rm", "a..b", "a-", "_a", "a/", "/a", "a//b", ""})
    EXPECT_NE(problem(bad).find("its repository"), std::string::npos)
        << bad << ": " << problem(bad);
  for (const std::string& bad :
       std::vector<std::string>{"x:", "x:.1", "x:-1", "x:a b", "x:" + std::string(129, 'a')})
    EXPECT_NE(problem(bad).find("its tag"), std::string::npos) << bad << ": " << problem(bad);
  for (const std::string& bad : std::vector<std::string>{"x@", "x@sha256", "x@sha256:abc",
                                                         "x@sha256:" + std::string(64, 'g')})
    EXPECT_NE(problem(bad).find("its digest"), std::string::npos) << bad << ": " << problem(bad);
  for (const std::string& bad :
       std::vector<std::string>{"-host.io/x", "host.io:/x", "host.io:99999x/x", "a_b.io/x",
                                "[zz]:1/x", "[::1]x/x", "[]:1/x", "[::1/x"})
    EXPECT_NE(problem(bad).find("its registry"), std::string::npos) << bad << ": " << problem(bad);
  EXPECT_NE(problem(std::string(256, 'a')).find("longer than 255"), std::string::npos);
}

TEST(NormalizedImageNameTest, OneNameForTheSpellingsOfAnImage) {
  for (const std::string& same :
       std::vector<std::string>{"busybox", "busybox:latest", "docker.io/library/busybox",
                                "index.docker.io/library/busybox:latest", "library/busybox"})
    EXPECT_EQ(NormalizedImageName(same), "busybox:latest") << same;
  EXPECT_EQ(NormalizedImageName("localhost:5000/t"), "localhost:5000/t:latest");  // a port
  const std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(NormalizedImageName("x:1@" + digest), "x@" + digest);
}

}  // namespace
}  // namespace berth
