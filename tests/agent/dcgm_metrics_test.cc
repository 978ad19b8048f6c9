#include "agent/dcgm_metrics.h"

#include <gtest/gtest.h>

#include "../config/config_test_util.h"
#include "agent_test_util.h"

namespace berth {
namespace {

TEST(DcgmMetricsTest, ParsesTheExporterPage) {
  const DcgmScrape s = ParseDcgmMetrics(Capture("dcgm/metrics.txt"), "metrics");
  ASSERT_EQ(s.gpus.size(), 4u);      // GPUs 0, 1 and two MIG instances of GPU 3
  EXPECT_EQ(s.skipped_samples, 2u);  // the SM clocks
  const DcgmGpuMetrics* g0 = s.Find(0);
  ASSERT_NE(g0, nullptr);
  EXPECT_EQ(g0->uuid, "GPU-fef8089b-4820-abfc-e83e-94318197576e");
  EXPECT_EQ(g0->device, "nvidia0");
  EXPECT_EQ(g0->model_name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(g0->hostname, "dgx-a100-01");
  EXPECT_EQ(g0->fb_used_mib, 77303);
  EXPECT_EQ(g0->fb_free_mib, 3617);
  EXPECT_EQ(g0->gpu_util_percent, 97);
  EXPECT_DOUBLE_EQ(g0->sm_active, 0.873421);
  EXPECT_DOUBLE_EQ(g0->power_watts, 371.825);
  EXPECT_EQ(g0->nvlink_bandwidth_total, 189234567);
  EXPECT_EQ(g0->pcie_tx_bytes, 412345678);
  EXPECT_EQ(g0->pcie_rx_bytes, 98765432);
  EXPECT_EQ(g0->temperature_c, 61);
  EXPECT_EQ(g0->xid_errors, 0);
  EXPECT_EQ(s.FindByUuid("GPU-1c2b08c1-f602-d290-4519-863bc0c96079")->xid_errors, 79);
  const DcgmGpuMetrics* mig = s.Find(3, 9);
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(mig->mig_profile, "1g.10gb");
  EXPECT_EQ(mig->fb_used_mib, 5120);
  EXPECT_DOUBLE_EQ(mig->sm_active, 0.412);
  EXPECT_EQ(mig->gpu_util_percent, -1);  // not on the page for instances
  EXPECT_EQ(s.Find(3), nullptr);         // no whole-GPU sample of GPU 3
  EXPECT_EQ(s.FindByUuid("GPU-559c7f49-0c4e-4b0a-9a51-2cf1c7b5d0aa"), nullptr);
  EXPECT_EQ(s.gpus[2].mig_instance, 2);  // ordered by (gpu, instance)
  const GpuTelemetry t = ToTelemetry(*g0);
  EXPECT_EQ(t.fb_used_mib, 77303);
  EXPECT_EQ(t.util_percent, 97);
  // What the agent reports of it, through the report's JSON as the server reads it.
  AgentReport report;
  report.gpus.push_back(ToGpuReport(0, *g0));
  const AgentReport read = ParseReport(ToJson(report));
  ASSERT_EQ(read.gpus.size(), 1u);
  const GpuReport& r = read.gpus[0];
  EXPECT_EQ(r.fb_used_mib, 77303);
  EXPECT_DOUBLE_EQ(r.sm_active, 0.873421);
  EXPECT_EQ(r.nvlink_total, 189234567);
  EXPECT_EQ(r.pcie_tx_bytes, 412345678);
  EXPECT_EQ(r.pcie_rx_bytes, 98765432);
}

TEST(DcgmMetricsTest, EscapesTimestampsAndOddValues) {
  const DcgmScrape s = ParseDcgmMetrics(
      "# a comment\n"
      "\n"
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",modelName=\"x, \\\"y\\\"\\\\z\\n\",} 42 1712345678901\n"
      "DCGM_FI_DEV_FB_USED{gpu=\"0\"} NaN\n"
      "DCGM_FI_DEV_FB_FREE{ gpu=\"0\" , UUID=\"GPU-a\" } +Inf\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 1.5e2\n"
      "go_goroutines 12\n"
      "DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-a\"} 50\n"
      "# EOF\n",
      "m");
  ASSERT_EQ(s.gpus.size(), 1u);
  EXPECT_EQ(s.gpus[0].model_name, "x, \"y\"\\z\n");
  EXPECT_EQ(s.gpus[0].gpu_util_percent, 42);
  EXPECT_EQ(s.gpus[0].fb_used_mib, -1);
  EXPECT_EQ(s.gpus[0].fb_free_mib, -1);
  EXPECT_EQ(s.gpus[0].power_watts, 150);
  EXPECT_EQ(s.skipped_samples, 2u);  // go_goroutines, and the sample without a gpu label
}

// Values past what a GPU can show are kept as read, but the agent reports them unknown: the
// server refuses a whole report that carries one (found by fuzz/dcgm_metrics_fuzz.cc).
TEST(DcgmMetricsTest, ReportsOnlyValuesInTheirRange) {
  const DcgmScrape s =
      ParseDcgmMetrics(Capture("../fuzz/dcgm_metrics/values-past-their-range.txt"), "metrics");
  ASSERT_EQ(s.gpus.size(), 1u);
  EXPECT_EQ(s.gpus[0].gpu_util_percent, 250);
  AgentReport report;
  report.gpus.push_back(ToGpuReport(2, s.gpus[0]));
  const GpuReport& g = report.gpus[0];
  EXPECT_EQ(g.gpu, 2);
  EXPECT_EQ(g.util_percent, -1);
  EXPECT_EQ(g.fb_used_mib, -1);
  EXPECT_EQ(g.fb_free_mib, -1);
  EXPECT_EQ(g.sm_active, -1);
  EXPECT_EQ(g.xid, 79);
  EXPECT_NO_THROW(ParseReport(ToJson(report)));
}

TEST(DcgmMetricsTest, GarbageNamesTheLine) {
  const auto fails = [](const std::string& line, const std::string& part) {
    return ThrowsConfigError([&] { ParseDcgmMetrics("# HELP x y\n" + line + "\n", "m"); },
                             "m:2: ", {part, "DCGM exporter"});
  };
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 5", "expected , or }"));
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=\"0} 5", "no closing quote"));
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=0} 5", "expected =\" after label"));
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} five", "\"five\" is not a number"));
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5 soon", "timestamp"));
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",gpu=\"1\"} 5", "given twice"));
  EXPECT_TRUE(fails("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\\q\"} 5", "unknown escape"));
  EXPECT_TRUE(fails("{gpu=\"0\"} 5", "expected a metric name"));
  EXPECT_TRUE(
      ThrowsConfigError([] { ParseDcgmMetrics("DCGM_FI_DEV_GPU_UTIL{gpu=\"64\"} 5\n", "m"); },
                        "m:1: label gpu: ", {"from 0 to 63"}));
}

TEST(DcgmMetricsTest, Bounds) {
  std::string many;
  for (int g = 0; g < 64; ++g)
    for (int i = -1; i < 8; ++i)
      many += "DCGM_FI_DEV_FB_USED{gpu=\"" + std::to_string(g) + "\"" +
              (i < 0 ? "" : ",GPU_I_ID=\"" + std::to_string(i) + "\"") + "} 1\n";
  EXPECT_TRUE(ThrowsConfigError([&] { ParseDcgmMetrics(many, "m"); },
                                "m:513: ", {"more than 512 GPUs and MIG instances"}));
  const std::string long_line = "x " + std::string(kMaxDcgmLineBytes, '1') + "\n";
  EXPECT_TRUE(ThrowsConfigError([&] { ParseDcgmMetrics(long_line, "m"); }, "m:1: ", {"a line of"}));
}

}  // namespace
}  // namespace berth
