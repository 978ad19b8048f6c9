#include "config/limits.h"

#include <gtest/gtest.h>

#include <string>

#include "config/cluster_file.h"
#include "config/config_error.h"
#include "config/openb_node_list.h"
#include "config/yaml_reader.h"
#include "config_test_util.h"

namespace berth {
namespace {

// Restores the bounds in force when the test ends, whatever it set.
class LimitsTest : public ::testing::Test {
 protected:
  void TearDown() override { limits::Set(saved_); }

 private:
  limits::Limits saved_ = limits::Get();
};

// A cluster of `nodes` nodes, each with `gpus` GPUs under one switch.
std::string ClusterText(int nodes, int gpus) {
  return "name: t\n"
         "gpuModels: [{name: T4, memoryMiB: 15360}]\n"
         "nodeShapes:\n"
         "  s: {gpuModel: T4, sockets: [{switches: [" +
         std::to_string(gpus) +
         "]}]}\n"
         "nodes: [{namePrefix: n, count: " +
         std::to_string(nodes) + ", shape: s}]\n";
}

TEST_F(LimitsTest, DefaultsAreTheDocumentedNumbers) {
  const limits::Limits& max = limits::Get();
  EXPECT_EQ(max.nodes, 100000);
  EXPECT_EQ(max.gpus, 1 << 18);
  EXPECT_EQ(max.gpus_per_node, 128);
  EXPECT_EQ(max.file_bytes, 64 << 20);
  EXPECT_EQ(max.node_cpu_milli, int64_t{1} << 40);
  EXPECT_EQ(max.jobs, 1000000);
  EXPECT_EQ(max.yaml_nodes, 1000000);
}

// The name-length bound is on names: a low one still reads the format's own field names.
TEST_F(LimitsTest, ANameLengthBoundLeavesFieldNamesAlone) {
  limits::SetFromFlags({"name-length=2"});
  EXPECT_EQ(ParseClusterYaml(ClusterText(1, 1), "c.yaml").nodes.size(), 1u);
  limits::SetFromFlags({"name-length=1"});
  EXPECT_TRUE(ThrowsConfigError(
      [] { ParseClusterYaml(ClusterText(1, 1), "c.yaml"); },
      "c.yaml:2:20: ", {"gpuModels[0].name", "more than the limit of 1 characters"}));
}

// A long plain list is refused where it passes the nodes bound, before yaml-cpp builds the
// whole document (whose size the file bound alone leaves at tens of millions of nodes).
TEST_F(LimitsTest, TheYamlNodesBoundStopsReadingAtTheBound) {
  limits::SetFromFlags({"yaml-nodes=100"});
  std::string text = "name: t\nnodes:\n";
  for (int i = 0; i < 200; ++i) text += "  - n" + std::to_string(i) + "\n";
  // The map, name, t, nodes and the list are 5 nodes: item 95 is the 101st, on line 98.
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml(text, "c.yaml"); }, "c.yaml:98:5: ",
                                {"more than the limit of 100 YAML nodes", "--limit yaml-nodes=N"}));
}

TEST_F(LimitsTest, ALoweredLimitRefusesWhatTheDefaultAccepts) {
  EXPECT_EQ(ParseClusterYaml(ClusterText(3, 1), "c.yaml").nodes.size(), 3u);
  limits::SetFromFlags({"nodes=2"});
  EXPECT_EQ(limits::Get().nodes, 2);
  EXPECT_TRUE(ThrowsConfigError([] { ParseClusterYaml(ClusterText(3, 1), "c.yaml"); },
                                "c.yaml:5:32: ",
                                {"nodes[0].count", "expected an integer from 1 to 2",
                                 "raise it with --limit nodes=N", "docs/cluster-file.md, Bounds"}));
  // Two entries of two nodes each: the cluster-wide count names the flag too.
  const std::string text =
      "name: t\n"
      "gpuModels: [{name: T4, memoryMiB: 15360}]\n"
      "nodeShapes:\n"
      "  s: {gpuModel: T4, sockets: [{switches: [1]}]}\n"
      "nodes:\n"
      "  - {namePrefix: n, count: 2, shape: s}\n"
      "  - {namePrefix: m, count: 2, shape: s}\n";
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml(text, "c.yaml"); },
                                "c.yaml:7:28: nodes[1].count: ",
                                {"the cluster would have more than the limit of 2 nodes "
                                 "(raise it with --limit nodes=N; docs/cluster-file.md, Bounds)"}));
}

TEST_F(LimitsTest, ARaisedLimitAcceptsWhatTheDefaultRefuses) {
  EXPECT_TRUE(ThrowsConfigError(
      [] { ParseClusterYaml(ClusterText(1, 200), "c.yaml"); }, "c.yaml:4:43: ",
      {"expected an integer from 1 to 128", "raise it with --limit gpus-per-node=N"}));
  limits::SetFromFlags({"gpus-per-node=256"});
  const Cluster cluster = ParseClusterYaml(ClusterText(1, 200), "c.yaml");
  EXPECT_EQ(cluster.nodes.at(0).gpus.size(), 200u);
}

TEST_F(LimitsTest, CsvAndFileBoundsNameTheirFlags) {
  const std::string csv =
      WriteTempFile("limits-nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,1,T4\n");
  EXPECT_EQ(LoadOpenbNodeList(csv).nodes.size(), 1u);
  limits::SetFromFlags({"csv-columns=4"});
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(csv); }, csv + ":1: ",
                                {"more than the limit of 4 columns", "--limit csv-columns=N"}));
  limits::SetFromFlags({"csv-columns=64"});
  limits::SetFromFlags({"file-bytes=10"});
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(csv); }, csv + ": ",
                                {"more than the limit of 10 bytes", "--limit file-bytes=N"}));
}

