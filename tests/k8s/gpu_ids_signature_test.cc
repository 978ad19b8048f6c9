#include "k8s/gpu_ids_signature.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config_error.h"

namespace berth {
namespace {

const std::string kKey = "0123456789abcdef-key";

TEST(GpuIdsSignatureTest, OnlyWhatWasSignedChecksOut) {
  const std::string signature = SignGpuIds(kKey, "uid-1", "node-a", "GPU-1,GPU-2");
  EXPECT_EQ(signature.size(), 64u);  // hex SHA-256
  EXPECT_TRUE(GpuIdsSigned(kKey, "uid-1", "node-a", "GPU-1,GPU-2", signature));
  EXPECT_FALSE(GpuIdsSigned(kKey, "uid-2", "node-a", "GPU-1,GPU-2", signature));
  EXPECT_FALSE(GpuIdsSigned(kKey, "uid-1", "node-b", "GPU-1,GPU-2", signature));
  EXPECT_FALSE(GpuIdsSigned(kKey, "uid-1", "node-a", "GPU-1", signature));
  EXPECT_FALSE(GpuIdsSigned(kKey + "x", "uid-1", "node-a", "GPU-1,GPU-2", signature));
  EXPECT_FALSE(GpuIdsSigned(kKey, "uid-1", "node-a", "GPU-1,GPU-2", signature.substr(1)));
  EXPECT_FALSE(GpuIdsSigned(kKey, "uid-1", "node-a", "GPU-1,GPU-2", ""));
  // The fields cannot be shifted into one another.
  EXPECT_NE(SignGpuIds(kKey, "uid-1\nnode-a", "", "GPU-1"),
            SignGpuIds(kKey, "uid-1", "node-a", "GPU-1"));
}

TEST(GpuIdsSignatureTest, AKeyFileIsReadWithoutItsLineEndAndMustBeLongEnough) {
  const std::string dir = ::testing::TempDir() + "berth_signing_key";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/key") << " " << kKey << "\r\n";
  EXPECT_EQ(ReadSigningKey(dir + "/key"), kKey);
  std::ofstream(dir + "/blank") << std::string(20, ' ') << "\n";
  EXPECT_THROW(ReadSigningKey(dir + "/blank"), ConfigError);
  std::ofstream(dir + "/short") << "short\n";
  try {
    ReadSigningKey(dir + "/short");
    ADD_FAILURE() << "a 5-byte key was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/short: the signing key has 5 bytes"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace berth
