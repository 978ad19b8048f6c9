#include "sim/report.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

// Queue, policy and file names come from input files: the report shows them as text, in its
// tables and in its charts, and none of them opens a tag.
TEST(ReportTest, NamesFromTheInputAreEscaped) {
  ReplayResult r;
  r.policy = "<b>pol</b>";
  r.queues = {"<script>alert(1)</script>"};
  r.queue_timeline = {{QueuePoint{0, 1, 1, 0}, QueuePoint{3600, 2, 1, 0}}};
  r.per_queue[r.queues[0]] = {};
  r.timeline = {{0, 50, 0}, {3600, 60, 0}};
  const std::string html = ReplayReportHtml("berth replay: \"</title><img src=x>'", {r});

  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("<title>berth replay: &quot;&lt;/title&gt;&lt;img src=x&gt;&#39;</title>"),
            std::string::npos);
  EXPECT_NE(html.find("<h1>berth replay: &quot;&lt;/title&gt;"), std::string::npos);
  EXPECT_NE(html.find("<tr><td>&lt;b&gt;pol&lt;/b&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Queues under &lt;b&gt;pol&lt;/b&gt;</h2>"), std::string::npos);
  EXPECT_NE(html.find("<tr><td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"), std::string::npos);
  // The queue chart's legend and title, once escaped (not twice).
  EXPECT_NE(html.find(">&lt;script&gt;alert(1)&lt;/script&gt; usage</text>"), std::string::npos);
  EXPECT_NE(html.find("(&lt;b&gt;pol&lt;/b&gt;, first 4 queues)</text>"), std::string::npos);
  EXPECT_EQ(html.find("&amp;lt;"), std::string::npos);
}

}  // namespace
}  // namespace berth
