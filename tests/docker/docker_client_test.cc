// The Docker client against a real engine: tests/docker/run_docker_tests.sh starts a private
// dockerd and passes its socket (BERTH_DOCKER_SOCK) and a busybox image (BERTH_TEST_IMAGE).
// Every test labels its containers with its own value of berth.test and removes them after.
#include "docker/docker_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

namespace berth {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;

TEST(CreateBodyTest, SendsWhatTheSpecSays) {
  ContainerSpec spec;
  spec.name = "job-1";
  spec.image = "img:1";
  spec.command = {"sh", "-c", "true"};
  spec.env = {"A=1"};
  spec.labels = {{"berth.job", "1"}};
  spec.mounts = {{"/data", "/in", true}, {"/scratch", "/out", false}};
  spec.shm_bytes = 1 << 30;
  spec.memory_bytes = int64_t{8} << 30;
  spec.nano_cpus = 4'000'000'000;
  spec.cpuset_cpus = "0-3";
  spec.cpuset_mems = "0";
  json body = json::parse(CreateBody(spec));
  EXPECT_EQ(body["Image"], "img:1");
  EXPECT_EQ(body["Cmd"], json({"sh", "-c", "true"}));
  EXPECT_EQ(body["Env"], json({"A=1"}));
  EXPECT_EQ(body["Labels"], json({{"berth.job", "1"}}));
  EXPECT_FALSE(body.contains("name"));
  const json& host = body["HostConfig"];
  EXPECT_EQ(host["Binds"], json({"/data:/in:ro", "/scratch:/out"}));
  EXPECT_EQ(host["ShmSize"], 1 << 30);
  EXPECT_EQ(host["Memory"], int64_t{8} << 30);
  EXPECT_EQ(host["NanoCpus"], 4'000'000'000);
  EXPECT_EQ(host["CpusetCpus"], "0-3");
  EXPECT_EQ(host["CpusetMems"], "0");
  EXPECT_FALSE(host.contains("DeviceRequests"));

  spec.gpu_device_ids = {"GPU-x", "MIG-y"};
  json requests = json::parse(CreateBody(spec))["HostConfig"]["DeviceRequests"];
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["Driver"], "nvidia");
  EXPECT_EQ(requests[0]["DeviceIDs"], json({"GPU-x", "MIG-y"}));
  EXPECT_EQ(requests[0]["Capabilities"], json::parse(R"([["gpu"]])"));
  EXPECT_EQ(requests[0]["Count"], 0);
}

TEST(CreateBodyTest, LeavesUnsetFieldsToTheEngine) {
  ContainerSpec spec;
  spec.image = "img:1";
  json body = json::parse(CreateBody(spec));
  EXPECT_EQ(body, json::parse(R"({"Image": "img:1", "HostConfig": {}})"));
}

TEST(EngineSecondsTest, ReadsTheEnginesTimesAndNothingElse) {
  EXPECT_DOUBLE_EQ(EngineSeconds("2026-12-02T13:40:01Z"), 1796218801);
  EXPECT_DOUBLE_EQ(EngineSeconds("2026-12-02T13:40:01.250000000Z"), 1796218801.25);
  EXPECT_DOUBLE_EQ(EngineSeconds("2026-12-02T13:40:01.5Z"), 1796218801.5);
  EXPECT_EQ(EngineSeconds("0001-01-01T00:00:00Z"), 0);  // unset
  for (const char* bad : {"", "2026-12-02", "2026-12-02T13:40:01", "2026-12-02T13:40:01.5",
                          "2026-12-02T13:40:01+01:00", "2026-12-02T13:40:01.5Zjunk", "junk"})
    EXPECT_EQ(EngineSeconds(bad), 0) << bad;
}

TEST(SafeStopTest, StopsOnlyWhereEveryLineLeftIsLaterThanEveryLineTaken) {
  const auto lines = [](std::vector<std::string> stamps) {
    std::vector<LogLine> out;
    for (std::string& t : stamps) out.push_back({false, std::move(t), "x\n"});
    return out;
  };
  // In order: anywhere between two timestamps, not inside one (the engine's 16 KiB pieces).
  const auto ordered = lines({"2026-12-04T10:00:00.1Z", "2026-12-04T10:00:00.2Z",
                              "2026-12-04T10:00:00.2Z", "2026-12-04T10:00:00.3Z"});
  EXPECT_EQ(SafeStop(ordered, 4), 4u);
  EXPECT_EQ(SafeStop(ordered, 3), 3u);
  EXPECT_EQ(SafeStop(ordered, 2), 1u);
  EXPECT_EQ(SafeStop(ordered, 1), 1u);
  EXPECT_EQ(SafeStop(ordered, 0), 0u);
  EXPECT_EQ(SafeStop(ordered, 99), 4u);
  // The other stream's line stamped earlier comes after: no stop between them.
  const auto merged = lines({"2026-12-04T10:00:00.1Z", "2026-12-04T10:00:00.5Z",
                             "2026-12-04T10:00:00.30Z", "2026-12-04T10:00:00.6Z"});
  EXPECT_EQ(SafeStop(merged, 3), 3u);
  EXPECT_EQ(SafeStop(merged, 2), 1u);
  // Trimmed zeros compare as times, not as text ("00Z" sorts after "00.1Z").
  EXPECT_EQ(SafeStop(lines({"2026-12-04T10:00:00Z", "2026-12-04T10:00:00.1Z"}), 1), 1u);
  // A line without a stamp binds nothing.
  EXPECT_EQ(SafeStop(lines({"2026-12-04T10:00:00.1Z", "", "2026-12-04T10:00:00.2Z"}), 2), 2u);
}

TEST(DockerClientTest, UnreachableEngineNamesTheSocket) {
  DockerClient docker("/nonexistent/docker.sock");
  try {
    docker.Negotiate();
    FAIL() << "no error";
  } catch (const DockerError& e) {
    EXPECT_EQ(e.status, 0);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/docker.sock"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("is dockerd running?"), std::string::npos);
  }
}

class EngineTest : public testing::Test {
 protected:
  void SetUp() override {
    const char* sock = getenv("BERTH_DOCKER_SOCK");
    const char* image = getenv("BERTH_TEST_IMAGE");
    if (!sock || !image)
      GTEST_SKIP() << "needs an engine: bash tests/docker/run_docker_tests.sh BINARY";
    docker_ = std::make_unique<DockerClient>(sock);
    image_ = image;
    label_ =
        "berth.test=" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) +
        "-" + std::to_string(getpid());
  }

