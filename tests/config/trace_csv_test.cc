// The CSV loaders (openb pod list, Tiresias cluster and jobs) against hostile and broken input:
// every refusal names the file, the line and the column.
#include <gtest/gtest.h>

#include <string>

#include "config/limits.h"
#include "config/openb_node_list.h"
#include "config/openb_pod_list.h"
#include "config/tiresias_trace.h"
#include "config_test_util.h"

namespace berth {
namespace {

const std::string kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
const std::string kJobHeader =
    "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
const std::string kClusterHeader =
    "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n";

TEST(TraceCsvTest, TimesAreFiniteAndInRange) {
  // strtod took these, and a replay with them never ended (or dropped the pod silently).
  for (const std::string time : {"nan", "inf", "-inf", "1e999", "-5", "0x10", "1e10"}) {
    const std::string pods = WriteTempFile(
        "pods.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Running," + time + ",100,0\n");
    EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(pods); }, pods + ":2: ",
                                  {"column 'creation_time'", "from 0 to 1000000000"}))
        << time;
    const std::string jobs = WriteTempFile("jobs.csv", kJobHeader + "0,1,0,1,vgg," + time + ",1\n");
    EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasJobs(jobs); },
                                  jobs + ":2: ", {"column 'duration'", "from 0 to 1000000000"}))
        << time;
  }
  // An empty time stays unknown.
  const std::string pods =
      WriteTempFile("pods.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Running,5,,\n");
  EXPECT_EQ(LoadOpenbPodList(pods).at(0).end_time, -1);
}

TEST(TraceCsvTest, TiresiasClusterIsOneBoundedRow) {
  const std::string two = WriteTempFile("two.csv", kClusterHeader + "1,2,4,8,16\n3,3,3,3,3\n");
  EXPECT_TRUE(
      ThrowsConfigError([&] { LoadTiresiasCluster(two); }, two + ":3: ", {"a second cluster row"}));
  const std::string big = WriteTempFile("big.csv", kClusterHeader + "10000,10000,64,8,16\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasCluster(big); },
                                big + ":2: ", {"more than the limit of 100000 nodes"}));
  const std::string none = WriteTempFile("none.csv", kClusterHeader);
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasCluster(none); },
                                none + ":2: ", {"expected one row after the header"}));
  // A byte order mark and CRLF line ends are read as the plain text.
  const std::string bom =
      WriteTempFile("bom.csv",
                    "\xef\xbb\xbfnum_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,"
                    "mem_p_node\r\n1,2,4,8,16\r\n");
  EXPECT_EQ(LoadTiresiasCluster(bom).gpu_count(), 8);
  const std::string mac = WriteTempFile("mac.csv", kClusterHeader.substr(0, 60) + "\r1\r");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasCluster(mac); },
                                mac + ":1:61: ", {"a carriage return without a line feed"}));
}

TEST(TraceCsvTest, NodeListBounds) {
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model\n";
  const std::string wide = WriteTempFile("wide.csv", header + "a,1,2,129,T4\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(wide); },
                                wide + ":2: ", {"column 'gpu'", "from 0 to 128"}));
  const std::string columns =
      WriteTempFile("columns.csv", header + "a,1,2,1,T4" + std::string(100, ',') + "\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(columns); },
                                columns + ":2: ", {"more than the limit of 64 columns"}));
  const std::string utf8 = WriteTempFile("utf8.csv", header + "a\xff,1,2,1,T4\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(utf8); },
                                utf8 + ":2:2: ", {"invalid UTF-8 (byte 0xFF)"}));
  const std::string empty = WriteTempFile("empty.csv", "");
  EXPECT_TRUE(
      ThrowsConfigError([&] { LoadOpenbNodeList(empty); }, empty + ":1: ", {"the file is empty"}));
}

