#include "config/berth_trace.h"

#include <gtest/gtest.h>

#include <string>

#include "config/cluster_file.h"
#include "config/limits.h"
#include "config_test_util.h"

namespace berth {
namespace {

const Cluster& MultiRack() {
  static const Cluster cluster =
      LoadClusterFile(std::string(BERTH_SOURCE_DIR) + "/examples/multi-rack.yaml");
  return cluster;
}

BerthTrace Parse(const std::string& text, const std::vector<QueueSpec>& given = {}) {
  return ParseBerthTraceYaml(text, "trace.yaml", MultiRack(), given);
}

// Expects the trace to fail at the line of `marker` with every one of `parts`.
::testing::AssertionResult FailsAt(const std::string& text, const std::string& marker,
                                   std::initializer_list<std::string> parts) {
  return ThrowsConfigErrorAtLine([&] { Parse(text); }, "trace.yaml", LineOf(text, marker), parts);
}

TEST(BerthTraceTest, EveryField) {
  const BerthTrace t = Parse(R"(
queues:
  a: {weight: 3, cap: 40, modelCaps: {L40S: 8}, guarantees: {dgx-a100/node: 2},
      lendingLimit: {dgx-a100/node: 1}}
  b:
    virtualCells: [{cellType: L40S, cellNumber: 2}]
  c:
jobs:
  - name: train
    queue: a
    user: u1
    priorityClass: prod
    qos: guaranteed
    submit: 10
    duration: 3600.5
    workload: vgg16
    minReplicas: 2
    spread: [{topologyKey: rack, maxSkew: 1}, {topologyKey: node, whenUnsatisfiable: ScheduleAnyway}]
    gangAffinity: rack
    preemptible: false
    gracePeriodSeconds: 120
    groups:
      - {name: workers, replicas: 3, gpus: 8, cpuMilli: 32000, memoryMiB: 65536, affinity: node,
         gpuModels: [A100-80GB], nodeSelector: {pool: train}, image: "registry/train:1"}
      - {name: ps, cpuMilli: 4000}
  - {name: share, submit: 0, duration: 60, gpuMilli: 500, gpuMemoryMiB: 20000, priority: -1}
  - {name: whole, queue: b, submit: 0, duration: 60, gpuMilli: 1000}
  - {name: slice, queue: c, submit: 5, duration: 60, migProfile: 3g.40gb}
events:
  - {at: 100, cordon: dgx-a-0}
  - {at: 200, failGpu: {node: dgx-a-1, gpu: 7}}
  - {at: 300, recover: {node: dgx-a-1, gpu: 7}}
  - {at: 400, failNode: pcie-c-0}
  - {at: 500, recover: pcie-c-0}
  - {at: 600, uncordon: dgx-a-0}
  - {at: 700, drain: dgx-b-0}
  - {at: 800, cancel: train}
)");
  ASSERT_EQ(t.queues.size(), 3u);
  EXPECT_EQ(t.queues[0].name, "a");
  EXPECT_EQ(t.queues[0].weight, 3);
  EXPECT_EQ(t.queues[0].cap_gpus, 40);
  ASSERT_EQ(t.queues[0].guarantees.size(), 1u);
  EXPECT_EQ(t.queues[0].guarantees[0].cell_type, "dgx-a100/node");
  EXPECT_EQ(t.queues[0].guarantees[0].lending_limit, 1);
  EXPECT_EQ(t.queues[0].model_caps.at("L40S"), 8);
  EXPECT_EQ(t.queues[1].guarantees[0].count, 2);
  EXPECT_EQ(t.queues[2].weight, 1);
  EXPECT_LT(t.queues[2].cap_gpus, 0);
  EXPECT_TRUE(t.queues[2].guarantees.empty());

  ASSERT_EQ(t.jobs.size(), 4u);
  const ReplayJob& train = t.jobs[0];
  EXPECT_EQ(train.spec.name, "train");
  EXPECT_EQ(train.spec.queue, "a");
  EXPECT_EQ(train.spec.user, "u1");
  EXPECT_EQ(train.spec.priority_class, "prod");
  EXPECT_EQ(train.spec.qos, QosClass::kGuaranteed);
  EXPECT_EQ(train.submit, 10);
  EXPECT_EQ(train.duration, 3600.5);
  EXPECT_EQ(train.comm, CommIntensity("vgg16"));
  EXPECT_EQ(train.spec.min_replicas, 2);
  ASSERT_EQ(train.spec.spread.size(), 2u);
  EXPECT_EQ(train.spec.spread[0].topology_key, "rack");
  EXPECT_TRUE(train.spec.spread[0].hard);
  EXPECT_FALSE(train.spec.spread[1].hard);
  EXPECT_EQ(train.spec.gang_affinity, Level::kRack);
  EXPECT_FALSE(train.spec.preemptible);
  EXPECT_EQ(train.spec.grace_period_s, 120);
  ASSERT_EQ(train.spec.groups.size(), 2u);
  const TaskGroup& workers = train.spec.groups[0];
  EXPECT_EQ(workers.name, "workers");
  EXPECT_EQ(workers.replicas, 3);
  EXPECT_EQ(workers.demand.gpus, 8);
  EXPECT_EQ(workers.demand.cpu_milli, 32000);
  EXPECT_EQ(workers.demand.memory_mib, 65536);
  EXPECT_EQ(workers.demand.affinity, Level::kNode);
  EXPECT_EQ(workers.demand.models, std::vector<std::string>{"A100-80GB"});
  EXPECT_EQ(workers.node_selector.at("pool"), "train");
  EXPECT_EQ(workers.image, "registry/train:1");
  EXPECT_EQ(train.spec.groups[1].replicas, 1);
  EXPECT_EQ(train.spec.groups[1].demand.gpus, 0);

  const ReplayJob& share = t.jobs[1];
  EXPECT_EQ(share.spec.queue, "");  // the first queue
  EXPECT_EQ(share.spec.priority, -1);
  EXPECT_EQ(share.spec.groups[0].demand.gpu_milli, 500);
  EXPECT_EQ(share.spec.groups[0].demand.gpu_memory_mib, 20000);
  // 1000 thousandths of a GPU is the whole GPU: the allocator takes shares of 1..999 only.
  EXPECT_EQ(t.jobs[2].spec.groups[0].demand.gpus, 1);
  EXPECT_EQ(t.jobs[2].spec.groups[0].demand.gpu_milli, 0);
  EXPECT_EQ(t.jobs[2].spec.priority, 100);  // the default class's
  EXPECT_EQ(t.jobs[3].spec.groups[0].demand.mig_profile, "3g.40gb");

  using Kind = ReplayEvent::Kind;
  ASSERT_EQ(t.events.size(), 8u);
  const int a0 = 0, a1 = 1;  // dgx-a-0, dgx-a-1: the first nodes of rack-a
  EXPECT_EQ(MultiRack().nodes[a0].name, "dgx-a-0");
  EXPECT_EQ(t.events[0].kind, Kind::kCordon);
  EXPECT_EQ(t.events[0].node, a0);
  EXPECT_EQ(t.events[0].time, 100);
  EXPECT_EQ(t.events[1].kind, Kind::kFailGpu);
  EXPECT_EQ(t.events[1].node, a1);
  EXPECT_EQ(t.events[1].gpu, 7);
  EXPECT_EQ(t.events[2].kind, Kind::kRecoverGpu);
  EXPECT_EQ(t.events[3].kind, Kind::kFailNode);
  EXPECT_EQ(MultiRack().nodes[t.events[3].node].name, "pcie-c-0");
  EXPECT_EQ(t.events[4].kind, Kind::kRecoverNode);
  EXPECT_EQ(t.events[5].kind, Kind::kUncordon);
  EXPECT_EQ(t.events[6].kind, Kind::kDrain);
  EXPECT_EQ(t.events[7].kind, Kind::kCancel);
  EXPECT_EQ(t.events[7].job, 0);
}

TEST(BerthTraceTest, QueuesFromElsewhere) {
  const std::string jobs = "jobs: [{name: j, queue: research, submit: 0, duration: 1}]\n";
  const BerthTrace t = Parse(jobs, {{"research", 1, -1, {}}, {"dev", 1, -1, {}}});
  ASSERT_EQ(t.queues.size(), 2u);
  EXPECT_EQ(t.jobs[0].spec.queue, "research");
  // Without queues anywhere, one default queue.
  EXPECT_EQ(Parse("jobs: [{name: j, submit: 0, duration: 1}]\n").queues[0].name, "default");
  EXPECT_TRUE(FailsAt("jobs: []\n", "jobs", {"jobs: expected at least one job"}));
  const std::string both = "queues: {a: }\n" + jobs;
  EXPECT_TRUE(ThrowsConfigError(
      [&] {
        Parse(both, {{"research", 1, -1, {}}});
      },
      "trace.yaml:1:9: ", {"queues: ", "give them in one place"}));
}

TEST(BerthTraceTest, Errors) {
  const std::string head = "jobs:\n";
  auto job = [&](const std::string& fields) {
    return head + "  - {name: j, submit: 0, duration: 60, " + fields + "}\n";
  };
  EXPECT_TRUE(FailsAt("jobs: [{name: j, submit: 0, duration: 1}]\nnodes: []\n", "nodes",
                      {"unknown field \"nodes\"", "known fields: events, jobs, queues"}));
  EXPECT_TRUE(FailsAt("queues: {a: }\n", "queues", {"missing required field \"jobs\""}));
  EXPECT_TRUE(FailsAt(job("colour: red"), "colour", {"jobs[0]", "unknown field \"colour\""}));
  EXPECT_TRUE(FailsAt(head + "  - {name: j, duration: 60}\n", "name: j",
                      {"jobs[0]", "missing required field \"submit\""}));
  EXPECT_TRUE(FailsAt(job("gpus: 0"), "gpus", {"jobs[0].gpus", "expected an integer from 1"}));
  EXPECT_TRUE(FailsAt(head + "  - {name: j, submit: -1, duration: 60}\n", "-1",
                      {"jobs[0].submit", "expected a number from 0 to"}));
  EXPECT_TRUE(FailsAt(head + "  - {name: j, submit: 0, duration: 0}\n", "duration",
                      {"jobs[0].duration", "expected a number > 0"}));
  EXPECT_TRUE(FailsAt(job("gpuMilli: 1001"), "gpuMilli",
                      {"jobs[0].gpuMilli", "expected an integer from 1 to 1000"}));
  EXPECT_TRUE(FailsAt(job("gpus: 1, gpuMilli: 500"), "name: j",
                      {"jobs[0]", "give one of gpus", "not several"}));
  EXPECT_TRUE(FailsAt(job("gpus: 1, gpuMemoryMiB: 100"), "gpuMemoryMiB",
                      {"jobs[0].gpuMemoryMiB", "goes with a share"}));
  EXPECT_TRUE(FailsAt(job("queue: nope"), "nope",
                      {"jobs[0].queue", "unknown queue \"nope\"", "queues: default"}));
  EXPECT_TRUE(FailsAt(job("priority: 5, priorityClass: prod"), "name: j",
                      {"jobs[0].priorityClass", "give priority or priorityClass, not both"}));
  EXPECT_TRUE(FailsAt(job("qos: gold"), "gold", {"jobs[0].qos", "unknown QoS class"}));
  EXPECT_TRUE(FailsAt(job("affinity: row"), "row",
                      {"jobs[0].affinity", "unknown level \"row\"", "known levels: gpu"}));
  EXPECT_TRUE(FailsAt(job("gpuModels: [H100]"), "H100",
                      {"jobs[0].gpuModels[0]", "no GPU model \"H100\"", "A100-80GB, L40S"}));
  EXPECT_TRUE(FailsAt(
      job("migProfile: 9g.90gb"), "9g",
      {"jobs[0].migProfile", "no GPU model of the cluster has the MIG profile", "3g.40gb"}));
  EXPECT_TRUE(FailsAt(job("replicas: 2, minReplicas: 3"), "minReplicas",
                      {"jobs[0].minReplicas", "expected an integer from 0 to 2"}));
  EXPECT_TRUE(FailsAt(job("spread: [{topologyKey: rack, whenUnsatisfiable: Maybe}]"), "Maybe",
                      {"jobs[0].spread[0].whenUnsatisfiable", "known values: DoNotSchedule"}));
  EXPECT_TRUE(FailsAt(job("gpus: 1, groups: [{gpus: 2}]"), "name: j",
                      {"jobs[0].gpus", "give gpus in each group instead"}));
  EXPECT_TRUE(FailsAt(job("groups: []"), "name: j", {"jobs[0].groups", "at least one group"}));
  EXPECT_TRUE(FailsAt(job("groups: [{gpus: 1, colour: red}]"), "name: j",
                      {"jobs[0].groups[0]", "unknown field \"colour\""}));
  const std::string twice =
      head + "  - {name: j, submit: 0, duration: 1}\n" + "  - {name: j, submit: 1, duration: 1}\n";
  EXPECT_TRUE(FailsAt(twice, "name: j, submit: 1",
                      {"jobs[1].name", "job \"j\" is also jobs[0]", "its own name"}));
  EXPECT_TRUE(FailsAt(job("user: " + std::string(300, 'u')), "uuu",
                      {"jobs[0].user", "longer than 253 characters"}));
  std::string models;
  for (int i = 0; i < 65; ++i) models += (i ? ", " : "") + std::string("L40S");
  EXPECT_TRUE(FailsAt(job("gpuModels: [" + models + "]"), "name: j",
                      {"jobs[0].gpuModels", "65 GPU models, more than the limit of 64"}));
}

TEST(BerthTraceTest, EventErrors) {
  const std::string jobs = "jobs: [{name: j, submit: 50, duration: 60}]\nevents:\n";
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 1, cordon: dgx-z-9}\n", "dgx-z-9",
                      {"events[0].cordon", "no node \"dgx-z-9\"", "dgx-a-0", "in all)"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 1, failGpu: {node: dgx-a-0, gpu: 8}}\n", "gpu: 8",
                      {"events[0].failGpu.gpu", "expected an integer from 0 to 7"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 1, failGpu: dgx-a-0}\n", "failGpu",
                      {"events[0].failGpu", "expected a map with fields gpu, node"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 1}\n", "at: 1",
                      {"events[0]", "no action; give exactly one of cordon, uncordon"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 1, cordon: dgx-a-0, drain: dgx-a-0}\n", "at: 1",
                      {"events[0]", "actions cordon and drain"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {cordon: dgx-a-0}\n", "cordon",
                      {"events[0]", "missing required field \"at\""}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 60, cancel: k}\n", "cancel",
                      {"events[0].cancel", "no job is named \"k\""}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 10, cancel: j}\n", "cancel",
                      {"events[0]", "before it is submitted at 50", "at or after"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 60, cancel: j}\n  - {at: 70, cancel: j}\n", "at: 70",
                      {"events[1].cancel", "already cancelled at trace.yaml:", "events[0]"}));
  EXPECT_TRUE(FailsAt(jobs + "  - {at: 1, reboot: dgx-a-0}\n", "reboot",
                      {"events[0]", "unknown field \"reboot\""}));
}

