#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "config/cluster_file.h"
#include "server/control_plane.h"
#include "server/http_api.h"
#include "server_test_util.h"

namespace berth {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsTest, LabelValuesAreEscapedAsTheTextFormatSays) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  MetricsRegistry registry;
  registry.DeclareGauge("berth_test", "A help text with a \\ and a\nnewline.", {"name"});
  registry.Set("berth_test", {"x\"}\ny\\"}, 2);
  const std::string text = registry.Expose();
  EXPECT_EQ(text,
            "# HELP berth_test A help text with a \\\\ and a\\nnewline.\n"
            "# TYPE berth_test gauge\n"
            "berth_test{name=\"x\\\"}\\ny\\\\\"} 2\n");
}

TEST(MetricsTest, ValuesAreWrittenExactly) {
  EXPECT_EQ(FormatMetricValue(8), "8");
  EXPECT_EQ(FormatMetricValue(0.5), "0.5");
  EXPECT_EQ(FormatMetricValue(0.0005), "0.0005");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(1e-5), "1e-05");
  EXPECT_EQ(FormatMetricValue(123456789012), "123456789012");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndEndWithInf) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 3.0, 10.0}) h.Observe(v);  // 1.0 falls in le="1"
  EXPECT_EQ(h.cumulative(0), 2u);
  EXPECT_EQ(h.cumulative(1), 3u);
  EXPECT_EQ(h.cumulative(2), 4u);
  EXPECT_EQ(h.cumulative(3), 5u);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 16);

  MetricsRegistry registry;
  registry.DeclareHistogram("berth_wait_seconds", "Waits.", {"queue"}, {1, 2, 5});
  registry.SetHistogram("berth_wait_seconds", {"q"}, h);
  registry.Observe("berth_wait_seconds", {"r"}, 0.25);
  EXPECT_EQ(registry.Expose(),
            "# HELP berth_wait_seconds Waits.\n"
            "# TYPE berth_wait_seconds histogram\n"
            "berth_wait_seconds_bucket{queue=\"q\",le=\"1\"} 2\n"
            "berth_wait_seconds_bucket{queue=\"q\",le=\"2\"} 3\n"
            "berth_wait_seconds_bucket{queue=\"q\",le=\"5\"} 4\n"
            "berth_wait_seconds_bucket{queue=\"q\",le=\"+Inf\"} 5\n"
            "berth_wait_seconds_sum{queue=\"q\"} 16\n"
            "berth_wait_seconds_count{queue=\"q\"} 5\n"
            "berth_wait_seconds_bucket{queue=\"r\",le=\"1\"} 1\n"
            "berth_wait_seconds_bucket{queue=\"r\",le=\"2\"} 1\n"
            "berth_wait_seconds_bucket{queue=\"r\",le=\"5\"} 1\n"
            "berth_wait_seconds_bucket{queue=\"r\",le=\"+Inf\"} 1\n"
            "berth_wait_seconds_sum{queue=\"r\"} 0.25\n"
            "berth_wait_seconds_count{queue=\"r\"} 1\n");
  EXPECT_THROW(registry.SetHistogram("berth_wait_seconds", {"q"}, Histogram({1, 2})),
               std::invalid_argument);
  EXPECT_THROW(Histogram({2, 1}), std::invalid_argument);
}