// A cluster without GPUs was refused only later, by the cell tree, with no line or column.
TEST(TraceCsvTest, AClusterWithoutGpusIsRefusedWhereItSaysSo) {
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model\n";
  const std::string cpu_only = WriteTempFile("cpu.csv", header + "a,1,2,0,\nb,1,2,0,\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(cpu_only); }, cpu_only + ":2: ",
                                {"column 'gpu'", "no node has GPUs", "1 or more"}));
  const std::string no_rows = WriteTempFile("rows.csv", header);
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(no_rows); },
                                no_rows + ":2: ", {"expected a node per row after the header"}));
  const std::string tiresias = WriteTempFile("zero.csv", kClusterHeader + "1,2,0,8,16\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasCluster(tiresias); },
                                tiresias + ":2: ", {"column 'num_gpu_p_node'", "from 1 to 128"}));
}

// A 20 MB field came back whole in its error message.
TEST(TraceCsvTest, AnErrorQuotesALongFieldCut) {
  // The cut falls inside the é: it keeps whole characters.
  const std::string id = std::string(59, 'x') + "\xc3\xa9" + std::string(100000, 'y');
  const std::string jobs = WriteTempFile("long.csv", kJobHeader + "0," + id + ",0,1,vgg,5,1\n");
  EXPECT_TRUE(ThrowsConfigError(
      [&] { LoadTiresiasJobs(jobs); },
      jobs + ":2: ", {"column 'num_gpu'", "got '" + std::string(59, 'x') + "...' (100061 bytes)"}));
}

// Columns a replay does not use are still checked: nonsense there is a broken file.
TEST(TraceCsvTest, APodWithoutGpusHasNoShare) {
  const std::string pods =
      WriteTempFile("share.csv", kPodHeader + "p,1000,1024,0,500,,LS,Running,1,,\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(pods); },
                                pods + ":2: ", {"column 'gpu_milli'", "no GPU takes 0, got 500"}));
}

TEST(TraceCsvTest, TiresiasColumnsAreAllChecked) {
  for (const auto& [row, column] : {std::pair{"0,1,0,abc,vgg,5,1", "iterations"},
                                    {"0,1,0,-5,vgg,5,1", "iterations"},
                                    {"0,1,0,1,vgg,5,nan", "interval"},
                                    {",1,0,1,vgg,5,1", "job_id"}}) {
    const std::string jobs = WriteTempFile("jobs.csv", kJobHeader + row + "\n");
    EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasJobs(jobs); },
                                  jobs + ":2: ", {"column '" + std::string(column) + "'"}))
        << row;
  }
}

TEST(TraceCsvTest, NamesAreUniqueAndPrintable) {
  const std::string pods = WriteTempFile(
      "dup.csv",
      kPodHeader + "p,1000,1024,1,1000,,LS,Running,1,,\np,1000,1024,1,1000,,LS,Running,2,,\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(pods); }, pods + ":3: ",
                                {"column 'name'", "pod \"p\" is already listed at line 2"}));
  const std::string jobs =
      WriteTempFile("dup.csv", kJobHeader + "7,1,0,1,vgg,5,1\n7,1,0,1,vgg,5,1\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasJobs(jobs); }, jobs + ":3: ",
                                {"column 'job_id'", "job \"7\" is already listed at line 2"}));
  const std::string nul = WriteTempFile(
      "nul.csv", std::string("sn,cpu_milli,memory_mib,gpu,model\na\0b,1,2,1,T4\n", 47));
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(nul); }, nul + ":2:2: ", {"a NUL byte"}));
  // The pod list's user (qos) and models are names too; so is a Tiresias job id.
  const std::string pod_header =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n";
  const std::string qos =
      WriteTempFile("qos.csv", pod_header + "p,1,1,1,1000,T4,L\x7fS,Running,0,9,0\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(qos); }, qos + ":2: ",
                                {"column 'qos'", "a control character (byte 0x7F) at byte 2"}));
  const std::string model = WriteTempFile(
      "model.csv", pod_header + "p,1,1,1,1000,T4|" + std::string(300, 'V') + ",LS,Running,0,9,0\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(model); }, model + ":2: ",
                                {"column 'gpu_spec'", "more than the limit of 253 characters"}));
  const std::string id = WriteTempFile("id.csv", kJobHeader + "7\x01,1,0,1,vgg,5,1\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasJobs(id); }, id + ":2: ",
                                {"column 'job_id'", "a control character (byte 0x01)"}));
  const std::string tab =
      WriteTempFile("tab.csv", std::string("sn,cpu_milli,memory_mib,gpu,model\na\tb,1,2,1,T4\n"));
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbNodeList(tab); }, tab + ":2: ",
                                {"column 'sn'", "a control character (byte 0x09) at byte 2"}));
}