TEST(BerthTraceTest, HostileInput) {
  // Deep nesting is a clear error, not a stack overflow.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_TRUE(ThrowsConfigError([&] { Parse(deep); },
                                "trace.yaml:", {"nested more than the limit of 32 levels"}));
  EXPECT_TRUE(ThrowsConfigError([&] { Parse("jobs: [\n"); }, "trace.yaml:", {"YAML syntax"}));
  // Names reach terminals: an escape sequence in one would rewrite the operator's screen.
  EXPECT_TRUE(FailsAt("jobs:\n  - {name: \"a\\eb\", submit: 0, duration: 1, gpus: 1}\n", "a\\eb",
                      {"jobs[0].name", "a control character (byte 0x1B)"}));
  EXPECT_TRUE(FailsAt("jobs:\n  - {name: a, user: \"\\0\", submit: 0, duration: 1}\n", "user",
                      {"jobs[0].user", "a control character (byte 0x00)"}));
  // A file larger than the bound is refused before it is parsed.
  const std::string path =
      WriteTempFile("huge-trace.yaml", "jobs: []\n" + std::string(limits::Get().file_bytes, '#'));
  EXPECT_TRUE(ThrowsConfigError([&] { LoadBerthTrace(path, MultiRack(), {}); }, path + ": ",
                                {"more than the limit of 67108864 bytes", "split it"}));
  EXPECT_TRUE(ThrowsConfigError([&] { LoadBerthTrace(path + ".missing", MultiRack(), {}); },
                                path + ".missing: ", {"cannot read"}));
}

