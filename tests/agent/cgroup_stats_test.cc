#include "agent/cgroup_stats.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../config/config_test_util.h"
#include "agent_test_util.h"

namespace berth {
namespace {

constexpr char kId[] = "3f4e8b2a9c1d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";

TEST(CgroupStatsTest, DockerV1) {
  const std::string root = AgentData("cgroup-v1");
  const std::optional<ContainerCgroup> c = FindContainerCgroup(kId, root);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->version, CgroupVersion::kV1);
  EXPECT_EQ(c->path, std::string("docker/") + kId);
  const CgroupSample s = ReadCgroupSample(*c);
  EXPECT_EQ(s.cpu_usage_usec, 115783856092);
  EXPECT_EQ(s.cpu_nr_throttled, 1200);
  EXPECT_EQ(s.cpu_throttled_usec, 45000000);
  EXPECT_EQ(s.cpu_quota, 4.0);
  EXPECT_EQ(s.memory_bytes, 1466765312);
  EXPECT_EQ(s.memory_limit_bytes, -1);  // 9223372036854771712: unlimited
  EXPECT_EQ(s.io_read_bytes, 1459200 + 90430464);
  EXPECT_EQ(s.io_write_bytes, 314773504 + 299008000);
  EXPECT_EQ(s.io_ops, 10200);
  EXPECT_EQ(s.io_service_time_ns, 51000000000);
  EXPECT_EQ(s.cpu_pressure, -1);  // v1 has no PSI per cgroup
}

TEST(CgroupStatsTest, DockerV2SystemdAndCgroupfsDrivers) {
  const std::string root = AgentData("cgroup-v2");
  const std::optional<ContainerCgroup> c = FindContainerCgroup(kId, root);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->version, CgroupVersion::kV2);
  EXPECT_EQ(c->path, root + "/system.slice/docker-" + kId + ".scope");
  const CgroupSample s = ReadCgroupSample(*c);
  EXPECT_EQ(s.cpu_usage_usec, 123456789);
  EXPECT_EQ(s.cpu_nr_throttled, 1200);
  EXPECT_EQ(s.cpu_throttled_usec, 45000000);
  EXPECT_EQ(s.cpu_quota, 4.0);
  EXPECT_EQ(s.memory_bytes, 7516192768);
  EXPECT_EQ(s.memory_limit_bytes, 8589934592);
  EXPECT_EQ(s.io_read_bytes, 1459200 + 90430464);
  EXPECT_EQ(s.io_write_bytes, 314773504 + 299008000);
  EXPECT_EQ(s.io_ops, -1);
  EXPECT_DOUBLE_EQ(s.cpu_pressure, 12.5);
  EXPECT_DOUBLE_EQ(s.memory_pressure, 0);
  EXPECT_DOUBLE_EQ(s.io_pressure, 3.21);

  const std::optional<ContainerCgroup> open = FindContainerCgroup("0123456789ab", root);
  ASSERT_TRUE(open);
  EXPECT_EQ(open->path, root + "/docker/0123456789ab");
  const CgroupSample u = ReadCgroupSample(*open);
  EXPECT_EQ(u.cpu_quota, -1);
  EXPECT_EQ(u.memory_limit_bytes, -1);
  EXPECT_EQ(u.io_read_bytes, -1);
  EXPECT_EQ(u.cpu_pressure, -1);
}

TEST(CgroupStatsTest, UnknownAndBadIds) {
  EXPECT_FALSE(FindContainerCgroup("abc", AgentData("cgroup-v2")));
  EXPECT_FALSE(FindContainerCgroup("abc", AgentData("cgroup-v1")));
  EXPECT_TRUE(ThrowsConfigError([] { FindContainerCgroup("../../etc", "/sys/fs/cgroup"); },
                                "container id \"../../etc\"", {"hex digits"}));
  EXPECT_TRUE(
      ThrowsConfigError([] { FindContainerCgroup("", "/sys/fs/cgroup"); }, "container id", {}));
  EXPECT_TRUE(ThrowsConfigError([] { FindContainerCgroup(std::string(65, 'a'), "/sys/fs/cgroup"); },
                                "container id", {}));
}

