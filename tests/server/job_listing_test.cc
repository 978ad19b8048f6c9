#include "server/job_listing.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace berth {
namespace {

StoredJob HostileJob() {
  StoredJob j;
  j.id = 42;
  j.name = "a\tb\\c\nd\re\\";  // every escaped byte, and a trailing backslash
  j.queue = "q\\t";            // a backslash before a letter that names an escape
  j.user = "";
  j.state = "pending";
  j.reason = "could not be started on n0: pull\tfailed\nnext line \xc3\xa9";
  j.exit_code = -3;
  j.submitted = 1796277013.4439332;
  j.updated = 1796277013.5;
  j.placements = R"({"gpuIds": ["n0/1", "n0/2"], "replicas": []})";
  return j;
}

TEST(JobListing, ALineReadsBackAsTheJobWhateverItsTextHolds) {
  const StoredJob j = HostileJob();
  std::string text;
  AppendJobLine(j, &text);
  ASSERT_EQ(text.back(), '\n');
  ASSERT_EQ(text.find('\n'), text.size() - 1) << "one line per job";
  std::vector<std::string_view> cells;
  ASSERT_TRUE(SplitJobLine(std::string_view(text).substr(0, text.size() - 1), &cells));
  EXPECT_EQ(cells[kId], "42");
  EXPECT_EQ(UnescapedCell(cells[kName]), j.name);
  EXPECT_EQ(UnescapedCell(cells[kQueue]), j.queue);
  EXPECT_EQ(UnescapedCell(cells[kUser]), "");
  EXPECT_EQ(UnescapedCell(cells[kState]), "pending");
  EXPECT_EQ(UnescapedCell(cells[kReason]), j.reason);
  EXPECT_EQ(cells[kExitCode], "-3");
  EXPECT_EQ(std::stod(std::string(cells[kSubmitted])), j.submitted);
  EXPECT_EQ(std::stod(std::string(cells[kUpdated])), j.updated);
  EXPECT_EQ(GpuIdsCell(cells[kGpus]), (std::vector<std::string>{"n0/1", "n0/2"}));
}

TEST(JobListing, TheHeaderNamesEveryColumnAndAJobWithoutGpusHasAnEmptyCell) {
  std::vector<std::string_view> cells;
  const std::string_view header(kJobListingHeader);
  ASSERT_TRUE(SplitJobLine(header.substr(0, header.size() - 1), &cells));
  EXPECT_EQ(cells[kId], "id");
  EXPECT_EQ(cells[kGpus], "gpus");
  StoredJob j = HostileJob();
  j.placements = "";
  std::string text;
  AppendJobLine(j, &text);
  ASSERT_TRUE(SplitJobLine(std::string_view(text).substr(0, text.size() - 1), &cells));
  EXPECT_TRUE(GpuIdsCell(cells[kGpus]).empty());
}

TEST(JobListing, GpuIdsWithCommasAndEscapesSplitRight) {
  StoredJob j = HostileJob();
  j.placements = R"({"gpuIds": ["n,1/0", "n\\2/1", "plain/7"]})";
  std::string text;
  AppendJobLine(j, &text);
  std::vector<std::string_view> cells;
  ASSERT_TRUE(SplitJobLine(std::string_view(text).substr(0, text.size() - 1), &cells));
  EXPECT_EQ(GpuIdsCell(cells[kGpus]), (std::vector<std::string>{"n,1/0", "n\\2/1", "plain/7"}));
}

TEST(JobListing, ALineWithAnotherCellCountIsRefused) {
  std::vector<std::string_view> cells;
  EXPECT_FALSE(SplitJobLine("1\tname", &cells));
  EXPECT_FALSE(SplitJobLine("", &cells));
  EXPECT_FALSE(SplitJobLine("1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11", &cells));
}

TEST(JobListing, TheJsonFormIsTheSameJob) {
  const StoredJob j = HostileJob();
  std::string text;
  AppendJobJson(j, &text);
  const nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_EQ(json["id"], 42);
  EXPECT_EQ(json["name"], j.name);
  EXPECT_EQ(json["reason"], j.reason);
  EXPECT_EQ(json["exitCode"], -3);
  EXPECT_EQ(json["submitted"].get<double>(), j.submitted);
  EXPECT_EQ(json["gpus"], (nlohmann::json{"n0/1", "n0/2"}));
  StoredJob broken = j;
  broken.name = "\xff\xfe";  // not UTF-8: replaced, never an exception
  broken.placements = "{not json";
  text.clear();
  AppendJobJson(broken, &text);
  const nlohmann::json replaced = nlohmann::json::parse(text);
  EXPECT_EQ(replaced["name"], "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_TRUE(replaced["gpus"].empty());
}

}  // namespace
}  // namespace berth