JobSpec Submission(const std::string& text, bool strict_booleans = true) {
  return ParseJobSubmission(text, "job", MultiRack(), {{"default", 1, -1, {}}}, strict_booleans);
}

// Expects the submission to fail at the line of `marker` with every one of `parts`.
::testing::AssertionResult SubmissionFailsAt(const std::string& text, const std::string& marker,
                                             std::initializer_list<std::string> parts) {
  return ThrowsConfigErrorAtLine([&] { Submission(text); }, "job", LineOf(text, marker), parts);
}

// A new submission's boolean is JSON's: the string "no" is not false. A spec stored by a berth
// that read YAML 1.1's yes/no still loads at a restart as it was accepted.
TEST(JobSubmissionTest, BooleansAreTrueOrFalseUnquoted) {
  EXPECT_FALSE(Submission(R"({"gpus": 1, "preemptible": false})").preemptible);
  EXPECT_TRUE(Submission("gpus: 1\npreemptible: True\n").preemptible);
  for (const std::string value : {R"("no")", R"("true")", "yes", "off", "1"}) {
    const std::string text = "gpus: 1\npreemptible: " + value + "\n";
    EXPECT_TRUE(SubmissionFailsAt(text, "preemptible", {"preemptible: expected true or false"}))
        << value;
  }
  EXPECT_FALSE(Submission("gpus: 1\npreemptible: no\n", /*strict_booleans=*/false).preemptible);
  EXPECT_TRUE(Submission(R"({"gpus": 1, "preemptible": "true"})", false).preemptible);
}