TEST(MetricsTest, NamesFollowTheRules) {
  MetricsRegistry r;
  EXPECT_THROW(r.DeclareCounter("berth_decisions", "x"), std::invalid_argument);  // no _total
  EXPECT_THROW(r.DeclareGauge("berth_jobs_total", "x"), std::invalid_argument);   // only counters
  EXPECT_THROW(r.DeclareGauge("jobs", "x"), std::invalid_argument);               // not berth_
  EXPECT_THROW(r.DeclareGauge("berth_queueUsage", "x"), std::invalid_argument);   // camel case
  EXPECT_THROW(r.DeclareGauge("berth_jobs_count", "x"), std::invalid_argument);   // reserved
  EXPECT_THROW(r.DeclareHistogram("berth_x_seconds", "x", {"le"}, {1}), std::invalid_argument);
  EXPECT_THROW(r.DeclareGauge("berth_x", "x", {"__name"}), std::invalid_argument);
  EXPECT_THROW(r.DeclareGauge("berth_x", "x", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(r.DeclareGauge("berth_x", ""), std::invalid_argument);  // HELP is required

  r.DeclareCounter("berth_decisions_total", "Decisions.", {"kind"});
  r.DeclareCounter("berth_decisions_total", "Decisions.", {"kind"});  // the same again: no-op
  EXPECT_THROW(r.DeclareGauge("berth_decisions_total", "x"), std::invalid_argument);
  EXPECT_THROW(r.Add("berth_decisions_total", {}), std::invalid_argument);  // label count
  EXPECT_THROW(r.Add("berth_decisions_total", {"start"}, -1), std::invalid_argument);
  EXPECT_THROW(r.Set("berth_decisions_total", {"start"}, 1), std::invalid_argument);  // type
  EXPECT_THROW(r.Add("berth_unknown_total", {}), std::invalid_argument);
  r.Add("berth_decisions_total", {"start"});
  r.Add("berth_decisions_total", {"start"}, 2);
  r.DeclareGauge("berth_empty", "Nothing yet.");
  EXPECT_EQ(r.Expose(),
            "# HELP berth_decisions_total Decisions.\n"
            "# TYPE berth_decisions_total counter\n"
            "berth_decisions_total{kind=\"start\"} 3\n"
            "# HELP berth_empty Nothing yet.\n"
            "# TYPE berth_empty gauge\n");
}

TEST(MetricsTest, ConcurrentObservationsAreAllCounted) {
  MetricsRegistry r;
  r.DeclareHistogram("berth_x_seconds", "x", {"t"}, {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 2000; ++i) r.Observe("berth_x_seconds", {std::to_string(t % 2)}, 1);
    });
  for (std::thread& t : threads) t.join();
  const std::string text = r.Expose();
  EXPECT_TRUE(Has(text, "berth_x_seconds_count{t=\"0\"} 8000")) << text;
  EXPECT_TRUE(Has(text, "berth_x_seconds_count{t=\"1\"} 8000")) << text;
}

TEST(MetricsTest, RoutesAreLabelledByPatternAndUnknownPathsCollapse) {
  EXPECT_EQ(RouteLabel("/v1/jobs"), "/v1/jobs");
  EXPECT_EQ(RouteLabel("/v1/jobs/17"), "/v1/jobs/{id}");
  EXPECT_EQ(RouteLabel("/v1/jobs/17/stop"), "/v1/jobs/{id}/stop");
  EXPECT_EQ(RouteLabel("/v1/jobs/17/events"), "/v1/jobs/{id}/events");
  EXPECT_EQ(RouteLabel("/metrics"), "/metrics");
  EXPECT_EQ(RouteLabel("/v1/jobs/abc"), "other");
  EXPECT_EQ(RouteLabel("/v1/jobs/17/"), "other");
  EXPECT_EQ(RouteLabel("/v1/jobs/" + std::string(1000, '1')), "other");

  // A client asking for thousands of URLs, with made-up methods, adds one series.
  MetricsRegistry requests;
  DeclareRequestMetrics(requests);
  for (int i = 0; i < 1000; ++i) {
    httplib::Request req;
    req.method = "X" + std::to_string(i % 10);
    req.path = "/random/" + std::to_string(i);
    httplib::Response res;
    res.status = 404;
    RecordRequest(requests, req, res);
  }
  EXPECT_EQ(requests.series("berth_api_request_duration_seconds"), 1u);
  httplib::Request req;
  req.method = "GET";
  req.path = "/v1/jobs/5";
  httplib::Response res;
  res.status = 200;
  NoteRequestStart();
  RecordRequest(requests, req, res);
  const std::string text = requests.Expose();
  EXPECT_TRUE(Has(text,
                  "berth_api_request_duration_seconds_count{route=\"other\",method=\"other\","
                  "code=\"404\"} 1000"))
      << text;
  EXPECT_TRUE(Has(text,
                  "berth_api_request_duration_seconds_count{route=\"/v1/jobs/{id}\",method=\"GET\","
                  "code=\"200\"} 1"))
      << text;
}

class ControlPlaneMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "berth_metrics_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    plane_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Open(int nodes, std::vector<QueueSpec> queues = {}) {
    store_ = std::make_unique<StateStore>(dir_);
    ControlPlaneConfig config;
    config.cluster = Dgx(nodes);
    config.queues = std::move(queues);
    EXPECT_TRUE(BuiltinPolicy("berth", &config.policy));
    plane_ = std::make_unique<ControlPlane>(std::move(config), store_.get(),
                                            [this] { return now_ += 1; });
  }

  std::string dir_;
  double now_ = 1000;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<ControlPlane> plane_;
};

