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

}  // namespace
}  // namespace berth