  void TearDown() override {
    if (!docker_) return;
    for (const ContainerInfo& c : docker_->List(label_)) docker_->Remove(c.id, true);
  }

  // A container of the test image running `sh -c script`, labelled as this test's.
  ContainerSpec Spec(const std::string& script) {
    ContainerSpec spec;
    spec.image = image_;
    spec.command = {"sh", "-c", script};
    size_t eq = label_.find('=');
    spec.labels = {{label_.substr(0, eq), label_.substr(eq + 1)}};
    return spec;
  }

  std::string Run(const ContainerSpec& spec) {
    std::string id = docker_->Create(spec);
    docker_->Start(id);
    return id;
  }

  ContainerInfo WaitExited(const std::string& id) {
    auto deadline = steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      ContainerInfo c = docker_->Inspect(id);
      if (c.status == "exited" || steady_clock::now() > deadline) return c;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  static std::vector<std::string> Texts(const std::vector<LogLine>& lines) {
    std::vector<std::string> texts;
    for (const LogLine& l : lines) texts.push_back(l.text);
    return texts;
  }

  std::unique_ptr<DockerClient> docker_;
  std::string image_, label_;
};

TEST_F(EngineTest, NegotiatesAVersionBothSpeak) {
  std::string engine;
  std::string version = docker_->Negotiate(&engine);
  int major = 0, minor = 0;
  ASSERT_EQ(sscanf(version.c_str(), "%d.%d", &major, &minor), 2) << version;
  EXPECT_EQ(major, 1);
  EXPECT_GE(minor, 24);
  EXPECT_LE(minor, 43);
  EXPECT_FALSE(engine.empty());
}

// Every client of one engine names it alike (a replaced agent compares them: the fleet test
// has two engines whose IDs are alike and whose identities differ).
TEST_F(EngineTest, AnEnginesIdentityIsTheSameForEachOfItsClients) {
  const std::string identity = docker_->EngineIdentity();
  EXPECT_EQ(identity.size(), 16u) << identity;
  EXPECT_EQ(identity.find_first_not_of("0123456789abcdef"), std::string::npos) << identity;
  DockerClient other(std::getenv("BERTH_DOCKER_SOCK"));
  EXPECT_EQ(other.EngineIdentity(), identity);
}

TEST_F(EngineTest, RunsAContainerAndReadsItsState) {
  ContainerSpec spec = Spec("echo out; echo err >&2; exit 3");
  spec.name = "berth-test-" + std::to_string(getpid());
  spec.env = {"GREETING=hi"};
  spec.cpuset_cpus = "0";
  spec.memory_bytes = 64 << 20;
  spec.shm_bytes = 16 << 20;
  std::string id = Run(spec);
  ContainerInfo c = WaitExited(id);
  EXPECT_EQ(c.status, "exited");
  EXPECT_FALSE(c.running);
  EXPECT_EQ(c.exit_code, 3);
  EXPECT_FALSE(c.oom_killed);
  EXPECT_EQ(c.id, id);
  EXPECT_EQ(c.name, spec.name);
  EXPECT_EQ(c.image, image_);
  EXPECT_EQ(c.labels, spec.labels);
  EXPECT_EQ(c.cpuset_cpus, "0");
  EXPECT_FALSE(c.started_at.empty());
  EXPECT_FALSE(c.finished_at.empty());
  EXPECT_FALSE(c.tty);

  std::vector<LogLine> lines = docker_->Logs(id, "", 1 << 20);
  ASSERT_EQ(lines.size(), 2u);
  std::regex stamp(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)");
  for (const LogLine& l : lines) {
    EXPECT_TRUE(std::regex_match(l.timestamp, stamp)) << l.timestamp;
    EXPECT_EQ(l.text, l.stderr_stream ? "err\n" : "out\n");
  }
  EXPECT_NE(lines[0].stderr_stream, lines[1].stderr_stream);
}

TEST_F(EngineTest, CreateNamesTheEnginesRefusal) {
  ContainerSpec spec = Spec("true");
  spec.image = "berth-no-such-image:1";
  try {
    docker_->Create(spec);
    FAIL() << "no error";
  } catch (const DockerError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_NE(std::string(e.what()).find("docker: POST /v"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such image: berth-no-such-image:1"), std::string::npos)
        << e.what();
  }
}

// The agent names each run's container so that a create tried again meets the first (409)
// and can find it by name.
TEST_F(EngineTest, ASecondCreateOfANameIsRefusedAndTheFirstFoundByIt) {
  ContainerSpec spec = Spec("true");
  spec.name = "berth-test-named-" + std::to_string(::getpid());
  const std::string id = docker_->Create(spec);
  try {
    docker_->Create(spec);
    FAIL() << "a second container with the same name";
  } catch (const DockerError& e) {
    EXPECT_EQ(e.status, 409) << e.what();
  }
  const ContainerInfo found = docker_->Inspect(spec.name);
  EXPECT_EQ(found.id, id);
  EXPECT_EQ(found.status, "created");
  EXPECT_EQ(docker_->List(label_).size(), 1u);
}

TEST_F(EngineTest, PassesEnvAndMounts) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("berth-docker-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "ro");
  std::filesystem::create_directories(dir / "rw");
  std::ofstream(dir / "ro" / "in") << "data\n";
  ContainerSpec spec =
      Spec("echo $GREETING; cat /in/in; echo x > /in/y || echo refused; echo z > /out/z");
  spec.env = {"GREETING=hi"};
  spec.mounts = {{(dir / "ro").string(), "/in", true}, {(dir / "rw").string(), "/out", false}};
  std::string id = Run(spec);
  EXPECT_EQ(WaitExited(id).exit_code, 0);
  std::vector<std::string> out;
  for (const LogLine& l : docker_->Logs(id, "", 1 << 20))
    if (!l.stderr_stream) out.push_back(l.text);
  EXPECT_EQ(out, (std::vector<std::string>{"hi\n", "data\n", "refused\n"}));
  EXPECT_TRUE(std::filesystem::exists(dir / "rw" / "z"));
  EXPECT_FALSE(std::filesystem::exists(dir / "ro" / "y"));
  std::filesystem::remove_all(dir);
}

TEST_F(EngineTest, LogsAfterATimestampAndWithinABound) {
  std::string id = Run(Spec("for i in 1 2 3 4 5; do echo line$i; done; printf last"));
  WaitExited(id);
  std::vector<LogLine> all = docker_->Logs(id, "", 1 << 20);
  ASSERT_EQ(Texts(all), (std::vector<std::string>{"line1\n", "line2\n", "line3\n", "line4\n",
                                                  "line5\n", "last"}));

  // After the first line's timestamp: the lines stamped later.
  std::vector<std::string> later;
  for (const LogLine& l : all)
    if (l.timestamp != all[0].timestamp) later.push_back(l.text);
  EXPECT_EQ(Texts(docker_->Logs(id, all[0].timestamp, 1 << 20)), later);
  EXPECT_TRUE(docker_->Logs(id, all.back().timestamp, 1 << 20).empty());

  // Timestamps compare as times, not text: ".1Z" is before ".123456789Z" though it sorts
  // after it as text, and +00:00 is Z.
  std::string first = all[0].timestamp;
  std::string shorter = first.substr(0, first.find('.') + 2) + "Z";
  if (shorter.substr(0, shorter.size() - 1) + std::string(8, '0') + "Z" != first) {
    EXPECT_EQ(docker_->Logs(id, shorter, 1 << 20).size(), all.size()) << shorter;
  }
  std::string offset = first.substr(0, first.size() - 1) + "+00:00";
  EXPECT_EQ(Texts(docker_->Logs(id, offset, 1 << 20)), later);
  EXPECT_THROW(docker_->Logs(id, "yesterday", 1 << 20), std::invalid_argument);

  // Whole lines up to max_bytes, and whole timestamps: a read stopped by its bound ends
  // before the timestamp it stopped in, so reading on from its last line's misses none.
  bool more = false;
  const std::vector<LogLine> part = docker_->Logs(id, "", 14, &more);
  EXPECT_TRUE(more);
  ASSERT_LT(part.size(), all.size());
  size_t bytes = 0;
  for (size_t i = 0; i < part.size(); ++i) {
    EXPECT_EQ(part[i].text, all[i].text);
    bytes += part[i].text.size();
  }
  EXPECT_LE(bytes, 14u);
  if (!part.empty()) {
    EXPECT_NE(part.back().timestamp, all[part.size()].timestamp);
  }
  docker_->Logs(id, "", 1 << 20, &more);
  EXPECT_FALSE(more);
  // A line longer than all of the bound is cut, or with cut false not given at all.
  EXPECT_EQ(Texts(docker_->Logs(id, "", 6)), std::vector<std::string>{"line1\n"});
  EXPECT_EQ(Texts(docker_->Logs(id, "", 3)), std::vector<std::string>{"lin"});
  EXPECT_TRUE(docker_->Logs(id, "", 3, &more, false).empty());
  EXPECT_TRUE(more);
}

TEST_F(EngineTest, LogsAfterATimestampFarFromTheEndMissNothing) {
  // More lines after the cursor than a read from the log's end asks for: those are read from
  // the log's start, and a cursor near the end gets only the lines after it.
  std::string id = Run(Spec("i=0; while [ $i -lt 6000 ]; do i=$((i+1)); echo $i; done"));
  WaitExited(id);
  const std::vector<LogLine> all = docker_->Logs(id, "", 1 << 20);
  ASSERT_EQ(all.size(), 6000u);
  for (size_t cursor : {9, 1500, 5989}) {
    std::vector<std::string> after;
    for (size_t i = cursor + 1; i < all.size(); ++i)
      if (all[i].timestamp != all[cursor].timestamp) after.push_back(all[i].text);
    bool more = true;
    EXPECT_EQ(Texts(docker_->Logs(id, all[cursor].timestamp, 1 << 20, &more)), after) << cursor;
    EXPECT_FALSE(more);
    // Bounded: the first lines after the cursor, not the last.
    const std::vector<LogLine> some = docker_->Logs(id, all[cursor].timestamp, 40, &more);
    ASSERT_FALSE(some.empty());
    EXPECT_EQ(some.front().text, after.front()) << cursor;
    EXPECT_TRUE(more);
  }
}

TEST_F(EngineTest, BoundedReadsFromTheCursorMissNoLineOfEitherStream) {
  // stdout and stderr reach the log apart, so their stamps are not in the log's order: a read
  // that stops at its bound must not end past a line, beyond the bound, stamped earlier than
  // one it gives (the cursor would step over it). Both streams write at once here.
  std::string id = Run(Spec("seq 1 60000 & seq 100001 160000 >&2; wait"));
  WaitExited(id);
  // The engine's stamps drop trailing zeros: as fixed-width text they compare as times.
  const auto as_key = [](const std::string& ts) {
    std::string fraction = ts.size() > 20 ? ts.substr(20, ts.size() - 21) : "";
    fraction.resize(9, '0');
    return ts.substr(0, 19) + "." + fraction;
  };
  std::multiset<std::string> expected;
  for (const LogLine& l : docker_->Logs(id, "", 64 << 20)) expected.insert(l.text);
  ASSERT_EQ(expected.size(), 120000u);
  std::multiset<std::string> read;
  std::string cursor;
  for (bool more = true; more;) {
    const std::vector<LogLine> part = docker_->Logs(id, cursor, 64 << 10, &more);
    ASSERT_FALSE(part.empty()) << "no progress after " << cursor;
    for (const LogLine& l : part) {
      read.insert(l.text);
      if (cursor.empty() || as_key(l.timestamp) > as_key(cursor)) cursor = l.timestamp;
    }
  }
  EXPECT_EQ(read.size(), expected.size());
  std::vector<std::string> missing;
  std::set_difference(expected.begin(), expected.end(), read.begin(), read.end(),
                      std::back_inserter(missing));
  EXPECT_TRUE(missing.empty()) << missing.size() << " lines missed, the first " << missing[0];
}

TEST_F(EngineTest, LogsOfATtyContainerAreOneStream) {
  // The client has no Tty option (jobs need none); docker's own CLI makes one here.
  ASSERT_EQ(
      system(("docker -H unix://" + std::string(getenv("BERTH_DOCKER_SOCK")) + " run -t --label " +
              label_ + " " + image_ + " sh -c 'echo out; echo err >&2' > /dev/null")
                 .c_str()),
      0);
  std::vector<ContainerInfo> list = docker_->List(label_);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_TRUE(list[0].tty);
  std::vector<LogLine> lines = docker_->Logs(list[0].id, "", 1 << 20);
  EXPECT_EQ(Texts(lines), (std::vector<std::string>{"out\r\n", "err\r\n"}));
  for (const LogLine& l : lines) EXPECT_FALSE(l.stderr_stream);
}

TEST_F(EngineTest, CreatesWithADeviceRequest) {
  // The engine takes the request at create; starting needs the NVIDIA runtime's hook and the
  // GPU, which no test machine is sure to have ("could not select device driver").
  ContainerSpec spec = Spec("true");
  spec.gpu_device_ids = {"GPU-x"};
  std::string id = docker_->Create(spec);
  EXPECT_EQ(docker_->Inspect(id).status, "created");
}

TEST_F(EngineTest, ListsByLabel) {
  std::string a = docker_->Create(Spec("true"));
  std::string b = Run(Spec("exit 3"));
  WaitExited(b);
  std::string d = Run(Spec("exec sleep 1000"));
  ContainerSpec other = Spec("true");
  other.labels.begin()->second += "-other";
  std::string c = docker_->Create(other);
  std::vector<std::string> ids;
  for (const ContainerInfo& info : docker_->List(label_)) {
    ids.push_back(info.id);
    // Each as the engine has it, whether listed (created, running) or inspected (stopped).
    EXPECT_EQ(info.image, image_);
    EXPECT_EQ(info.labels, Spec("").labels);
    EXPECT_FALSE(info.name.empty());
    EXPECT_EQ(info.status, info.id == a ? "created" : info.id == b ? "exited" : "running");
    EXPECT_EQ(info.running, info.id == d);
    EXPECT_EQ(info.exit_code, info.id == b ? 3 : 0);
  }
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want = {a, b, d};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);
  EXPECT_EQ(docker_->List(label_.substr(0, label_.find('='))).size() >= 3, true);
  docker_->Remove(c, true);
}

TEST_F(EngineTest, WaitsForAContainerToExit) {
  // Nothing of this label runs: the wait ends empty-handed after its second or two.
  int64_t after = 0;
  EXPECT_FALSE(docker_->WaitForExit(label_, 1, &after));
  EXPECT_GT(after, 0);  // from the first call on
  // One exits after half a second: the wait ends then, not at its 10 s.
  Run(Spec("sleep 0.5"));
  const auto start = steady_clock::now();
  EXPECT_TRUE(docker_->WaitForExit(label_, 10, &after));
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(8));
  // That exit counts once: the next wait (in the same second) sees nothing new. Counted again,
  // an agent would spin on it for the rest of the second.
  EXPECT_FALSE(docker_->WaitForExit(label_, 1, &after));
  // One that exits between two waits is not missed.
  const std::string quick = Run(Spec("true"));
  WaitExited(quick);
  EXPECT_TRUE(docker_->WaitForExit(label_, 5, &after));
  // Another label's exit does not count.
  ContainerSpec other = Spec("true");
  other.labels.begin()->second += "-other";
  const std::string c = docker_->Create(other);
  docker_->Start(c);
  WaitExited(c);
  int64_t fresh = 0;
  EXPECT_FALSE(docker_->WaitForExit(label_ + "-nothing", 1, &fresh));
  docker_->Remove(c, true);
}

TEST_F(EngineTest, AWaitSaysWhichContainersTheEngineSignalled) {
  const std::string c = Run(Spec("trap 'exit 0' TERM; while true; do sleep 0.1; done"));
  int64_t after = 0;
  EngineEventsSeen seen;
  EXPECT_FALSE(docker_->WaitForExit(label_, 1, &after, &seen));
  EXPECT_TRUE(seen.signalled.empty());
  EXPECT_GE(seen.until_ns, after);  // the whole wait was seen
  docker_->Stop(c, 10);
  // The stop's SIGTERM comes before the exit that ends the wait.
  seen = {};
  const int64_t before = after;
  EXPECT_TRUE(docker_->WaitForExit(label_, 10, &after, &seen));
  ASSERT_EQ(seen.signalled.size(), 1u);
  EXPECT_EQ(seen.signalled[0].container, c);
  EXPECT_EQ(seen.signalled[0].signal, 15);  // SIGTERM
  EXPECT_GT(seen.signalled[0].at_ns, before);
  EXPECT_LE(seen.signalled[0].at_ns, after);
  EXPECT_EQ(seen.until_ns, after);  // up to the exit
  // On the engine's clock, as the container's end is.
  EXPECT_NEAR(EngineSeconds(docker_->Inspect(c).finished_at), seen.signalled[0].at_ns / 1e9, 5);
  // Seen once.
  seen = {};
  EXPECT_FALSE(docker_->WaitForExit(label_, 1, &after, &seen));
  EXPECT_TRUE(seen.signalled.empty());
  docker_->Remove(c, true);
}

TEST_F(EngineTest, StopsWithinTheGrace) {
  // sleep as PID 1 has no handler for SIGTERM: killed when the grace is over.
  std::string stubborn = Run(Spec("exec sleep 1000"));
  std::string polite = Run(Spec("trap 'exit 0' TERM; while true; do sleep 0.1; done"));
  docker_->Start(stubborn);                                     // already running: no error
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the trap is set
  auto start = steady_clock::now();
  docker_->Stop(stubborn, 1);
  docker_->Stop(polite, 5);
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
  ContainerInfo s = docker_->Inspect(stubborn), p = docker_->Inspect(polite);
  EXPECT_FALSE(s.running);
  EXPECT_EQ(s.exit_code, 137);
  EXPECT_FALSE(p.running);
  EXPECT_EQ(p.exit_code, 0);
  docker_->Stop(stubborn, 1);  // already stopped: no error
}

TEST_F(EngineTest, RemovesOnceAndAgain) {
  std::string id = Run(Spec("exec sleep 1000"));
  docker_->Remove(id, true);
  try {
    docker_->Inspect(id);
    FAIL() << "no error";
  } catch (const DockerError& e) {
    EXPECT_EQ(e.status, 404);
  }
  docker_->Remove(id, true);
  docker_->Remove(id, false);
}

TEST_F(EngineTest, UpdatesTheCpusetOfARunningContainer) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs 2 CPUs";
  ContainerSpec spec = Spec("exec sleep 1000");
  spec.cpuset_cpus = "0";
  std::string id = Run(spec);
  docker_->UpdateCpuset(id, "1", "0");
  ContainerInfo c = docker_->Inspect(id);
  EXPECT_TRUE(c.running);
  EXPECT_EQ(c.cpuset_cpus, "1");
  EXPECT_EQ(c.cpuset_mems, "0");
}