TEST(CgroupStatsTest, NetDevSumsAllButLoopback) {
  const NetBytes b = ParseNetDev(Capture("net-dev.txt"), "net/dev");
  EXPECT_EQ(b.rx_bytes, 121122402 + 1000000000);
  EXPECT_EQ(b.tx_bytes, 611721 + 2000000000);
  EXPECT_TRUE(ThrowsConfigError([] { ParseNetDev("eth0: 1 2 3\n", "net/dev"); },
                                "net/dev:1: ", {"16 counters"}));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseNetDev("eth0: x 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", "net/dev"); },
                        "net/dev:1: ", {"\"x\""}));
}

TEST(CgroupStatsTest, ContainerNetBytesAreThoseOfItsFirstProcess) {
  const std::string proc = AgentData("proc");
  // v1: the memory controller lists the processes; 4242's namespace has eth0 and ib0.
  const std::optional<NetBytes> v1 =
      ReadContainerNetBytes(*FindContainerCgroup(kId, AgentData("cgroup-v1")), proc);
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->rx_bytes, 121122402 + 1000000000);
  EXPECT_EQ(v1->tx_bytes, 611721 + 2000000000);
  const std::optional<NetBytes> v2 =
      ReadContainerNetBytes(*FindContainerCgroup(kId, AgentData("cgroup-v2")), proc);
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->rx_bytes, 7000);
  EXPECT_EQ(v2->tx_bytes, 3000);
  // An exited container's cgroup lists no process: nothing measured, no error.
  EXPECT_FALSE(
      ReadContainerNetBytes(*FindContainerCgroup("0123456789ab", AgentData("cgroup-v2")), proc));
  // A process gone between the two reads: likewise.
  EXPECT_FALSE(ReadContainerNetBytes(*FindContainerCgroup(kId, AgentData("cgroup-v1")),
                                     AgentData("no-such-proc")));
}

TEST(CgroupStatsTest, GradesAtTheBoundaries) {
  EXPECT_EQ(GradeCpu(-1), Contention::kUnknown);
  EXPECT_EQ(GradeCpu(39.99), Contention::kLow);
  EXPECT_EQ(GradeCpu(40), Contention::kMedium);
  EXPECT_EQ(GradeCpu(80), Contention::kMedium);
  EXPECT_EQ(GradeCpu(80.01), Contention::kHigh);
  EXPECT_EQ(GradeMemory(59.99), Contention::kLow);
  EXPECT_EQ(GradeMemory(60), Contention::kMedium);
  EXPECT_EQ(GradeMemory(90), Contention::kMedium);
  EXPECT_EQ(GradeMemory(90.01), Contention::kHigh);
  EXPECT_EQ(GradeIoLatency(0), Contention::kLow);
  EXPECT_EQ(GradeIoLatency(4.99), Contention::kLow);
  EXPECT_EQ(GradeIoLatency(5), Contention::kMedium);
  EXPECT_EQ(GradeIoLatency(50), Contention::kMedium);
  EXPECT_EQ(GradeIoLatency(50.01), Contention::kHigh);
  EXPECT_STREQ(ContentionName(Contention::kHigh), "high");
  EXPECT_STREQ(ContentionName(Contention::kUnknown), "unknown");
}