// JSON's escapes of a character past U+FFFF, as UTF-16 halves (Python's json.dumps), read as
// the character; an escaped backslash before "u" stays text (review: a 400 "invalid unicode").
TEST(JobSubmissionTest, JsonSurrogatePairsAreOneCharacter) {
  EXPECT_EQ(Submission(R"({"gpus": 1, "name": "sp\ud83d\ude80x"})").name, "sp\xF0\x9F\x9A\x80x");
  EXPECT_EQ(Submission(R"({"gpus": 1, "name": "a\\ud83d\\ude80"})").name, R"(a\ud83d\ude80)");
  EXPECT_TRUE(SubmissionFailsAt("{\"gpus\": 1,\n \"name\": \"\\ud83d\\ude80\", \"colour\": 1}",
                                "colour", {"unknown field \"colour\""}));
}

TEST(JobSubmissionTest, VolumesAndShmSize) {
  const JobSpec s = Submission(R"(gpus: 1
image: trainer:1
volumes: ["/data/x:/x:ro", "//scratch/./a/:/work/", "/models:/models:rw"]
shmSize: 1g
)");
  ASSERT_EQ(s.groups.size(), 1u);
  const std::vector<Mount>& m = s.groups[0].mounts;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].host, "/data/x");
  EXPECT_EQ(m[0].container, "/x");
  EXPECT_TRUE(m[0].read_only);
  // Kept lexically normal: the server compares them with its prefixes component by component.
  EXPECT_EQ(m[1].host, "/scratch/a");
  EXPECT_EQ(m[1].container, "/work");
  EXPECT_FALSE(m[1].read_only);
  EXPECT_FALSE(m[2].read_only);
  EXPECT_EQ(s.groups[0].shm_bytes, int64_t{1} << 30);

  for (const auto& [size, bytes] : std::vector<std::pair<std::string, int64_t>>{
           {"1073741824", int64_t{1} << 30},
           {"\"512m\"", int64_t{512} << 20},
           {"64MB", int64_t{64} << 20},
           {"2Gi", int64_t{2} << 30},
           {"100k", 102400},
           {"7b", 7},
           {"2t", int64_t{2} << 40}})  // the largest node's memory
    EXPECT_EQ(Submission("image: x\nshmSize: " + size + "\n").groups[0].shm_bytes, bytes) << size;
  EXPECT_EQ(Submission("image: x\ngpus: 1\n").groups[0].shm_bytes, 0);  // the runtime's default

  // Each group has its own.
  const JobSpec groups = Submission(R"(groups:
  - {gpus: 1, image: x, volumes: ["/data:/data"], shmSize: 64m}
  - {cpuMilli: 1000, image: y}
)");
  EXPECT_EQ(groups.groups[0].mounts.size(), 1u);
  EXPECT_EQ(groups.groups[0].shm_bytes, int64_t{64} << 20);
  EXPECT_TRUE(groups.groups[1].mounts.empty());

  // A trace describes no containers.
  EXPECT_TRUE(FailsAt("jobs:\n  - {name: j, submit: 0, duration: 1, volumes: [\"/a:/b\"]}\n",
                      "name: j", {"unknown field \"volumes\""}));
}

