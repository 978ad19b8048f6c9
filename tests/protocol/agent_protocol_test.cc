#include "protocol/agent_protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace berth {
namespace {

using Json = nlohmann::json;

// The ProtocolError's message that `parse` throws; fails the test when it throws none.
std::string ErrorOf(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ProtocolError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ProtocolError";
  return "";
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

AssignmentSet SampleSet() {
  AssignmentSet s;
  s.version = 1'765'000'000'123'456ULL;  // microseconds, above 2^32
  Assignment a;
  a.job = 42;
  a.replica = 1;
  a.placement = "p1765000000123456";
  a.name = "train";
  a.image = "trainer:1";
  a.command = {"python", "train.py", "--epochs", "3"};
  a.env = {"EPOCHS=3", "EMPTY="};
  a.mounts = {{"/data", "/in", true}, {"/scratch", "/out", false}};
  a.shm_bytes = 1 << 30;
  a.memory_bytes = int64_t{64} << 30;
  a.nano_cpus = 8'000'000'000;
  a.gpus = {1, 3};
  a.gpu_uuids = {"GPU-b", "GPU-d"};
  a.cpuset_cpus = "4,5,6,7";
  a.cpuset_mems = "1";
  a.grace_s = 45;
  a.log_since = "2026-12-02T03:40:46.898183200Z";
  a.ran = true;
  s.assignments.push_back(a);
  Assignment b;
  b.job = 43;
  b.gpus = {2};
  b.gpu_uuids = {"MIG-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"};
  b.mig_profile = "3g.40gb";
  b.mig_start = 4;
  s.assignments.push_back(b);
  s.prefetch = {"trainer:3", "registry.local:5000/eval@sha256:ab"};
  return s;
}

AgentReport SampleReport() {
  AgentReport r;
  r.applied_version = 1'765'000'000'123'999ULL;
  ContainerReport c;
  c.job = 42;
  c.replica = 1;
  c.placement = "p1";
  c.state = "running";
  c.container_id = "abc123";
  c.phases = {{"pull", 1.5}, {"create", 0.25}, {"start", 0.125}};
  c.off_gpus = "runs on CPUs 0-3 rather than its GPUs' (CPUs 4-7, NUMA nodes 1)";
  c.cpu_throttled_periods = 17;
  c.cpu_throttled_seconds = 2.5;
  c.io_read_bytes = 4096;
  c.io_write_bytes = 8192;
  c.memory_bytes = 1 << 20;
  c.memory_limit_bytes = 1 << 30;
  c.cpu_pressure = 12.5;
  c.memory_pressure = 0.25;
  c.io_pressure = 99;
  r.containers.push_back(c);
  ContainerReport d;
  d.job = 43;
  d.placement = "p2";
  d.state = "exited";
  d.exit_code = 3;
  d.error = "boom";
  r.containers.push_back(d);
  r.logs.push_back({42,
                    1,
                    "p1",
                    "2026-12-02T03:40:45Z",
                    "2026-12-02T03:40:46.8981Z",
                    "hello\nworld\n",
                    {{6, 12}}});
  return r;
}

// Serialized through text, as it goes over the wire.
Json Wire(const Json& j) { return Json::parse(j.dump()); }

// --- Round trips -------------------------------------------------------------------------------

TEST(AgentProtocolTest, RegistrationRoundTrips) {
  NodeRegistration r;
  r.gpu_uuids = {"GPU-0", "GPU-1", "GPU-2"};
  r.simulated = true;
  r.agent_version = "berth 1.2.3";
  r.instance = "0123abcd-_";
  r.report_every_ms = 2500;
  r.engine = "7TRN:IPZB:QYBB:VPBQ";
  const NodeRegistration back = ParseRegistration(Wire(ToJson(r)));
  EXPECT_EQ(back.instance, "0123abcd-_");
  EXPECT_EQ(back.engine, "7TRN:IPZB:QYBB:VPBQ");
  EXPECT_EQ(back.report_every_ms, 2500);
  EXPECT_EQ(back.gpu_uuids, r.gpu_uuids);
  EXPECT_TRUE(back.simulated);
  EXPECT_EQ(back.agent_version, "berth 1.2.3");
  EXPECT_FALSE(back.found);
  // The node as found: sockets with their CPUs, switches, GPUs.
  Node found;
  found.cpu_milli = 8000;
  found.memory_mib = 1024;
  found.sockets = {{{0, 1, 2, 3}, 512}, {{4, 5, 6, 7}, 512}};
  found.switches = {{0}, {1}};
  found.gpus = {{"A100-SXM4-80GB", 0, 0, false, {}}, {"A100-SXM4-80GB", 1, -1, true, {}}};
  r.found = found;
  const NodeRegistration with = ParseRegistration(Wire(ToJson(r)));
  ASSERT_TRUE(with.found);
  EXPECT_EQ(with.found->cpu_milli, 8000);
  EXPECT_EQ(with.found->memory_mib, 1024);
  ASSERT_EQ(with.found->sockets.size(), 2u);
  EXPECT_EQ(with.found->sockets[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(with.found->sockets[1].memory_mib, 512);
  ASSERT_EQ(with.found->switches.size(), 2u);
  EXPECT_EQ(with.found->switches[1].socket, 1);
  ASSERT_EQ(with.found->gpus.size(), 2u);
  EXPECT_EQ(with.found->gpus[1].model, "A100-SXM4-80GB");
  EXPECT_EQ(with.found->gpus[1].pcie_switch, 1);
  EXPECT_EQ(with.found->gpus[0].nvlink_domain, 0);
  EXPECT_EQ(with.found->gpus[1].nvlink_domain, -1);
  EXPECT_TRUE(with.found->gpus[1].mig_enabled);
  EXPECT_TRUE(with.migs.empty());
  EXPECT_FALSE(with.declared);
  // A declared node and the GPU models (MIG profiles: berth's own, by name).
  found.gpus[1].mig_layout = {"3g.40gb@0", "3g.40gb@4"};
  found.labels = {{"pool", "blue"}, {"example.com/tier", "gold"}};
  r.declared = found;
  r.found.reset();
  r.models = {{"A100-SXM4-80GB", 81920, BuiltinMigProfiles("A100-SXM4-80GB")}};
  const NodeRegistration declared = ParseRegistration(Wire(ToJson(r)));
  EXPECT_FALSE(declared.found);
  ASSERT_TRUE(declared.declared);
  EXPECT_EQ(declared.declared->gpus[1].mig_layout, found.gpus[1].mig_layout);
  EXPECT_EQ(declared.declared->labels, found.labels);
  EXPECT_EQ(declared.declared->sockets[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  ASSERT_EQ(declared.models.size(), 1u);
  EXPECT_EQ(declared.models[0].memory_mib, 81920);
  EXPECT_EQ(declared.models[0].mig_profiles.size(), r.models[0].mig_profiles.size());
  EXPECT_FALSE(declared.models[0].mig_profiles.empty());
  r.declared.reset();
  // MIG instances, by GPU, profile and start slot.
  r.migs = {{1, "3g.40gb", 0, "MIG-a"}, {1, "1g.10gb", 6, "MIG-b"}};
  const NodeRegistration migs = ParseRegistration(Wire(ToJson(r)));
  ASSERT_EQ(migs.migs.size(), 2u);
  EXPECT_EQ(migs.migs[1].gpu, 1);
  EXPECT_EQ(migs.migs[1].profile, "1g.10gb");
  EXPECT_EQ(migs.migs[1].start, 6);
  EXPECT_EQ(migs.migs[1].uuid, "MIG-b");
  // Missing fields take their defaults.
  const NodeRegistration empty = ParseRegistration(Json::object());
  EXPECT_TRUE(empty.gpu_uuids.empty());
  EXPECT_FALSE(empty.simulated);
  EXPECT_EQ(empty.agent_version, "");
}

TEST(AgentProtocolTest, AssignmentSetRoundTrips) {
  const AssignmentSet s = SampleSet();
  const AssignmentSet back = ParseAssignments(Wire(ToJson(s)));
  EXPECT_EQ(back.version, s.version);
  ASSERT_EQ(back.assignments.size(), 2u);
  const Assignment& a = back.assignments[0];
  const Assignment& want = s.assignments[0];
  EXPECT_EQ(a.job, want.job);
  EXPECT_EQ(a.replica, want.replica);
  EXPECT_EQ(a.placement, want.placement);
  EXPECT_EQ(a.name, want.name);
  EXPECT_EQ(a.image, want.image);
  EXPECT_EQ(a.command, want.command);
  EXPECT_EQ(a.env, want.env);
  ASSERT_EQ(a.mounts.size(), 2u);
  EXPECT_EQ(a.mounts[0].host, "/data");
  EXPECT_EQ(a.mounts[0].container, "/in");
  EXPECT_TRUE(a.mounts[0].read_only);
  EXPECT_EQ(a.mounts[1].host, "/scratch");
  EXPECT_FALSE(a.mounts[1].read_only);
  EXPECT_EQ(a.shm_bytes, want.shm_bytes);
  EXPECT_EQ(a.memory_bytes, want.memory_bytes);
  EXPECT_EQ(a.nano_cpus, want.nano_cpus);
  EXPECT_EQ(a.gpus, want.gpus);
  EXPECT_EQ(a.gpu_uuids, want.gpu_uuids);
  EXPECT_EQ(a.cpuset_cpus, want.cpuset_cpus);
  EXPECT_EQ(a.cpuset_mems, want.cpuset_mems);
  EXPECT_EQ(a.grace_s, 45);
  EXPECT_EQ(a.log_since, want.log_since);
  EXPECT_TRUE(a.ran);
  EXPECT_EQ(a.mig_profile, "");  // a whole GPU's
  EXPECT_EQ(a.mig_start, -1);
  EXPECT_EQ(back.assignments[1].job, 43);
  EXPECT_TRUE(back.assignments[1].command.empty());
  EXPECT_EQ(back.assignments[1].gpu_uuids, s.assignments[1].gpu_uuids);
  EXPECT_EQ(back.assignments[1].mig_profile, "3g.40gb");
  EXPECT_EQ(back.assignments[1].mig_start, 4);
  EXPECT_EQ(back.prefetch,
            (std::vector<std::string>{"trainer:3", "registry.local:5000/eval@sha256:ab"}));
  // An empty set is a set.
  const AssignmentSet none = ParseAssignments(Wire(ToJson(AssignmentSet{7, {}, {}})));
  EXPECT_EQ(none.version, 7u);
  EXPECT_TRUE(none.assignments.empty());
  EXPECT_TRUE(none.prefetch.empty());
}

TEST(AgentProtocolTest, ReportRoundTrips) {
  const AgentReport r = SampleReport();
  const AgentReport back = ParseReport(Wire(ToJson(r)));
  EXPECT_EQ(back.applied_version, r.applied_version);
  ASSERT_EQ(back.containers.size(), 2u);
  const ContainerReport& c = back.containers[0];
  EXPECT_EQ(c.job, 42);
  EXPECT_EQ(c.replica, 1);
  EXPECT_EQ(c.placement, "p1");
  EXPECT_EQ(c.state, "running");
  EXPECT_EQ(c.container_id, "abc123");
  EXPECT_EQ(c.phases, r.containers[0].phases);
  EXPECT_EQ(c.off_gpus, r.containers[0].off_gpus);
  const ContainerReport& sent = r.containers[0];
  for (const auto& [field, got, want] :
       {std::tuple{"cpuThrottledPeriods", c.cpu_throttled_periods, sent.cpu_throttled_periods},
        {"cpuThrottledSeconds", c.cpu_throttled_seconds, sent.cpu_throttled_seconds},
        {"ioReadBytes", c.io_read_bytes, sent.io_read_bytes},
        {"ioWriteBytes", c.io_write_bytes, sent.io_write_bytes},
        {"memoryBytes", c.memory_bytes, sent.memory_bytes},
        {"memoryLimitBytes", c.memory_limit_bytes, sent.memory_limit_bytes},
        {"cpuPressure", c.cpu_pressure, sent.cpu_pressure},
        {"memoryPressure", c.memory_pressure, sent.memory_pressure},
        {"ioPressure", c.io_pressure, sent.io_pressure}})
    EXPECT_EQ(got, want) << field;
  EXPECT_EQ(back.containers[1].memory_bytes, -1);  // not measured
  EXPECT_EQ(back.containers[1].off_gpus, "");
  EXPECT_EQ(back.containers[1].state, "exited");
  EXPECT_EQ(back.containers[1].exit_code, 3);
  EXPECT_EQ(back.containers[1].error, "boom");
  ASSERT_EQ(back.logs.size(), 1u);
  EXPECT_EQ(back.logs[0].job, 42);
  EXPECT_EQ(back.logs[0].replica, 1);
  EXPECT_EQ(back.logs[0].placement, "p1");
  EXPECT_EQ(back.logs[0].from, "2026-12-02T03:40:45Z");
  AgentReport without_from = r;  // an older agent's
  without_from.logs[0].from.reset();
  EXPECT_FALSE(ToJson(without_from)["logs"][0].contains("from"));
  EXPECT_FALSE(ParseReport(Wire(ToJson(without_from))).logs[0].from.has_value());
  EXPECT_EQ(back.logs[0].until, "2026-12-02T03:40:46.8981Z");
  EXPECT_EQ(back.logs[0].text, "hello\nworld\n");
  EXPECT_EQ(back.logs[0].stderr_spans, (StderrSpans{{6, 12}}));
  EXPECT_FALSE(back.images);  // none sent: as last reported
}

// Output that is not UTF-8 (binary, or a line cut inside a character) goes in base64 and comes
// back byte for byte; UTF-8 goes as it is.
// A GPU listed twice is taken once, as first listed: its counters would be added together in
// /metrics, and refusing the report would take the node for silent (review).
TEST(AgentProtocolTest, AGpuReportedTwiceIsTakenOnce) {
  Json j = Wire(ToJson(SampleReport()));
  j["gpus"] = Json::array({{{"gpu", 1}, {"nvlinkTotal", 5}},
                           {{"gpu", 0}, {"nvlinkTotal", 7}},
                           {{"gpu", 1}, {"nvlinkTotal", 9}}});
  const AgentReport r = ParseReport(j);
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[0].gpu, 1);
  EXPECT_EQ(r.gpus[0].nvlink_total, 5);
  EXPECT_EQ(r.gpus[1].gpu, 0);
}

TEST(AgentProtocolTest, ALogChunkThatIsNotUtf8RoundTripsByteForByte) {
  AgentReport r = SampleReport();
  r.logs[0].text = std::string("\xff\xfe\x00bin\n\xe2\x82", 9) + "caf\xc3\xa9\n";
  r.logs[0].stderr_spans = {{0, 3}};
  const Json wire = Wire(ToJson(r));
  EXPECT_FALSE(wire["logs"][0].contains("text"));
  const AgentReport back = ParseReport(wire);
  EXPECT_EQ(back.logs[0].text, r.logs[0].text);
  EXPECT_EQ(back.logs[0].stderr_spans, (StderrSpans{{0, 3}}));
  r.logs[0].text = "caf\xc3\xa9\n";
  EXPECT_EQ(Wire(ToJson(r))["logs"][0]["text"], "caf\xc3\xa9\n");
  EXPECT_FALSE(IsUtf8("\xc3"));
  EXPECT_TRUE(IsUtf8("\xc3\xa9"));
}

TEST(AgentProtocolTest, ABase64ChunkIsCheckedAndBounded) {
  Json j = Wire(ToJson(SampleReport()));
  j["logs"][0].erase("text");
  j["logs"][0]["textBase64"] = "aGk*";
  std::string e = ErrorOf([&] { ParseReport(j); });
  EXPECT_TRUE(Has(e, "logs[0].textBase64: expected base64")) << e;
  j["logs"][0]["text"] = "hi";
  e = ErrorOf([&] { ParseReport(j); });
  EXPECT_TRUE(Has(e, "logs[0].text: give text or textBase64, not both")) << e;
  j["logs"][0].erase("text");
  j["logs"][0]["textBase64"] = std::string((kMaxReportLogBytes + 2) / 3 * 4 + 4, 'A');
  e = ErrorOf([&] { ParseReport(j); });
  EXPECT_TRUE(Has(e, "logs[0].textBase64")) << e;
  j["logs"][0]["stderr"] = Json::array();
  j["logs"][0]["textBase64"] = "/w==";  // one byte, 0xff
  EXPECT_EQ(ParseReport(j).logs[0].text, "\xff");
}

TEST(AgentProtocolTest, AReportReplyRoundTripsAndIsBounded) {
  ReportReply r;
  r.log_cursors.push_back({42, 1, "p1", "2026-12-02T03:40:46.898100000Z"});
  r.log_cursors.push_back({43, 0, "p2", ""});
  r.logs_full.push_back({44, 2, "p3", "2026-12-02T03:40:47.000000000Z"});
  const ReportReply back = ParseReportReply(Wire(ToJson(r)));
  ASSERT_EQ(back.logs_full.size(), 1u);
  EXPECT_EQ(back.logs_full[0].job, 44);
  EXPECT_EQ(back.logs_full[0].replica, 2);
  EXPECT_EQ(back.logs_full[0].placement, "p3");
  ASSERT_EQ(back.log_cursors.size(), 2u);
  EXPECT_EQ(back.log_cursors[0].job, 42);
  EXPECT_EQ(back.log_cursors[0].replica, 1);
  EXPECT_EQ(back.log_cursors[0].placement, "p1");
  EXPECT_EQ(back.log_cursors[0].cursor, "2026-12-02T03:40:46.898100000Z");
  EXPECT_EQ(back.log_cursors[1].cursor, "");
  EXPECT_TRUE(ParseReportReply(Wire(Json{{"ok", true}})).log_cursors.empty());
  Json j = ToJson(r);
  j["logCursors"][0]["cursor"] = std::string(65, '9');
  EXPECT_THROW(ParseReportReply(j), ProtocolError);
  j = ToJson(r);
  j["logCursors"][0]["job"] = 0;
  EXPECT_THROW(ParseReportReply(j), ProtocolError);
}

TEST(AgentProtocolTest, AReportOfAnEngineAwayRoundTripsAndIsBounded) {
  AgentReport r;
  r.applied_version = 7;
  EXPECT_FALSE(ToJson(r).contains("runtimeError"));  // absent while the engine answers
  r.runtime_error = "cannot reach the Docker engine at /var/run/docker.sock";
  const AgentReport back = ParseReport(Wire(ToJson(r)));
  EXPECT_EQ(back.runtime_error, r.runtime_error);
  EXPECT_EQ(back.applied_version, 7u);
  Json j = ToJson(r);
  j["runtimeError"] = std::string(kMaxRuntimeError + 1, 'e');
  EXPECT_THROW(ParseReport(j), ProtocolError);
  j["runtimeError"] = 3;
  EXPECT_THROW(ParseReport(j), ProtocolError);
  j["runtimeError"] = "fake\nrow";  // shown in tables and events: one line
  EXPECT_THROW(ParseReport(j), ProtocolError);
}

// What an agent sends: any engine error becomes one line the server takes, cut between
// characters (a cut inside one, replaced, would make it longer than the bound).
TEST(AgentProtocolTest, ARuntimeErrorLineIsOneLineTheServerTakes) {
  EXPECT_EQ(RuntimeErrorLine("no\tsuch\nsocket\x7f"), "no such socket ");
  for (size_t pad = 0; pad < 3; ++pad) {
    std::string accents = std::string(pad, 'x');
    for (int i = 0; i < 700; ++i) accents += "\xc3\xa9";  // é, two bytes
    const std::string line = RuntimeErrorLine(accents + "\xff");
    EXPECT_LE(line.size(), kMaxRuntimeError);
    EXPECT_GE(line.size(), kMaxRuntimeError - 1);
    AgentReport r;
    r.runtime_error = line;
    EXPECT_EQ(ParseReport(Wire(ToJson(r))).runtime_error, line) << pad;
  }
  EXPECT_NE(RuntimeErrorLine("bad \xff byte").find("\xef\xbf\xbd"), std::string::npos);
}

TEST(AgentProtocolTest, ValidUtf8ReplacesOnlyTheBytesThatAreNot) {
  EXPECT_EQ(ValidUtf8("plain ascii\n"), "plain ascii\n");
  EXPECT_EQ(ValidUtf8("caf\xc3\xa9 \xff!"), "caf\xc3\xa9 \xef\xbf\xbd!");
  EXPECT_EQ(ValidUtf8("cut \xc3"), "cut \xef\xbf\xbd");
}

TEST(AgentProtocolTest, AReportsImagesRoundTripAndAreBounded) {
  AgentReport r = SampleReport();
  r.images = std::vector<ReportedImage>{
      {{"train:v2", "train:latest"}, {{"sha256:base", 6'000'000'000}, {"sha256:code", 0}}},
      {{}, {{"sha256:dangling", 7}}}};
  const AgentReport back = ParseReport(Wire(ToJson(r)));
  ASSERT_TRUE(back.images);
  ASSERT_EQ(back.images->size(), 2u);
  EXPECT_EQ((*back.images)[0].names, (std::vector<std::string>{"train:v2", "train:latest"}));
  ASSERT_EQ((*back.images)[0].layers.size(), 2u);
  EXPECT_EQ((*back.images)[0].layers[0].digest, "sha256:base");
  EXPECT_EQ((*back.images)[0].layers[0].bytes, 6'000'000'000);
  EXPECT_TRUE((*back.images)[1].names.empty());
  r.images->clear();  // a node without images says so
  EXPECT_TRUE(ParseReport(Wire(ToJson(r))).images->empty());
  const auto refused = [&](const std::function<void(Json&)>& change) {
    Json j = Wire(ToJson(r));
    j["images"] = Json::array({{{"names", {"a:1"}}, {"layers", Json::array()}}});
    change(j);
    return ErrorOf([&] { ParseReport(j); });
  };
  std::string e = refused([](Json& j) { j["images"][0]["names"][0] = std::string(1025, 'n'); });
  EXPECT_TRUE(Has(e, "images[0].names[0]: expected an image name of at most 1024 bytes")) << e;
  e = refused([](Json& j) {
    j["images"][0]["layers"] = Json::array({{{"digest", "d"}, {"bytes", -1}}});
  });
  EXPECT_TRUE(Has(e, "images[0].layers[0].bytes")) << e;
  e = refused([](Json& j) {
    j["images"][0]["layers"] = Json::array();
    for (size_t i = 0; i <= kMaxImageLayers; ++i)
      j["images"][0]["layers"].push_back({{"digest", "d"}});
  });
  EXPECT_TRUE(Has(e, "images[0].layers: more than 256 entries")) << e;
  e = refused([](Json& j) {
    for (size_t i = 0; i < kMaxReportImages; ++i) j["images"].push_back(j["images"][0]);
  });
  EXPECT_TRUE(Has(e, "images: more than 1024 entries")) << e;
}

// --- Refusals, each naming its field -----------------------------------------------------------

TEST(AgentProtocolTest, RegistrationRefusesWrongTypesAndTooManyGpus) {
  EXPECT_TRUE(Has(ErrorOf([] { ParseRegistration(Json::array()); }), "expected an object"));
  std::string e = ErrorOf([] { ParseRegistration({{"gpuUuids", "GPU-0"}}); });
  EXPECT_TRUE(Has(e, "gpuUuids: expected a list")) << e;
  e = ErrorOf([] { ParseRegistration({{"gpuUuids", {"GPU-0", 5}}}); });
  EXPECT_TRUE(Has(e, "gpuUuids[1]: expected a string")) << e;
  e = ErrorOf([] { ParseRegistration({{"simulated", "yes"}}); });
  EXPECT_TRUE(Has(e, "simulated: expected true or false")) << e;
  // The agent process's name: shown in a refusal, so plain.
  e = ErrorOf([] { ParseRegistration({{"instance", "a b"}}); });
  EXPECT_TRUE(Has(e, "instance: expected letters, digits, '-' or '_'")) << e;
  e = ErrorOf([] { ParseRegistration({{"instance", std::string(65, 'a')}}); });
  EXPECT_TRUE(Has(e, "instance: longer than 64 bytes")) << e;
  e = ErrorOf([] { ParseReport({{"instance", "a\n"}}); });
  EXPECT_TRUE(Has(e, "instance: expected letters")) << e;
  e = ErrorOf([] { ParseRegistration({{"engine", "id\x1b[2J"}}); });
  EXPECT_TRUE(Has(e, "engine: expected printable ASCII, as the agent's Docker engine's identity"))
      << e;
  e = ErrorOf([] { ParseRegistration({{"engine", std::string(201, 'e')}}); });
  EXPECT_TRUE(Has(e, "engine: longer than 200 bytes")) << e;
  e = ErrorOf([] { ParseRegistration({{"reportEveryMs", -1}}); });
  EXPECT_TRUE(Has(e, "reportEveryMs: expected an integer from 0 to 3600000")) << e;
  e = ErrorOf([] { ParseRegistration({{"agentVersion", std::string(201, 'v')}}); });
  EXPECT_TRUE(Has(e, "agentVersion: longer than 200 bytes")) << e;
  Json many = {{"gpuUuids", std::vector<std::string>(kMaxRegisteredGpus + 1, "GPU")}};
  e = ErrorOf([&] { ParseRegistration(many); });
  EXPECT_TRUE(Has(e, "gpuUuids: more than " + std::to_string(kMaxRegisteredGpus))) << e;
  many["gpuUuids"] = std::vector<std::string>(kMaxRegisteredGpus, "GPU");
  EXPECT_EQ(ParseRegistration(many).gpu_uuids.size(), kMaxRegisteredGpus);
  // MIG instances: on a registered GPU, at a memory slot, at most 7 a GPU.
  const Json mig = {{"gpu", 0}, {"profile", "1g.10gb"}, {"start", 0}, {"uuid", "MIG-x"}};
  e = ErrorOf([&] { ParseRegistration({{"migs", {mig}}}); });
  EXPECT_TRUE(Has(e, "migs[0]: a MIG instance without GPUs (gpuUuids)")) << e;
  Json bad = mig;
  bad["gpu"] = 1;
  e = ErrorOf([&] { ParseRegistration({{"gpuUuids", {"GPU-0"}}, {"migs", {bad}}}); });
  EXPECT_TRUE(Has(e, "migs[0].gpu: expected an integer from 0 to 0")) << e;
  bad = mig;
  bad["start"] = 8;
  e = ErrorOf([&] { ParseRegistration({{"gpuUuids", {"GPU-0"}}, {"migs", {bad}}}); });
  EXPECT_TRUE(Has(e, "migs[0].start: expected an integer from 0 to 7")) << e;
  e = ErrorOf([&] {
    ParseRegistration({{"gpuUuids", {"GPU-0"}}, {"migs", std::vector<Json>(7 * 64 + 1, mig)}});
  });
  EXPECT_TRUE(Has(e, "migs: more than 448")) << e;
  e = ErrorOf([] { ParseRegistration({{"models", {{{"name", "A\n100"}}}}}); });
  EXPECT_TRUE(Has(e, "models[0].name: expected printable ASCII")) << e;
  e = ErrorOf([] {
    ParseRegistration({{"models", std::vector<Json>(kMaxRegisteredGpus + 1, Json::object())}});
  });
  EXPECT_TRUE(Has(e, "models: more than 64")) << e;
  const Json one_socket = {{"cpus", {0}}};
  e = ErrorOf([&] {
    ParseRegistration({{"declared",
                        {{"sockets", {one_socket}},
                         {"switches", {{{"socket", 0}}}},
                         {"gpus", {{{"switch", 0}, {"migLayout", std::vector<int>(8, 1)}}}}}}});
  });
  EXPECT_TRUE(Has(e, "declared.gpus[0].migLayout: more than 7")) << e;
  for (const std::string& uuid : {std::string(), std::string("GPU-1,GPU-2"), std::string("a b"),
                                  std::string("x\n"), std::string(301, 'u')}) {
    e = ErrorOf([&] { ParseRegistration({{"gpuUuids", {"GPU-0", uuid}}}); });
    EXPECT_TRUE(Has(e, "gpuUuids[1]: expected a UUID of 1 to 300 printable ASCII")) << e;
  }
  e = ErrorOf([] { ParseRegistration({{"declared", {{"labels", {{"a b", "x"}}}}}}); });
  EXPECT_TRUE(Has(e, "declared.labels: a key of 1 to 253 letters")) << e;
  e = ErrorOf([] { ParseRegistration({{"declared", {{"labels", {{"k", "x\ny"}}}}}}); });
  EXPECT_TRUE(Has(e, "declared.labels.k: expected printable ASCII")) << e;
  e = ErrorOf([] { ParseRegistration({{"declared", {{"labels", {{"k", 5}}}}}}); });
  EXPECT_TRUE(Has(e, "declared.labels.k: expected a string")) << e;
  e = ErrorOf([] { ParseAssignments({{"assignments", {{{"job", 1}, {"migStart", 9}}}}}); });
  EXPECT_TRUE(Has(e, "assignments[0].migStart: expected an integer from -1 to 7")) << e;
}

TEST(AgentProtocolTest, AFoundNodesIndicesStayInsideIt) {
  const Json one_socket = {{"cpus", {0, 1}}, {"memoryMiB", 1}};
  const auto error = [](const Json& found) {
    return ErrorOf([&] { ParseRegistration({{"found", found}}); });
  };
  std::string e = error({{"sockets", {one_socket}}, {"switches", {{{"socket", 1}}}}});
  EXPECT_TRUE(Has(e, "found.switches[0].socket: expected an integer from 0 to 0")) << e;
  e = error({{"switches", {{{"socket", 4}}}}});
  EXPECT_TRUE(Has(e, "found.switches: switches without sockets")) << e;
  e = error({{"sockets", {one_socket}},
             {"switches", {{{"socket", 0}}}},
             {"gpus", {{{"model", "A100\n\u202e"}, {"switch", 0}}}}});
  EXPECT_TRUE(Has(e, "found.gpus[0].model: expected printable ASCII")) << e;
  e = error({{"sockets", {one_socket}},
             {"switches", {{{"socket", 0}}}},
             {"gpus", {{{"model", "A100"}, {"switch", 1}}}}});
  EXPECT_TRUE(Has(e, "found.gpus[0].switch: expected an integer from 0 to 0")) << e;
  e = error({{"gpus", {{{"model", "A100"}, {"switch", 0}}}}});
  EXPECT_TRUE(Has(e, "found.gpus[0]: a GPU without PCIe switches")) << e;
  e = error({{"sockets", {{{"cpus", {-1}}}}}});
  EXPECT_TRUE(Has(e, "found.sockets[0].cpus[0]: expected a CPU id")) << e;
  e = error({{"sockets", Json::array({one_socket, "x"})}});
  EXPECT_TRUE(Has(e, "found.sockets[1]: expected an object")) << e;
  e = error({{"sockets", std::vector<Json>(kMaxRegisteredSockets + 1, one_socket)}});
  EXPECT_TRUE(Has(e, "found.sockets: more than")) << e;
  e = error("a node");
  EXPECT_TRUE(Has(e, "found: expected an object")) << e;
}

TEST(AgentProtocolTest, AssignmentsRefuseMistakesNamingThePath) {
  const Json good = Wire(ToJson(SampleSet()));
  const auto with = [&](const std::function<void(Json&)>& change) {
    Json j = good;
    change(j);
    return ErrorOf([&] { ParseAssignments(j); });
  };
  std::string e = with([](Json& j) { j["version"] = -1; });
  EXPECT_TRUE(Has(e, "version: expected a version")) << e;
  e = with([](Json& j) { j["version"] = "12"; });
  EXPECT_TRUE(Has(e, "version: expected a version")) << e;
  e = with([](Json& j) { j["assignments"] = Json::object(); });
  EXPECT_TRUE(Has(e, "assignments: expected a list")) << e;
  e = with([](Json& j) { j["assignments"][1] = 5; });
  EXPECT_TRUE(Has(e, "assignments[1]: expected an object")) << e;
  e = with([](Json& j) { j["assignments"][1].erase("job"); });
  EXPECT_TRUE(Has(e, "assignments[1].job: missing")) << e;
  e = with([](Json& j) { j["assignments"][0]["job"] = 0; });
  EXPECT_TRUE(Has(e, "assignments[0].job: expected an integer")) << e;
  e = with([](Json& j) { j["assignments"][0]["job"] = "42"; });
  EXPECT_TRUE(Has(e, "assignments[0].job: expected an integer")) << e;
  e = with([](Json& j) { j["assignments"][0]["command"] = "sleep 1"; });
  EXPECT_TRUE(Has(e, "assignments[0].command: expected a list")) << e;
  e = with([](Json& j) { j["assignments"][0]["env"][1] = 7; });
  EXPECT_TRUE(Has(e, "assignments[0].env[1]: expected a string")) << e;
  e = with([](Json& j) { j["prefetch"] = Json::array({"a", 3}); });
  EXPECT_TRUE(Has(e, "prefetch[1]: expected a string")) << e;
  e = with([](Json& j) { j["prefetch"] = std::vector<std::string>(kMaxPrefetchImages + 1, "a"); });
  EXPECT_TRUE(Has(e, "prefetch: more than 64 entries")) << e;
  e = with([](Json& j) { j["assignments"][0]["gpus"][0] = -1; });
  EXPECT_TRUE(Has(e, "assignments[0].gpus[0]: expected an index")) << e;
  e = with([](Json& j) { j["assignments"][0]["mounts"][1]["readOnly"] = "no"; });
  EXPECT_TRUE(Has(e, "assignments[0].mounts[1].readOnly: expected true or false")) << e;
  e = with([](Json& j) { j["assignments"][0]["placement"] = std::string(65, 'p'); });
  EXPECT_TRUE(Has(e, "assignments[0].placement: longer than 64 bytes")) << e;
  e = with([](Json& j) { j["assignments"][0]["graceSeconds"] = 86401; });
  EXPECT_TRUE(Has(e, "assignments[0].graceSeconds: expected an integer from 0 to 86400")) << e;
  e = with(
      [](Json& j) { j["assignments"][0]["gpus"] = std::vector<int>(kMaxRegisteredGpus + 1, 0); });
  EXPECT_TRUE(Has(e, "assignments[0].gpus: more than")) << e;
  e = with([](Json& j) {
    j["assignments"] = Json::array();
    for (size_t i = 0; i <= kMaxReportContainers; ++i) j["assignments"].push_back({{"job", 1}});
  });
  EXPECT_TRUE(Has(e, "assignments: more than " + std::to_string(kMaxReportContainers))) << e;
}

TEST(AgentProtocolTest, ReportsRefuseMistakesNamingThePath) {
  const Json good = Wire(ToJson(SampleReport()));
  const auto with = [&](const std::function<void(Json&)>& change) {
    Json j = good;
    change(j);
    return ErrorOf([&] { ParseReport(j); });
  };
  EXPECT_TRUE(Has(ErrorOf([] { ParseReport("report"); }), "expected an object"));
  std::string e = with([](Json& j) { j["appliedVersion"] = 1.5; });
  EXPECT_TRUE(Has(e, "appliedVersion: expected a version")) << e;
  e = with([](Json& j) { j["containers"] = "none"; });
  EXPECT_TRUE(Has(e, "containers: expected a list")) << e;
  e = with([](Json& j) { j["containers"][1].erase("job"); });
  EXPECT_TRUE(Has(e, "containers[1].job: missing")) << e;
  e = with([](Json& j) { j["containers"][0]["ioPressure"] = 101; });
  EXPECT_TRUE(Has(e, "containers[0].ioPressure: expected a number from -1 (unknown) to 100")) << e;
  e = with([](Json& j) { j["containers"][0]["ioReadBytes"] = 2e19; });
  EXPECT_TRUE(Has(e, "containers[0].ioReadBytes: expected a number from -1 (unknown) to 1e+19"))
      << e;
  e = with([](Json& j) { j["containers"][0]["state"] = "sleeping"; });
  EXPECT_TRUE(
      Has(e, "containers[0].state: expected starting, running, exited, failed or interrupted"))
      << e;
  EXPECT_TRUE(Has(e, "\"sleeping\"")) << e;
  e = with([](Json& j) { j["containers"][0].erase("state"); });
  EXPECT_TRUE(Has(e, "containers[0].state: expected starting")) << e;
  e = with([](Json& j) { j["containers"][0]["state"] = 1; });
  EXPECT_TRUE(Has(e, "containers[0].state: expected a string")) << e;
  e = with([](Json& j) { j["containers"][1]["exitCode"] = 256; });
  EXPECT_TRUE(Has(e, "containers[1].exitCode: expected an integer from 0 to 255")) << e;
  e = with([](Json& j) { j["containers"][1]["error"] = std::string(4097, 'e'); });
  EXPECT_TRUE(Has(e, "containers[1].error: longer than 4096 bytes")) << e;
  e = with([](Json& j) { j["containers"][0]["offGpus"] = std::string(kMaxOffGpusText + 1, 'x'); });
  EXPECT_TRUE(Has(e, "containers[0].offGpus: longer than 1024 bytes")) << e;
  e = with([](Json& j) { j["containers"][0]["phases"] = Json::array(); });
  EXPECT_TRUE(Has(e, "containers[0].phases: expected at most 8 named durations")) << e;
  e = with([](Json& j) { j["containers"][0]["phases"]["pull"] = "slow"; });
  EXPECT_TRUE(Has(e, "containers[0].phases.pull: expected seconds")) << e;
  // A long name was cut at byte 20, through the middle of its "é": the refusal, sent back as
  // JSON, was not UTF-8 (found by fuzz/agent_protocol_fuzz.cc).
  e = with([](Json& j) { j["containers"][0]["phases"]["aaaaaaaaaaaaaaaaaaa\xc3\xa9"] = 1; });
  EXPECT_TRUE(Has(e, "containers[0].phases: a phase name must be 1-20 letters, digits or '_'"))
      << e;
  EXPECT_NO_THROW((void)Json(e).dump()) << e;
  // A name with a space made the refusal read as if it named a field "containers[0].phases.crea
  // x" (found by fuzz/agent_protocol_fuzz.cc); such a name is no phase the agent reports.
  e = with([](Json& j) { j["containers"][0]["phases"]["crea x"] = "slow"; });
  EXPECT_TRUE(Has(e, "containers[0].phases: a phase name must be 1-20 letters")) << e;
  e = with([](Json& j) { j["containers"][0]["phases"][""] = 1; });
  EXPECT_TRUE(Has(e, "containers[0].phases: a phase name must be 1-20 letters")) << e;
  e = with([](Json& j) { j["containers"][0]["phases"]["pull"] = -1; });
  EXPECT_TRUE(Has(e, "containers[0].phases.pull: expected seconds (0 to 1e9)")) << e;
  e = with([](Json& j) {
    for (int i = 0; i < 9; ++i) j["containers"][0]["phases"]["p" + std::to_string(i)] = 1;
  });
  EXPECT_TRUE(Has(e, "containers[0].phases: expected at most 8")) << e;
  e = with([](Json& j) {
    j["containers"] = Json::array();
    for (size_t i = 0; i <= kMaxReportContainers; ++i)
      j["containers"].push_back({{"job", 1}, {"state", "running"}});
  });
  EXPECT_TRUE(Has(e, "containers: more than " + std::to_string(kMaxReportContainers))) << e;
  e = with([](Json& j) { j["logs"][0].erase("job"); });
  EXPECT_TRUE(Has(e, "logs[0].job: missing")) << e;
  e = with([](Json& j) { j["logs"][0]["text"] = 5; });
  EXPECT_TRUE(Has(e, "logs[0].text: expected a string")) << e;
  e = with([](Json& j) { j["logs"][0]["until"] = std::string(65, '9'); });
  EXPECT_TRUE(Has(e, "logs[0].until: longer than 64 bytes")) << e;
  // stderr spans: pairs inside the text, in order.
  for (const Json& spans : {Json::array({Json::array({0, 13})}), Json::array({Json::array({3, 3})}),
                            Json::array({Json::array({4, 6}), Json::array({5, 8})}),
                            Json::array({Json::array({-1, 2})}), Json::array({1, 2}),
                            Json::array({Json::array({1, 2, 3})})}) {
    e = with([&](Json& j) { j["logs"][0]["stderr"] = spans; });
    EXPECT_TRUE(Has(e, "logs[0].stderr[")) << spans << ": " << e;
    EXPECT_TRUE(Has(e, "from < to <= 12")) << spans << ": " << e;
  }
  e = with([](Json& j) {
    j["logs"][0]["stderr"] = Json::array();
    for (int i = 0; i <= 12; ++i) j["logs"][0]["stderr"].push_back({i, i + 1});
  });
  EXPECT_TRUE(Has(e, "logs[0].stderr: more than 12")) << e;
  e = with([](Json& j) {
    j["logs"] = Json::array();
    for (size_t i = 0; i <= kMaxReportContainers; ++i) j["logs"].push_back({{"job", 1}});
  });
  EXPECT_TRUE(Has(e, "logs: more than " + std::to_string(kMaxReportContainers))) << e;
}

TEST(AgentProtocolTest, AReportsLogTextIsBoundedInAllItsChunks) {
  // One chunk over the bound.
  Json j = Wire(ToJson(SampleReport()));
  j["logs"][0]["text"] = std::string(kMaxReportLogBytes + 1, 'x');
  std::string e = ErrorOf([&] { ParseReport(j); });
  EXPECT_TRUE(Has(e, "logs[0].text")) << e;
  // Each chunk under it, together over it: the chunk that passes it is named.
  j["logs"] = Json::array();
  const size_t third = kMaxReportLogBytes / 3 + 1;
  for (int i = 0; i < 3; ++i)
    j["logs"].push_back({{"job", 1}, {"placement", "p"}, {"text", std::string(third, 'x')}});
  e = ErrorOf([&] { ParseReport(j); });
  EXPECT_TRUE(Has(
      e, "logs[2].text: the report's logs pass " + std::to_string(kMaxReportLogBytes) + " bytes"))
      << e;
  // Exactly the bound is accepted.
  j["logs"] = Json::array();
  j["logs"].push_back({{"job", 1}, {"text", std::string(kMaxReportLogBytes / 2, 'x')}});
  j["logs"].push_back({{"job", 2}, {"text", std::string(kMaxReportLogBytes / 2, 'y')}});
  EXPECT_EQ(ParseReport(j).logs.size(), 2u);
}

// --- Timestamps --------------------------------------------------------------------------------

TEST(AgentProtocolTest, NormalizedTimestampPadsTheFractionToNineDigits) {
  EXPECT_EQ(NormalizedTimestamp("2026-12-02T03:40:46.8981Z"), "2026-12-02T03:40:46.898100000Z");
  EXPECT_EQ(NormalizedTimestamp("2026-12-02T03:40:46.898183200Z"),
            "2026-12-02T03:40:46.898183200Z");
  EXPECT_EQ(NormalizedTimestamp("2026-12-02T03:40:46Z"), "2026-12-02T03:40:46.000000000Z");
  EXPECT_EQ(NormalizedTimestamp("2026-12-02T03:40:46.Z"), "2026-12-02T03:40:46.000000000Z");
}

TEST(AgentProtocolTest, NormalizedTimestampRejectsJunk) {
  const std::vector<std::string> junks = {"",
                                          "now",
                                          "2026-12-02T03:40:46",
                                          "2026-12-02 03:40:46.1Z",
                                          "2026-12-02T03:40:46.1234567890Z",
                                          "2026-12-02T03:40:46,123Z",
                                          "2026-12-02T03:40:4x.123Z",
                                          "2026-12-02T03:40:46.12a4Z",
                                          "2026-12-02T03:40:46+01:00",
                                          "x026-12-02T03:40:46.1Z",
                                          "2026-12-02T03:40:46.1z"};
  for (const std::string& junk : junks) EXPECT_EQ(NormalizedTimestamp(junk), "") << junk;
}

TEST(AgentProtocolTest, PaddedTimestampsOrderAsTheirTimes) {
  // In time order; as the engine writes them (trailing zeros trimmed) they do not sort so:
  // ".9Z" sorts after ".89Z" and ".1Z" after "Z".
  const std::vector<std::string> in_order = {
      "2026-12-02T03:40:46Z",    "2026-12-02T03:40:46.000000001Z", "2026-12-02T03:40:46.1Z",
      "2026-12-02T03:40:46.12Z", "2026-12-02T03:40:46.8981Z",      "2026-12-02T03:40:46.89832Z",
      "2026-12-02T03:40:46.9Z",  "2026-12-02T03:40:47Z",           "2026-12-02T03:40:47.05Z"};
  std::vector<std::string> raw = in_order;
  std::sort(raw.begin(), raw.end());
  EXPECT_NE(raw, in_order);  // what padding is for
  for (size_t i = 0; i + 1 < in_order.size(); ++i) {
    const std::string a = NormalizedTimestamp(in_order[i]),
                      b = NormalizedTimestamp(in_order[i + 1]);
    ASSERT_FALSE(a.empty()) << in_order[i];
    EXPECT_LT(a, b) << in_order[i] << " vs " << in_order[i + 1];
  }
}

}  // namespace
}  // namespace berth