TEST(CgroupStatsTest, GradesTwoSamples) {
  const NodeCapacity node{.cpus = 32, .memory_bytes = int64_t{64} << 30};
  CgroupSample before, after;
  before.cpu_usage_usec = 1'000'000;
  after.cpu_usage_usec = 1'000'000 + 3'200'000;  // 3.2 CPU-seconds in 1 s
  after.cpu_quota = 4;                           // 80% of the quota
  after.memory_bytes = 9 << 20;
  after.memory_limit_bytes = 10 << 20;  // 90%
  before.io_ops = 100;
  after.io_ops = 200;
  before.io_service_time_ns = 0;
  after.io_service_time_ns = int64_t{100} * 50'000'000;  // 50 ms each
  ContentionGrades g = GradeContention(before, after, 1.0, node);
  EXPECT_DOUBLE_EQ(g.cpu_percent, 80);
  EXPECT_EQ(g.cpu, Contention::kMedium);
  EXPECT_DOUBLE_EQ(g.memory_percent, 90);
  EXPECT_EQ(g.memory, Contention::kMedium);
  EXPECT_DOUBLE_EQ(g.io_latency_ms, 50);
  EXPECT_EQ(g.io, Contention::kMedium);

  // No quota and no limit: the node's 32 CPUs and 64 GiB; no IO in between: 0 ms.
  after.cpu_quota = -1;
  after.memory_limit_bytes = -1;
  after.memory_bytes = int64_t{60} << 30;
  after.io_ops = before.io_ops;
  after.io_service_time_ns = before.io_service_time_ns;
  g = GradeContention(before, after, 1.0, node);
  EXPECT_DOUBLE_EQ(g.cpu_percent, 10);
  EXPECT_EQ(g.cpu, Contention::kLow);
  EXPECT_EQ(g.memory, Contention::kHigh);  // 93.75%
  EXPECT_EQ(g.io, Contention::kLow);

  // v2: no latency; a counter that went backwards (a restarted container) is unknown.
  CgroupSample restarted = after;
  restarted.cpu_usage_usec = 10;
  restarted.io_ops = -1;
  g = GradeContention(before, restarted, 1.0, node);
  EXPECT_EQ(g.cpu, Contention::kUnknown);
  EXPECT_EQ(g.io, Contention::kUnknown);
}

// Two samples a moment apart (or a counter that leapt) grade high, and the report carries them
// capped: the server refused the whole report for a percentage past its bound (found by
// fuzz/cgroup_stats_fuzz.cc).
TEST(CgroupStatsTest, ReportCarriesCappedMeasures) {
  CgroupSample before, after;
  before.cpu_usage_usec = 0;
  after.cpu_usage_usec = int64_t{1} << 50;
  after.memory_bytes = int64_t{1} << 60;
  after.memory_limit_bytes = 1;
  before.io_ops = 0;
  after.io_ops = 1;
  before.io_service_time_ns = 0;
  after.io_service_time_ns = int64_t{1} << 62;
  const ContentionGrades g = GradeContention(before, after, 0.001, {.cpus = 1, .memory_bytes = 1});
  EXPECT_EQ(g.cpu, Contention::kHigh);
  EXPECT_GT(g.cpu_percent, kMaxReportPercent);
  AgentReport report;
  ContainerReport& c = report.containers.emplace_back();
  c.job = 1;
  c.state = "running";
  SetContention(g, &c);
  EXPECT_EQ(c.cpu_percent, kMaxReportPercent);
  EXPECT_EQ(c.memory_percent, kMaxReportPercent);
  EXPECT_EQ(c.io_latency_ms, kMaxReportIoLatencyMs);
  EXPECT_EQ(c.cpu_grade, "high");
  EXPECT_EQ(c.io_grade, "high");
  EXPECT_NO_THROW(ParseReport(ToJson(report)));
}

TEST(CgroupStatsTest, BadFilesNameTheirLine) {
  const std::string dir = ::testing::TempDir() + "/berth-cgroup-bad";
  std::filesystem::create_directories(dir + "/docker/abc");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/docker/abc/" + name) << text;
  };
  std::ofstream(dir + "/cgroup.controllers") << "cpu memory\n";
  const ContainerCgroup c = *FindContainerCgroup("abc", dir);
  write("cpu.stat", "usage_usec 12\nnr_throttled lots\n");
  EXPECT_TRUE(ThrowsConfigError([&] { ReadCgroupSample(c); },
                                dir + "/docker/abc/cpu.stat:2: ", {"\"lots\""}));
  write("cpu.stat", "usage_usec 12\n");
  write("cpu.max", "100000\n");
  EXPECT_TRUE(ThrowsConfigError([&] { ReadCgroupSample(c); },
                                dir + "/docker/abc/cpu.max:1: ", {"MAX PERIOD"}));
  write("cpu.max", "max 100000\n");
  write("cpu.pressure", "some avg10=abc avg60=0 avg300=0 total=0\n");
  EXPECT_TRUE(ThrowsConfigError([&] { ReadCgroupSample(c); },
                                dir + "/docker/abc/cpu.pressure:1: ", {"percentage"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace berth