TEST(JobSubmissionTest, BadVolumesNameTheVolumeAndItsLine) {
  auto volume = [](const std::string& v) {
    return "gpus: 1\nvolumes:\n  - /ok:/ok\n  - " + v + "\n";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"data/x:/x", "volumes[1]: the host path is not absolute; give the full path"},
      {"/data/x:x", "volumes[1]: the container path is not absolute"},
      {"/data/../etc:/x", "volumes[1]: the host path has a \"..\" component"},
      {"/data:/x/../../etc", "volumes[1]: the container path has a \"..\" component"},
      {"/data", "volumes[1]: expected HOST:CONTAINER, HOST:CONTAINER:ro or"},
      {"/data:/x:rx", "volumes[1]: expected HOST:CONTAINER"},
      {"/data:/x:ro:z", "volumes[1]: expected HOST:CONTAINER"},
      {"\"\"", "volumes[1]: expected HOST:CONTAINER"},
      {"/data:/", "volumes[1]: the container path is the container's root"},
      {"/data:/proc/x", "volumes[1]: the container path \"/proc/x\" is under /proc, which the"},
      {"/data:/dev", "volumes[1]: the container path \"/dev\" is under /dev"},
      {"/data:/ok/", "volumes[1]: \"/ok\" is also where volumes[0] is mounted"},
      {"\"/da\\tta:/x\"", "volumes[1]: a control character (byte 0x09) at byte 4 of the volume"},
      {"/" + std::string(5000, 'a') + ":/x",
       "volumes[1]: the host path is 5001 bytes, more than the limit of 4096"},
      {"{host: /data}", "volumes[1]: expected a string"},
  };
  for (const auto& [v, message] : cases) {
    const std::string text = volume(v);
    EXPECT_TRUE(SubmissionFailsAt(text, "  - " + v.substr(0, 10), {message})) << v;
  }
  EXPECT_TRUE(
      SubmissionFailsAt("gpus: 1\nvolumes: /a:/b\n", "volumes", {"volumes: expected a list"}));
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? ", " : "") + std::string("/a:/b") + std::to_string(i);
  EXPECT_TRUE(SubmissionFailsAt("gpus: 1\nvolumes: [" + many + "]\n", "volumes",
                                {"volumes: 33 volumes, more than the limit of 32"}));
  EXPECT_TRUE(
      SubmissionFailsAt("groups:\n  - {gpus: 1, image: x}\n  - {gpus: 1, volumes: [a:/b]}\n",
                        "a:/b", {"groups[1].volumes[0]: the host path is not absolute"}));
  EXPECT_TRUE(SubmissionFailsAt("volumes: [/a:/b]\ngroups:\n  - {gpus: 1}\n", "volumes",
                                {"volumes: the job has groups: give volumes in each group"}));
}