TEST(TraceCsvTest, APodEndsAfterItStartsAndNamesFewModels) {
  // Deleted before it was created: the replay refused the whole trace with no line.
  const std::string early =
      WriteTempFile("early.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Running,100,5,100\n");
  EXPECT_TRUE(ThrowsConfigError(
      [&] { LoadOpenbPodList(early); },
      early + ":2: ", {"column 'deletion_time'", "ends (5) before its creation_time (100)"}));
  const std::string unscheduled =
      WriteTempFile("late.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Running,1,5,9\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(unscheduled); },
                                unscheduled + ":2: ", {"ends (5) before its scheduled_time (9)"}));
  // A gpu_spec of 100,000 models made every placement walk them all: a hang.
  std::string models;
  for (int i = 0; i < 100; ++i) models += (i ? "|" : "") + std::string("M") + std::to_string(i);
  const std::string many = WriteTempFile(
      "many.csv", kPodHeader + "p,1000,1024,1,1000," + models + ",LS,Running,1,5,1\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(many); },
                                many + ":2: ", {"column 'gpu_spec'", "more than 64 GPU models"}));
  int skipped = 0;
  EXPECT_TRUE(LoadOpenbPodList(early, &skipped).empty());
  EXPECT_EQ(skipped, 1);
  // Scheduled before it was created, or deleted the moment it was scheduled: replayed as a
  // job that waited a negative time, or ran none.
  const std::string backwards =
      WriteTempFile("back.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Running,50,100,10\n");
  EXPECT_TRUE(ThrowsConfigError(
      [&] { LoadOpenbPodList(backwards); },
      backwards + ":2: ", {"column 'scheduled_time'", "scheduled (10) before it is created (50)"}));
  const std::string instant =
      WriteTempFile("instant.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Running,50,60,60\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(instant); },
                                instant + ":2: ", {"column 'deletion_time'", "a run of 0 s"}));
  // A pod created and deleted at once that never ran is a pod the trace lists as pending.
  const std::string pending =
      WriteTempFile("pending.csv", kPodHeader + "p,1000,1024,1,1000,,BE,Pending,50,50,\n");
  EXPECT_EQ(LoadOpenbPodList(pending).size(), 1u);
}

TEST(TraceCsvTest, QosAndPhaseAreTheTracesOwn) {
  // Any text was taken (and replayed as the pod's user).
  const std::string qos =
      WriteTempFile("qos.csv", kPodHeader + "p,1000,1024,1,1000,,XX,Running,0,100,0\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(qos); }, qos + ":2: ",
                                {"column 'qos'", "one of LSE, LSR, LS, BE", "got 'XX'"}));
  const std::string phase =
      WriteTempFile("phase.csv", kPodHeader + "p,1000,1024,1,1000,,LS,Bogus,0,100,0\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadOpenbPodList(phase); }, phase + ":2: ",
                                {"column 'pod_phase'", "Pending, Running, Succeeded"}));
  const std::string unrecorded =
      WriteTempFile("blank.csv", kPodHeader + "p,1000,1024,1,1000,,,,0,100,0\n");
  EXPECT_EQ(LoadOpenbPodList(unrecorded).at(0).qos, "");
}

TEST(TraceCsvTest, TiresiasJobRunsSomeTime) {
  const std::string jobs = WriteTempFile("jobs.csv", kJobHeader + "0,1,0,606,vgg19,0,30\n");
  EXPECT_TRUE(ThrowsConfigError([&] { LoadTiresiasJobs(jobs); }, jobs + ":2: ",
                                {"column 'duration'", "seconds above 0", "got '0'"}));
}

}  // namespace
}  // namespace berth