TEST_F(ControlPlaneMetricsTest, AScheduledJobShowsInTheSnapshotAndTheExposition) {
  Open(2);
  ControlPlane::MetricsSnapshot m = plane_->Metrics();
  ASSERT_EQ(m.jobs.size(), ControlPlane::JobStates().size());  // every state, 0 included
  for (const auto& [state, count] : m.jobs) EXPECT_EQ(count, 0) << state;
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_EQ(m.gpus[0].free + m.gpus[1].free, 16);
  EXPECT_EQ(m.cycle_seconds.count(), 0u);

  plane_->Submit(R"({"name": "train", "gpus": 8, "image": "busybox"})");
  plane_->Submit(R"({"image": "x", "gpus": 1})");
  plane_->Submit(R"({"image": "x", "gpus": 8})");  // waits: 7 GPUs are left
  plane_->Cycle();
  m = plane_->Metrics();
  EXPECT_EQ(m.jobs["scheduled"], 2);
  EXPECT_EQ(m.jobs["pending"], 1);
  EXPECT_EQ(m.jobs["succeeded"], 0);
  EXPECT_EQ(m.gpus[0].allocated + m.gpus[1].allocated, 9);
  EXPECT_EQ(m.gpus[0].free + m.gpus[1].free, 7);
  EXPECT_EQ(m.gpus[0].model, "A100");
  EXPECT_EQ(m.decisions["start"], 2u);
  EXPECT_EQ(m.decisions["preempt"], 0u);
  EXPECT_EQ(m.cycle_seconds.count(), 1u);
  ASSERT_EQ(m.queues.size(), 1u);
  EXPECT_EQ(m.queues[0].usage_gpus, 9);
  EXPECT_EQ(m.queues[0].pending_gpus, 8);
  // FGD: the typical pods are the three jobs' shapes (8 GPUs twice, 1 GPU once); the 7 free
  // GPUs of the node shared with the 1-GPU job cannot take an 8-GPU pod: 2/3 of 7 GPUs.
  EXPECT_NEAR(m.fragmentation_gpus, 7.0 * 2 / 3, 1e-9);

  MetricsRegistry requests;
  DeclareRequestMetrics(requests);
  const std::string text = MetricsExposition(*plane_, requests);
  EXPECT_TRUE(Has(text, "berth_jobs{state=\"scheduled\"} 2")) << text;
  EXPECT_TRUE(Has(text, "berth_jobs{state=\"lost\"} 0")) << text;
  EXPECT_TRUE(Has(text, "berth_queue_usage_gpus{queue=\"default\"} 9")) << text;
  EXPECT_TRUE(Has(text, "berth_scheduling_decisions_total{kind=\"start\"} 2")) << text;
  EXPECT_TRUE(Has(text, "berth_scheduling_decisions_total{kind=\"kill\"} 0")) << text;
  EXPECT_TRUE(Has(text, "berth_scheduling_cycle_duration_seconds_count 1")) << text;
  EXPECT_TRUE(Has(text, "berth_scheduling_cycle_duration_seconds_bucket{le=\"+Inf\"} 1")) << text;
  EXPECT_TRUE(Has(text, "berth_preemptions_total 0")) << text;
  EXPECT_TRUE(Has(text, "# TYPE berth_api_request_duration_seconds histogram")) << text;
  const bool full0 = Has(text, "berth_gpus{node=\"dgx-0\",model=\"A100\",state=\"allocated\"} 8");
  const bool full1 = Has(text, "berth_gpus{node=\"dgx-1\",model=\"A100\",state=\"allocated\"} 8");
  EXPECT_TRUE(full0 != full1) << text;  // one node holds the 8-GPU job, the other the 1-GPU job
  EXPECT_TRUE(Has(text, "berth_gpus{node=\"dgx-0\",model=\"A100\",state=\"bad\"} 0")) << text;
}

TEST_F(ControlPlaneMetricsTest, APreemptionIsCounted) {
  VcGuarantee node;
  node.cell_type = "s/node";
  node.count = 1;
  Open(1, {{"owner", 1, -1, {node}}, {"other", 1, -1, {}}});
  plane_->Submit(R"({"image": "x", "gpus": 8, "queue": "other"})");
  plane_->Cycle();
  EXPECT_EQ(plane_->Metrics().queues[1].borrowed_gpus, 8);
  plane_->Submit(R"({"image": "x", "gpus": 8, "queue": "owner"})");
  for (int i = 0; i < 3; ++i) plane_->Cycle();
  const ControlPlane::MetricsSnapshot m = plane_->Metrics();
  EXPECT_EQ(m.preemptions, 1u);
  EXPECT_EQ(m.decisions.at("preempt"), 1u);
  EXPECT_EQ(m.decisions.at("start"), 2u);
  EXPECT_EQ(m.cycle_seconds.count(), 4u);
  EXPECT_EQ(m.queues[0].guarantee_gpus, 8);
  EXPECT_EQ(m.queues[0].usage_gpus, 8);
  EXPECT_EQ(m.queues[1].pending_gpus, 8);
}

}  // namespace
}  // namespace berth