TEST(JobSubmissionTest, BadShmSizes) {
  EXPECT_TRUE(
      SubmissionFailsAt("gpus: 1\nshmSize: 0\n", "shmSize", {"shmSize: expected a size above 0"}));
  for (const std::string bad : {"1x", "-1", "1.5g", "g", "1gg", "1ib", "99999999999999999999"})
    EXPECT_TRUE(SubmissionFailsAt("gpus: 1\nshmSize: " + bad + "\n", "shmSize",
                                  {"shmSize: expected a size such as 64m or 1g", bad}))
        << bad;
  EXPECT_TRUE(
      SubmissionFailsAt("gpus: 1\nshmSize: [1g]\n", "shmSize", {"shmSize: expected a string"}));
  EXPECT_TRUE(SubmissionFailsAt(
      "gpus: 1\nshmSize: 3t\n", "shmSize",
      {"shmSize: \"3t\" is more than the 2097152 MiB of memory of this cluster's largest node"}));
  // Sizes whose bytes pass 2^63 are too large, not wrapped round to a small one (review).
  for (const std::string huge : {"16777217t", "999999999999999t", "17179869185g", "16777217Ti"})
    EXPECT_TRUE(SubmissionFailsAt("gpus: 1\nshmSize: " + huge + "\n", "shmSize",
                                  {"is more than the 2097152 MiB"}))
        << huge;
  EXPECT_TRUE(SubmissionFailsAt(
      "gpus: 1\nmemoryMiB: 1024\nshmSize: 2g\n", "shmSize",
      {"shmSize: \"2g\" is more than the group's memoryMiB (1024)", "raise memoryMiB"}));
  EXPECT_EQ(Submission("image: x\nmemoryMiB: 1024\nshmSize: 1g\n").groups[0].shm_bytes,
            int64_t{1} << 30);
}