TEST_F(EngineTest, InspectsImages) {
  ImageInfo image = docker_->InspectImage(image_);
  EXPECT_EQ(image.id.rfind("sha256:", 0), 0u);
  EXPECT_EQ(image.names, std::vector<std::string>{image_});  // built here: no digest
  EXPECT_GT(image.bytes, 0);
  ASSERT_GE(image.layers.size(), 1u);
  int64_t sum = 0;
  for (const ImageLayer& l : image.layers) {
    EXPECT_EQ(l.digest.rfind("sha256:", 0), 0u);
    sum += l.bytes;
  }
  EXPECT_GT(sum, 0);
  EXPECT_TRUE(docker_->HasImage(image_));
  EXPECT_FALSE(docker_->HasImage("berth-no-such-image:1"));
  EXPECT_THROW(docker_->InspectImage("berth-no-such-image:1"), DockerError);
  bool listed = false;
  for (const ImageInfo& i : docker_->Images())
    listed |= i.id == image.id && i.layers.size() == image.layers.size();
  EXPECT_TRUE(listed);
}

TEST_F(EngineTest, PullWithoutARegistryFails) {
  // Nothing listens on port 1: the engine's refusal comes at once.
  std::vector<std::string> progress;
  try {
    docker_->Pull("127.0.0.1:1/berth/none:1",
                  [&](const std::string& line) { progress.push_back(line); });
    FAIL() << "no error";
  } catch (const DockerError& e) {
    EXPECT_NE(e.status, 0);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace berth
