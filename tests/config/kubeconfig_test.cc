#include "config/kubeconfig.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config_test_util.h"

namespace berth {
namespace {

class KubeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("berth_kubeconfig_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  // A kubeconfig whose cluster and user entries are given.
  std::string Config(const std::string& cluster, const std::string& user) {
    return Write("kubeconfig.yaml",
                 "current-context: gpu\n"
                 "contexts:\n"
                 "- name: gpu\n"
                 "  context: {cluster: fleet, user: berth}\n"
                 "clusters:\n"
                 "- name: fleet\n"
                 "  cluster:\n" +
                     cluster +
                     "users:\n"
                     "- name: berth\n"
                     "  user:\n" +
                     user);
  }
  std::filesystem::path dir_;
};

TEST_F(KubeConfigTest, ReadsTheCurrentContextsServerCaAndToken) {
  const std::string ca = Write("ca.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n");
  const std::string token = Write("token", "abc.def\n");
  const KubeConfig config = LoadKubeConfig(
      Config("    server: https://10.0.0.1:6443\n    certificate-authority: " + ca + "\n",
             "    tokenFile: " + token + "\n"));
  EXPECT_EQ(config.server, "https://10.0.0.1:6443");
  EXPECT_EQ(config.ca_file, ca);
  EXPECT_EQ(config.token, "abc.def");  // without its line end
  EXPECT_EQ(config.token_file, token);
  EXPECT_FALSE(config.insecure);

  // CA data inline (base64 PEM), a token inline, an IPv6 server.
  const KubeConfig inline_config = LoadKubeConfig(
      Config("    server: \"https://[fd00::1]:443\"\n"
             "    certificate-authority-data: "
             "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=\n",
             "    token: xyz\n"));
  EXPECT_EQ(inline_config.ca_pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  EXPECT_EQ(inline_config.token, "xyz");

  // Relative paths are from the kubeconfig's directory, as kubectl reads them.
  const KubeConfig relative = LoadKubeConfig(Config(
      "    server: https://h\n    certificate-authority: ca.crt\n", "    tokenFile: token\n"));
  EXPECT_EQ(relative.ca_file, ca);
  EXPECT_EQ(relative.token_file, token);
  EXPECT_EQ(relative.token, "abc.def");
}

TEST_F(KubeConfigTest, MistakesAreNamedAtTheirField) {
  const auto fails = [&](const std::string& cluster, const std::string& user,
                         std::initializer_list<std::string> parts) {
    const std::string path = Config(cluster, user);
    return ThrowsConfigError([&] { LoadKubeConfig(path); }, path + ":", parts);
  };
  EXPECT_TRUE(fails("    server: 10.0.0.1:6443\n", "    token: x\n",
                    {"cluster.server", "expected https://HOST:PORT"}));
  EXPECT_TRUE(fails("    server: https://h:99999\n", "    token: x\n", {"cluster.server"}));
  EXPECT_TRUE(fails("    server: https://h\n    certificate-authority-data: '%%'\n",
                    "    token: x\n", {"cluster.certificate-authority-data", "base64"}));
  EXPECT_TRUE(fails("    server: https://h\n", "    exec: {command: aws}\n",
                    {"user.exec", "not supported by berth", "token"}));
  EXPECT_TRUE(fails("    server: https://h\n", "    client-certificate: /x\n",
                    {"client-certificate and client-key together"}));
  // A file the kubeconfig names but that cannot be read is blamed on the field that names it.
  EXPECT_TRUE(
      fails("    server: https://h\n    certificate-authority: " + (dir_ / "none").string() + "\n",
            "    token: x\n", {":9:", "cluster.certificate-authority", "none"}));
  EXPECT_TRUE(fails("    server: https://h\n", "    tokenFile: " + (dir_ / "gone").string() + "\n",
                    {"user.tokenFile", "gone"}));
  // A token goes into an HTTP header: a line end or other control character inside is refused.
  EXPECT_TRUE(fails("    server: https://h\n", "    token: \"ab\\ncd\"\n",
                    {"user.token", "control character"}));
  Write("two-lines", "ab\ncd\n");
  EXPECT_TRUE(fails("    server: https://h\n", "    tokenFile: two-lines\n",
                    {"user.tokenFile", "control character"}));
  // Entries that are not maps, and a document that is not one.
  EXPECT_TRUE(fails("    5\n", "    token: x\n", {"clusters[0].cluster", "expected a map"}));
  EXPECT_TRUE(
      fails("    server: https://h\n", "    just-a-string\n", {"users[0].user", "expected a map"}));
  const std::string scalar = Write("scalar.yaml", "current-context\n");
  EXPECT_TRUE(
      ThrowsConfigError([&] { LoadKubeConfig(scalar); }, scalar + ":1:", {"expected a map"}));
  const std::string no_context = Write("nocontext.yaml", "current-context: x\ncontexts: []\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadKubeConfig(no_context); }, no_context + ":",
                                {"contexts", "no entry named \"x\""}));
}

TEST_F(KubeConfigTest, InClusterReadsTheServiceAccount) {
  const std::string secrets = (dir_ / "var/run/secrets/kubernetes.io/serviceaccount").string();
  std::filesystem::create_directories(secrets);
  std::ofstream(secrets + "/token") << "sa-token\n";
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  const KubeConfig config = InClusterKubeConfig(dir_.string());
  EXPECT_EQ(config.server, "https://[fd00::1]:443");
  EXPECT_EQ(config.token, "sa-token");
  EXPECT_EQ(config.ca_file, secrets + "/ca.crt");
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_TRUE(ThrowsConfigError([&] { InClusterKubeConfig(dir_.string()); },
                                "--kubeconfig:", {"not inside a pod"}));
}

}  // namespace
}  // namespace berth