// What the engine would refuse when the job starts, after its wait, is refused at submission.
TEST(JobSubmissionTest, LimitsBelowWhatAContainerTakesAreRefused) {
  EXPECT_TRUE(SubmissionFailsAt("image: x\ncpuMilli: 9\n", "cpuMilli",
                                {"cpuMilli: a container takes at least 10 (0.01 CPU)"}));
  EXPECT_TRUE(SubmissionFailsAt("image: x\nmemoryMiB: 5\n", "memoryMiB",
                                {"memoryMiB: a container takes at least 6 MiB"}));
  EXPECT_TRUE(SubmissionFailsAt("groups:\n  - {image: x}\n  - {image: y, cpuMilli: 1}\n",
                                "cpuMilli", {"groups[1].cpuMilli: a container takes at least 10"}));
  const JobSpec least = Submission("image: x\ncpuMilli: 10\nmemoryMiB: 6\n");
  EXPECT_EQ(least.groups[0].demand.cpu_milli, 10);
  EXPECT_EQ(least.groups[0].demand.memory_mib, 6);
  // 0 is no limit; a group without a container (a trace's) is not held to it.
  EXPECT_EQ(Submission("image: x\ncpuMilli: 0\nmemoryMiB: 0\n").groups[0].demand.cpu_milli, 0);
  EXPECT_EQ(Submission("gpus: 1\ncpuMilli: 1\n").groups[0].demand.cpu_milli, 1);
}

// Arguments and variables are any text a program can take: escapes and other control
// characters pass, a NUL (which would cut the string short) does not.
TEST(JobSubmissionTest, ANulInACommandOrVariableIsRefused) {
  const JobSpec ok = Submission(
      "{\"gpus\": 1, \"image\": \"x\", \"command\": [\"printf\", \"\\u001b[31mred\\t\"], \"env\": "
      "{\"A\": "
      "\"x\\ny\"}}");
  EXPECT_EQ(ok.groups.size(), 1u);
  EXPECT_TRUE(SubmissionFailsAt("gpus: 1\ncommand: [sh, \"a\\0b\"]\n", "command",
                                {"command[1]: holds a NUL byte", "remove it"}));
  EXPECT_TRUE(
      SubmissionFailsAt("gpus: 1\nenv:\n  A: \"a\\0b\"\n", "A:", {"env.A: holds a NUL byte"}));
}