// The ceiling of yaml-depth stays below yaml-cpp's own guard: a document that deep is read.
TEST_F(LimitsTest, YamlDepthCeilingIsReadable) {
  std::string flow, block;
  for (int i = 0; i < 250; ++i) flow += "[";
  for (int i = 0; i < 250; ++i) flow += "]";
  for (int i = 0; i < 250; ++i) block += std::string(i * 2, ' ') + "k:\n";
  const YamlReader reader("d.yaml");
  EXPECT_TRUE(ThrowsConfigError([&] { reader.Parse(flow); }, "d.yaml:1",
                                {"more than the limit of 32 levels deep", "--limit yaml-depth=N"}));
  limits::SetFromFlags({"yaml-depth=256"});
  EXPECT_NO_THROW(reader.Parse(flow));
  EXPECT_NO_THROW(reader.Parse(block));
}

TEST_F(LimitsTest, BadFlagValuesAreClearErrors) {
  const limits::Limits before = limits::Get();
  EXPECT_TRUE(ThrowsConfigError(
      [] { limits::SetFromFlags({"nodez=5"}); }, "--limit: ",
      {"unknown bound \"nodez\"", "names: file-bytes,", "nodes", "gpus-per-node", "csv-columns"}));
  EXPECT_TRUE(ThrowsConfigError([] { limits::SetFromFlags({"nodes"}); },
                                "--limit: ", {"expected NAME=VALUE", "names: "}));
  for (const char* bad : {"nodes=", "nodes=x", "nodes=1.5", "nodes=0", "nodes=-3", "nodes= 5",
                          "nodes=99999999999999999999999", "nodes=16777217"})
    EXPECT_TRUE(ThrowsConfigError([&] { limits::SetFromFlags({bad}); },
                                  "--limit nodes: ", {"expected an integer from 1 to 16777216"}))
        << bad;
  // The node's CPU and memory keep int64 sums safe: lowered, never raised.
  EXPECT_TRUE(ThrowsConfigError(
      [] { limits::SetFromFlags({"node-memory-mib=1099511627777"}); },
      "--limit node-memory-mib: ", {"from 1 to 1099511627776", "the default, is the most"}));
  EXPECT_EQ(limits::Get().nodes, before.nodes);
  limits::SetFromFlags({"node-memory-mib=1024"});
  EXPECT_EQ(limits::Get().node_memory_mib, 1024);
}

// The engine sums the VCs' guarantees in ints: queues x gpus stays within 2^31 - 1, whichever
// flag comes first; a refused --limit changes nothing.
TEST_F(LimitsTest, QueuesTimesGpusStaysWithinAnInt) {
  EXPECT_TRUE(ThrowsConfigError(
      [] { limits::SetFromFlags({"queues=9000"}); },
      "--limit: ", {"queues x gpus would be 9000 x 262144", "queues can be at most 8191"}));
  EXPECT_TRUE(ThrowsConfigError(
      [] {
        limits::SetFromFlags({"nodes=5", "nodez=1"});
      },
      "--limit: ", {"unknown bound \"nodez\""}));
  EXPECT_EQ(limits::Get().nodes, 100000);
  EXPECT_EQ(limits::Get().queues, 1000);
  limits::SetFromFlags({"queues=5000", "gpus=100000"});
  EXPECT_EQ(limits::Get().queues, 5000);
  limits::Set(limits::Limits{});
  limits::SetFromFlags({"gpus=2097152"});  // the ceiling, with the default queues
  EXPECT_EQ(limits::Get().gpus, 2097152);
}

// A cpulist that repeats a wide range stops expanding once it must hold a duplicate, instead of
// growing by 65,536 ids per 8 bytes of input.
TEST_F(LimitsTest, RepeatedCpuRangesStopEarly) {
  std::string cpus = "0-65535";
  for (int i = 0; i < 100000; ++i) cpus += ",0-65535";
  const std::string text =
      "name: t\n"
      "gpuModels: [{name: T4, memoryMiB: 15360}]\n"
      "nodeShapes:\n"
      "  s: {gpuModel: T4, sockets: [{cpus: \"" +
      cpus +
      "\", switches: [1]}]}\n"
      "nodes: [{name: n, shape: s}]\n";
  EXPECT_TRUE(ThrowsConfigError([&] { ParseClusterYaml(text, "c.yaml"); },
                                "c.yaml:4:38: ", {"sockets[0].cpus", "CPU 0 is listed twice"}));
}

TEST_F(LimitsTest, AtItsCeilingABoundSaysSo) {
  EXPECT_NE(
      limits::OverLimit(&limits::Limits::nodes, "nodes").find("raise it with --limit nodes=N"),
      std::string::npos);
  EXPECT_EQ(limits::OverLimit(&limits::Limits::node_cpu_milli, "milli-CPUs"),
            "more than the limit of 1099511627776 milli-CPUs (--limit node-cpu-milli goes no "
            "higher; docs/cluster-file.md, Bounds)");
  limits::SetFromFlags({"nodes=16777216"});
  EXPECT_NE(limits::OverLimit(&limits::Limits::nodes, "nodes").find("goes no higher"),
            std::string::npos);
}

}  // namespace
}  // namespace berth