// Numbers are numbers: JSON's {"gpus": "1"} is refused as a JSON reader would, with the fix.
TEST(JobSubmissionTest, AQuotedNumberIsRefused) {
  EXPECT_TRUE(ThrowsConfigError(
      [] { Submission(R"({"gpus": "1", "image": "x"})"); }, "job:1:",
      {"gpus: expected an integer from 1", "got the string \"1\"; write it without quotes"}));
  EXPECT_TRUE(ThrowsConfigError([] { Submission("image: x\ngpus: 2\npriority: '3'\n"); },
                                "job:3:", {"priority: expected an integer", "without quotes"}));
}

// Each is refused at its own line, naming the field and why berth never grants it, not as an
// unknown field.
TEST(JobSubmissionTest, WhatBerthNeverGrantsIsRefusedByName) {
  EXPECT_TRUE(ThrowsConfigError([] { Submission("gpus: 1\nprivileged: true\n"); },
                                "job:2:1: privileged: ",
                                {"berth does not run privileged containers",
                                 "GPUs come from the job's gpus", "devices are not granted"}));
  EXPECT_TRUE(ThrowsConfigError([] { Submission(R"({"gpus": 1, "hostNetwork": true})"); },
                                "job:1:", {"hostNetwork: ", "network namespace of its own"}));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"network: host", "network: each container has a network namespace of its own"},
      {"hostPID: true", "hostPID: each container has a PID namespace of its own"},
      {"pid: host", "pid: each container has a PID namespace"},
      {"hostIPC: true", "hostIPC: each container has an IPC namespace of its own"},
      {"hostUsers: false", "hostUsers: berth never runs a container in the host's user"},
      {"ipc: host", "ipc: each container has an IPC namespace of its own"},
      {"userns: host", "userns: berth never runs a container in the host's user namespace"},
      {"devices: [/dev/nvidia0]", "devices: berth grants no devices"},
      {"capAdd: [SYS_ADMIN]", "capAdd: berth grants no capabilities"},
      {"capabilities: {add: [NET_ADMIN]}", "capabilities: berth grants no capabilities"},
      {"securityOpt: [seccomp=unconfined]", "securityOpt: berth keeps the runtime's default"},
      {"securityContext: {privileged: true}", "securityContext: berth does not run privileged"},
      {"sysctls: {net.core.somaxconn: 1024}", "sysctls: berth sets no kernel parameters"},
  };
  for (const auto& [field, message] : cases) {
    const std::string text = "gpus: 1\nimage: x\n" + field + "\n";
    EXPECT_TRUE(SubmissionFailsAt(text, field, {message})) << field;
    // In a group too, at the group's field.
    const std::string grouped = "groups:\n  - gpus: 1\n    " + field + "\n";
    EXPECT_TRUE(SubmissionFailsAt(grouped, field, {"groups[0]." + message})) << field;
  }
  // Even beside a field that is wrong in another way, the refusal says what it is.
  // An image is a reference docker run takes: no blanks, not an option, lowercase, a tag of its
  // own form.
  for (const std::string bad : {"\"  \"", "\"a b\"", "-rm", "Busybox", "x:.1"})
    EXPECT_TRUE(SubmissionFailsAt("gpus: 1\nimage: " + bad + "\n", "image",
                                  {"image: ", "is not an image reference"}))
        << bad;
  EXPECT_TRUE(SubmissionFailsAt("colour: red\nprivileged: true\n", "privileged",
                                {"privileged: berth does not run privileged containers"}));
  // A trace describes no containers: there it is only an unknown field.
  EXPECT_TRUE(FailsAt("jobs:\n  - {name: j, submit: 0, duration: 1, privileged: true}\n", "name: j",
                      {"unknown field \"privileged\""}));
}

}  // namespace
}  // namespace berth
